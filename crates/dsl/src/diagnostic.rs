//! The one diagnostic type of the workspace.
//!
//! Every phase (parser, checker, runtime reload, language server) reports problems as
//! [`Diagnostic`]s. They carry byte spans; the `render` module turns them into ariadne reports
//! for people and into JSON for machines, and the language server into LSP diagnostics.

use crate::codes::Code;
use crate::span::Span;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// A span with a short message; the first primary label is where the diagnostic points.
#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    pub span: Span,
    pub message: String,
    pub primary: bool,
}

/// A machine-applicable edit that fixes the diagnostic (used by the language server's code
/// actions): replace the text under `span` by `replacement`.
#[derive(Debug, Clone, PartialEq)]
pub struct Fix {
    pub span: Span,
    pub replacement: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub code: Code,
    /// One line, lowercase, no trailing period, identifiers in backticks.
    pub message: String,
    pub labels: Vec<Label>,
    pub help: Option<String>,
    pub notes: Vec<String>,
    pub fix: Option<Fix>,
}

impl Diagnostic {
    pub fn new(severity: Severity, code: Code, message: impl Into<String>, span: Span) -> Self {
        Diagnostic {
            severity,
            code,
            message: message.into(),
            labels: vec![Label {
                span,
                message: String::new(),
                primary: true,
            }],
            help: None,
            notes: Vec::new(),
            fix: None,
        }
    }

    pub fn error(code: Code, message: impl Into<String>, span: Span) -> Self {
        Self::new(Severity::Error, code, message, span)
    }

    pub fn warning(code: Code, message: impl Into<String>, span: Span) -> Self {
        Self::new(Severity::Warning, code, message, span)
    }

    /// Sets the message shown under the primary span.
    pub fn with_label_message(mut self, message: impl Into<String>) -> Self {
        if let Some(l) = self.labels.iter_mut().find(|l| l.primary) {
            l.message = message.into();
        }
        self
    }

    /// Adds a secondary label (e.g. "first declared here").
    pub fn with_secondary(mut self, span: Span, message: impl Into<String>) -> Self {
        self.labels.push(Label {
            span,
            message: message.into(),
            primary: false,
        });
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    pub fn with_fix(mut self, span: Span, replacement: impl Into<String>) -> Self {
        self.fix = Some(Fix {
            span,
            replacement: replacement.into(),
        });
        self
    }

    /// The span the diagnostic points at.
    pub fn primary_span(&self) -> Span {
        self.labels
            .iter()
            .find(|l| l.primary)
            .or(self.labels.first())
            .map(|l| l.span)
            .unwrap_or_default()
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Counts errors and warnings of a list.
pub fn tally(diagnostics: &[Diagnostic]) -> (usize, usize) {
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    (errors, diagnostics.len() - errors)
}
