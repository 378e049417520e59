//! What the editor says about the language's fixed vocabulary: builtin functions and values,
//! `request.*` fields, declaration keywords and each declaration's fields.
//!
//! The wording follows docs/language.md, "Declarations" and
//! docs/language.md, "Expressions and types"; the table is the single source for hover texts,
//! completion items and snippets.

/// A builtin function: name, signature, one-line doc, snippet body.
pub struct Builtin {
    pub name: &'static str,
    pub signature: &'static str,
    pub doc: &'static str,
    pub snippet: &'static str,
}

#[rustfmt::skip]
pub const FUNCTIONS: &[Builtin] = &[
    Builtin { name: "header", signature: "header(name: STRING) -> text?", doc: "request header (case-insensitive name)", snippet: "header(\"${1:x-name}\")" },
    Builtin { name: "contains", signature: "contains(text, [STRING...]) -> bool", doc: "any phrase occurs (Unicode case-insensitive, on word boundaries)", snippet: "contains(${1:prompt}, [\"${2}\"])" },
    Builtin { name: "hits", signature: "hits(text, [STRING...]) -> int", doc: "how many of the phrases occur", snippet: "hits(${1:prompt}, [\"${2}\"])" },
    Builtin { name: "count", signature: "count(text, regex: STRING) -> int", doc: "number of regex matches", snippet: "count(${1:prompt}, \"${2}\")" },
    Builtin { name: "density", signature: "density(text, [STRING...]) -> float", doc: "phrase occurrences per word", snippet: "density(${1:prompt}, [\"${2}\"])" },
    Builtin { name: "sequence", signature: "sequence(text, [STRING...]) -> bool", doc: "the phrases occur in this order", snippet: "sequence(${1:prompt}, [\"${2}\"])" },
    Builtin { name: "words", signature: "words(text) -> int", doc: "word count", snippet: "words(${1:prompt})" },
    Builtin { name: "language", signature: "language(text) -> class<language>", doc: "detected language, ISO 639-1 labels (`en`, `zh`, ...)", snippet: "language(${1:prompt})" },
    Builtin { name: "matches", signature: "matches(text, regex: STRING) -> bool", doc: "regex match (compiled and checked at compile time)", snippet: "matches(${1:prompt}, \"${2}\")" },
    Builtin { name: "tokens", signature: "tokens(text) -> int", doc: "token count (declared tokenizer, else ⌈UTF-8 bytes / 4⌉)", snippet: "tokens(${1:history})" },
    Builtin { name: "similarity", signature: "similarity(encoder, text, [STRING...]) -> score", doc: "max cosine similarity to the examples under the encoder", snippet: "similarity(${1:encoder}, ${2:prompt}, [\"${3}\"])" },
    Builtin { name: "min", signature: "min(a, b) -> int | float", doc: "the smaller number (int if both are int)", snippet: "min(${1}, ${2})" },
    Builtin { name: "max", signature: "max(a, b) -> int | float", doc: "the larger number (int if both are int)", snippet: "max(${1}, ${2})" },
    Builtin { name: "outcomes", signature: "outcomes(pinned).fail_rate: score, .count: int", doc: "recent outcomes of the pinned model in this session (`protect` only)", snippet: "outcomes(pinned).${1:fail_rate}" },
];

/// Builtin values: name, type, doc.
#[rustfmt::skip]
pub const VALUES: &[(&str, &str, &str)] = &[
    ("prompt", "text", "last user message"),
    ("history", "text", "all message text in order"),
    ("system", "text", "system prompt"),
    ("api_key", "text?", "bearer token of the request (never logged)"),
    ("request", "request", "the request's counters: `.tools`, `.turns`, `.messages`, `.tool_calls`, `.tool_results`, `.stream`, `.tool_loop`"),
    ("pinned", "model", "the session's pinned model (`protect` only)"),
    ("proposed", "model", "the route's proposal (`protect` only)"),
];

/// Fields of `request`: name, type, doc.
pub const REQUEST_FIELDS: &[(&str, &str, &str)] = &[
    ("tools", "int", "number of tools offered"),
    ("turns", "int", "number of user turns in `messages`"),
    ("messages", "int", "number of messages of any role"),
    ("tool_calls", "int", "assistant tool calls in the history"),
    (
        "tool_results",
        "int",
        "`tool` result messages in the history",
    ),
    ("stream", "bool", "streaming requested"),
    ("tool_loop", "bool", "the request continues a tool loop"),
];

