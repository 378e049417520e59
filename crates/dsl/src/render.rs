//! Showing diagnostics: ariadne reports for people, JSON for machines.
//!
//! This is the one place where byte spans become something else. Spans are byte offsets
//! everywhere in the workspace, while ariadne counts characters by default, which misplaces
//! every label after a non-ASCII character. ariadne 0.6 has a byte mode (`IndexType::Byte`), but
//! it locates a label group in a second file by feeding a character offset to its byte lookup:
//! the `file:line:col` it prints is wrong after non-ASCII text and it panics when that offset
//! falls inside a multi-byte character. So spans are converted to character offsets here, once,
//! and ariadne runs in its (consistent) character mode. JSON positions are 1-based lines and
//! columns counted in characters, as editors and CI annotations expect. Spans that point past the
//! end of their text or into the middle of a character (a stale span after an edit, a bug
//! elsewhere) are clamped, never trusted: rendering must not panic on any diagnostic.
//!
//! The header is written here rather than by ariadne, because ariadne's own header reads
//! `[E011] Error: ...` and cannot print a custom kind without colour; ours is the rustc-like
//! `error[E011]: message`.

use crate::diagnostic::{tally, Diagnostic, Severity};
use crate::span::{FileId, SourceMap, Span};
use ariadne::{Color, Config, IndexType, Label, Report, ReportKind};
use serde_json::{json, Value};
use std::fmt;
use std::ops::Range;

/// Renders every diagnostic as an ariadne report, one after the other, with source excerpts and
/// file names as the [`SourceMap`] gives them.
pub fn human(diags: &[Diagnostic], sources: &SourceMap, color: bool) -> String {
    let mut out = String::new();
    for d in diags {
        out.push_str(&human_one(d, sources, color));
    }
    out
}

/// One diagnostic as a JSON object with exactly the keys `code`, `severity`, `message`, `file`,
/// `line`, `column`, `end_line`, `end_column` and `help`.
///
/// Positions are those of the primary span, 1-based, columns counted in characters; the end is
/// exclusive (the position just after the last character). `file` is null when the span's file
/// is not in the map, and `help` is null when there is none.
pub fn json_diagnostic(d: &Diagnostic, sources: &SourceMap) -> Value {
    let span = d.primary_span();
    let file = sources
        .get(span.file)
        .map(|f| Value::String(f.path.display().to_string()))
        .unwrap_or(Value::Null);
    let (line, column) = sources.line_col(span.file, span.start as usize);
    let (end_line, end_column) = sources.line_col(span.file, span.end.max(span.start) as usize);
    json!({
        "code": d.code.as_str(),
        "severity": d.severity.as_str(),
        "message": d.message,
        "file": file,
        "line": line,
        "column": column,
        "end_line": end_line,
        "end_column": end_column,
        "help": d.help,
    })
}

/// `{"diagnostics": [...], "errors": N, "warnings": M}` for a whole run.
pub fn json_report(diags: &[Diagnostic], sources: &SourceMap) -> Value {
    let (errors, warnings) = tally(diags);
    let list: Vec<Value> = diags.iter().map(|d| json_diagnostic(d, sources)).collect();
    json!({
        "diagnostics": list,
        "errors": errors,
        "warnings": warnings,
    })
}

/// The identity of a source for ariadne: compared by [`FileId`], displayed as its path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SrcId {
    file: FileId,
    name: String,
}

impl fmt::Display for SrcId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

