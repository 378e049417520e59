//! The reserved words of the language and the shape of each declaration body, in one place for
//! the parser, the formatter's tests and the language server's completion.
//!
//! The parser checks a body's fields against [`fields`], so a field cannot be accepted without
//! being listed here; the fixed choices and the snippets are held to the parser by the tests
//! below (each snippet parses, each choice parses where it is offered).

/// Words that cannot name a declaration or stand as a bare name in an expression. The
/// declaration keywords come first.
pub const KEYWORDS: &[&str] = &[
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

/// Keywords that begin a top-level declaration. `budget` and `detector` are ones only at the
/// start of a declaration: in an expression `budget(NAME)` is a builtin, and `detector` stays a
/// name policies written before it may use, so neither is in [`KEYWORDS`].
pub const DECLARATION_KEYWORDS: &[&str] = &[
    "backend",
    "model",
    "classifier",
    "guard",
    "encoder",
    "detector",
    "signal",
    "block",
    "route",
    "cache",
    "session",
    "protect",
    "failure",
    "router",
    "test",
    "budget",
];

/// The fields (and statements) each declaration body accepts, by declaration keyword.
pub mod fields {
    pub const BACKEND: &[&str] = &[
        "url",
        "catalog",
        "api_key",
        "timeout",
        "simulated",
        "client_auth",
        "api",
    ];
    pub const MODEL: &[&str] = &[
        "backend",
        "serves",
        "aliases",
        "cost",
        "context",
        "tokenizer",
    ];
    pub const CLASSIFIER: &[&str] = &["path", "labels", "device", "window", "windows"];
    pub const GUARD: &[&str] = &["path", "positive", "device", "window", "windows"];
    pub const ENCODER: &[&str] = &["path", "device", "window", "windows"];
    pub const DETECTOR: &[&str] = &[
        "path",
        "entities",
        "threshold",
        "device",
        "window",
        "windows",
    ];
    pub const BLOCK: &[&str] = &["when", "status", "message", "to", "redact"];
    pub const ROUTE: &[&str] = &[
        "when",
        "to",
        "system_prompt",
        "headers",
        "reasoning",
        "tools",
        "cache",
        "redact",
    ];
    pub const CACHE: &[&str] = &[
        "encoder",
        "threshold",
        "ttl",
        "store",
        "max_entries",
        "max_bytes",
        "skip",
    ];
    pub const SESSION: &[&str] = &["id", "tenant", "ttl", "store", "missing", "outcomes"];
    pub const PROTECT: &[&str] = &["mode", "hold", "owner_lost"];
    pub const FAILURE: &[&str] = &[
        "classifier",
        "store",
        "backend",
        "cooldown_after",
        "cooldown",
    ];
    pub const ROUTER: &[&str] = &["names", "tokenizer", "anonymous"];
    pub const TEST: &[&str] = &["prompt", "messages", "system", "header", "given", "expect"];
    pub const BUDGET: &[&str] = &["per", "window", "requests", "tokens", "cost", "exceeded"];
}

/// A top-level declaration: its keyword, what its body accepts and the skeleton an editor
/// inserts (LSP snippet syntax).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Declaration {
    pub keyword: &'static str,
    pub fields: &'static [&'static str],
    pub snippet: &'static str,
}

/// Every declaration, in the order of [`DECLARATION_KEYWORDS`].
#[rustfmt::skip]
pub const DECLARATIONS: &[Declaration] = &[
    Declaration { keyword: "backend", fields: fields::BACKEND, snippet: "backend ${1:name} {\n  url = \"${2:http://127.0.0.1:8000/v1}\"\n}" },
    Declaration { keyword: "model", fields: fields::MODEL, snippet: "model ${1:name} {\n  backend = ${2:provider}\n  serves = \"${3:id}\"\n}" },
    Declaration { keyword: "classifier", fields: fields::CLASSIFIER, snippet: "classifier ${1:name} {\n  path = \"${2:models/name}\"\n  labels = [${3:label}]\n}" },
    Declaration { keyword: "guard", fields: fields::GUARD, snippet: "guard ${1:name} {\n  path = \"${2:models/name}\"\n}" },
    Declaration { keyword: "encoder", fields: fields::ENCODER, snippet: "encoder ${1:name} {\n  path = \"${2:models/name}\"\n}" },
    Declaration { keyword: "detector", fields: fields::DETECTOR, snippet: "detector ${1:name} {\n  path = \"${2:models/name}\"\n  entities = [${3:PERSON}]\n  threshold = ${4:0.6}\n}" },
    Declaration { keyword: "signal", fields: &[], snippet: "signal ${1:name} = ${2:expr}" },
    Declaration { keyword: "block", fields: fields::BLOCK, snippet: "block ${1:name} {\n  when ${2:expr}\n  message = \"${3:blocked}\"\n}" },
    Declaration { keyword: "route", fields: fields::ROUTE, snippet: "route ${1:name} priority ${2:10} {\n  when ${3:expr}\n  to ${4:target}\n}" },
    Declaration { keyword: "cache", fields: fields::CACHE, snippet: "cache {\n  encoder = ${1:embedder}\n  threshold = ${2:0.9}\n}" },
    Declaration { keyword: "session", fields: fields::SESSION, snippet: "session {\n  ttl = ${1:10m}\n}" },
    Declaration { keyword: "protect", fields: fields::PROTECT, snippet: "protect {\n  mode = ${1:enforce}\n  hold \"${2:reason}\" when ${3:expr}\n}" },
    Declaration { keyword: "failure", fields: fields::FAILURE, snippet: "failure {\n  backend = ${1:closed}\n}" },
    Declaration { keyword: "router", fields: fields::ROUTER, snippet: "router {\n  names = [\"${1:auto}\"]\n}" },
    Declaration { keyword: "test", fields: fields::TEST, snippet: "test ${1:name} {\n  prompt = \"${2}\"\n  expect ${3:route_name}\n}" },
    Declaration { keyword: "budget", fields: fields::BUDGET, snippet: "budget ${1:name} {\n  per = ${2:tenant}\n  window = ${3:1m}\n  requests = ${4:20}\n  exceeded = ${5:reject}\n}" },
];