pub use src_dsl::keywords::KEYWORDS;

/// Top-level declarations with a snippet each.
#[rustfmt::skip]
pub const DECLARATIONS: &[(&str, &str)] = &[
    ("backend", "backend ${1:name} {\n  url = \"${2:http://127.0.0.1:8000/v1}\"\n}"),
    ("model", "model ${1:name} {\n  backend = ${2:backend}\n  serves = \"${3:id}\"\n}"),
    ("classifier", "classifier ${1:name} {\n  path = \"${2:models/name}\"\n  labels = [${3}]\n}"),
    ("guard", "guard ${1:name} {\n  path = \"${2:models/name}\"\n}"),
    ("encoder", "encoder ${1:name} {\n  path = \"${2:models/name}\"\n}"),
    ("signal", "signal ${1:name} = ${2:expr}"),
    ("block", "block ${1:name} {\n  when ${2:expr}\n  message = \"${3:blocked}\"\n}"),
    ("route", "route ${1:name} priority ${2:10} {\n  when ${3:expr}\n  to ${4:model}\n}"),
    ("cache", "cache {\n  encoder = ${1:encoder}\n  threshold = ${2:0.9}\n}"),
    ("session", "session {\n  ttl = ${1:10m}\n}"),
    ("protect", "protect {\n  mode = ${1:enforce}\n  hold \"${2:reason}\" when ${3:expr}\n}"),
    ("failure", "failure {\n  backend = ${1:closed}\n}"),
    ("router", "router {\n  names = [\"${1:auto}\"]\n}"),
    ("test", "test ${1:name} {\n  prompt = \"${2}\"\n  expect ${3:route}\n}"),
];

/// The fields (and statements) a declaration body accepts.
pub fn fields_of(keyword: &str) -> &'static [&'static str] {
    match keyword {
        "backend" => &["url", "catalog", "api_key", "timeout", "simulated"],
        "model" => &[
            "backend",
            "serves",
            "aliases",
            "cost",
            "context",
            "tokenizer",
        ],
        "classifier" => &["path", "labels", "device"],
        "guard" => &["path", "positive", "device"],
        "encoder" => &["path", "device"],
        "block" => &["when", "status", "message", "to"],
        "route" => &[
            "when",
            "to",
            "else",
            "system_prompt",
            "headers",
            "reasoning",
            "tools",
            "cache",
        ],
        "cache" => &["encoder", "threshold", "ttl", "store", "skip"],
        "session" => &["id", "tenant", "ttl", "store", "missing"],
        "protect" => &["mode", "hold"],
        "failure" => &["classifier", "store", "backend"],
        "router" => &["names", "tokenizer"],
        "test" => &["prompt", "messages", "system", "header", "given", "expect"],
        _ => &[],
    }
}

/// Fixed choices for a field's value, when it has them.
pub fn field_values(keyword: &str, field: &str) -> &'static [&'static str] {
    match (keyword, field) {
        (_, "device") => &["auto", "cpu", "cuda"],
        ("route", "reasoning") => &["off", "low", "medium", "high"],
        ("route", "tools") => &["keep", "none", "only"],
        ("route", "cache") => &["on", "off"],
        ("protect", "mode") => &["observe", "enforce"],
        ("session", "missing") => &["route", "reject"],
        ("failure", _) => &["open", "closed"],
        (_, "store") => &["memory", "redis"],
        ("backend", "simulated") => &["true"],
        _ => &[],
    }
}

/// Whether a field takes an expression.
pub fn is_expression_field(keyword: &str, field: &str) -> bool {
    matches!(
        (keyword, field),
        ("session", "id") | ("session", "tenant") | (_, "when")
    )
}

pub fn function(name: &str) -> Option<&'static Builtin> {
    FUNCTIONS.iter().find(|b| b.name == name)
}

pub fn value(name: &str) -> Option<&'static (&'static str, &'static str, &'static str)> {
    VALUES.iter().find(|v| v.0 == name)
}

/// Whether `name` may name a declaration: an identifier that is neither a keyword nor a builtin.
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    let head_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    head_ok
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&name)
        && function(name).is_none()
        && value(name).is_none()
}