fn human_one(d: &Diagnostic, sources: &SourceMap, color: bool) -> String {
    // A message is one line by contract; a stray newline would break the header swap below.
    let message = d.message.replace(['\r', '\n'], " ");
    let kind = match d.severity {
        Severity::Error => ReportKind::Error,
        Severity::Warning => ReportKind::Warning,
    };
    let mut labels: Vec<(SrcId, Range<usize>, &crate::diagnostic::Label)> = d
        .labels
        .iter()
        .filter_map(|l| locate(l.span, sources).map(|(id, r)| (id, r, l)))
        .collect();
    // ariadne starts a new excerpt whenever a label sits on an earlier line than the one before
    // it; in source order, one file's labels share one excerpt. The primary file comes first.
    let primary_file = d.primary_span().file;
    labels.sort_by_key(|(id, r, _)| (id.file != primary_file, id.file, r.start));

    let anchor = locate(d.primary_span(), sources)
        .or_else(|| labels.first().map(|(id, r, _)| (id.clone(), r.clone())))
        .unwrap_or_else(|| {
            (
                SrcId {
                    file: d.primary_span().file,
                    name: String::from("<unknown>"),
                },
                0..0,
            )
        });

    let config = Config::default()
        .with_index_type(IndexType::Char)
        .with_color(color);
    let mut builder = Report::build(kind, anchor).with_config(config);
    builder.set_message(&message);
    for (id, range, label) in &labels {
        // ariadne underlines only labels that have a message; an empty one still marks the spot.
        let mut l = Label::new((id.clone(), range.clone())).with_message(&label.message);
        if color {
            l = l.with_color(label_color(d.severity, label.primary));
        }
        builder.add_label(l);
    }
    if let Some(help) = &d.help {
        builder.set_help(help);
    }
    for note in &d.notes {
        builder.add_note(note);
    }
    let report = builder.finish();

    let cache = ariadne::sources(
        labels
            .iter()
            .filter_map(|(id, _, _)| sources.get(id.file).map(|f| (id.clone(), f.text.clone())))
            .collect::<Vec<_>>(),
    );
    let mut buf = Vec::new();
    // Writing into a Vec cannot fail; if ariadne ever reports an error we still print the header.
    let _ = report.write(cache, &mut buf);
    let body = String::from_utf8_lossy(&buf);
    let body = match body.find('\n') {
        Some(i) => &body[i + 1..],
        None => "",
    };

    let head = format!("{}[{}]", d.severity.as_str(), d.code);
    let mut out = if color {
        let c = match d.severity {
            Severity::Error => RED,
            Severity::Warning => YELLOW,
        };
        format!("{BOLD}{c}{head}{RESET}{BOLD}: {message}{RESET}\n")
    } else {
        format!("{head}: {message}\n")
    };
    out.push_str(body);
    out
}

fn label_color(severity: Severity, primary: bool) -> Color {
    match (primary, severity) {
        (true, Severity::Error) => Color::Red,
        (true, Severity::Warning) => Color::Yellow,
        (false, _) => Color::Blue,
    }
}

/// The ariadne source and character range of a span, clamped into its text and onto character
/// boundaries; `None` when the span's file is not in the map.
fn locate(span: Span, sources: &SourceMap) -> Option<(SrcId, Range<usize>)> {
    let file = sources.get(span.file)?;
    let text = &file.text;
    let mut start = (span.start as usize).min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (span.end as usize).clamp(start, text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    let id = SrcId {
        file: span.file,
        name: file.path.display().to_string(),
    };
    let start_char = text[..start].chars().count();
    let end_char = start_char + text[start..end].chars().count();
    Some((id, start_char..end_char))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes;

    #[test]
    fn clamps_spans_into_text_and_onto_char_boundaries() {
        let mut map = SourceMap::new();
        let f = map.add("a.sr", "é\n");
        let chars = |span| locate(span, &map).map(|(_, r)| r);
        // Byte 1 is inside `é`: the span starts before it and ends at the end of the text.
        assert_eq!(chars(Span::new(f, 1, 99)), Some(0..2));
        assert_eq!(chars(Span::new(f, 7, 2)), Some(2..2));
        assert_eq!(chars(Span::new(f, 2, 3)), Some(1..2));
        assert!(locate(Span::new(FileId(9), 0, 1), &map).is_none());
    }

    #[test]
    fn header_is_rustc_like_and_message_single_line() {
        let mut map = SourceMap::new();
        let f = map.add("a.sr", "signal x = y\n");
        let d = Diagnostic::warning(
            codes::UNUSED_SIGNAL,
            "signal `x`\nis unused",
            Span::new(f, 7, 8),
        );
        let out = human(&[d], &map, false);
        assert!(
            out.starts_with("warning[W001]: signal `x` is unused\n"),
            "{out}"
        );
    }
}
