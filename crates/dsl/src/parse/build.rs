//! Builds typed declarations from parsed chunks: the header of every declaration (its keyword,
//! name and `priority`), and the deployment declarations (`backend`, `model`, `classifier`,
//! `guard`, `encoder`). The declarations that decide what happens to a request, and tests, are
//! built in [`super::rules`]; what both share is in [`super::decl`].
//!
//! Each builder reads its fields through [`Fields`], which has already reported unknown and
//! repeated keys; here live the rules that concern a whole declaration: which fields are
//! required (E004) and what a declaration's header may carry.

use super::decl::Decl;
use super::expr;
use super::fields::{self as f, Entry, Fields, Shape};
use super::rules;
use super::split::{Chunk, DECLARATION_KEYWORDS};
use super::syntax::{self, Rule};
use super::Ctx;
use crate::ast::*;
use crate::codes;
use crate::diagnostic::Diagnostic;
use crate::span::{FileId, Span, Spanned};
use pest::iterators::Pair;

use crate::keywords::KEYWORDS;

const BACKEND_APIS: &[(&str, BackendApi)] = &[
    ("openai", BackendApi::OpenAi),
    ("anthropic", BackendApi::Anthropic),
];

const DEVICES: &[(&str, Device)] = &[
    ("auto", Device::Auto),
    ("cpu", Device::Cpu),
    ("cuda", Device::Cuda),
];

/// The E001 for text between declarations.
pub(crate) fn stray(text: &str, chunk: &Chunk, file: FileId) -> Diagnostic {
    let (start, end, shown) = match syntax::token_at(text, chunk.start) {
        Some(found) => (found.start, found.end, found.shown),
        None => (chunk.start, chunk.end, String::new()),
    };
    let d = Diagnostic::error(
        codes::SYNTAX,
        format!("expected a declaration, found `{shown}`"),
        Span::new(file, start, end),
    )
    .with_label_message("expected a declaration");
    match f::suggest(&shown, DECLARATION_KEYWORDS) {
        Some(close) => d
            .with_help(format!("did you mean `{close}`?"))
            .with_fix(Span::new(file, start, end), close),
        None => d.with_help(format!(
            "a file holds declarations: {}",
            f::one_of(DECLARATION_KEYWORDS)
        )),
    }
}

/// Builds the typed item of a parsed chunk (a `signal_item` or `decl_item` pair).
pub(crate) fn item(cx: &mut Ctx<'_>, pair: Pair<'_, Rule>) -> Option<Item> {
    let span = cx.span(&pair);
    let kind = match pair.as_rule() {
        Rule::signal_item => signal(cx, pair)?,
        Rule::decl_item => declaration(cx, pair)?,
        _ => return None,
    };
    Some(Item { kind, span })
}

fn checked_name(cx: &mut Ctx<'_>, pair: &Pair<'_, Rule>) -> Ident {
    let name = expr::ident(cx, pair);
    if KEYWORDS.contains(&name.name.as_str()) {
        cx.report(
            Diagnostic::error(
                codes::SYNTAX,
                format!("`{}` is a keyword and cannot be a name", name.name),
                name.span,
            )
            .with_help(format!("choose another name, such as `{}_`", name.name)),
        );
    }
    name
}

fn signal(cx: &mut Ctx<'_>, pair: Pair<'_, Rule>) -> Option<ItemKind> {
    let mut name = None;
    let mut value = None;
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::decl_name => name = Some(checked_name(cx, &p)),
            Rule::expr => value = expr::build(cx, p).ok(),
            _ => {}
        }
    }
    Some(ItemKind::Signal(Signal {
        name: name?,
        expr: value?,
    }))
}

