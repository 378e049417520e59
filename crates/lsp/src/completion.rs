//! Completion from the lexical context of the cursor.
//!
//! The text around the cursor rarely parses while it is being typed, so the context comes from
//! [`crate::lexical`] (which declaration body, which tokens before the cursor), and the names on
//! offer come from the analysis of the current text merged with the last analysis whose files
//! all parsed (a declaration that is broken right now is still offered). What the language
//! itself defines comes from the front end and the compiler: declarations and their fields from
//! [`src_dsl::keywords`], builtins from [`src_compiler::vocabulary`], and the types that decide
//! which labels or fields fit from the checker's names.

use crate::lexical::{context_at, CursorContext, TokKind};
use crate::workspace::Analysis;
use lsp_types::{CompletionItem, CompletionItemKind, InsertTextFormat};
use src_compiler::check::DeclKind;
use src_compiler::hir::{ClassSet, Type};
use src_compiler::vocabulary::{self, Receiver, Value};
use src_dsl::keywords;

/// The completion items at a byte offset of `text`; `analyses` are searched in order (current
/// analysis first, then the last good one).
pub fn complete(text: &str, offset: usize, analyses: &[&Analysis]) -> Vec<CompletionItem> {
    let cx = context_at(text, offset);
    if cx.quiet {
        return Vec::new();
    }
    let mut out = Completions::default();
    let names = Names { analyses };
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
        Some("to") | Some("else") => out.names(&names, DeclKind::Model, CompletionItemKind::CLASS),
        Some("expect") => {
            out.names(&names, DeclKind::Route, CompletionItemKind::METHOD);
            out.keyword("blocked");
            out.keyword("rejected");
        }
        Some("blocked") => out.names(&names, DeclKind::Block, CompletionItemKind::EVENT),
        Some("rejected") if decl == "test" => {
            out.names(&names, DeclKind::Budget, CompletionItemKind::VALUE)
        }
        Some("model") if decl == "test" => {
            out.names(&names, DeclKind::Model, CompletionItemKind::CLASS)
        }
        Some("given") => out.names(&names, DeclKind::Signal, CompletionItemKind::VARIABLE),
        Some(",") if decl == "test" => {
            out.names(&names, DeclKind::Signal, CompletionItemKind::VARIABLE)
        }
        Some("=") => after_assign(&cx, &decl, &names, &mut out),
        Some(".") => {
            if let Some(receiver) = receiver(&cx, &names) {
                out.builtin_fields(receiver);
            }
        }
        Some("when") | Some("and") | Some("or") | Some("not") | Some("(") | Some(",")
        | Some("==") | Some("!=") | Some("<") | Some("<=") | Some(">") | Some(">=")
        | Some("??") | Some("+") | Some("-") | Some("*") | Some("/") => {
            out.expression(&names, &decl)
        }
        Some("{") if cx.back(1) == Some("headers") => {}
        Some("priority") | Some("hold") | Some("header") | Some("route") | Some("backend")
        | Some("classifier") | Some("guard") | Some("encoder") | Some("detector")
        | Some("block") | Some("test")
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

/// Which label set fits: a classifier's, or `language()`'s.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    Classifier(String),
    Language,
}

/// Names declared in any of the analyses, deduplicated, in declaration order.
struct Names<'a> {
    analyses: &'a [&'a Analysis],
}

impl Names<'_> {
    fn of(&self, kind: DeclKind) -> Vec<String> {
        let mut seen = Vec::new();
        for analysis in self.analyses {
            for d in analysis.symbols.decls_of(kind) {
                if !seen.contains(&d.key.name) {
                    seen.push(d.key.name.clone());
                }
            }
        }
        seen
    }

    fn labels(&self, classifier: &str) -> Vec<String> {
        self.analyses
            .iter()
            .find_map(|a| a.symbols.classifier_labels.get(classifier).cloned())
            .unwrap_or_default()
    }

    /// The type the checker gave a declared name (or a builtin value), from the first analysis
    /// that has one, with the label set's owner for class types.
    fn type_of(&self, name: &str) -> Option<(Type, Option<Owner>)> {
        if let Some(b) = vocabulary::lookup_value(name) {
            return match b.value() {
                Some(Value::Pinned | Value::Proposed) => Some((Type::Model, None)),
                _ => None,
            };
        }
        self.analyses.iter().find_map(|a| {
            let ty = a.names.type_of(name)?;
            let owner = match ty {
                Type::Class(ClassSet::Language) => Some(Owner::Language),
                Type::Class(set) => a
                    .names
                    .classifier(set)
                    .map(|c| Owner::Classifier(c.to_string())),
                _ => None,
            };
            Some((ty, owner))
        })
    }

    fn value_kind(&self, name: &str) -> Option<DeclKind> {
        self.analyses
            .iter()
            .find_map(|a| a.symbols.value_kind(name))
    }
}

/// The callee of the call whose closing parenthesis is the token `back` places before the prefix.
fn callee_before(cx: &CursorContext, back: usize) -> Option<&str> {
    let mut i = cx.before.len().checked_sub(back + 1)?;
    if cx.before.get(i)?.text != ")" {
        return None;
    }
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
    Some(cx.before.get(i.checked_sub(1)?)?.text.as_str())
}

