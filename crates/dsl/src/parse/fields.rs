//! Declaration bodies: the generic entry list the grammar yields, and its typed reading.
//!
//! The grammar accepts any `key = value` and any statement form in any declaration; what a
//! declaration accepts is data here ([`Shape`]), so the errors for unknown, duplicate, missing and
//! malformed fields (E002–E005) are worded in one place, with the field's name, the expected form
//! and a did-you-mean where one is close.

use super::expr::{self, Invalid};
use super::syntax::Rule;
use super::Ctx;
use crate::ast::{
    BudgetPer, EnvRef, Exceeded, Expectation, Expr, ExprKind, Given, HeaderSet, Hold, Ident,
    Number, RedactType, Store, UnaryOp,
};
use crate::codes;
use crate::diagnostic::Diagnostic;
use crate::span::{Span, Spanned};
use pest::iterators::Pair;
use std::collections::HashMap;

/// The value of a `key = value` field, before its form is checked.
pub(crate) enum Value {
    Expr(Expr),
    /// `replace "..."` (only `system_prompt` takes it), with the span of the whole form.
    Replace(Spanned<String>, Span),
    /// `only [...]` (only `tools` takes it).
    Only(Vec<Expr>, Span),
    /// `to MODEL` (only a budget's `exceeded` takes it), with the span of the whole form.
    To(Ident, Span),
    /// A keyword standing alone as a value (`missing = route`).
    Word(Ident),
    /// `f(a, ..., name = b, ...)`: a call with named arguments (only `store` takes one).
    NamedCall {
        callee: Ident,
        args: Vec<Expr>,
        named: Vec<(Ident, Expr)>,
        span: Span,
    },
    /// A value that could not be read; its error is already reported.
    Invalid,
}

pub(crate) enum EntryKind {
    Field(Value),
    /// `when EXPR`; `None` when the condition could not be read.
    When(Option<Expr>),
    To {
        model: Ident,
        fallbacks: Vec<Ident>,
    },
    Hold(Option<Hold>),
    Skip(Option<Expr>),
    Given(Vec<Given>),
    Expect(Spanned<Expectation>),
    Header(HeaderSet),
    Headers(Spanned<Vec<HeaderSet>>),
}

/// One entry of a declaration body; `key` is the field name or the statement keyword.
pub(crate) struct Entry {
    pub key: Ident,
    pub kind: EntryKind,
    pub span: Span,
}

/// What a declaration accepts.
pub(crate) struct Shape {
    pub keyword: &'static str,
    pub keys: &'static [&'static str],
    /// Keys that may appear more than once.
    pub repeatable: &'static [&'static str],
}

/// The keywords of statement forms, which are written without `=`.
const STATEMENTS: &[&str] = &[
    "when", "to", "hold", "skip", "given", "expect", "header", "headers",
];

/// Words people write for a fixed choice, with the choice they mean.
const SYNONYMS: &[(&str, &str)] = &[
    ("gpu", "cuda"),
    ("enabled", "on"),
    ("disabled", "off"),
    ("none", "off"),
];