fn declaration(cx: &mut Ctx<'_>, pair: Pair<'_, Rule>) -> Option<ItemKind> {
    let mut keyword = None;
    let mut name = None;
    let mut priority = None;
    let mut body = None;
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::decl_kw => keyword = Some(expr::ident(cx, &p)),
            Rule::decl_name => name = Some(p),
            Rule::priority_clause => priority = Some(p),
            Rule::body => body = Some(p),
            _ => {}
        }
    }
    let keyword = keyword?;
    let entries = f::read_body(cx, body?);
    let named = !matches!(
        keyword.name.as_str(),
        "cache" | "session" | "protect" | "failure" | "router"
    );
    let name = match (named, name) {
        (true, Some(p)) => Some(checked_name(cx, &p)),
        (true, None) => {
            cx.report(
                Diagnostic::error(
                    codes::SYNTAX,
                    format!("expected a name after `{}`", keyword.name),
                    keyword.span,
                )
                .with_help(format!("write `{} NAME {{ ... }}`", keyword.name)),
            );
            return None;
        }
        (false, Some(p)) => {
            let span = cx.span(&p);
            cx.report(
                Diagnostic::error(
                    codes::SYNTAX,
                    format!("`{}` takes no name", keyword.name),
                    span,
                )
                .with_help(format!("write `{} {{ ... }}`", keyword.name))
                .with_fix(span, ""),
            );
            None
        }
        (false, None) => None,
    };
    let priority = match priority {
        Some(p) if keyword.name == "route" => priority_of(cx, p),
        Some(p) => {
            let span = cx.span(&p);
            cx.report(
                Diagnostic::error(
                    codes::UNKNOWN_FIELD,
                    format!(
                        "`priority` is only allowed on a `route`, not on `{}`",
                        keyword.name
                    ),
                    span,
                )
                .with_help("remove it")
                .with_fix(span, ""),
            );
            None
        }
        None => None,
    };
    let at = name.as_ref().map_or(keyword.span, |n| n.span);
    let what = match &name {
        Some(n) => format!("{} `{}`", keyword.name, n.name),
        None => format!("`{}`", keyword.name),
    };
    let mut d = Decl { at, what };
    Some(match (keyword.name.as_str(), name) {
        ("backend", Some(name)) => ItemKind::Backend(backend(cx, &mut d, name, entries)),
        ("model", Some(name)) => ItemKind::Model(model(cx, &mut d, name, entries)),
        ("classifier", Some(name)) => ItemKind::Classifier(classifier(cx, &mut d, name, entries)),
        ("guard", Some(name)) => ItemKind::Guard(guard(cx, &mut d, name, entries)),
        ("encoder", Some(name)) => ItemKind::Encoder(encoder(cx, &mut d, name, entries)),
        ("detector", Some(name)) => ItemKind::Detector(detector(cx, &mut d, name, entries)),
        ("block", Some(name)) => ItemKind::Block(rules::block(cx, &mut d, name, entries)),
        ("route", Some(name)) => ItemKind::Route(rules::route(cx, &mut d, name, priority, entries)),
        ("test", Some(name)) => ItemKind::Test(rules::test(cx, &mut d, name, entries)),
        ("budget", Some(name)) => ItemKind::Budget(rules::budget(cx, &mut d, name, entries)),
        ("cache", _) => ItemKind::Cache(rules::cache(cx, &mut d, entries)),
        ("session", _) => ItemKind::Session(rules::session(cx, entries)),
        ("protect", _) => ItemKind::Protect(rules::protect(cx, entries)),
        ("failure", _) => ItemKind::Failure(rules::failure(cx, entries)),
        ("router", _) => ItemKind::Router(rules::router(cx, entries)),
        _ => return None,
    })
}

/// The number after `priority`, negated (and written with its `-`) when it has a sign: the
/// checker says a priority must not be negative (E034).
fn priority_of(cx: &mut Ctx<'_>, pair: Pair<'_, Rule>) -> Option<Spanned<Number>> {
    let mut sign = None;
    let mut number = None;
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::priority_sign => sign = Some(cx.span(&p)),
            Rule::number => number = Some(p),
            _ => {}
        }
    }
    let number = number?;
    let digits = cx.span(&number);
    let span = sign.map_or(digits, |s| {
        Span::new(s.file, s.start as usize, digits.end as usize)
    });
    match expr::numeric(cx, number.as_str(), digits) {
        ExprKind::Number(n) if sign.is_some() => Some(Spanned::new(
            Number {
                value: -n.value,
                is_int: n.is_int,
                text: format!("-{}", number.as_str()),
            },
            span,
        )),
        ExprKind::Number(n) => Some(Spanned::new(n, span)),
        _ => {
            cx.report(
                Diagnostic::error(
                    codes::INVALID_FIELD_VALUE,
                    "invalid value for `priority`",
                    span,
                )
                .with_label_message("found a duration")
                .with_help("expected a whole number such as `10`"),
            );
            None
        }
    }
}

fn backend(cx: &mut Ctx<'_>, d: &mut Decl, name: Ident, entries: Vec<Entry>) -> Backend {
    const SHAPE: Shape = Shape {
        keyword: "backend",
        keys: crate::keywords::fields::BACKEND,
        repeatable: &[],
    };
    let mut fields = Fields::check(cx, &SHAPE, entries);
    d.require(
        cx,
        &fields,
        &[("url", "url = \"http://127.0.0.1:8000/v1\"")],
    );
    Backend {
        name,
        url: fields.read(cx, "url", f::EXPECT_STRING, f::as_string),
        catalog: fields.read(cx, "catalog", f::EXPECT_STRING, f::as_string),
        api_key: fields.read(cx, "api_key", f::EXPECT_ENV, f::as_env),
        timeout: fields.read(cx, "timeout", f::EXPECT_DURATION, f::as_duration),
        simulated: fields.read(cx, "simulated", f::EXPECT_BOOL, f::as_bool),
        client_auth: fields.choice(
            cx,
            "client_auth",
            &[("forward", ClientAuth::Forward), ("drop", ClientAuth::Drop)],
        ),
        api: fields.choice(cx, "api", BACKEND_APIS),
    }
}

