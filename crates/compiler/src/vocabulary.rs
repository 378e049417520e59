//! The builtin vocabulary of expressions: every function, value and field the language defines
//! without a declaration, with its signature, one line of documentation and an editor snippet.
//!
//! This table is the one place a builtin exists. The checker resolves builtin names through it
//! (a name without a row is not a builtin), the language server takes its hovers and completions
//! from it, and tests hold `docs/language.md`'s table of expressions and the editor's answers to
//! it in both directions. Declaration keywords and their fields are the front end's:
//! `src_dsl::keywords`.

use crate::hir::RequestField;

/// A builtin function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Function {
    Header,
    Body,
    Contains,
    Hits,
    Count,
    Density,
    Sequence,
    Fuzzy,
    FuzzyHits,
    Bm25,
    Words,
    Language,
    Matches,
    Pii,
    Tokens,
    Similarity,
    Min,
    Max,
    /// `outcomes(pinned)`, only meaningful through its fields.
    Outcomes,
    /// `budget(NAME)`, only meaningful through its fields.
    Budget,
}

/// A builtin value: a name an expression reads without a declaration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Value {
    Prompt,
    History,
    System,
    ApiKey,
    /// `request`, only meaningful through its fields.
    Request,
    Pinned,
    Proposed,
}

/// What a builtin field is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Receiver {
    /// `request.tools`.
    Request,
    /// A class value: `topic.confidence`.
    Class,
    /// A model: `strong.cost`.
    Model,
    /// `outcomes(pinned).fail_rate`.
    Outcomes,
    /// `budget(NAME).used`.
    Budget,
}

impl Receiver {
    /// The receiver as the documentation writes it before the dot.
    pub fn written(self) -> &'static str {
        match self {
            Receiver::Request => "request",
            Receiver::Class => "c",
            Receiver::Model => "m",
            Receiver::Outcomes => "outcomes(pinned)",
            Receiver::Budget => "budget(NAME)",
        }
    }
}

/// A builtin field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    Request(RequestField),
    Confidence,
    Cost,
    FailRate,
    OutcomeCount,
    BudgetUsed,
    BudgetRemaining,
}

impl Field {
    pub fn receiver(self) -> Receiver {
        match self {
            Field::Request(_) => Receiver::Request,
            Field::Confidence => Receiver::Class,
            Field::Cost => Receiver::Model,
            Field::FailRate | Field::OutcomeCount => Receiver::Outcomes,
            Field::BudgetUsed | Field::BudgetRemaining => Receiver::Budget,
        }
    }
}

/// What a builtin name means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Meaning {
    Function(Function),
    Value(Value),
    Field(Field),
}

/// One row of the vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Builtin {
    /// The name as written (for a field, without its receiver).
    pub name: &'static str,
    pub meaning: Meaning,
    /// Argument and result types as the documentation writes them:
    /// `header(name: STRING) -> text?`, `prompt: text`, `request.tools: int`.
    pub signature: &'static str,
    /// The result type as the documentation writes it: `text?`, `int | float`.
    pub ty: &'static str,
    /// One line of documentation.
    pub doc: &'static str,
    /// What the editor inserts, in LSP snippet syntax.
    pub snippet: &'static str,
    /// A call written out, for the help of argument errors (functions only).
    pub usage: &'static str,
    /// Number of arguments (functions only).
    pub arity: usize,
    /// Only defined inside `protect` rules.
    pub protect_only: bool,
}

impl Builtin {
    pub fn function(&self) -> Option<Function> {
        match self.meaning {
            Meaning::Function(f) => Some(f),
            _ => None,
        }
    }

    pub fn value(&self) -> Option<Value> {
        match self.meaning {
            Meaning::Value(v) => Some(v),
            _ => None,
        }
    }

    pub fn field(&self) -> Option<Field> {
        match self.meaning {
            Meaning::Field(f) => Some(f),
            _ => None,
        }
    }

