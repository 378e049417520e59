//! The formatter's self-check: formatted text must parse back to the tree it was made from.
//!
//! A formatter bug that drops a field, loses a parenthesis or re-escapes a string wrongly would
//! otherwise rewrite a user's policy into a different one without a word. Before
//! [`super::format_source`] hands text back, the text is parsed again and its tree compared with
//! the input's by shape ([`EqShape`]: spans aside). Comments are compared as a set of texts,
//! because the formatter legitimately moves them with the fields it reorders and trims the
//! spaces that end them.

use crate::ast::{EqShape, File};
use crate::codes;
use crate::diagnostic::Diagnostic;
use crate::span::{FileId, Span};

const HELP: &str = "this is a bug in the formatter, not in the policy: the file was left as it \
    is; please report it with this file";

/// The internal error to report instead of `formatted`, when `formatted` is not `before`
/// printed faithfully; `None` when it is.
pub(super) fn unsound(before: &File, formatted: &str, file: FileId) -> Option<Diagnostic> {
    let after = crate::parse(formatted, file);
    if let Some(error) = after.diagnostics.iter().find(|d| d.is_error()) {
        let at = before
            .items
            .first()
            .map_or(Span::new(file, 0, 0), |i| i.span);
        return Some(
            Diagnostic::error(
                codes::FORMAT_UNSOUND,
                "the formatted text of this file does not parse",
                at,
            )
            .with_help(HELP)
            .with_note(format!(
                "the formatted text fails with {}: {}",
                error.code, error.message
            )),
        );
    }
    if let Some(i) = first_difference(before, &after.file) {
        let at = before
            .items
            .get(i)
            .or(before.items.last())
            .map_or(Span::new(file, 0, 0), |item| item.span);
        return Some(
            Diagnostic::error(
                codes::FORMAT_UNSOUND,
                "formatting would change this declaration",
                at,
            )
            .with_label_message("printed differently from what it says")
            .with_help(HELP),
        );
    }
    if comment_texts(before) != comment_texts(&after.file) {
        return Some(
            Diagnostic::error(
                codes::FORMAT_UNSOUND,
                "formatting would lose or change a comment",
                Span::new(file, 0, 0),
            )
            .with_help(HELP),
        );
    }
    None
}

/// The index of the first item that differs in shape (or is missing on one side).
fn first_difference(before: &File, after: &File) -> Option<usize> {
    let common = before.items.len().min(after.items.len());
    (0..common)
        .find(|&i| !before.items[i].eq_shape(&after.items[i]))
        .or((before.items.len() != after.items.len()).then_some(common))
}

fn comment_texts(file: &File) -> Vec<&str> {
    let mut texts: Vec<&str> = file.comments.iter().map(|c| c.text.trim_end()).collect();
    texts.sort_unstable();
    texts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::format_file;

    const POLICY: &str =
        "# models\nmodel small { cost = 8k serves = \"small\" backend = local } # cheap\n\
        signal s = (a or b) and not c\nroute r priority 1 { when s to small }\n";

    fn parsed(text: &str) -> File {
        let p = crate::parse(text, FileId(0));
        assert!(p.diagnostics.is_empty(), "{:#?}", p.diagnostics);
        p.file
    }

    #[test]
    fn faithful_output_passes() {
        let file = parsed(POLICY);
        let formatted = format_file(&file, POLICY);
        assert_ne!(formatted, POLICY, "the fields are reordered");
        assert!(unsound(&file, &formatted, FileId(0)).is_none());
    }

    /// Each output is what a broken printer could produce; every one must be caught.
    #[test]
    fn a_changed_policy_is_refused() {
        let file = parsed(POLICY);
        let good = format_file(&file, POLICY);
        for (from, to, what) in [
            ("(a or b) and", "a or b and", "a lost parenthesis"),
            ("not c", "c", "a lost operator"),
            ("priority 1", "priority 10", "a changed value"),
            ("cost = 8k\n", "", "a lost field"),
            ("route r", "route q", "a changed name"),
            ("# cheap", "", "a lost comment"),
        ] {
            assert!(good.contains(from), "{from:?} not in\n{good}");
            let broken = good.replacen(from, to, 1);
            let d = unsound(&file, &broken, FileId(0));
            let d = d.unwrap_or_else(|| panic!("{what} went unnoticed:\n{broken}"));
            assert_eq!(d.code, codes::FORMAT_UNSOUND, "{what}");
        }
    }

    #[test]
    fn output_that_does_not_parse_is_refused() {
        let file = parsed(POLICY);
        let d = unsound(&file, "route r priority 1 { when s to }\n", FileId(0));
        let d = d.map(|d| (d.code, d.message));
        assert_eq!(
            d,
            Some((
                codes::FORMAT_UNSOUND,
                "the formatted text of this file does not parse".to_string()
            ))
        );
    }

    #[test]
    fn the_difference_is_located() {
        let file = parsed(POLICY);
        let broken = format_file(&file, POLICY).replacen("priority 1", "priority 2", 1);
        let d = unsound(&file, &broken, FileId(0)).map(|d| d.primary_span());
        assert_eq!(d, Some(file.items[2].span));
    }
}