fn model(cx: &mut Ctx<'_>, d: &mut Decl, name: Ident, entries: Vec<Entry>) -> Model {
    const SHAPE: Shape = Shape {
        keyword: "model",
        keys: crate::keywords::fields::MODEL,
        repeatable: &[],
    };
    let mut fields = Fields::check(cx, &SHAPE, entries);
    d.require(
        cx,
        &fields,
        &[
            ("backend", "backend = NAME"),
            ("serves", "serves = \"served/model-id\""),
        ],
    );
    Model {
        name,
        backend: fields.read(cx, "backend", f::EXPECT_NAME, f::as_name),
        serves: fields.read(cx, "serves", f::EXPECT_STRING, f::as_string),
        aliases: fields.read(cx, "aliases", f::EXPECT_STRINGS, f::as_strings),
        cost: fields.read(cx, "cost", f::EXPECT_NUMBER, f::as_number),
        context: fields.read(cx, "context", f::EXPECT_NUMBER, f::as_number),
        tokenizer: fields.read(cx, "tokenizer", f::EXPECT_STRING, f::as_string),
    }
}

fn classifier(cx: &mut Ctx<'_>, d: &mut Decl, name: Ident, entries: Vec<Entry>) -> Classifier {
    const SHAPE: Shape = Shape {
        keyword: "classifier",
        keys: crate::keywords::fields::CLASSIFIER,
        repeatable: &[],
    };
    let mut fields = Fields::check(cx, &SHAPE, entries);
    d.require(
        cx,
        &fields,
        &[
            ("path", "path = \"models/NAME\""),
            ("labels", "labels = [a, b]"),
        ],
    );
    Classifier {
        name,
        path: fields.read(cx, "path", f::EXPECT_STRING, f::as_string),
        labels: fields.read(cx, "labels", f::EXPECT_LABELS, f::as_labels),
        device: fields.choice(cx, "device", DEVICES),
        windows: fields.read(cx, "windows", f::EXPECT_NUMBER, f::as_number),
        window: fields.read(cx, "window", f::EXPECT_NUMBER, f::as_number),
    }
}

fn guard(cx: &mut Ctx<'_>, d: &mut Decl, name: Ident, entries: Vec<Entry>) -> Guard {
    const SHAPE: Shape = Shape {
        keyword: "guard",
        keys: crate::keywords::fields::GUARD,
        repeatable: &[],
    };
    let mut fields = Fields::check(cx, &SHAPE, entries);
    d.require(cx, &fields, &[("path", "path = \"models/NAME\"")]);
    Guard {
        name,
        path: fields.read(cx, "path", f::EXPECT_STRING, f::as_string),
        positive: fields.read(
            cx,
            "positive",
            "expected a label such as `injection`",
            f::as_name,
        ),
        device: fields.choice(cx, "device", DEVICES),
        windows: fields.read(cx, "windows", f::EXPECT_NUMBER, f::as_number),
        window: fields.read(cx, "window", f::EXPECT_NUMBER, f::as_number),
    }
}

fn detector(cx: &mut Ctx<'_>, d: &mut Decl, name: Ident, entries: Vec<Entry>) -> Detector {
    const SHAPE: Shape = Shape {
        keyword: "detector",
        keys: crate::keywords::fields::DETECTOR,
        repeatable: &[],
    };
    let mut fields = Fields::check(cx, &SHAPE, entries);
    d.require(
        cx,
        &fields,
        &[
            ("path", "path = \"models/NAME\""),
            ("entities", "entities = [PERSON, LOCATION]"),
        ],
    );
    Detector {
        name,
        path: fields.read(cx, "path", f::EXPECT_STRING, f::as_string),
        entities: fields.read(cx, "entities", f::EXPECT_LABELS, f::as_labels),
        threshold: fields.read(cx, "threshold", f::EXPECT_NUMBER, f::as_number),
        device: fields.choice(cx, "device", DEVICES),
        windows: fields.read(cx, "windows", f::EXPECT_NUMBER, f::as_number),
        window: fields.read(cx, "window", f::EXPECT_NUMBER, f::as_number),
    }
}

fn encoder(cx: &mut Ctx<'_>, d: &mut Decl, name: Ident, entries: Vec<Entry>) -> Encoder {
    const SHAPE: Shape = Shape {
        keyword: "encoder",
        keys: crate::keywords::fields::ENCODER,
        repeatable: &[],
    };
    let mut fields = Fields::check(cx, &SHAPE, entries);
    d.require(cx, &fields, &[("path", "path = \"models/NAME\"")]);
    Encoder {
        name,
        path: fields.read(cx, "path", f::EXPECT_STRING, f::as_string),
        device: fields.choice(cx, "device", DEVICES),
        windows: fields.read(cx, "windows", f::EXPECT_NUMBER, f::as_number),
        window: fields.read(cx, "window", f::EXPECT_NUMBER, f::as_number),
    }
}