/// The closest candidate to `word`, when it is close enough to be a likely typo.
pub(crate) fn suggest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .iter()
        .map(|c| (strsim::damerau_levenshtein(word, c), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// "`a`, `b` or `c`"
pub(crate) fn one_of(words: &[&str]) -> String {
    let quoted: Vec<String> = words.iter().map(|w| format!("`{w}`")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

fn inner_of(pair: Pair<'_, Rule>, rule: Rule) -> impl Iterator<Item = Pair<'_, Rule>> {
    pair.into_inner().filter(move |p| p.as_rule() == rule)
}

fn string_of(cx: &mut Ctx<'_>, pair: &Pair<'_, Rule>) -> Spanned<String> {
    let span = cx.span(pair);
    Spanned::new(expr::string(cx, pair.as_str(), span), span)
}

fn header_pair(cx: &mut Ctx<'_>, pair: Pair<'_, Rule>) -> Option<HeaderSet> {
    let mut strings = inner_of(pair, Rule::string);
    let name = string_of(cx, &strings.next()?);
    let value = string_of(cx, &strings.next()?);
    Some(HeaderSet { name, value })
}

/// Reads the entries of a `body` pair, in source order.
pub(crate) fn read_body(cx: &mut Ctx<'_>, body: Pair<'_, Rule>) -> Vec<Entry> {
    body.into_inner()
        .filter(|p| !matches!(p.as_rule(), Rule::lbrace | Rule::rbrace))
        .filter_map(|p| entry(cx, p))
        .collect()
}

fn entry(cx: &mut Ctx<'_>, pair: Pair<'_, Rule>) -> Option<Entry> {
    let span = cx.span(&pair);
    let rule = pair.as_rule();
    let mut inner = pair.into_inner();
    let first = inner.next()?;
    let key = expr::ident(cx, &first);
    let kind = match rule {
        Rule::field => {
            let value = inner
                .find(|p| p.as_rule() == Rule::field_value)
                .and_then(|p| p.into_inner().next());
            EntryKind::Field(match value {
                Some(v) => field_value(cx, v),
                None => Value::Invalid,
            })
        }
        Rule::when_stmt => EntryKind::When(inner.next().and_then(|e| expr::build(cx, e).ok())),
        Rule::skip_stmt => EntryKind::Skip(
            inner
                .find(|p| p.as_rule() == Rule::expr)
                .and_then(|e| expr::build(cx, e).ok()),
        ),
        Rule::to_stmt => {
            let mut names = inner.filter(|p| p.as_rule() == Rule::name);
            let model = expr::ident(cx, &names.next()?);
            let fallbacks = names.map(|p| expr::ident(cx, &p)).collect();
            EntryKind::To { model, fallbacks }
        }
        Rule::hold_stmt => {
            let name = inner.next().map(|p| string_of(cx, &p));
            let when = inner
                .find(|p| p.as_rule() == Rule::expr)
                .and_then(|e| expr::build(cx, e).ok());
            EntryKind::Hold(match (name, when) {
                (Some(name), Some(when)) => Some(Hold { name, when, span }),
                _ => None,
            })
        }
        Rule::given_stmt => {
            let mut givens = Vec::new();
            for pair in inner.filter(|p| p.as_rule() == Rule::given_pair) {
                let mut parts = pair.into_inner();
                let (Some(signal), Some(value)) =
                    (parts.next(), parts.find(|p| p.as_rule() == Rule::expr))
                else {
                    continue;
                };
                let signal = expr::ident(cx, &signal);
                if let Ok(value) = expr::build(cx, value) {
                    givens.push(Given { signal, value });
                }
            }
            EntryKind::Given(givens)
        }
        Rule::expect_stmt => {
            let mut blocked = false;
            let mut rejected = false;
            let mut names = Vec::new();
            for p in inner {
                match p.as_rule() {
                    Rule::kw_blocked => blocked = true,
                    Rule::kw_rejected => rejected = true,
                    Rule::name => names.push(expr::ident(cx, &p)),
                    _ => {}
                }
            }
            let mut names = names.into_iter();
            let target = names.next()?;
            let model = names.next();
            let expectation = if rejected {
                Expectation::Rejected { budget: target }
            } else if blocked {
                Expectation::Blocked {
                    block: target,
                    model,
                }
            } else {
                Expectation::Route {
                    route: target,
                    model,
                }
            };
            EntryKind::Expect(Spanned::new(expectation, span))
        }
        Rule::header_stmt => {
            let mut strings = inner.filter(|p| p.as_rule() == Rule::string);
            let name = string_of(cx, &strings.next()?);
            let value = string_of(cx, &strings.next()?);
            EntryKind::Header(HeaderSet { name, value })
        }
        Rule::headers_block => {
            let sets = inner
                .filter(|p| p.as_rule() == Rule::header_pair)
                .filter_map(|p| header_pair(cx, p))
                .collect();
            EntryKind::Headers(Spanned::new(sets, span))
        }
        _ => return None,
    };
    Some(Entry { key, kind, span })
}

fn field_value(cx: &mut Ctx<'_>, pair: Pair<'_, Rule>) -> Value {
    match pair.as_rule() {
        Rule::expr => match expr::build(cx, pair) {
            Ok(e) => Value::Expr(e),
            Err(Invalid) => Value::Invalid,
        },
        Rule::replace_value => {
            let span = cx.span(&pair);
            match pair.into_inner().find(|p| p.as_rule() == Rule::string) {
                Some(s) => Value::Replace(string_of(cx, &s), span),
                None => Value::Invalid,
            }
        }
        Rule::only_value => {
            let span = cx.span(&pair);
            let Some(list) = pair.into_inner().find(|p| p.as_rule() == Rule::list) else {
                return Value::Invalid;
            };
            let mut items = Vec::new();
            let mut failed = false;
            for e in inner_of(list, Rule::expr) {
                match expr::build(cx, e) {
                    Ok(e) => items.push(e),
                    Err(Invalid) => failed = true,
                }
            }
            if failed {
                Value::Invalid
            } else {
                Value::Only(items, span)
            }
        }
        Rule::to_value => {
            let span = cx.span(&pair);
            match pair.into_inner().find(|p| p.as_rule() == Rule::name) {
                Some(name) => Value::To(expr::ident(cx, &name), span),
                None => Value::Invalid,
            }
        }
        Rule::bare_word => Value::Word(expr::ident(cx, &pair)),
        Rule::named_call => named_call(cx, pair),
        _ => Value::Invalid,
    }
}

fn named_call(cx: &mut Ctx<'_>, pair: Pair<'_, Rule>) -> Value {
    let span = cx.span(&pair);
    let mut callee = None;
    let mut args = Vec::new();
    let mut named = Vec::new();
    let mut failed = false;
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::name => callee = Some(expr::ident(cx, &p)),
            Rule::expr => match expr::build(cx, p) {
                Ok(e) => args.push(e),
                Err(Invalid) => failed = true,
            },
            Rule::named_arg => {
                let mut parts = p.into_inner();
                let name = parts.next().map(|n| expr::ident(cx, &n));
                let value = parts
                    .find(|v| v.as_rule() == Rule::expr)
                    .map(|v| expr::build(cx, v));
                match (name, value) {
                    (Some(name), Some(Ok(value))) => named.push((name, value)),
                    _ => failed = true,
                }
            }
            _ => {}
        }
    }
    match callee {
        Some(callee) if !failed => Value::NamedCall {
            callee,
            args,
            named,
            span,
        },
        _ => Value::Invalid,
    }
}

/// How a value was written, for "found ..." labels.
fn found(value: &Value) -> &'static str {
    match value {
        Value::Expr(e) => match &e.kind {
            ExprKind::Bool(_) => "found a boolean",
            ExprKind::Number(_) => "found a number",
            ExprKind::Str(_) => "found a string",
            ExprKind::Duration(_) => "found a duration",
            ExprKind::List(_) => "found a list",
            ExprKind::Name(_) => "found a name",
            ExprKind::Call(..) => "found a call",
            _ => "found an expression",
        },
        Value::Replace(..) => "found `replace`",
        Value::Only(..) => "found `only`",
        Value::To(..) => "found `to`",
        Value::Word(_) => "found a keyword",
        Value::NamedCall { .. } => "found a call with named arguments",
        Value::Invalid => "",
    }
}

fn value_span(value: &Value, entry: &Entry) -> Span {
    match value {
        Value::Expr(e) => e.span,
        Value::Replace(_, span) => *span,
        Value::Only(_, span) => *span,
        Value::To(_, span) => *span,
        Value::Word(w) => w.span,
        Value::NamedCall { span, .. } => *span,
        Value::Invalid => entry.span,
    }
}

/// The entries of one declaration, checked against its [`Shape`] and read field by field.
pub(crate) struct Fields {
    entries: Vec<Entry>,
    /// Every accepted key that was written, even when its value turned out invalid.
    present: HashMap<String, Span>,
}

impl Fields {
    /// Reports unknown and repeated keys (keeping the first of a repeated key) and keeps the rest.
    pub fn check(cx: &mut Ctx<'_>, shape: &Shape, entries: Vec<Entry>) -> Fields {
        let mut present: HashMap<String, Span> = HashMap::new();
        let mut kept = Vec::new();
        for entry in entries {
            let key = entry.key.name.as_str();
            if !shape.keys.contains(&key) {
                cx.report(unknown_key(shape, &entry.key));
                continue;
            }
            if let Some(first) = present.get(key) {
                if !shape.repeatable.contains(&key) {
                    cx.report(
                        Diagnostic::error(
                            codes::DUPLICATE_FIELD,
                            format!("field `{key}` is given twice in `{}`", shape.keyword),
                            entry.key.span,
                        )
                        .with_secondary(*first, "first given here")
                        .with_help("remove one of them"),
                    );
                    continue;
                }
            } else {
                present.insert(key.to_string(), entry.key.span);
            }
            kept.push(entry);
        }
        Fields {
            entries: kept,
            present,
        }
    }

    pub fn has(&self, key: &str) -> bool {
        self.present.contains_key(key)
    }

    pub fn key_span(&self, key: &str) -> Option<Span> {
        self.present.get(key).copied()
    }

    /// Reports E004 for each of `keys` that was not written; `at` is the declaration's name.
    pub fn require(&self, cx: &mut Ctx<'_>, keys: &[(&str, &str)], what: &str, at: Span) {
        for (key, example) in keys {
            if !self.has(key) {
                cx.report(
                    Diagnostic::error(
                        codes::MISSING_FIELD,
                        format!("missing field `{key}` in {what}"),
                        at,
                    )
                    .with_label_message(format!("`{key}` is required"))
                    .with_help(format!("add `{example}`")),
                );
            }
        }
    }

    pub fn take(&mut self, key: &str) -> Option<Entry> {
        let at = self.entries.iter().position(|e| e.key.name == key)?;
        Some(self.entries.remove(at))
    }

    pub fn take_all(&mut self, key: &str) -> Vec<Entry> {
        let (taken, kept) = std::mem::take(&mut self.entries)
            .into_iter()
            .partition(|e| e.key.name == key);
        self.entries = kept;
        taken
    }

    /// The value of a `key = value` field; a statement form written for a field key is an E005.
    fn value(&mut self, cx: &mut Ctx<'_>, key: &str, expected: &str) -> Option<(Value, Entry)> {
        let mut entry = self.take(key)?;
        let kind = std::mem::replace(&mut entry.kind, EntryKind::Field(Value::Invalid));
        match kind {
            EntryKind::Field(Value::Invalid) => None,
            EntryKind::Field(value) => Some((value, entry)),
            _ => {
                cx.report(
                    Diagnostic::error(
                        codes::INVALID_FIELD_VALUE,
                        format!("invalid value for field `{key}`"),
                        entry.span,
                    )
                    .with_help(format!("write `{key} = ...`: {expected}")),
                );
                None
            }
        }
    }

    /// Reads a field with `read`, reporting E005 with `expected` when it returns `None`.
    pub fn read<T>(
        &mut self,
        cx: &mut Ctx<'_>,
        key: &str,
        expected: &str,
        read: impl FnOnce(&mut Ctx<'_>, &Value) -> Option<T>,
    ) -> Option<T> {
        let (value, entry) = self.value(cx, key, expected)?;
        let out = read(cx, &value);
        if out.is_none() {
            let span = value_span(&value, &entry);
            cx.report(match negative_duration(&value) {
                Some(written) => out_of_range(key, &written, span),
                None => invalid_value(key, expected, &value, span),
            });
        }
        out
    }

    /// A choice among fixed words (`device = cpu`), with a did-you-mean on a near miss.
    pub fn choice<T: Copy>(
        &mut self,
        cx: &mut Ctx<'_>,
        key: &str,
        options: &[(&str, T)],
    ) -> Option<Spanned<T>> {
        let words: Vec<&str> = options.iter().map(|(w, _)| *w).collect();
        let expected = format!("expected one of {}", one_of(&words));
        let (value, entry) = self.value(cx, key, &expected)?;
        let word = match &value {
            Value::Expr(Expr {
                kind: ExprKind::Name(id),
                ..
            })
            | Value::Word(id) => Some(id),
            _ => None,
        };
        if let Some(id) = word {
            if let Some((_, v)) = options.iter().find(|(w, _)| *w == id.name) {
                return Some(Spanned::new(*v, id.span));
            }
        }
        let span = value_span(&value, &entry);
        let mut d = invalid_value(key, &expected, &value, span);
        // A near miss in spelling is not always what was meant: `gpu` is `cuda`, not `cpu`.
        let close = word.and_then(|id| {
            SYNONYMS
                .iter()
                .find(|(w, m)| *w == id.name && words.contains(m))
                .map(|(_, m)| *m)
                .or_else(|| suggest(&id.name, &words))
        });
        if let Some(close) = close {
            d = d
                .with_help(format!("{expected}; did you mean `{close}`?"))
                .with_fix(span, close);
        }
        cx.report(d);
        None
    }
}

fn invalid_value(key: &str, expected: &str, value: &Value, span: Span) -> Diagnostic {
    Diagnostic::error(
        codes::INVALID_FIELD_VALUE,
        format!("invalid value for field `{key}`"),
        span,
    )
    .with_label_message(found(value))
    .with_help(expected.to_string())
}

/// A duration written with a minus (`ttl = -10s`): the right form with a value out of range,
/// which the checker reports as E045 for numbers; `-10s` as written.
fn negative_duration(value: &Value) -> Option<String> {
    match expr_of(value).map(|e| &e.kind) {
        Some(ExprKind::Unary(UnaryOp::Neg, inner)) => match &inner.kind {
            ExprKind::Duration(d) => Some(format!("-{}", d.text)),
            _ => None,
        },
        _ => None,
    }
}

fn out_of_range(key: &str, written: &str, span: Span) -> Diagnostic {
    Diagnostic::error(
        codes::INVALID_VALUE,
        format!("`{key}` must not be negative, found `{written}`"),
        span,
    )
    .with_label_message("a negative duration")
    .with_help("durations are 0 or more, such as `30s`")
}

fn unknown_key(shape: &Shape, key: &Ident) -> Diagnostic {
    let name = key.name.as_str();
    let accepted = one_of(shape.keys);
    let message = if STATEMENTS.contains(&name) {
        format!("`{name}` is not allowed in `{}`", shape.keyword)
    } else {
        format!("unknown field `{name}` in `{}`", shape.keyword)
    };
    let d = Diagnostic::error(codes::UNKNOWN_FIELD, message, key.span);
    match suggest(name, shape.keys) {
        Some(close) => d
            .with_help(format!("did you mean `{close}`?"))
            .with_note(format!("`{}` accepts {accepted}", shape.keyword))
            .with_fix(key.span, close),
        None => d.with_help(format!("`{}` accepts {accepted}", shape.keyword)),
    }
}

// ---------------------------------------------------------------------------------------------
// Readers for the value forms, used with `Fields::read`.

pub(crate) const EXPECT_STRING: &str = "expected a string such as `\"...\"`";
pub(crate) const EXPECT_DURATION: &str = "expected a duration such as `30s`";
pub(crate) const EXPECT_NUMBER: &str = "expected a number such as `42` or `0.5`";
pub(crate) const EXPECT_BOOL: &str = "expected `true` or `false`";
pub(crate) const EXPECT_NAME: &str = "expected a name such as `dynamo`";
pub(crate) const EXPECT_STRINGS: &str = "expected a list of strings such as `[\"a\", \"b\"]`";
pub(crate) const EXPECT_REDACT: &str =
    "expected a list of types such as `[\"email\", people.PERSON]`";
pub(crate) const EXPECT_LABELS: &str = "expected a list of labels such as `[math, code]`";
pub(crate) const EXPECT_STORE: &str = "expected `memory`, `redis(\"redis://...\")`, \
     `redis_cluster([\"redis://...\", ...])`, \
     `redis_sentinel([\"redis://...\", ...], master = \"NAME\")` or \
     `milvus(\"http://HOST:19530\")`";
pub(crate) const EXPECT_ENV: &str = "expected `env(\"VARIABLE\")`";
pub(crate) const EXPECT_TOOLS: &str = "expected `keep`, `none` or `only [\"tool\", ...]`";
pub(crate) const EXPECT_PROMPT: &str = "expected a string, or `replace` and a string";
pub(crate) const EXPECT_EXPR: &str = "expected an expression";
pub(crate) const EXPECT_EXCEEDED: &str = "expected `reject`, `observe` or `to MODEL`";

fn expr_of(value: &Value) -> Option<&Expr> {
    match value {
        Value::Expr(e) => Some(e),
        _ => None,
    }
}

pub(crate) fn as_expr(_: &mut Ctx<'_>, value: &Value) -> Option<Expr> {
    expr_of(value).cloned()
}

fn spanned_string(e: &Expr) -> Option<Spanned<String>> {
    match &e.kind {
        ExprKind::Str(s) => Some(Spanned::new(s.clone(), e.span)),
        _ => None,
    }
}

pub(crate) fn as_string(_: &mut Ctx<'_>, value: &Value) -> Option<Spanned<String>> {
    expr_of(value).and_then(spanned_string)
}

pub(crate) fn as_duration(_: &mut Ctx<'_>, value: &Value) -> Option<Spanned<crate::ast::Duration>> {
    let e = expr_of(value)?;
    match &e.kind {
        ExprKind::Duration(d) => Some(Spanned::new(d.clone(), e.span)),
        _ => None,
    }
}

pub(crate) fn as_bool(_: &mut Ctx<'_>, value: &Value) -> Option<Spanned<bool>> {
    let e = expr_of(value)?;
    match e.kind {
        ExprKind::Bool(b) => Some(Spanned::new(b, e.span)),
        _ => None,
    }
}

/// A number, with a leading `-` folded in (range checks belong to the checker).
pub(crate) fn number_of(e: &Expr) -> Option<Spanned<Number>> {
    match &e.kind {
        ExprKind::Number(n) => Some(Spanned::new(n.clone(), e.span)),
        ExprKind::Unary(UnaryOp::Neg, inner) => match &inner.kind {
            ExprKind::Number(n) => Some(Spanned::new(
                Number {
                    value: -n.value,
                    is_int: n.is_int,
                    text: format!("-{}", n.text),
                },
                e.span,
            )),
            _ => None,
        },
        _ => None,
    }
}

pub(crate) fn as_number(_: &mut Ctx<'_>, value: &Value) -> Option<Spanned<Number>> {
    expr_of(value).and_then(number_of)
}

/// `exceeded = reject | observe | to MODEL`.
pub(crate) fn as_exceeded(_: &mut Ctx<'_>, value: &Value) -> Option<Spanned<Exceeded>> {
    match value {
        Value::To(model, span) => Some(Spanned::new(Exceeded::To(model.clone()), *span)),
        Value::Word(id)
        | Value::Expr(Expr {
            kind: ExprKind::Name(id),
            ..
        }) => match id.name.as_str() {
            "reject" => Some(Spanned::new(Exceeded::Reject, id.span)),
            "observe" => Some(Spanned::new(Exceeded::Observe, id.span)),
            _ => None,
        },
        _ => None,
    }
}

/// `per = tenant` or a text expression.
pub(crate) fn as_per(_: &mut Ctx<'_>, value: &Value) -> Option<BudgetPer> {
    match expr_of(value)? {
        Expr {
            kind: ExprKind::Name(id),
            ..
        } if id.name == "tenant" => Some(BudgetPer::Tenant(id.span)),
        e => Some(BudgetPer::Expr(e.clone())),
    }
}

pub(crate) fn as_name(_: &mut Ctx<'_>, value: &Value) -> Option<Ident> {
    match &expr_of(value)?.kind {
        ExprKind::Name(id) => Some(id.clone()),
        _ => None,
    }
}

pub(crate) fn as_strings(_: &mut Ctx<'_>, value: &Value) -> Option<Spanned<Vec<Spanned<String>>>> {
    expr_of(value).and_then(spanned_strings)
}

/// `redact = ["email", people.PERSON, PERSON]`: built-in types as strings, a detector's types as
/// names, qualified by the detector or bare.
pub(crate) fn as_redact(_: &mut Ctx<'_>, value: &Value) -> Option<Spanned<Vec<RedactType>>> {
    let e = expr_of(value)?;
    let ExprKind::List(items) = &e.kind else {
        return None;
    };
    let types: Option<Vec<_>> = items
        .iter()
        .map(|i| match &i.kind {
            ExprKind::Str(_) => spanned_string(i).map(RedactType::Pii),
            ExprKind::Name(entity) => Some(RedactType::Entity {
                detector: None,
                entity: entity.clone(),
            }),
            ExprKind::Field(of, entity) => match &of.kind {
                ExprKind::Name(detector) => Some(RedactType::Entity {
                    detector: Some(detector.clone()),
                    entity: entity.clone(),
                }),
                _ => None,
            },
            _ => None,
        })
        .collect();
    Some(Spanned::new(types?, e.span))
}

pub(crate) fn as_labels(_: &mut Ctx<'_>, value: &Value) -> Option<Spanned<Vec<Ident>>> {
    let e = expr_of(value)?;
    match &e.kind {
        ExprKind::List(items) => {
            let names: Option<Vec<_>> = items
                .iter()
                .map(|i| match &i.kind {
                    ExprKind::Name(id) => Some(id.clone()),
                    _ => None,
                })
                .collect();
            Some(Spanned::new(names?, e.span))
        }
        _ => None,
    }
}

/// `f("text")`, for a fixed `f`.
fn call_with_string(e: &Expr, callee: &str) -> Option<Spanned<String>> {
    match &e.kind {
        ExprKind::Call(f, args) if f.name == callee => match args.as_slice() {
            [arg] => spanned_string(arg),
            _ => None,
        },
        _ => None,
    }
}

pub(crate) fn as_store(_: &mut Ctx<'_>, value: &Value) -> Option<Spanned<Store>> {
    let (callee, args, named, span) = match value {
        Value::Expr(e) => match &e.kind {
            ExprKind::Name(id) if id.name == "memory" => {
                return Some(Spanned::new(Store::Memory, e.span))
            }
            ExprKind::Call(f, args) => (f, args.as_slice(), &[][..], e.span),
            _ => return None,
        },
        Value::NamedCall {
            callee,
            args,
            named,
            span,
        } => (callee, args.as_slice(), named.as_slice(), *span),
        _ => return None,
    };
    let store = match (callee.name.as_str(), args, named) {
        ("redis", [url], []) => Store::Redis(spanned_string(url)?),
        ("redis_cluster", [nodes], []) => Store::Cluster(spanned_strings(nodes)?),
        ("redis_sentinel", [nodes], named) => {
            let mut master = None;
            for (name, value) in named {
                match name.name.as_str() {
                    "master" if master.is_none() => master = Some(spanned_string(value)?),
                    _ => return None,
                }
            }
            Store::Sentinel {
                sentinels: spanned_strings(nodes)?,
                master,
            }
        }
        ("milvus", [url], named) => Store::Milvus {
            url: spanned_string(url)?,
            options: named
                .iter()
                .map(|(name, value)| Some((name.clone(), spanned_string(value)?)))
                .collect::<Option<_>>()?,
        },
        _ => return None,
    };
    Some(Spanned::new(store, span))
}

/// `["text", ...]`, with the list's span.
fn spanned_strings(e: &Expr) -> Option<Spanned<Vec<Spanned<String>>>> {
    match &e.kind {
        ExprKind::List(items) => {
            let strings: Option<Vec<_>> = items.iter().map(spanned_string).collect();
            Some(Spanned::new(strings?, e.span))
        }
        _ => None,
    }
}

pub(crate) fn as_env(_: &mut Ctx<'_>, value: &Value) -> Option<EnvRef> {
    let e = expr_of(value)?;
    Some(EnvRef {
        var: call_with_string(e, "env")?,
        span: e.span,
    })
}