    /// How the documentation's table of expressions writes the builtin: `header()`, `prompt`,
    /// `request.tools`, `.cost`.
    pub fn written(&self) -> String {
        match self.meaning {
            Meaning::Function(_) => format!("{}()", self.name),
            Meaning::Value(_) => self.name.to_string(),
            Meaning::Field(f) if f.receiver() == Receiver::Request => {
                format!("request.{}", self.name)
            }
            Meaning::Field(_) => format!(".{}", self.name),
        }
    }
}

#[expect(
    clippy::too_many_arguments,
    reason = "one row per line reads as a table; a struct literal per row would not"
)]
const fn function(
    name: &'static str,
    f: Function,
    signature: &'static str,
    ty: &'static str,
    doc: &'static str,
    snippet: &'static str,
    usage: &'static str,
    arity: usize,
) -> Builtin {
    Builtin {
        name,
        meaning: Meaning::Function(f),
        signature,
        ty,
        doc,
        snippet,
        usage,
        arity,
        protect_only: matches!(f, Function::Outcomes),
    }
}

const fn value(
    name: &'static str,
    v: Value,
    signature: &'static str,
    ty: &'static str,
    doc: &'static str,
) -> Builtin {
    Builtin {
        name,
        meaning: Meaning::Value(v),
        signature,
        ty,
        doc,
        snippet: name,
        usage: "",
        arity: 0,
        protect_only: matches!(v, Value::Pinned | Value::Proposed),
    }
}

const fn field(
    name: &'static str,
    f: Field,
    signature: &'static str,
    ty: &'static str,
    doc: &'static str,
) -> Builtin {
    Builtin {
        name,
        meaning: Meaning::Field(f),
        signature,
        ty,
        doc,
        snippet: name,
        usage: "",
        arity: 0,
        protect_only: matches!(f, Field::FailRate | Field::OutcomeCount),
    }
}

use Function as F;
use RequestField as R;

