//! The user reference's complete examples (```sr policy blocks in docs/*.md and the README's
//! ```sr block) must check without errors, so the documentation cannot drift from the compiler.

#![allow(
    clippy::expect_used,
    reason = "helpers outside `#[test]` functions fail the test on an unexpected error"
)]

use src_compiler::{check, load::load_str, CheckOptions};
use std::path::Path;

/// Every fenced block whose info string starts with `lang`, with the line it starts on.
fn blocks(text: &str, info: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        match &mut current {
            None if line.trim_start().starts_with("```")
                && line.trim_start().trim_start_matches('`').trim() == info =>
            {
                current = Some((n + 1, String::new()));
            }
            Some((start, body)) if line.trim_start().starts_with("```") => {
                out.push((*start, std::mem::take(body)));
                current = None;
            }
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
            None => {}
        }
    }
    out
}

fn assert_checks(doc: &str, info: &str, minimum: usize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(doc);
    let text = std::fs::read_to_string(&path).expect("document exists");
    let found = blocks(&text, info);
    assert!(
        found.len() >= minimum,
        "{doc}: expected at least {minimum} `{info}` blocks"
    );
    for (line, body) in found {
        let outcome = check(
            load_str(&format!("{doc}:{line}"), &body),
            &CheckOptions::default(),
        );
        let errors: Vec<_> = outcome
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| format!("{} {}", d.code, d.message))
            .collect();
        assert!(
            errors.is_empty(),
            "{doc} block at line {line} has errors: {errors:?}"
        );
    }
}

#[test]
fn language_reference_policies_check() {
    assert_checks("docs/language.md", "sr policy", 1);
}

#[test]
fn readme_policy_checks() {
    assert_checks("README.md", "sr", 1);
}

#[test]
fn block_extraction_sees_fences() {
    let text = "a\n```sr policy\nx\n```\n```sr\ny\n```\n";
    assert_eq!(blocks(text, "sr policy"), vec![(2, "x\n".to_string())]);
    assert_eq!(blocks(text, "sr"), vec![(5, "y\n".to_string())]);
}
