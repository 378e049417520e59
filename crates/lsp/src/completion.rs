//! Completion from the lexical context of the cursor.
//!
//! The text around the cursor rarely parses while it is being typed, so the context comes from
//! [`crate::lexical`] (which declaration body, which tokens before the cursor), and the names on
//! offer come from the symbol index of the current text merged with the last analysis whose
//! files all parsed (a declaration that is broken right now is still offered).

use crate::builtins::{self, DECLARATIONS, FUNCTIONS, VALUES};
use crate::lexical::{context_at, CursorContext, TokKind};
use crate::symbols::{SymKind, SymbolIndex};
use crate::types::{infer, Ty};
use lsp_types::{CompletionItem, CompletionItemKind, InsertTextFormat};
use src_dsl::ast::{Expr, ExprKind, Ident};
use src_dsl::Span;

/// The completion items at a byte offset of `text`; `indexes` are searched in order (current
/// analysis first, then the last good one).
pub fn complete(text: &str, offset: usize, indexes: &[&SymbolIndex]) -> Vec<CompletionItem> {
    let cx = context_at(text, offset);
    if cx.quiet {
        return Vec::new();
    }
    let mut out = Completions::default();
    let names = Names { indexes };
    let decl = cx.decl.clone().unwrap_or_default();
    match cx.back(0) {
        _ if cx.decl.is_none() => out.declarations(),
        _ if cx.depth == 0 && decl != "signal" => {}
        Some("is") => out.labels(&names, label_owner(&cx, 1, &names)),
        Some("[") if cx.back(1) == Some("in") => out.labels(&names, label_owner(&cx, 2, &names)),
        Some(",") if in_label_list(&cx) => {
            let at = cx.before.iter().rposition(|t| t.text == "in").unwrap_or(0);
            let back = cx.before.len() - at;
            out.labels(&names, label_owner(&cx, back, &names));
        }
        Some("to") | Some("else") => out.names(&names, SymKind::Model, CompletionItemKind::CLASS),
        Some("expect") => {
            out.names(&names, SymKind::Route, CompletionItemKind::METHOD);
            out.keyword("blocked");
        }
        Some("blocked") => out.names(&names, SymKind::Block, CompletionItemKind::EVENT),
        Some("model") if decl == "test" => {
            out.names(&names, SymKind::Model, CompletionItemKind::CLASS)
        }
        Some("given") => out.names(&names, SymKind::Signal, CompletionItemKind::VARIABLE),
        Some(",") if decl == "test" => {
            out.names(&names, SymKind::Signal, CompletionItemKind::VARIABLE)
        }
        Some("=") => after_assign(&cx, &decl, &names, &mut out),
        Some("when") | Some("and") | Some("or") | Some("not") | Some("(") | Some(",")
        | Some("==") | Some("!=") | Some("<") | Some("<=") | Some(">") | Some(">=")
        | Some("??") | Some("+") | Some("-") | Some("*") | Some("/") => {
            out.expression(&names, &decl)
        }
        Some("{") if cx.back(1) == Some("headers") => {}
        Some("priority") | Some("hold") | Some("header") | Some("route") | Some("backend")
        | Some("classifier") | Some("guard") | Some("encoder") | Some("block") | Some("test")
            if cx.before.len() <= 2 => {}
        _ if cx.depth == 0 => {
            // After a complete `signal x = ...`: a new declaration or more expression.
            if ends_value(&cx) && cx.before.iter().any(|t| t.text == "=") {
                out.declarations();
                for op in ["and", "or", "is", "in"] {
                    out.keyword(op);
                }
            }
        }
        _ => {
            out.fields(&decl);
            if ends_value(&cx) {
                for op in ["and", "or", "is", "in"] {
                    out.keyword(op);
                }
            }
        }
    }
    out.items
        .into_iter()
        .filter(|i| i.label.starts_with(cx.prefix.as_str()))
        .collect()
}

/// Names declared in any of the indexes, deduplicated, in declaration order.
struct Names<'a> {
    indexes: &'a [&'a SymbolIndex],
}

impl Names<'_> {
    fn of(&self, kind: SymKind) -> Vec<String> {
        let mut seen = Vec::new();
        for index in self.indexes {
            for d in index.decls_of(kind) {
                if !seen.contains(&d.key.name) {
                    seen.push(d.key.name.clone());
                }
            }
        }
        seen
    }

    fn labels(&self, classifier: &str) -> Vec<String> {
        self.indexes
            .iter()
            .find_map(|i| i.classifier_labels.get(classifier).cloned())
            .unwrap_or_default()
    }

    fn type_of(&self, name: &str) -> Ty {
        let expr = Expr {
            kind: ExprKind::Name(Ident {
                name: name.to_string(),
                span: Span::default(),
            }),
            span: Span::default(),
        };
        self.indexes
            .iter()
            .map(|i| infer(&expr, i))
            .find(|t| *t != Ty::Unknown)
            .unwrap_or(Ty::Unknown)
    }

    fn value_kind(&self, name: &str) -> Option<SymKind> {
        self.indexes.iter().find_map(|i| i.value_kind(name))
    }
}

