//! Edits and commands: whole-document formatting, quick fixes from diagnostics' fixes, the
//! "run tests" code lens and the `src.runTests` command behind it.
//!
//! Formatting goes through the same formatter as `src fmt` and refuses a file with syntax
//! errors (no edit), since a broken file is never rewritten. Tests run on both engines, as
//! `src test` does; a policy that does not check runs nothing and says why.

use crate::diagnostics::to_lsp;
use crate::workspace::Analysis;
use lsp_types::{
    CodeAction, CodeActionKind, CodeLens, Command, Range, TextEdit, Uri, WorkspaceEdit,
};
use serde_json::{json, Value};
use src_compiler::testing::run_tests;
use src_compiler::{check, CheckOptions, EngineKind};
use src_dsl::ast::ItemKind;
use src_dsl::format::format_source;
use src_dsl::{Diagnostic, FileId};
use std::collections::HashMap;

/// The command a test code lens runs.
pub const RUN_TESTS: &str = "src.runTests";

/// One edit replacing the whole document with its formatted text; empty when the text is
/// already formatted or does not parse.
pub fn format_document(text: &str, lines: &crate::position::LineIndex) -> Vec<TextEdit> {
    match format_source(text, FileId(0)) {
        Ok(formatted) if formatted != text => {
            vec![TextEdit::new(lines.range(text, 0..text.len()), formatted)]
        }
        _ => Vec::new(),
    }
}

/// A quick fix for every diagnostic of `file` that has a fix and touches `range`.
pub fn code_actions(
    analysis: &Analysis,
    raw: &[Diagnostic],
    file: FileId,
    range: std::ops::Range<usize>,
) -> Vec<CodeAction> {
    let mut out = Vec::new();
    for d in raw {
        let span = d.primary_span();
        if span.file != file
            || (span.end as usize) < range.start
            || (span.start as usize) > range.end
        {
            continue;
        }
        let Some(fix) = &d.fix else {
            continue;
        };
        let Some(location) = analysis.location(fix.span) else {
            continue;
        };
        let title = match &d.help {
            Some(help) => format!("{}: {help}", d.code),
            None => format!("{}: replace with `{}`", d.code, fix.replacement),
        };
        let mut changes: HashMap<Uri, Vec<TextEdit>> = HashMap::new();
        changes.insert(
            location.uri,
            vec![TextEdit::new(location.range, fix.replacement.clone())],
        );
        out.push(CodeAction {
            title,
            kind: Some(CodeActionKind::QUICKFIX),
            diagnostics: to_lsp(d, analysis).map(|l| vec![l]),
            edit: Some(WorkspaceEdit {
                changes: Some(changes),
                ..Default::default()
            }),
            is_preferred: Some(true),
            ..Default::default()
        });
    }
    out
}

/// A "run test" lens on every `test` declaration of the file, and a "run all tests" lens on the
/// first one.
pub fn code_lenses(analysis: &Analysis, file: FileId) -> Vec<CodeLens> {
    let (Some(tree), Some(info)) = (analysis.tree(file), analysis.file_by_id(file)) else {
        return Vec::new();
    };
    let text = analysis.text(file);
    let mut out = Vec::new();
    for item in &tree.items {
        let ItemKind::Test(t) = &item.kind else {
            continue;
        };
        let range = info.lines.range(text, t.name.span.range());
        if out.is_empty() {
            out.push(lens(range, "▶ run all tests", json!([info.uri.as_str()])));
        }
        let title = format!("▶ run test `{}`", t.name.name);
        out.push(lens(range, &title, json!([info.uri.as_str(), t.name.name])));
    }
    out
}

fn lens(range: Range, title: &str, arguments: Value) -> CodeLens {
    let arguments = match arguments {
        Value::Array(a) => a,
        other => vec![other],
    };
    CodeLens {
        range,
        command: Some(Command {
            title: title.to_string(),
            command: RUN_TESTS.to_string(),
            arguments: Some(arguments),
        }),
        data: None,
    }
}

/// Runs the policy's tests (all, or the one named) on the interpreter and the JIT.
///
/// The answer is `{"passed": N, "failed": M, "errors": [...], "cases": [...]}`; a policy that
/// does not check has its error diagnostics under `errors` and no cases.
pub fn run_policy_tests(analysis: &Analysis, only: Option<&str>) -> Value {
    let outcome = check(analysis.source.clone(), &CheckOptions::default());
    let Some(policy) = outcome.policy else {
        let errors: Vec<Value> = outcome
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| json!({"code": d.code.as_str(), "message": d.message}))
            .collect();
        return json!({"passed": 0, "failed": 0, "errors": errors, "cases": []});
    };
    let mut cases = Vec::new();
    let mut errors = Vec::new();
    let (mut passed, mut failed) = (0, 0);
    for engine in [EngineKind::Interp, EngineKind::Jit] {
        match run_tests(&policy, engine) {
            Ok(results) => {
                for r in results.iter().filter(|r| only.is_none_or(|n| n == r.name)) {
                    if r.passed {
                        passed += 1;
                    } else {
                        failed += 1;
                    }
                    let location = analysis.location(r.span);
                    cases.push(json!({
                        "name": r.name,
                        "engine": engine.as_str(),
                        "passed": r.passed,
                        "expected": r.expected,
                        "actual": r.actual.to_string(),
                        "line": location.map(|l| l.range.start.line),
                    }));
                }
            }
            Err(e) => errors.push(json!({"engine": engine.as_str(), "message": e.to_string()})),
        }
    }
    json!({"passed": passed, "failed": failed, "errors": errors, "cases": cases})
}

/// A one-line summary of a test run for `window/showMessage`.
pub fn summary(result: &Value) -> String {
    let passed = result["passed"].as_u64().unwrap_or(0);
    let failed = result["failed"].as_u64().unwrap_or(0);
    let errors = result["errors"].as_array().map(Vec::len).unwrap_or(0);
    let mut text = format!("src tests: {passed} passed, {failed} failed (both engines)");
    if errors > 0 {
        text.push_str(&format!(", {errors} error(s) before running"));
    }
    if let Some(cases) = result["cases"].as_array() {
        for c in cases.iter().filter(|c| c["passed"] == json!(false)) {
            text.push_str(&format!(
                "\n{} [{}]: expected {}, got {}",
                c["name"].as_str().unwrap_or(""),
                c["engine"].as_str().unwrap_or(""),
                c["expected"].as_str().unwrap_or(""),
                c["actual"].as_str().unwrap_or("")
            ));
        }
    }
    text
}
