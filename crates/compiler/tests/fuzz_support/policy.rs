//! The property every `.sr` text must have, whatever it holds: shared by the proptest tests
//! (`fuzz_policy.rs`, on every `cargo test`) and the coverage-guided fuzz target
//! (`fuzz/fuzz_targets/policy.rs`), so both search for the same failures.
//!
//! For any text: `parse`, `check` and `format_source` return instead of panicking; every
//! diagnostic label and fix lies inside the text on character boundaries; the formatter never
//! refuses its own output (E090) and, where the text parses, its output parses to the same tree
//! (spans aside) and formats to itself. A policy that checks is also compiled and its `test`
//! blocks run on the interpreter, which reaches lowering and evaluation too.

use src_compiler::engine::EngineKind;
use src_compiler::load::from_texts;
use src_compiler::{check, testing, CheckOptions};
use src_dsl::ast::EqShape;
use src_dsl::codes;
use src_dsl::format::format_source;
use src_dsl::{parse, Diagnostic, FileId, Span};
use std::path::PathBuf;

/// Checks the property on `text`; the error says which part failed and how.
pub fn check_text(text: &str) -> Result<(), String> {
    let parsed = parse(text, FileId(0));
    spans_inside(text, FileId(0), &parsed.diagnostics, "parse")?;
    check_policy(text)?;
    check_format(text, parsed.has_errors(), &parsed.file)
}

fn check_policy(text: &str) -> Result<(), String> {
    // Paths in a policy are read as files. Fuzzed text may name a device that never ends
    // (`/dev/zero`) or a file too big to matter; what `check` makes of files is not what is
    // being searched here, so such text is only parsed and formatted.
    if ["/dev", "/proc", "/sys"].iter().any(|p| text.contains(p)) {
        return Ok(());
    }
    // A root that does not exist: relative paths in the text resolve to nothing.
    let root = PathBuf::from("/nonexistent-policy-root");
    let source = from_texts(root, vec![(PathBuf::from("fuzz.sr"), text.to_string())]);
    let file = source.files.first().map_or(FileId(0), |(id, _)| *id);
    let outcome = check(source, &CheckOptions::default());
    spans_inside(text, file, &outcome.diagnostics, "check")?;
    if let Some(policy) = &outcome.policy {
        // Compiling may refuse (a program too large, say) but must not panic.
        if let Ok(results) = testing::run_tests(policy, EngineKind::Interp) {
            if results.len() != policy.tests.len() {
                return Err(format!(
                    "{} test blocks gave {} results",
                    policy.tests.len(),
                    results.len()
                ));
            }
        }
    }
    Ok(())
}

fn check_format(text: &str, has_errors: bool, tree: &src_dsl::ast::File) -> Result<(), String> {
    match format_source(text, FileId(0)) {
        Ok(formatted) => {
            if has_errors {
                return Err("text with parse errors was formatted".into());
            }
            let again = parse(&formatted, FileId(0));
            if again.has_errors() {
                return Err(format!(
                    "the formatted text does not parse: {:?}\n{formatted}",
                    again.diagnostics
                ));
            }
            if !tree.items.eq_shape(&again.file.items) {
                return Err(format!(
                    "the formatted text means something else:\n{formatted}"
                ));
            }
            match format_source(&formatted, FileId(0)) {
                Ok(twice) if twice == formatted => Ok(()),
                Ok(twice) => Err(format!(
                    "formatting is not idempotent:\n{formatted}\n---\n{twice}"
                )),
                Err(ds) => Err(format!(
                    "the formatted text is refused: {ds:?}\n{formatted}"
                )),
            }
        }
        Err(ds) => {
            if let Some(d) = ds.iter().find(|d| d.code == codes::FORMAT_UNSOUND) {
                return Err(format!("the formatter refused its own output: {d:?}"));
            }
            if !has_errors {
                return Err(format!("text without parse errors was refused: {ds:?}"));
            }
            spans_inside(text, FileId(0), &ds, "format")
        }
    }
}

/// Every label and fix of `diagnostics` lies in `file`, inside `text`, on character boundaries.
fn spans_inside(
    text: &str,
    file: FileId,
    diagnostics: &[Diagnostic],
    phase: &str,
) -> Result<(), String> {
    for d in diagnostics {
        let spans = d
            .labels
            .iter()
            .map(|l| l.span)
            .chain(d.fix.iter().map(|f| f.span));
        for span in spans {
            if !span_inside(text, file, span) {
                return Err(format!(
                    "{phase} diagnostic {} ({}) has span {}..{} in file {} outside the text \
                     of {} bytes or off a character boundary",
                    d.code,
                    d.message,
                    span.start,
                    span.end,
                    span.file.0,
                    text.len()
                ));
            }
        }
    }
    Ok(())
}

fn span_inside(text: &str, file: FileId, span: Span) -> bool {
    let (start, end) = (span.start as usize, span.end as usize);
    span.file == file
        && start <= end
        && end <= text.len()
        && text.is_char_boundary(start)
        && text.is_char_boundary(end)
}