/// The classifier whose labels fit after the token `back` places before the prefix
/// (`topic is |`: the token before `is`; `domain(prompt) is |`: the call's name).
fn label_owner(cx: &CursorContext, back: usize, names: &Names<'_>) -> Option<Ty> {
    let len = cx.before.len();
    let mut i = len.checked_sub(back + 1)?;
    let tok = cx.before.get(i)?;
    if tok.text == ")" {
        let mut depth = 0usize;
        loop {
            match cx.before.get(i)?.text.as_str() {
                ")" => depth += 1,
                "(" => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            i = i.checked_sub(1)?;
        }
        let callee = cx.before.get(i.checked_sub(1)?)?;
        return match callee.text.as_str() {
            "language" => Some(Ty::Class(None)),
            c if names.value_kind(c) == Some(SymKind::Classifier) => {
                Some(Ty::Class(Some(c.to_string())))
            }
            _ => None,
        };
    }
    (tok.kind == TokKind::Ident).then(|| names.type_of(&tok.text))
}

fn in_label_list(cx: &CursorContext) -> bool {
    let Some(open) = cx.before.iter().rposition(|t| t.text == "[") else {
        return false;
    };
    let closed = cx.before[open..].iter().any(|t| t.text == "]");
    !closed && open > 0 && cx.before[open - 1].text == "in"
}

/// Whether the token before the prefix ends a value (so an operator or a new field may follow).
fn ends_value(cx: &CursorContext) -> bool {
    cx.before.last().is_some_and(|t| {
        matches!(t.kind, TokKind::Ident | TokKind::Str | TokKind::Number)
            || t.text == ")"
            || t.text == "]"
    })
}

fn after_assign(cx: &CursorContext, decl: &str, names: &Names<'_>, out: &mut Completions) {
    let field = cx.back(1).unwrap_or("");
    if decl == "signal" && cx.depth == 0 {
        return out.expression(names, decl);
    }
    if decl == "test" && cx.before.iter().any(|t| t.text == "given") {
        // `given SIGNAL = |`: the signal's labels, or booleans.
        match names.type_of(field) {
            Ty::Class(owner) => out.labels(names, Some(Ty::Class(owner))),
            Ty::Bool => {
                out.keyword("true");
                out.keyword("false");
            }
            _ => {}
        }
        return;
    }
    match (decl, field) {
        ("model", "backend") => out.names(names, SymKind::Backend, CompletionItemKind::MODULE),
        ("cache", "encoder") => out.names(names, SymKind::Encoder, CompletionItemKind::FUNCTION),
        _ if builtins::is_expression_field(decl, field) => out.expression(names, decl),
        _ => {
            for v in builtins::field_values(decl, field) {
                out.keyword(v);
            }
        }
    }
}

#[derive(Default)]
struct Completions {
    items: Vec<CompletionItem>,
}

impl Completions {
    fn push(&mut self, item: CompletionItem) {
        if !self.items.iter().any(|i| i.label == item.label) {
            self.items.push(item);
        }
    }

    fn keyword(&mut self, word: &str) {
        self.push(CompletionItem {
            label: word.to_string(),
            kind: Some(CompletionItemKind::KEYWORD),
            ..Default::default()
        });
    }

    fn snippet(&mut self, label: &str, kind: CompletionItemKind, body: &str, detail: &str) {
        self.push(CompletionItem {
            label: label.to_string(),
            kind: Some(kind),
            detail: Some(detail.to_string()),
            insert_text: Some(body.to_string()),
            insert_text_format: Some(InsertTextFormat::SNIPPET),
            ..Default::default()
        });
    }

    fn declarations(&mut self) {
        for (kw, body) in DECLARATIONS {
            self.snippet(kw, CompletionItemKind::KEYWORD, body, "declaration");
        }
    }

    fn fields(&mut self, decl: &str) {
        for f in builtins::fields_of(decl) {
            self.push(CompletionItem {
                label: f.to_string(),
                kind: Some(CompletionItemKind::FIELD),
                detail: Some(format!("{decl} field")),
                ..Default::default()
            });
        }
    }

    fn names(&mut self, names: &Names<'_>, kind: SymKind, item_kind: CompletionItemKind) {
        for n in names.of(kind) {
            self.push(CompletionItem {
                label: n,
                kind: Some(item_kind),
                detail: Some(kind.word().to_string()),
                ..Default::default()
            });
        }
    }

    fn labels(&mut self, names: &Names<'_>, owner: Option<Ty>) {
        let (labels, owner_name) = match owner {
            Some(Ty::Class(Some(c))) => (names.labels(&c), c),
            Some(Ty::Class(None)) => (
                src_compiler::language::labels().to_vec(),
                "language".to_string(),
            ),
            _ => return,
        };
        for l in labels {
            self.push(CompletionItem {
                label: l,
                kind: Some(CompletionItemKind::ENUM_MEMBER),
                detail: Some(format!("label of `{owner_name}`")),
                ..Default::default()
            });
        }
    }

    fn expression(&mut self, names: &Names<'_>, decl: &str) {
        self.names(names, SymKind::Signal, CompletionItemKind::VARIABLE);
        for c in names.of(SymKind::Classifier) {
            let body = format!("{c}(${{1:prompt}})");
            self.snippet(&c, CompletionItemKind::FUNCTION, &body, "classifier");
        }
        for g in names.of(SymKind::Guard) {
            let body = format!("{g}(${{1:prompt}})");
            self.snippet(&g, CompletionItemKind::FUNCTION, &body, "guard");
        }
        for b in FUNCTIONS {
            if b.name == "outcomes" && decl != "protect" {
                continue;
            }
            self.snippet(b.name, CompletionItemKind::FUNCTION, b.snippet, b.signature);
        }
        for (name, ty, _) in VALUES {
            if matches!(*name, "pinned" | "proposed") && decl != "protect" {
                continue;
            }
            self.push(CompletionItem {
                label: name.to_string(),
                kind: Some(CompletionItemKind::VARIABLE),
                detail: Some(ty.to_string()),
                ..Default::default()
            });
        }
        if decl == "protect" {
            self.names(names, SymKind::Model, CompletionItemKind::CLASS);
        }
        for kw in ["not", "true", "false"] {
            self.keyword(kw);
        }
    }
}
