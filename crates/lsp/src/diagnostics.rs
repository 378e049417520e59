//! Turning a policy's diagnostics into LSP diagnostics, one list per file.
//!
//! The diagnostics are those of the same `check` that `src check` runs, on the same files (open
//! buffers in place of their saved text; see [`crate::workspace::Analysis`]), so codes, messages
//! and spans agree with `src check --format json`. A diagnostic belongs to the file of its primary span; secondary labels, the help and
//! the notes become related information (the help pointing at the primary span), which editors
//! show under the message without changing the message itself.

use crate::workspace::Analysis;
use lsp_types::{DiagnosticRelatedInformation, DiagnosticSeverity, Location, NumberOrString, Uri};
use src_dsl::{Diagnostic, Severity};

/// The outcome of checking one policy.
#[derive(Debug, Clone, Default)]
pub struct Checked {
    /// Every file of the policy with its diagnostics (possibly none, which clears the file).
    pub per_file: Vec<(Uri, Vec<lsp_types::Diagnostic>)>,
    /// The diagnostics as the checker gave them (their fixes feed code actions).
    pub raw: Vec<Diagnostic>,
}

/// The diagnostics of an analysed policy, file by file.
pub fn check_policy(analysis: &Analysis) -> Checked {
    let mut per_file: Vec<(Uri, Vec<lsp_types::Diagnostic>)> = analysis
        .files
        .iter()
        .map(|f| (f.uri.clone(), Vec::new()))
        .collect();
    for d in &analysis.diagnostics {
        let file = d.primary_span().file;
        let Some(i) = analysis.files.iter().position(|f| f.id == file) else {
            continue;
        };
        if let Some(converted) = to_lsp(d, analysis) {
            per_file[i].1.push(converted);
        }
    }
    Checked {
        per_file,
        raw: analysis.diagnostics.clone(),
    }
}

/// One diagnostic in LSP form; `None` when its file is not part of the analysis.
pub fn to_lsp(d: &Diagnostic, analysis: &Analysis) -> Option<lsp_types::Diagnostic> {
    let primary = analysis.location(d.primary_span())?;
    let mut related = Vec::new();
    for label in d.labels.iter().filter(|l| !l.primary) {
        if let Some(location) = analysis.location(label.span) {
            let message = if label.message.is_empty() {
                "related".to_string()
            } else {
                label.message.clone()
            };
            related.push(DiagnosticRelatedInformation { location, message });
        }
    }
    if let Some(help) = &d.help {
        related.push(DiagnosticRelatedInformation {
            location: primary.clone(),
            message: format!("help: {help}"),
        });
    }
    for note in &d.notes {
        related.push(DiagnosticRelatedInformation {
            location: primary.clone(),
            message: format!("note: {note}"),
        });
    }
    Some(lsp_types::Diagnostic {
        range: primary.range,
        severity: Some(match d.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
        }),
        code: Some(NumberOrString::String(d.code.as_str().to_string())),
        source: Some("src".to_string()),
        message: d.message.clone(),
        related_information: (!related.is_empty()).then_some(related),
        ..Default::default()
    })
}

/// Whether an LSP diagnostic was made from this one (same code and primary location).
pub fn same(lsp: &lsp_types::Diagnostic, d: &Diagnostic, primary: &Location) -> bool {
    lsp.range == primary.range
        && matches!(&lsp.code, Some(NumberOrString::String(c)) if c == d.code.as_str())
}
