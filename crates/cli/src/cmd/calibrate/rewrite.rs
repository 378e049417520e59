//! Writing fitted thresholds back: each literal replaced in its file, the file put through the
//! formatter (comments kept), and a unified diff of what changed. A file not in canonical form
//! keeps its layout (the edited text is still parsed and checked by the formatter), so the diff
//! is the thresholds alone either way.

use super::probe::PolicyText;
use anyhow::{anyhow, Result};
use src_dsl::{format::format_source, FileId, Span};
use std::path::PathBuf;

/// A literal to replace.
#[derive(Debug, Clone)]
pub struct Edit {
    pub literal: Span,
    pub value: f64,
    pub current: f64,
}

/// The number as a literal: Rust's shortest round-trip form (`0.86`, `2`).
pub fn literal_text(value: f64) -> String {
    format!("{value}")
}

/// A changed file: its path, old and new text.
#[derive(Debug, Clone)]
pub struct Changed {
    pub path: PathBuf,
    pub before: String,
    pub after: String,
}

/// `text` with `edits` applied (spans index `text.files` by position, which is how the checked
/// policy numbered them), each changed file formatted when it was canonical. Edits that keep a
/// literal's value are skipped, so a second run changes nothing.
pub fn apply(text: &PolicyText, edits: &[Edit]) -> Result<(PolicyText, Vec<Changed>)> {
    let mut out = text.clone();
    let mut changed = Vec::new();
    for (index, (path, original)) in text.files.iter().enumerate() {
        let mut mine: Vec<&Edit> = edits
            .iter()
            .filter(|e| e.literal.file == FileId(index as u32) && e.value != e.current)
            .collect();
        if mine.is_empty() {
            continue;
        }
        mine.sort_by_key(|e| std::cmp::Reverse(e.literal.start));
        let mut edited = original.clone();
        for e in mine {
            let range = e.literal.range();
            if edited.get(range.clone()).is_none() {
                return Err(anyhow!(
                    "a threshold's place in `{}` is out of range",
                    path.display()
                ));
            }
            edited.replace_range(range, &literal_text(e.value));
        }
        let id = FileId(index as u32);
        let formatted = format_source(&edited, id).map_err(|d| {
            anyhow!(
                "the rewritten `{}` does not format: {}",
                path.display(),
                d.iter()
                    .map(|d| d.message.clone())
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        })?;
        // A file in canonical form stays so; one that is not keeps its layout, so the diff
        // shows the thresholds and nothing else (`src fmt` is the place to reformat it).
        let canonical = format_source(original, id).is_ok_and(|f| f == *original);
        let rewritten = if canonical { formatted } else { edited };
        if rewritten != *original {
            out.files[index].1 = rewritten.clone();
            changed.push(Changed {
                path: path.clone(),
                before: original.clone(),
                after: rewritten,
            });
        }
    }
    Ok((out, changed))
}

/// A unified diff of one file, three lines of context.
pub fn diff(change: &Changed) -> String {
    let name = change.path.display().to_string();
    similar::TextDiff::from_lines(&change.before, &change.after)
        .unified_diff()
        .context_radius(3)
        .header(&name, &name)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(files: &[&str]) -> PolicyText {
        PolicyText {
            root: PathBuf::from("."),
            files: files
                .iter()
                .enumerate()
                .map(|(i, t)| (PathBuf::from(format!("f{i}.sr")), t.to_string()))
                .collect(),
        }
    }

    #[test]
    fn a_file_not_in_canonical_form_keeps_its_layout() {
        let source = "signal a = density(prompt, [\"x\"])   >   0.8\nsignal b   = true\n";
        let at = source.find("0.8").unwrap();
        let edit = Edit {
            literal: Span::new(FileId(0), at, at + 3),
            value: 0.25,
            current: 0.8,
        };
        let (after, changed) = apply(&text(&[source]), &[edit]).unwrap();
        assert_eq!(
            after.files[0].1,
            "signal a = density(prompt, [\"x\"])   >   0.25\nsignal b   = true\n"
        );
        assert_eq!(
            diff(&changed[0])
                .lines()
                .filter(|l| l.starts_with('+'))
                .count(),
            2
        );
    }

    #[test]
    fn literals_are_replaced_comments_kept_and_a_rerun_is_a_no_op() {
        let source = "# why 0.8\nsignal a = density(prompt, [\"x\"]) > 0.8   # copied\n";
        let at = source.rfind("0.8").unwrap();
        let policy = text(&["signal b = true\n", source]);
        let edit = Edit {
            literal: Span::new(FileId(1), at, at + 3),
            value: 0.25,
            current: 0.8,
        };
        let (after, changed) = apply(&policy, std::slice::from_ref(&edit)).unwrap();
        assert_eq!(changed.len(), 1);
        assert!(after.files[1].1.contains("> 0.25"), "{}", after.files[1].1);
        assert!(after.files[1].1.contains("# copied"));
        assert!(after.files[1].1.contains("# why 0.8"));
        assert_eq!(after.files[0], policy.files[0]);
        let shown = diff(&changed[0]);
        assert!(
            shown.contains("-signal a = density(prompt, [\"x\"]) > 0.8"),
            "{shown}"
        );
        assert!(
            shown.contains("+signal a = density(prompt, [\"x\"]) > 0.25"),
            "{shown}"
        );
        let same = Edit {
            current: 0.8,
            value: 0.8,
            ..edit
        };
        let (again, none) = apply(&policy, &[same]).unwrap();
        assert!(none.is_empty());
        assert_eq!(again.files, policy.files);
    }
}
