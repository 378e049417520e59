//! The editor offers and explains exactly the compiler's builtins: every row of
//! `src_compiler::vocabulary` is completed where it fits and hovered with its signature and doc,
//! and every builtin the completion offers has a row.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "helpers outside `#[test]` functions fail the test on an unexpected error"
)]

use lsp_types::{CompletionItem, CompletionItemKind};
use src_compiler::vocabulary::{self, Builtin, Meaning, Receiver, BUILTINS};
use src_lsp::completion::complete;
use src_lsp::hover::hover;
use src_lsp::uri::path_to_uri;
use src_lsp::workspace::{Analysis, Gathered};
use std::collections::BTreeSet;
use std::path::PathBuf;

const DECLS: &str = r#"backend sim { url = "http://127.0.0.1:8000/v1"  simulated = true }
model strong { backend = sim  serves = "Qwen/Qwen3-8B"  cost = 1.0 }
classifier domain { path = "models/domain"  labels = [math, code] }
signal topic = domain(prompt)
"#;

/// Names `DECLS` declares, which completion offers besides the builtins.
const DECLARED: &[&str] = &["strong", "domain", "topic"];

fn analysis(text: &str) -> Analysis {
    let root = PathBuf::from("/tmp/src-lsp-vocabulary");
    let path = root.join("policy.sr");
    let uri = path_to_uri(&path).expect("an absolute path has a URI");
    Analysis::new(Gathered {
        root,
        files: vec![(uri, path, text.to_string())],
    })
}

fn completions(marked: &str) -> Vec<CompletionItem> {
    let at = marked.find("|caret|").expect("a |caret| marker");
    let text = marked.replacen("|caret|", "", 1);
    let a = analysis(&text);
    complete(&text, at, &[&a])
}

/// The expression a builtin stands in, written out, and where its name starts in it.
fn written(b: &Builtin) -> String {
    match b.meaning {
        Meaning::Function(_) => format!("{}(prompt)", b.name),
        Meaning::Value(_) => b.name.to_string(),
        Meaning::Field(f) => format!("{}.{}", receiver_expr(f.receiver()), b.name),
    }
}

fn receiver_expr(r: Receiver) -> &'static str {
    match r {
        Receiver::Request => "request",
        Receiver::Class => "topic",
        Receiver::Model => "strong",
        Receiver::Outcomes => "outcomes(pinned)",
        Receiver::Budget => "budget(per_key)",
    }
}

/// An unfinished condition, in `protect` when the builtin needs it.
fn condition(b: &Builtin, expr: &str) -> String {
    if b.protect_only {
        format!("{DECLS}protect {{\n  hold \"r\" when {expr}")
    } else {
        format!("{DECLS}route r priority 1 {{\n  when {expr}")
    }
}

#[test]
fn every_builtin_is_completed_where_it_fits() {
    for b in BUILTINS {
        let marked = match b.meaning {
            Meaning::Function(_) | Meaning::Value(_) => condition(b, "|caret|"),
            Meaning::Field(f) => condition(b, &format!("{}.|caret|", receiver_expr(f.receiver()))),
        };
        let items = completions(&marked);
        let item = items.iter().find(|i| i.label == b.name);
        assert!(
            item.is_some(),
            "`{}` is not offered in:\n{marked}",
            b.written()
        );
        let detail = item.and_then(|i| i.detail.clone()).unwrap_or_default();
        assert!(
            detail == b.signature || detail == b.ty,
            "`{}` is offered with `{detail}`",
            b.written()
        );
    }
}

#[test]
fn every_builtin_is_hovered_with_its_signature_and_doc() {
    for b in BUILTINS {
        let expr = written(b);
        let body = if b.protect_only {
            format!("{DECLS}protect {{\n  hold \"r\" when {expr} == {expr}\n}}\n")
        } else {
            format!("{DECLS}signal s = {expr}\n")
        };
        let at = body.rfind(&expr).unwrap() + expr.find(b.name).unwrap() + 1;
        let a = analysis(&body);
        let (markdown, _) = hover(&a, a.files[0].id, at)
            .unwrap_or_else(|| panic!("no hover on `{}` in:\n{body}", b.written()));
        assert!(
            markdown.contains(b.signature) && markdown.contains(b.doc),
            "hover on `{}`: {markdown}",
            b.written()
        );
    }
}

#[test]
fn completion_offers_no_builtin_the_compiler_lacks() {
    let offered = |marked: &str, kinds: &[CompletionItemKind]| -> BTreeSet<String> {
        completions(marked)
            .into_iter()
            .filter(|i| i.kind.is_some_and(|k| kinds.contains(&k)))
            .map(|i| i.label)
            .filter(|l| !DECLARED.contains(&l.as_str()))
            .collect()
    };
    let expressions = [
        format!("{DECLS}route r priority 1 {{\n  when |caret|"),
        format!("{DECLS}protect {{\n  hold \"r\" when |caret|"),
    ];
    let mut builtins = BTreeSet::new();
    for marked in &expressions {
        let kinds = [CompletionItemKind::FUNCTION, CompletionItemKind::VARIABLE];
        builtins.extend(offered(marked, &kinds));
    }
    let known: BTreeSet<String> = vocabulary::functions()
        .chain(vocabulary::values())
        .map(|b| b.name.to_string())
        .collect();
    assert_eq!(builtins, known);
    for receiver in [
        Receiver::Request,
        Receiver::Class,
        Receiver::Model,
        Receiver::Outcomes,
    ] {
        let marked = format!(
            "{DECLS}protect {{\n  hold \"r\" when {}.|caret|",
            receiver_expr(receiver)
        );
        let fields = offered(&marked, &[CompletionItemKind::FIELD]);
        let known: BTreeSet<String> = vocabulary::fields(receiver)
            .map(|b| b.name.to_string())
            .collect();
        assert_eq!(fields, known, "after `{}.`", receiver_expr(receiver));
    }
}
