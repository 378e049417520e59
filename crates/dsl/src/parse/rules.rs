//! Builds the declarations that decide what happens to a request (`block`, `route`, `cache`,
//! `session`, `protect`, `failure`, `router`) and inline `test`s.
//!
//! Besides reading fields, these builders enforce the rules that span several fields: a block
//! refuses or redirects but not both, a test has exactly one input, header names and `given`
//! signals are not repeated.

use super::decl::{statement, when, Decl};
use super::fields::{self as f, Entry, EntryKind, Fields, Shape};
use super::Ctx;
use crate::ast::*;
use crate::codes;
use crate::diagnostic::Diagnostic;
use crate::span::{Span, Spanned};
use std::collections::HashMap;

const FAIL_MODES: &[(&str, FailMode)] = &[("open", FailMode::Open), ("closed", FailMode::Closed)];

pub(super) fn block(cx: &mut Ctx<'_>, d: &mut Decl, name: Ident, entries: Vec<Entry>) -> Block {
    const SHAPE: Shape = Shape {
        keyword: "block",
        keys: crate::keywords::fields::BLOCK,
        repeatable: &[],
    };
    let mut fields = Fields::check(cx, &SHAPE, entries);
    d.require(cx, &fields, &[("when", "when CONDITION")]);
    let when = when(cx, &mut fields);
    let status = fields.read(
        cx,
        "status",
        "expected a status code such as `403`",
        f::as_number,
    );
    let message = fields.read(cx, "message", f::EXPECT_STRING, f::as_string);
    let refusal = ["status", "message"]
        .into_iter()
        .find_map(|k| fields.key_span(k));
    let mut action = BlockAction::Refuse { status, message };
    if let Some(entry) = statement(cx, &mut fields, "to", "to MODEL") {
        if let EntryKind::To { model, fallbacks } = entry.kind {
            if let Some(refusal) = refusal {
                cx.report(
                    Diagnostic::error(
                        codes::INVALID_FIELD_VALUE,
                        "a block either refuses or redirects, not both",
                        entry.span,
                    )
                    .with_label_message("redirects here")
                    .with_secondary(refusal, "refuses here")
                    .with_help("remove `to`, or remove `status` and `message`"),
                );
            } else if let Some(extra) = fallbacks.first() {
                cx.report(
                    Diagnostic::error(
                        codes::INVALID_FIELD_VALUE,
                        "a block's `to` takes one model",
                        extra.span,
                    )
                    .with_help("remove the `else` models; fallbacks belong to routes"),
                );
            } else {
                action = BlockAction::Redirect { model };
            }
        }
    }
    let redact = fields.read(cx, "redact", f::EXPECT_REDACT, f::as_redact);
    Block {
        name,
        when,
        action,
        redact,
    }
}

pub(super) fn route(
    cx: &mut Ctx<'_>,
    d: &mut Decl,
    name: Ident,
    priority: Option<Spanned<Number>>,
    entries: Vec<Entry>,
) -> Route {
    const SHAPE: Shape = Shape {
        keyword: "route",
        keys: crate::keywords::fields::ROUTE,
        repeatable: &[],
    };
    let mut fields = Fields::check(cx, &SHAPE, entries);
    d.require(cx, &fields, &[("to", "to MODEL")]);
    let when = when(cx, &mut fields);
    let (to, fallbacks) = match statement(cx, &mut fields, "to", "to MODEL else MODEL, ...") {
        Some(Entry {
            kind: EntryKind::To { model, fallbacks },
            ..
        }) => (Some(model), fallbacks),
        _ => (None, Vec::new()),
    };
    let headers = match statement(
        cx,
        &mut fields,
        "headers",
        "headers { \"name\" = \"value\" }",
    ) {
        Some(Entry {
            kind: EntryKind::Headers(h),
            ..
        }) => {
            distinct_headers(cx, &h.value);
            Some(h)
        }
        _ => None,
    };
    Route {
        name,
        priority,
        when,
        to,
        fallbacks,
        system_prompt: fields.read(cx, "system_prompt", f::EXPECT_PROMPT, system_prompt),
        headers,
        reasoning: fields.choice(
            cx,
            "reasoning",
            &[
                ("off", Reasoning::Off),
                ("low", Reasoning::Low),
                ("medium", Reasoning::Medium),
                ("high", Reasoning::High),
            ],
        ),
        tools: fields.read(cx, "tools", f::EXPECT_TOOLS, tools),
        cache: fields.choice(cx, "cache", &[("on", true), ("off", false)]),
        redact: fields.read(cx, "redact", f::EXPECT_REDACT, f::as_redact),
    }
}

