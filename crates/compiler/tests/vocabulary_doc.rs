//! `docs/language.md`'s table of expressions and the compiler's vocabulary name the same
//! builtins: a function, value or field added to one and not the other fails here.

#![allow(
    clippy::expect_used,
    reason = "helpers outside `#[test]` functions fail the test on an unexpected error"
)]

use src_compiler::vocabulary::BUILTINS;
use src_dsl::keywords::KEYWORDS;
use std::collections::BTreeSet;
use std::path::Path;

/// The first cell of each row of the table headed `| expression | type | meaning |`.
fn expression_cells(doc: &str) -> Vec<String> {
    let mut lines = doc.lines().skip_while(|l| {
        !l.trim_start()
            .starts_with("| expression | type | meaning |")
    });
    lines.next();
    lines
        .take_while(|l| l.trim_start().starts_with('|'))
        .filter(|l| !l.contains("|---"))
        .filter_map(|l| l.split('|').nth(1).map(str::to_string))
        .collect()
}

/// The code spans of a cell, with string literals blanked out.
fn code_spans(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(|code| {
            let mut out = String::new();
            let mut in_string = false;
            for c in code.chars() {
                if c == '"' {
                    in_string = !in_string;
                    out.push(' ');
                } else {
                    out.push(if in_string { ' ' } else { c });
                }
            }
            out
        })
        .collect()
}

/// The builtins a code span writes, as [`src_compiler::vocabulary::Builtin::written`] spells
/// them. Keywords, and the one-letter or capitalised names the table uses as placeholders
/// (`C(t)`, `m.cost`), are not builtins.
fn builtins_in(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !is_word(chars[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && is_word(chars[i]) {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        let placeholder = word.len() == 1 || word.starts_with(|c: char| c.is_ascii_uppercase());
        if placeholder
            || word.starts_with(|c: char| c.is_ascii_digit())
            || KEYWORDS.contains(&word.as_str())
        {
            continue;
        }
        let before_dot = start > 0 && chars[start - 1] == '.';
        if before_dot {
            let receiver: String = chars[..start - 1]
                .iter()
                .rev()
                .take_while(|c| is_word(**c))
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            if receiver == "request" {
                out.push(format!("request.{word}"));
            } else {
                out.push(format!(".{word}"));
            }
        } else if chars.get(i) == Some(&'(') {
            out.push(format!("{word}()"));
        } else {
            out.push(word);
        }
    }
    out
}

#[test]
fn the_documented_builtins_are_the_compilers() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/language.md");
    let doc = std::fs::read_to_string(&path).expect("docs/language.md exists");
    let cells = expression_cells(&doc);
    assert!(cells.len() > 10, "the table of expressions was not found");
    let documented: BTreeSet<String> = cells
        .iter()
        .flat_map(|c| code_spans(c))
        .flat_map(|code| builtins_in(&code))
        .collect();
    let known: BTreeSet<String> = BUILTINS.iter().map(|b| b.written()).collect();
    let undocumented: Vec<&String> = known.difference(&documented).collect();
    let unknown: Vec<&String> = documented.difference(&known).collect();
    assert!(
        undocumented.is_empty(),
        "builtins missing from the table of expressions in docs/language.md: {undocumented:?}"
    );
    assert!(
        unknown.is_empty(),
        "docs/language.md documents builtins the compiler does not have: {unknown:?}"
    );
}

#[test]
fn the_reader_finds_each_kind_of_builtin() {
    let found = builtins_in("outcomes(pinned).fail_rate request.tools m.cost C(t) e is L");
    assert_eq!(
        found,
        [
            "outcomes()",
            "pinned",
            ".fail_rate",
            "request",
            "request.tools",
            ".cost"
        ]
    );
    assert_eq!(
        code_spans("`header(\"name\")` and `x`"),
        ["header(      )", "x"]
    );
}
