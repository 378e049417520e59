//! Builds typed declarations from parsed chunks: one function per declaration kind.
//!
//! Each builder reads its fields through [`Fields`], which has already reported unknown and
//! repeated keys; here live the rules that concern a whole declaration: which fields are
//! required (E004), which combinations are invalid (a block that both refuses and redirects),
//! and what a declaration's header may carry (a name, a `priority`).

use super::expr;
use super::fields::{self as f, Entry, EntryKind, Fields, Shape};
use super::split::{Chunk, DECLARATION_KEYWORDS};
use super::syntax::{self, Rule};
use super::Ctx;
use crate::ast::*;
use crate::codes;
use crate::diagnostic::Diagnostic;
use crate::span::{FileId, Span, Spanned};
use pest::iterators::Pair;
use std::collections::HashMap;

/// Words that cannot name a declaration.
const KEYWORDS: &[&str] = &[
    "backend",
    "model",
    "classifier",
    "guard",
    "encoder",
    "signal",
    "block",
    "route",
    "cache",
    "session",
    "protect",
    "failure",
    "router",
    "test",
    "when",
    "to",
    "else",
    "priority",
    "and",
    "or",
    "not",
    "is",
    "in",
    "true",
    "false",
    "hold",
    "given",
    "expect",
    "blocked",
];

const DEVICES: &[(&str, Device)] = &[
    ("auto", Device::Auto),
    ("cpu", Device::Cpu),
    ("cuda", Device::Cuda),
];
const FAIL_MODES: &[(&str, FailMode)] = &[("open", FailMode::Open), ("closed", FailMode::Closed)];

/// The E001 for text between declarations.
pub(crate) fn stray(text: &str, chunk: &Chunk, file: FileId) -> Diagnostic {
    let (start, end, shown) =
        syntax::token_at(text, chunk.start).unwrap_or((chunk.start, chunk.end, String::new()));
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
        ("block", Some(name)) => ItemKind::Block(block(cx, &mut d, name, entries)),
        ("route", Some(name)) => ItemKind::Route(route(cx, &mut d, name, priority, entries)),
        ("test", Some(name)) => ItemKind::Test(test(cx, &mut d, name, entries)),
        ("cache", _) => ItemKind::Cache(cache(cx, &mut d, entries)),
        ("session", _) => ItemKind::Session(session(cx, entries)),
        ("protect", _) => ItemKind::Protect(protect(cx, entries)),
        ("failure", _) => ItemKind::Failure(failure(cx, entries)),
        ("router", _) => ItemKind::Router(router(cx, entries)),
        _ => return None,
    })
}

/// Where E004 points and how it names the declaration.
struct Decl {
    at: Span,
    what: String,
}

impl Decl {
    fn require(&self, cx: &mut Ctx<'_>, fields: &Fields, keys: &[(&str, &str)]) {
        fields.require(cx, keys, &self.what, self.at);
    }
}