fn system_prompt(cx: &mut Ctx<'_>, value: &f::Value) -> Option<SystemPrompt> {
    match value {
        f::Value::Replace(text, span) => Some(SystemPrompt {
            text: text.clone(),
            replace: true,
            span: *span,
        }),
        v => f::as_string(cx, v).map(|text| SystemPrompt {
            span: text.span,
            text,
            replace: false,
        }),
    }
}

fn tools(_: &mut Ctx<'_>, value: &f::Value) -> Option<Spanned<Tools>> {
    match value {
        f::Value::Expr(Expr {
            kind: ExprKind::Name(id),
            span,
        }) => match id.name.as_str() {
            "keep" => Some(Spanned::new(Tools::Keep, *span)),
            "none" => Some(Spanned::new(Tools::None, *span)),
            _ => None,
        },
        f::Value::Only(items, span) => {
            let names: Option<Vec<_>> = items
                .iter()
                .map(|e| match &e.kind {
                    ExprKind::Str(s) => Some(Spanned::new(s.clone(), e.span)),
                    _ => None,
                })
                .collect();
            Some(Spanned::new(Tools::Only(names?), *span))
        }
        _ => None,
    }
}

/// Header names are case-insensitive: setting one twice is a duplicate.
fn distinct_headers(cx: &mut Ctx<'_>, sets: &[HeaderSet]) {
    let mut seen: HashMap<String, Span> = HashMap::new();
    for set in sets {
        let key = set.name.value.to_ascii_lowercase();
        if let Some(first) = seen.get(&key) {
            cx.report(
                Diagnostic::error(
                    codes::DUPLICATE_FIELD,
                    format!("header `{}` is set twice", set.name.value),
                    set.name.span,
                )
                .with_secondary(*first, "first set here")
                .with_help("remove one of them (header names ignore case)"),
            );
        } else {
            seen.insert(key, set.name.span);
        }
    }
}

fn store(cx: &mut Ctx<'_>, fields: &mut Fields) -> Option<Spanned<Store>> {
    fields.read(cx, "store", f::EXPECT_STORE, f::as_store)
}

pub(super) fn cache(cx: &mut Ctx<'_>, d: &mut Decl, entries: Vec<Entry>) -> Cache {
    const SHAPE: Shape = Shape {
        keyword: "cache",
        keys: crate::keywords::fields::CACHE,
        repeatable: &[],
    };
    let mut fields = Fields::check(cx, &SHAPE, entries);
    d.require(
        cx,
        &fields,
        &[
            ("encoder", "encoder = NAME"),
            ("threshold", "threshold = 0.9"),
        ],
    );
    let skip_when = match statement(cx, &mut fields, "skip", "skip when CONDITION") {
        Some(Entry {
            kind: EntryKind::Skip(e),
            ..
        }) => e,
        _ => None,
    };
    Cache {
        encoder: fields.read(cx, "encoder", f::EXPECT_NAME, f::as_name),
        threshold: fields.read(
            cx,
            "threshold",
            "expected a score such as `0.9`",
            f::as_number,
        ),
        ttl: fields.read(cx, "ttl", f::EXPECT_DURATION, f::as_duration),
        store: store(cx, &mut fields),
        max_entries: fields.read(
            cx,
            "max_entries",
            "expected a whole number such as `100k`",
            f::as_number,
        ),
        max_bytes: fields.read(
            cx,
            "max_bytes",
            "expected a number of bytes such as `512M`",
            f::as_number,
        ),
        skip_when,
    }
}