/// Every builtin, functions first, then values, then fields.
#[rustfmt::skip]
pub const BUILTINS: &[Builtin] = &[
    function("header", F::Header, "header(name: STRING) -> text?", "text?", "request header (case-insensitive name)", "header(\"${1:x-name}\")", "header(\"x-name\")", 1),
    function("body", F::Body, "body(path: STRING) -> text?", "text?", "request body field at a dotted path (a string or number)", "body(\"${1:user}\")", "body(\"metadata.user_id\")", 1),
    function("contains", F::Contains, "contains(text, [STRING...]) -> bool", "bool", "any phrase occurs (Unicode case-insensitive, on word boundaries)", "contains(${1:prompt}, [\"${2}\"])", "contains(prompt, [\"a\", \"b\"])", 2),
    function("hits", F::Hits, "hits(text, [STRING...]) -> int", "int", "how many of the phrases occur", "hits(${1:prompt}, [\"${2}\"])", "hits(prompt, [\"a\", \"b\"])", 2),
    function("count", F::Count, "count(text, regex: STRING) -> int", "int", "number of regex matches", "count(${1:prompt}, \"${2}\")", "count(prompt, \"regex\")", 2),
    function("density", F::Density, "density(text, [STRING...]) -> float", "float", "phrase occurrences per word", "density(${1:prompt}, [\"${2}\"])", "density(prompt, [\"a\", \"b\"])", 2),
    function("sequence", F::Sequence, "sequence(text, [STRING...]) -> bool", "bool", "the phrases occur in this order", "sequence(${1:prompt}, [\"${2}\"])", "sequence(prompt, [\"first\", \"then\"])", 2),
    function("fuzzy", F::Fuzzy, "fuzzy(text, [STRING...], min: NUMBER) -> bool", "bool", "a phrase occurs at least `min` similar (typo-tolerant, word by word)", "fuzzy(${1:prompt}, [\"${2}\"], ${3:0.8})", "fuzzy(prompt, [\"a\", \"b\"], 0.8)", 3),
    function("fuzzy_hits", F::FuzzyHits, "fuzzy_hits(text, [STRING...], min: NUMBER) -> int", "int", "how many of the phrases occur at least `min` similar", "fuzzy_hits(${1:prompt}, [\"${2}\"], ${3:0.8})", "fuzzy_hits(prompt, [\"a\", \"b\"], 0.8)", 3),
    function("bm25", F::Bm25, "bm25(text, [STRING...]) -> float", "float", "Okapi BM25 of the text against the phrases as query terms", "bm25(${1:prompt}, [\"${2}\"])", "bm25(prompt, [\"a\", \"b\"])", 2),
    function("words", F::Words, "words(text) -> int", "int", "word count", "words(${1:prompt})", "words(prompt)", 1),
    function("language", F::Language, "language(text) -> class<language>", "class<language>", "detected language, ISO 639-1 labels (`en`, `zh`, ...)", "language(${1:prompt})", "language(prompt)", 1),
    function("matches", F::Matches, "matches(text, regex: STRING) -> bool", "bool", "regex match (compiled and checked at compile time)", "matches(${1:prompt}, \"${2}\")", "matches(prompt, \"regex\")", 2),
    function("pii", F::Pii, "pii(text, [TYPE...]) -> bool", "bool", "personal data or a secret of one of the types occurs (`email`, `phone`, `credit_card`, `iban`, `us_ssn`, `ip_address`, `api_key`, `private_key`, `jwt`), each validated (Luhn, mod-97, ...)", "pii(${1:prompt}, [\"${2:email}\"])", "pii(prompt, [\"email\", \"credit_card\"])", 2),
    function("tokens", F::Tokens, "tokens(text) -> int", "int", "token count (declared tokenizer, else ⌈UTF-8 bytes / 4⌉)", "tokens(${1:history})", "tokens(history)", 1),
    function("similarity", F::Similarity, "similarity(encoder, text, [STRING...]) -> score", "score", "max cosine similarity to the examples under the encoder", "similarity(${1:encoder}, ${2:prompt}, [\"${3}\"])", "similarity(encoder, prompt, [\"example\"])", 3),
    function("min", F::Min, "min(a, b) -> int | float", "int | float", "the smaller number (int if both are int)", "min(${1}, ${2})", "min(a, b)", 2),
    function("max", F::Max, "max(a, b) -> int | float", "int | float", "the larger number (int if both are int)", "max(${1}, ${2})", "max(a, b)", 2),
    function("budget", F::Budget, "budget(NAME).used: score, .remaining: float", "budget", "a declared budget's use for this request's `per` (see `budget`)", "budget(${1:name}).${2:used}", "budget(per_key).used", 1),
    function("outcomes", F::Outcomes, "outcomes(pinned).fail_rate: score, .count: int", "outcomes", "recent outcomes of the pinned model in this session (`protect` only)", "outcomes(pinned).${1:fail_rate}", "outcomes(pinned).fail_rate", 1),
    value("prompt", Value::Prompt, "prompt: text", "text", "last user message"),
    value("history", Value::History, "history: text", "text", "all message text in order"),
    value("system", Value::System, "system: text", "text", "system prompt"),
    value("api_key", Value::ApiKey, "api_key: text?", "text?", "bearer token of the request (never logged)"),
    value("request", Value::Request, "request: request", "request", "the request's counters: `.tools`, `.turns`, `.messages`, `.tool_calls`, `.tool_results`, `.stream`, `.tool_loop`, `.provider_state`"),
    value("pinned", Value::Pinned, "pinned: model", "model", "the session's pinned model (`protect` only)"),
    value("proposed", Value::Proposed, "proposed: model", "model", "the route's proposal (`protect` only)"),
    field("tools", Field::Request(R::Tools), "request.tools: int", "int", "number of tools offered"),
    field("turns", Field::Request(R::Turns), "request.turns: int", "int", "number of user turns in `messages`"),
    field("messages", Field::Request(R::Messages), "request.messages: int", "int", "number of messages of any role"),
    field("tool_calls", Field::Request(R::ToolCalls), "request.tool_calls: int", "int", "assistant tool calls in the history"),
    field("tool_results", Field::Request(R::ToolResults), "request.tool_results: int", "int", "`tool` result messages in the history"),
    field("stream", Field::Request(R::Stream), "request.stream: bool", "bool", "streaming requested"),
    field("tool_loop", Field::Request(R::ToolLoop), "request.tool_loop: bool", "bool", "the request continues a tool loop"),
    field("provider_state", Field::Request(R::ProviderState), "request.provider_state: bool", "bool", "the request continues a conversation only its backend holds (`previous_response_id` unknown to the router)"),
    field("confidence", Field::Confidence, "class<C>.confidence: score", "score", "how sure the classifier (or the language detector) is of its label"),
    field("cost", Field::Cost, "model.cost: float", "float", "the model's declared cost"),
    field("fail_rate", Field::FailRate, "outcomes(pinned).fail_rate: score", "score", "share of the pinned model's recent answers that failed (`protect` only)"),
    field("count", Field::OutcomeCount, "outcomes(pinned).count: int", "int", "number of recent outcomes of the pinned model (`protect` only)"),
    field("used", Field::BudgetUsed, "budget(NAME).used: score", "score", "share of the budget used before this request, 0–1"),
    field("remaining", Field::BudgetRemaining, "budget(NAME).remaining: float", "float", "what is left of the budget, in its unit (requests, tokens or cost)"),
];