/// The label set that fits after the token `back` places before the prefix
/// (`topic is |`: the token before `is`; `domain(prompt) is |`: the call's name).
fn label_owner(cx: &CursorContext, back: usize, names: &Names<'_>) -> Option<Owner> {
    if let Some(callee) = callee_before(cx, back) {
        return match callee {
            "language" => Some(Owner::Language),
            c if names.value_kind(c) == Some(DeclKind::Classifier) => {
                Some(Owner::Classifier(c.to_string()))
            }
            _ => None,
        };
    }
    let tok = cx.before.get(cx.before.len().checked_sub(back + 1)?)?;
    if tok.kind != TokKind::Ident {
        return None;
    }
    names.type_of(&tok.text).and_then(|(_, owner)| owner)
}

/// What the value before `.` is, for its fields.
fn receiver(cx: &CursorContext, names: &Names<'_>) -> Option<Receiver> {
    if let Some(callee) = callee_before(cx, 1) {
        let function = vocabulary::lookup_function(callee).and_then(|b| b.function());
        return match function {
            Some(vocabulary::Function::Outcomes) => Some(Receiver::Outcomes),
            Some(vocabulary::Function::Budget) => Some(Receiver::Budget),
            Some(vocabulary::Function::Language) => Some(Receiver::Class),
            _ if names.value_kind(callee) == Some(DeclKind::Classifier) => Some(Receiver::Class),
            _ => None,
        };
    }
    let name = cx.back(1)?;
    if vocabulary::lookup_value(name).and_then(|b| b.value()) == Some(Value::Request) {
        return Some(Receiver::Request);
    }
    match names.type_of(name)?.0 {
        Type::Class(_) => Some(Receiver::Class),
        Type::Model => Some(Receiver::Model),
        _ => None,
    }
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
            Some((Type::Class(_), owner)) => out.labels(names, owner),
            Some((Type::Bool, _)) => {
                out.keyword("true");
                out.keyword("false");
            }
            _ => {}
        }
        return;
    }
    match (decl, field) {
        ("model", "backend") => out.names(names, DeclKind::Backend, CompletionItemKind::MODULE),
        ("cache", "encoder") => out.names(names, DeclKind::Encoder, CompletionItemKind::FUNCTION),
        _ if keywords::takes_expression(decl, field) => out.expression(names, decl),
        _ => {
            for v in keywords::choices(decl, field) {
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
        for d in keywords::DECLARATIONS {
            self.snippet(
                d.keyword,
                CompletionItemKind::KEYWORD,
                d.snippet,
                "declaration",
            );
        }
    }

    fn fields(&mut self, decl: &str) {
        for f in keywords::fields_of(decl) {
            self.push(CompletionItem {
                label: f.to_string(),
                kind: Some(CompletionItemKind::FIELD),
                detail: Some(format!("{decl} field")),
                ..Default::default()
            });
        }
        if decl == "route" {
            // Not a field: the fallbacks of `to MODEL else MODEL`.
            self.keyword("else");
        }
    }

    /// The builtin fields of a value (`request.tools`, `topic.confidence`).
    fn builtin_fields(&mut self, receiver: Receiver) {
        for b in vocabulary::fields(receiver) {
            self.push(CompletionItem {
                label: b.name.to_string(),
                kind: Some(CompletionItemKind::FIELD),
                detail: Some(b.signature.to_string()),
                ..Default::default()
            });
        }
    }

    fn names(&mut self, names: &Names<'_>, kind: DeclKind, item_kind: CompletionItemKind) {
        for n in names.of(kind) {
            self.push(CompletionItem {
                label: n,
                kind: Some(item_kind),
                detail: Some(kind.noun().to_string()),
                ..Default::default()
            });
        }
    }

    fn labels(&mut self, names: &Names<'_>, owner: Option<Owner>) {
        let (labels, owner_name) = match owner {
            Some(Owner::Classifier(c)) => (names.labels(&c), c),
            Some(Owner::Language) => (
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
        self.names(names, DeclKind::Signal, CompletionItemKind::VARIABLE);
        for c in names.of(DeclKind::Classifier) {
            let body = format!("{c}(${{1:prompt}})");
            self.snippet(&c, CompletionItemKind::FUNCTION, &body, "classifier");
        }
        for g in names.of(DeclKind::Guard) {
            let body = format!("{g}(${{1:prompt}})");
            self.snippet(&g, CompletionItemKind::FUNCTION, &body, "guard");
        }
        for d in names.of(DeclKind::Detector) {
            let body = format!("{d}(${{1:prompt}}, [${{2:TYPE}}])");
            self.snippet(&d, CompletionItemKind::FUNCTION, &body, "detector");
        }
        let in_scope = |b: &&vocabulary::Builtin| !b.protect_only || decl == "protect";
        for b in vocabulary::functions().filter(in_scope) {
            self.snippet(b.name, CompletionItemKind::FUNCTION, b.snippet, b.signature);
        }
        for b in vocabulary::values().filter(in_scope) {
            self.push(CompletionItem {
                label: b.name.to_string(),
                kind: Some(CompletionItemKind::VARIABLE),
                detail: Some(b.ty.to_string()),
                ..Default::default()
            });
        }
        if decl == "protect" {
            self.names(names, DeclKind::Model, CompletionItemKind::CLASS);
        }
        for kw in ["not", "true", "false"] {
            self.keyword(kw);
        }
    }
}