pub(super) fn session(cx: &mut Ctx<'_>, entries: Vec<Entry>) -> Session {
    const SHAPE: Shape = Shape {
        keyword: "session",
        keys: crate::keywords::fields::SESSION,
        repeatable: &[],
    };
    let mut fields = Fields::check(cx, &SHAPE, entries);
    Session {
        id: fields.read(cx, "id", f::EXPECT_EXPR, f::as_expr),
        tenant: fields.read(cx, "tenant", f::EXPECT_EXPR, f::as_expr),
        ttl: fields.read(cx, "ttl", f::EXPECT_DURATION, f::as_duration),
        store: store(cx, &mut fields),
        missing: fields.choice(
            cx,
            "missing",
            &[("route", Missing::Route), ("reject", Missing::Reject)],
        ),
        outcomes: fields.choice(
            cx,
            "outcomes",
            &[
                ("any", Outcomes::Any),
                ("admin", Outcomes::Admin),
                ("keys", Outcomes::Keys),
            ],
        ),
    }
}

pub(super) fn budget(cx: &mut Ctx<'_>, d: &mut Decl, name: Ident, entries: Vec<Entry>) -> Budget {
    const SHAPE: Shape = Shape {
        keyword: "budget",
        keys: crate::keywords::fields::BUDGET,
        repeatable: &[],
    };
    let mut fields = Fields::check(cx, &SHAPE, entries);
    d.require(cx, &fields, &[("window", "window = 1m")]);
    Budget {
        name,
        per: fields.read(cx, "per", f::EXPECT_EXPR, f::as_per),
        window: fields.read(cx, "window", f::EXPECT_DURATION, f::as_duration),
        requests: fields.read(cx, "requests", f::EXPECT_NUMBER, f::as_number),
        tokens: fields.read(cx, "tokens", f::EXPECT_NUMBER, f::as_number),
        cost: fields.read(cx, "cost", f::EXPECT_NUMBER, f::as_number),
        exceeded: fields.read(cx, "exceeded", f::EXPECT_EXCEEDED, f::as_exceeded),
    }
}

pub(super) fn protect(cx: &mut Ctx<'_>, entries: Vec<Entry>) -> Protect {
    const SHAPE: Shape = Shape {
        keyword: "protect",
        keys: crate::keywords::fields::PROTECT,
        repeatable: &["hold"],
    };
    let mut fields = Fields::check(cx, &SHAPE, entries);
    let mut holds = Vec::new();
    for entry in fields.take_all("hold") {
        match entry.kind {
            EntryKind::Hold(Some(hold)) => holds.push(hold),
            EntryKind::Hold(None) => {}
            _ => cx.report(
                Diagnostic::error(
                    codes::INVALID_FIELD_VALUE,
                    "`hold` is written without `=`",
                    entry.span,
                )
                .with_help("write `hold \"reason\" when CONDITION`"),
            ),
        }
    }
    Protect {
        mode: fields.choice(
            cx,
            "mode",
            &[
                ("observe", ProtectMode::Observe),
                ("enforce", ProtectMode::Enforce),
            ],
        ),
        holds,
        owner_lost: fields.choice(
            cx,
            "owner_lost",
            &[
                ("fail", OwnerLost::Fail),
                ("fallback", OwnerLost::Fallback),
                ("move", OwnerLost::Move),
            ],
        ),
    }
}

pub(super) fn failure(cx: &mut Ctx<'_>, entries: Vec<Entry>) -> Failure {
    const SHAPE: Shape = Shape {
        keyword: "failure",
        keys: crate::keywords::fields::FAILURE,
        repeatable: &[],
    };
    let mut fields = Fields::check(cx, &SHAPE, entries);
    Failure {
        classifier: fields.choice(cx, "classifier", FAIL_MODES),
        store: fields.choice(cx, "store", FAIL_MODES),
        backend: fields.choice(cx, "backend", FAIL_MODES),
        cooldown_after: fields.read(cx, "cooldown_after", f::EXPECT_NUMBER, f::as_number),
        cooldown: fields.read(cx, "cooldown", f::EXPECT_DURATION, f::as_duration),
    }
}

