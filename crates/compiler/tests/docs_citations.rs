//! Comments that point readers at the language reference must point at something that exists.
//!
//! A citation names a heading of `docs/language.md` verbatim, in double quotes and on one line:
//! docs/language.md, "What happens to a request" (after "step 2 of" where a step matters). This
//! test walks every `*.rs` file under `crates/` and fails on a cited heading the reference does
//! not have, and on any citation of the section-numbered reference that preceded it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The start of a citation. Spelled in pieces so that this file does not cite anything itself.
const CITATION: &str = concat!("docs/language", ".md, ");
/// Citations of the old section-numbered reference, which no longer exists.
const STALE: &str = concat!("LANGUAGE", ".md §");

/// The heading texts of a Markdown document, outside fenced code blocks.
fn headings(markdown: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(line.trim_start_matches('#').trim().to_string());
        }
    }
    out
}

/// Every `*.rs` file under `dir`, in a stable order.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    let mut paths: Vec<PathBuf> = entries
        .map(|entry| {
            entry
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
                .path()
        })
        .collect();
    paths.sort();
    for path in paths {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if path.is_dir() {
            if name.is_some_and(|n| n != "target" && !n.starts_with('.')) {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// What is wrong with the citations on one line, if anything.
fn line_problems(line: &str, headings: &BTreeSet<String>) -> Vec<String> {
    let mut problems = Vec::new();
    if line.contains(STALE) {
        problems.push(format!(
            "cites `{STALE}…`; cite a heading of docs/language.md instead"
        ));
    }
    for (at, _) in line.match_indices(CITATION) {
        let rest = &line[at + CITATION.len()..];
        let heading = rest
            .strip_prefix('"')
            .and_then(|quoted| quoted.split_once('"'))
            .map(|(heading, _)| heading);
        match heading {
            Some(heading) if headings.contains(heading) => {}
            Some(heading) => {
                problems.push(format!("docs/language.md has no heading \"{heading}\""))
            }
            None => problems.push(
                "a citation names the heading in double quotes, on the same line".to_string(),
            ),
        }
    }
    problems
}

#[test]
fn citations_of_the_language_reference_name_its_headings() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let reference =
        std::fs::read_to_string(root.join("docs/language.md")).expect("docs/language.md exists");
    let headings = headings(&reference);
    assert!(
        headings.contains("What happens to a request"),
        "headings not found in docs/language.md: {headings:?}"
    );

    let mut files = Vec::new();
    rust_files(&root.join("crates"), &mut files);
    assert!(files.len() > 10, "no Rust files found under crates/");

    let mut problems = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a readable source file");
        let shown = file.strip_prefix(&root).unwrap_or(file).display();
        for (n, line) in text.lines().enumerate() {
            for problem in line_problems(line, &headings) {
                problems.push(format!("{shown}:{}: {problem}", n + 1));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} bad citations of the language reference:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn a_wrong_heading_or_a_section_number_is_caught() {
    let headings = headings("# Title\n\n```sr\n# a comment\n```\n\n## Expressions and types\n");
    assert!(!headings.contains("a comment"));
    let good = format!("//! the types of {CITATION}\"Expressions and types\".");
    assert!(line_problems(&good, &headings).is_empty());
    let wrong = format!("//! the types of {CITATION}\"Expression types\".");
    assert_eq!(line_problems(&wrong, &headings).len(), 1);
    let split = format!("//! the types of {CITATION}");
    assert_eq!(line_problems(&split, &headings).len(), 1);
    let stale = format!("//! the types of {STALE}4.");
    assert_eq!(line_problems(&stale, &headings).len(), 1);
}