fn priority_of(cx: &mut Ctx<'_>, pair: Pair<'_, Rule>) -> Option<Spanned<Number>> {
    let number = pair.into_inner().find(|p| p.as_rule() == Rule::number)?;
    let span = cx.span(&number);
    match expr::numeric(cx, number.as_str(), span) {
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

/// Takes a statement (`when ...`, `to ...`); a `key = value` written for it is an E005.
fn statement(cx: &mut Ctx<'_>, fields: &mut Fields, key: &str, form: &str) -> Option<Entry> {
    let entry = fields.take(key)?;
    if let EntryKind::Field(_) = entry.kind {
        cx.report(
            Diagnostic::error(
                codes::INVALID_FIELD_VALUE,
                format!("`{key}` is written without `=`"),
                entry.span,
            )
            .with_help(format!("write `{form}`")),
        );
        return None;
    }
    Some(entry)
}

fn when(cx: &mut Ctx<'_>, fields: &mut Fields) -> Option<Expr> {
    match statement(cx, fields, "when", "when CONDITION")?.kind {
        EntryKind::When(e) => e,
        _ => None,
    }
}

fn backend(cx: &mut Ctx<'_>, d: &mut Decl, name: Ident, entries: Vec<Entry>) -> Backend {
    const SHAPE: Shape = Shape {
        keyword: "backend",
        keys: &["url", "catalog", "api_key", "timeout", "simulated"],
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
    }
}

fn model(cx: &mut Ctx<'_>, d: &mut Decl, name: Ident, entries: Vec<Entry>) -> Model {
    const SHAPE: Shape = Shape {
        keyword: "model",
        keys: &[
            "backend",
            "serves",
            "aliases",
            "cost",
            "context",
            "tokenizer",
        ],
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
        keys: &["path", "labels", "device"],
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
    }
}

fn guard(cx: &mut Ctx<'_>, d: &mut Decl, name: Ident, entries: Vec<Entry>) -> Guard {
    const SHAPE: Shape = Shape {
        keyword: "guard",
        keys: &["path", "positive", "device"],
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
    }
}

fn encoder(cx: &mut Ctx<'_>, d: &mut Decl, name: Ident, entries: Vec<Entry>) -> Encoder {
    const SHAPE: Shape = Shape {
        keyword: "encoder",
        keys: &["path", "device"],
        repeatable: &[],
    };
    let mut fields = Fields::check(cx, &SHAPE, entries);
    d.require(cx, &fields, &[("path", "path = \"models/NAME\"")]);
    Encoder {
        name,
        path: fields.read(cx, "path", f::EXPECT_STRING, f::as_string),
        device: fields.choice(cx, "device", DEVICES),
    }
}

fn block(cx: &mut Ctx<'_>, d: &mut Decl, name: Ident, entries: Vec<Entry>) -> Block {
    const SHAPE: Shape = Shape {
        keyword: "block",
        keys: &["when", "status", "message", "to"],
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
    Block { name, when, action }
}

fn route(
    cx: &mut Ctx<'_>,
    d: &mut Decl,
    name: Ident,
    priority: Option<Spanned<Number>>,
    entries: Vec<Entry>,
) -> Route {
    const SHAPE: Shape = Shape {
        keyword: "route",
        keys: &[
            "when",
            "to",
            "system_prompt",
            "headers",
            "reasoning",
            "tools",
            "cache",
        ],
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

fn cache(cx: &mut Ctx<'_>, d: &mut Decl, entries: Vec<Entry>) -> Cache {
    const SHAPE: Shape = Shape {
        keyword: "cache",
        keys: &["encoder", "threshold", "ttl", "store", "skip"],
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
        skip_when,
    }
}

fn session(cx: &mut Ctx<'_>, entries: Vec<Entry>) -> Session {
    const SHAPE: Shape = Shape {
        keyword: "session",
        keys: &["id", "tenant", "ttl", "store", "missing"],
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
    }
}

fn protect(cx: &mut Ctx<'_>, entries: Vec<Entry>) -> Protect {
    const SHAPE: Shape = Shape {
        keyword: "protect",
        keys: &["mode", "hold"],
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
    }
}

fn failure(cx: &mut Ctx<'_>, entries: Vec<Entry>) -> Failure {
    const SHAPE: Shape = Shape {
        keyword: "failure",
        keys: &["classifier", "store", "backend"],
        repeatable: &[],
    };
    let mut fields = Fields::check(cx, &SHAPE, entries);
    Failure {
        classifier: fields.choice(cx, "classifier", FAIL_MODES),
        store: fields.choice(cx, "store", FAIL_MODES),
        backend: fields.choice(cx, "backend", FAIL_MODES),
    }
}

fn router(cx: &mut Ctx<'_>, entries: Vec<Entry>) -> Router {
    const SHAPE: Shape = Shape {
        keyword: "router",
        keys: &["names", "tokenizer"],
        repeatable: &[],
    };
    let mut fields = Fields::check(cx, &SHAPE, entries);
    Router {
        names: fields.read(cx, "names", f::EXPECT_STRINGS, f::as_strings),
        tokenizer: fields.read(cx, "tokenizer", f::EXPECT_STRING, f::as_string),
    }
}

fn test(cx: &mut Ctx<'_>, d: &mut Decl, name: Ident, entries: Vec<Entry>) -> Test {
    const SHAPE: Shape = Shape {
        keyword: "test",
        keys: &["prompt", "messages", "system", "header", "given", "expect"],
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