pub(super) fn router(cx: &mut Ctx<'_>, entries: Vec<Entry>) -> Router {
    const SHAPE: Shape = Shape {
        keyword: "router",
        keys: crate::keywords::fields::ROUTER,
        repeatable: &[],
    };
    let mut fields = Fields::check(cx, &SHAPE, entries);
    Router {
        names: fields.read(cx, "names", f::EXPECT_STRINGS, f::as_strings),
        tokenizer: fields.read(cx, "tokenizer", f::EXPECT_STRING, f::as_string),
        anonymous: fields.choice(
            cx,
            "anonymous",
            &[("isolate", Anonymous::Isolate), ("share", Anonymous::Share)],
        ),
    }
}

pub(super) fn test(cx: &mut Ctx<'_>, d: &mut Decl, name: Ident, entries: Vec<Entry>) -> Test {
    const SHAPE: Shape = Shape {
        keyword: "test",
        keys: crate::keywords::fields::TEST,
        repeatable: &["header", "given"],
    };
    let mut fields = Fields::check(cx, &SHAPE, entries);
    if !fields.has("prompt") && !fields.has("messages") {
        cx.report(
            Diagnostic::error(
                codes::MISSING_FIELD,
                format!("missing field `prompt` or `messages` in {}", d.what),
                d.at,
            )
            .with_label_message("a test needs an input")
            .with_help("add `prompt = \"...\"`, or `messages = \"chat.json\"`"),
        );
    }
    d.require(cx, &fields, &[("expect", "expect ROUTE")]);
    if let (Some(_), Some(second)) = (fields.key_span("prompt"), fields.key_span("messages")) {
        let first = fields.key_span("prompt").unwrap_or(second);
        let (first, second) = if first.start <= second.start {
            (first, second)
        } else {
            (second, first)
        };
        cx.report(
            Diagnostic::error(
                codes::INVALID_FIELD_VALUE,
                "a test takes either `prompt` or `messages`, not both",
                second,
            )
            .with_secondary(first, "input given here")
            .with_help("remove one of them"),
        );
    }
    let prompt = fields.read(cx, "prompt", f::EXPECT_STRING, f::as_string);
    let messages = fields.read(
        cx,
        "messages",
        "expected a file name such as `\"chat.json\"`",
        f::as_string,
    );
    let input = match (prompt, messages) {
        (Some(p), None) => Some(TestInput::Prompt(p)),
        (None, Some(m)) => Some(TestInput::Messages(m)),
        _ => None,
    };
    let mut headers = Vec::new();
    for entry in fields.take_all("header") {
        match entry.kind {
            EntryKind::Header(set) => headers.push(set),
            _ => cx.report(
                Diagnostic::error(
                    codes::INVALID_FIELD_VALUE,
                    "`header` is written without `=` after its keyword",
                    entry.span,
                )
                .with_help("write `header \"name\" = \"value\"`"),
            ),
        }
    }
    distinct_headers(cx, &headers);
    let mut givens: Vec<Given> = Vec::new();
    for entry in fields.take_all("given") {
        match entry.kind {
            EntryKind::Given(list) => {
                for given in list {
                    if let Some(first) = givens.iter().find(|g| g.signal.name == given.signal.name)
                    {
                        cx.report(
                            Diagnostic::error(
                                codes::DUPLICATE_FIELD,
                                format!("signal `{}` is given twice", given.signal.name),
                                given.signal.span,
                            )
                            .with_secondary(first.signal.span, "first given here")
                            .with_help("remove one of them"),
                        );
                    } else {
                        givens.push(given);
                    }
                }
            }
            _ => cx.report(
                Diagnostic::error(
                    codes::INVALID_FIELD_VALUE,
                    "`given` is written without `=` after its keyword",
                    entry.span,
                )
                .with_help("write `given SIGNAL = VALUE, SIGNAL = VALUE`"),
            ),
        }
    }
    let expect = match statement(cx, &mut fields, "expect", "expect ROUTE [model MODEL]") {
        Some(Entry {
            kind: EntryKind::Expect(e),
            ..
        }) => Some(e),
        _ => None,
    };
    Test {
        name,
        input,
        system: fields.read(cx, "system", f::EXPECT_STRING, f::as_string),
        headers,
        givens,
        expect,
    }
}