/// The builtin functions.
pub fn functions() -> impl Iterator<Item = &'static Builtin> {
    BUILTINS.iter().filter(|b| b.function().is_some())
}

/// The builtin values.
pub fn values() -> impl Iterator<Item = &'static Builtin> {
    BUILTINS.iter().filter(|b| b.value().is_some())
}

/// The builtin fields of one receiver.
pub fn fields(receiver: Receiver) -> impl Iterator<Item = &'static Builtin> {
    BUILTINS
        .iter()
        .filter(move |b| b.field().is_some_and(|f| f.receiver() == receiver))
}

/// The builtin function called `name`.
pub fn lookup_function(name: &str) -> Option<&'static Builtin> {
    functions().find(|b| b.name == name)
}

/// The builtin value called `name`.
pub fn lookup_value(name: &str) -> Option<&'static Builtin> {
    values().find(|b| b.name == name)
}

/// The field `name` of `receiver`.
pub fn lookup_field(receiver: Receiver, name: &str) -> Option<&'static Builtin> {
    fields(receiver).find(|b| b.name == name)
}

/// Whether a declaration may not take `name`: builtin functions and values share the
/// expression namespace with declarations (fields do not).
pub fn is_reserved(name: &str) -> bool {
    lookup_function(name).is_some() || lookup_value(name).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique_within_their_namespace() {
        let mut seen = HashSet::new();
        for b in BUILTINS {
            let namespace = match b.meaning {
                Meaning::Function(_) | Meaning::Value(_) => "expression".to_string(),
                Meaning::Field(f) => format!("{:?}", f.receiver()),
            };
            assert!(seen.insert((namespace, b.name)), "`{}` twice", b.name);
        }
    }

    #[test]
    fn every_row_is_filled_in() {
        for b in BUILTINS {
            assert!(!b.doc.is_empty() && !b.signature.is_empty() && !b.ty.is_empty());
            assert!(b.signature.contains(b.name), "{}", b.signature);
            assert!(b.snippet.starts_with(b.name), "{}", b.snippet);
            if b.function().is_some() {
                assert!(b.arity > 0 && b.usage.starts_with(b.name), "{}", b.name);
            }
        }
    }
}