/// The declaration a keyword begins.
pub fn declaration(keyword: &str) -> Option<&'static Declaration> {
    DECLARATIONS.iter().find(|d| d.keyword == keyword)
}

/// The fields (and statements) a declaration body accepts; none for an unknown keyword.
pub fn fields_of(keyword: &str) -> &'static [&'static str] {
    declaration(keyword).map_or(&[], |d| d.fields)
}

/// The fixed choices for a field's value, when it has them (as they are written).
pub fn choices(keyword: &str, field: &str) -> &'static [&'static str] {
    match (keyword, field) {
        ("classifier" | "guard" | "encoder" | "detector", "device") => &["auto", "cpu", "cuda"],
        ("route", "reasoning") => &["off", "low", "medium", "high"],
        ("route", "tools") => &["keep", "none", "only [\"tool\"]"],
        ("route", "cache") => &["on", "off"],
        ("protect", "mode") => &["observe", "enforce"],
        ("protect", "owner_lost") => &["fail", "fallback", "move"],
        ("session", "missing") => &["route", "reject"],
        ("session", "outcomes") => &["any", "admin", "keys"],
        ("backend", "client_auth") => &["forward", "drop"],
        ("failure", "classifier" | "store" | "backend") => &["open", "closed"],
        ("cache" | "session", "store") => &["memory", "redis(\"redis://127.0.0.1:6379\")"],
        ("backend", "simulated") => &["true", "false"],
        ("backend", "api") => &["openai", "anthropic"],
        ("budget", "exceeded") => &["reject", "to MODEL", "observe"],
        _ => &[],
    }
}

/// Whether a field (or statement) takes an expression.
pub fn takes_expression(keyword: &str, field: &str) -> bool {
    matches!(
        (keyword, field),
        ("session", "id" | "tenant") | ("budget", "per") | (_, "when")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A snippet with each placeholder replaced by its default text.
    fn expand(snippet: &str) -> String {
        let mut out = String::new();
        let mut rest = snippet;
        while let Some(at) = rest.find("${") {
            out.push_str(&rest[..at]);
            let end = rest[at..].find('}').map_or(rest.len(), |e| at + e);
            let inner = &rest[at + 2..end];
            out.push_str(inner.split_once(':').map_or("", |(_, d)| d));
            rest = &rest[(end + 1).min(rest.len())..];
        }
        out.push_str(rest);
        out
    }

    fn parse_errors(text: &str) -> Vec<String> {
        crate::parse(text, crate::FileId(0))
            .diagnostics
            .into_iter()
            .filter(|d| d.is_error())
            .map(|d| d.message)
            .collect()
    }

    #[test]
    fn the_declarations_are_the_declaration_keywords() {
        let keywords: Vec<&str> = DECLARATIONS.iter().map(|d| d.keyword).collect();
        assert_eq!(keywords, DECLARATION_KEYWORDS);
    }

    #[test]
    fn every_snippet_parses() {
        for d in DECLARATIONS {
            let text = expand(d.snippet);
            assert!(
                parse_errors(&text).is_empty(),
                "{text}: {:?}",
                parse_errors(&text)
            );
        }
    }

    #[test]
    fn every_choice_parses_where_it_is_offered() {
        for d in DECLARATIONS {
            for field in d.fields {
                for choice in choices(d.keyword, field) {
                    let skeleton = expand(d.snippet);
                    let mut lines: Vec<String> = skeleton
                        .lines()
                        .filter(|l| !l.trim_start().starts_with(&format!("{field} =")))
                        .map(str::to_string)
                        .collect();
                    let close = lines.len() - 1;
                    lines.insert(close, format!("  {field} = {choice}"));
                    let text = lines.join("\n");
                    assert!(
                        parse_errors(&text).is_empty(),
                        "{text}: {:?}",
                        parse_errors(&text)
                    );
                }
            }
        }
        assert!(!parse_errors("backend b {\n  url = \"x\"\n  simulated = maybe\n}").is_empty());
    }

    #[test]
    fn declaration_keywords_are_the_declarations() {
        assert_eq!(DECLARATION_KEYWORDS.first(), Some(&"backend"));
        assert_eq!(DECLARATION_KEYWORDS.last(), Some(&"budget"));
        assert!(!DECLARATION_KEYWORDS.contains(&"when"));
    }
}
