//! The facts of one OpenAI-style request that policies read
//! (docs/language.md, "Expressions and types"): `prompt`, `history`, `system`, headers,
//! `api_key` and the `request.*` counters.
//!
//! A [`RequestView`] is extracted once per request, before any signal runs, so every phase sees
//! the same facts and the body's JSON shape is checked in one place. Extraction is strict about
//! the shapes policies depend on (a malformed body gets a [`RequestError`] naming the JSON path).
//! Every text the backend reads is text a signal can read: a content part, block or item of a
//! type the router does not know is refused ([`RequestError::Unreadable`]) rather than forwarded
//! unread; media (images, audio, files) is accepted and read by no text signal.
//!
//! `/v1/chat/completions`, `/v1/responses` (`responses.rs`) and Anthropic's `/v1/messages`
//! (`messages.rs`) bodies are read as one sequence of chat-style messages, so a conversation
//! gives the same facts whichever API carries it:
//! - `/v1/responses` `instructions` count as a leading system message; a run of `function_call`
//!   items joins the assistant message before it (or forms one), as chat's `tool_calls` do;
//!   each `function_call_output` is one `tool` message. Reasoning summaries and the text
//!   built-in tools return are history, but no messages are counted for them.
//! - The legacy chat `function_call` on an assistant message counts as a tool call, and a
//!   `function` role message as its result. Legacy calls have no id, so each `function`
//!   message answers the oldest unanswered legacy call.
//! - `prompt` is the text of the last user turn that has text: a trailing user message that is
//!   empty, blank or only an image still counts as a turn, but cannot hide the one before it.
//! - `history` joins the texts of messages that have text, in order, with `\n`; content parts
//!   of one message are joined with `\n` too. Tool call arguments are not message text.

mod json;
mod messages;
mod responses;
#[cfg(test)]
mod tests;

pub use json::{Borrowed, Json, Key, Members, Node, Object};
use std::borrow::Cow;
use std::fmt;

/// What a policy can read about one request.
#[derive(Clone, Default, PartialEq)]
pub struct RequestView {
    pub model: Option<String>,
    /// Text of the last user message that has text (not only whitespace); empty when none has.
    pub prompt: String,
    /// All message texts in order, joined by `\n`.
    pub history: String,
    /// System and developer message texts, joined by `\n`.
    pub system: String,
    /// Header names lowercased; values as received.
    pub headers: Vec<(String, String)>,
    /// The credential: the bearer token of `authorization`, else its whole value, else
    /// `api-key`, else `x-api-key` (one reader for every door).
    pub api_key: Option<String>,
    pub tools: i64,
    pub turns: i64,
    pub messages: i64,
    pub tool_calls: i64,
    pub tool_results: i64,
    pub stream: bool,
    pub tool_loop: bool,
    /// The request continues a conversation kept by its backend: a `/v1/responses` body with
    /// `previous_response_id` or `conversation`. A router that holds the named response itself
    /// expands it and clears this (docs/responses.md).
    pub provider_state: bool,
    /// The body's scalar fields outside the conversation, for `body("a.b")`: dotted path and
    /// value (strings as they are, numbers in JSON form); see [`body_fields`].
    pub body_fields: Vec<(String, String)>,
}

/// A request body that does not have the shape of its API. `path` is a JSON path into the body
/// (`messages[2].content[0].text`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("request body must be a JSON object, found {found}")]
    Body { found: &'static str },
    #[error("`{path}` is missing")]
    Missing { path: String },
    #[error("`{path}` must not be empty")]
    Empty { path: String },
    #[error("`{path}` must be {expected}, found {found}")]
    WrongType {
        path: String,
        expected: &'static str,
        found: &'static str,
    },
    /// A part, block or item whose text the backend would read but the router cannot, so no
    /// signal would see it; `path` is its `type` field.
    #[error("`{path}` is `{kind}`, a type the router cannot read")]
    Unreadable { path: String, kind: String },
}

impl RequestError {
    /// The JSON path of the offending field; `None` when the body itself is wrong.
    pub fn path(&self) -> Option<&str> {
        match self {
            RequestError::Body { .. } => None,
            RequestError::Missing { path }
            | RequestError::Empty { path }
            | RequestError::WrongType { path, .. }
            | RequestError::Unreadable { path, .. } => Some(path),
        }
    }
}

const CONTENT: &str = "a string, an array of content parts or null";

/// Where a value sits in the body (`messages[2].content[0]`), spelled out only when an error
/// names it: a well-formed request is read without building a path string per message.
#[derive(Clone, Copy)]
enum At<'a> {
    Field(&'static str),
    Index(&'a At<'a>, usize),
    Key(&'a At<'a>, &'static str),
}

impl At<'_> {
    fn index(&self, i: usize) -> At<'_> {
        At::Index(self, i)
    }

    fn key(&self, key: &'static str) -> At<'_> {
        At::Key(self, key)
    }
}

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Field(name) => f.write_str(name),
            At::Index(parent, i) => write!(f, "{parent}[{i}]"),
            At::Key(parent, key) => write!(f, "{parent}.{key}"),
        }
    }
}

/// Header pairs as a [`RequestView`] takes them: owned pairs are moved in (a front door that
/// has just decoded them), borrowed ones copied.
pub trait IntoHeaders {
    fn into_headers(self) -> Vec<(String, String)>;
}

impl IntoHeaders for Vec<(String, String)> {
    fn into_headers(self) -> Vec<(String, String)> {
        self
    }
}

impl IntoHeaders for &Vec<(String, String)> {
    fn into_headers(self) -> Vec<(String, String)> {
        self.clone()
    }
}

impl IntoHeaders for &[(String, String)] {
    fn into_headers(self) -> Vec<(String, String)> {
        self.to_vec()
    }
}

impl<const N: usize> IntoHeaders for &[(String, String); N] {
    fn into_headers(self) -> Vec<(String, String)> {
        self.to_vec()
    }
}

impl RequestView {
    /// Reads a `/v1/chat/completions` body: a `serde_json::Value`, or the [`Borrowed`] tree a
    /// proxy reads its bodies into (the same facts and errors either way).
    pub fn from_chat<J: Json>(body: &J, headers: impl IntoHeaders) -> Result<Self, RequestError> {
        let obj = body_object(body)?;
        let mut facts = Facts::new(headers);
        read_common(obj, &mut facts.view)?;
        facts.view.tools = facts
            .view
            .tools
            .saturating_add(array_len(obj, "functions")?);
        let messages = match obj.get("messages").map(Json::node) {
            None => return Err(missing("messages")),
            Some(Node::Array(messages)) => messages,
            Some(other) => return Err(wrong("messages".into(), "an array", &other)),
        };
        let root = At::Field("messages");
        for (i, message) in messages.iter().enumerate() {
            read_chat_message(message, root.index(i), &mut facts)?;
        }
        // A conversation of no messages is nothing a model can answer: refused here rather than
        // routed on an empty prompt and refused by the backend.
        if messages.is_empty() {
            return Err(RequestError::Empty {
                path: "messages".into(),
            });
        }
        Ok(facts.finish())
    }

    /// A one-message request (inline `test` cases, `src explain "..."`).
    pub fn from_prompt(prompt: &str, system: Option<&str>, headers: impl IntoHeaders) -> Self {
        let mut facts = Facts::new(headers);
        if let Some(system) = system {
            facts.message(Role::System, system);
        }
        facts.message(Role::User, prompt);
        facts.finish()
    }

    /// The first header named `name`, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body field at the dotted `path` (`metadata.user_id`), when it is a string or a
    /// number outside the conversation.
    pub fn body_field(&self, path: &str) -> Option<&str> {
        self.body_fields
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, v)| v.as_str())
    }
}

/// Body fields that carry the conversation (or tool schemas), never read by `body(..)`: they are
/// large, and what a policy reads of them is `prompt`, `history` and `request.*`.
const CONVERSATION_FIELDS: [&str; 5] = ["messages", "input", "instructions", "tools", "functions"];

/// How deep `body(..)` paths may reach, and how many fields are kept: identity fields sit near
/// the top (`user`, `metadata.user_id`), and a hostile body must not cost more than a bounded walk.
const MAX_BODY_DEPTH: usize = 4;
const MAX_BODY_FIELDS: usize = 256;

/// The scalar fields `body(..)` reads: every string or number reached through objects from the
/// top of the body (arrays are not entered), outside `CONVERSATION_FIELDS`.
pub fn body_fields<O: Object>(obj: &O) -> Vec<(String, String)> {
    fn walk<O: Object>(obj: &O, prefix: &str, depth: usize, out: &mut Vec<(String, String)>) {
        for (key, value) in obj.entries() {
            if out.len() >= MAX_BODY_FIELDS {
                return;
            }
            if depth == 0 && CONVERSATION_FIELDS.contains(&key) {
                continue;
            }
            let path = if prefix.is_empty() {
                key.to_owned()
            } else {
                format!("{prefix}.{key}")
            };
            match value.node() {
                Node::String(s) => out.push((path, s.to_owned())),
                Node::Number(n) => out.push((path, n.to_string())),
                Node::Object(inner) if depth + 1 < MAX_BODY_DEPTH => {
                    walk(inner, &path, depth + 1, out)
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(obj, "", 0, &mut out);
    out
}

/// The API key never reaches logs, neither as `api_key` nor inside `authorization`.
impl fmt::Debug for RequestView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(n, v)| {
                let v = if is_secret_header(n) { "<redacted>" } else { v };
                (n.as_str(), v)
            })
            .collect();
        f.debug_struct("RequestView")
            .field("model", &self.model)
            .field("prompt", &self.prompt)
            .field("history", &self.history)
            .field("system", &self.system)
            .field("headers", &headers)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("tools", &self.tools)
            .field("turns", &self.turns)
            .field("messages", &self.messages)
            .field("tool_calls", &self.tool_calls)
            .field("tool_results", &self.tool_results)
            .field("stream", &self.stream)
            .field("tool_loop", &self.tool_loop)
            .field("provider_state", &self.provider_state)
            .field(
                "body_fields",
                &self.body_fields.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            )
            .finish()
    }
}

fn is_secret_header(name: &str) -> bool {
    [
        "authorization",
        "proxy-authorization",
        "api-key",
        "x-api-key",
    ]
    .iter()
    .any(|s| name.eq_ignore_ascii_case(s))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    System,
    User,
    Assistant,
    /// A result: chat `tool`, legacy `function`, responses `function_call_output`.
    Tool,
    /// Roles some servers accept beyond OpenAI's (`ipython`): text only.
    Other,
}

/// Accumulates the view message by message and tracks which tool calls are unanswered.
struct Facts {
    view: RequestView,
    /// Ids of tool calls with no later result yet.
    pending: Vec<String>,
    /// Legacy `function_call`s with no later `function` message yet.
    legacy_pending: usize,
    last_is_result: bool,
    /// The last message counted is an assistant one (responses `function_call` items join it).
    last_is_assistant: bool,
}

impl Facts {
    fn new(headers: impl IntoHeaders) -> Facts {
        let mut headers = headers.into_headers();
        for (name, _) in &mut headers {
            name.make_ascii_lowercase();
        }
        let api_key = credential(&headers);
        Facts {
            view: RequestView {
                headers,
                api_key,
                ..RequestView::default()
            },
            pending: Vec::new(),
            legacy_pending: 0,
            last_is_result: false,
            last_is_assistant: false,
        }
    }

    fn message(&mut self, role: Role, text: &str) {
        let view = &mut self.view;
        view.messages += 1;
        push_line(&mut view.history, text);
        match role {
            Role::System => push_line(&mut view.system, text),
            Role::User => {
                view.turns += 1;
                // A trailing user message without text (empty, blank, an image alone) keeps the
                // turn before it as the prompt: otherwise it would hide that turn from every
                // rule on `prompt` while the model still reads it.
                if !text.trim().is_empty() {
                    text.clone_into(&mut view.prompt);
                }
            }
            Role::Tool => view.tool_results += 1,
            Role::Assistant | Role::Other => {}
        }
        self.last_is_result = role == Role::Tool;
        self.last_is_assistant = role == Role::Assistant;
    }

    /// Text the model reads outside any message (reasoning, a built-in tool's output): it is
    /// history, but no message is counted.
    fn text(&mut self, text: &str) {
        push_line(&mut self.view.history, text);
    }

    fn call(&mut self, id: &str) {
        self.view.tool_calls += 1;
        self.pending.push(id.to_owned());
    }

    /// Answers every earlier call with this id.
    fn answer(&mut self, id: &str) {
        self.pending.retain(|pending| pending != id);
    }

    fn legacy_call(&mut self) {
        self.view.tool_calls += 1;
        self.legacy_pending += 1;
    }

    fn finish(mut self) -> RequestView {
        self.view.tool_loop =
            self.last_is_result || !self.pending.is_empty() || self.legacy_pending > 0;
        self.view
    }
}

fn read_chat_message<J: Json>(
    message: &J,
    path: At<'_>,
    facts: &mut Facts,
) -> Result<(), RequestError> {
    let message = match message.node() {
        Node::Object(message) => message,
        other => return Err(wrong(path.to_string(), "an object", &other)),
    };
    let role = role_of(message, path)?;
    if matches!(role, "system" | "developer" | "user") {
        require_content(message, path)?;
    }
    let mut text = content_text(message.get("content"), path, &OPENAI_PARTS)?;
    if role == "assistant" {
        text = with_assistant_extras(message, path, text)?;
    }
    match role {
        "system" | "developer" => facts.message(Role::System, &text),
        "user" => facts.message(Role::User, &text),
        "assistant" => {
            facts.message(Role::Assistant, &text);
            match message.get("tool_calls").map(Json::node) {
                None | Some(Node::Null) => {}
                Some(Node::Array(calls)) => {
                    let calls_at = path.key("tool_calls");
                    for (i, call) in calls.iter().enumerate() {
                        let call_at = calls_at.index(i);
                        let call = match call.node() {
                            Node::Object(call) => call,
                            other => return Err(wrong(call_at.to_string(), "an object", &other)),
                        };
                        facts.call(required_str(call, "id", call_at)?);
                    }
                }
                Some(other) => {
                    return Err(wrong(
                        format!("{path}.tool_calls"),
                        "an array or null",
                        &other,
                    ))
                }
            }
            match message.get("function_call").map(Json::node) {
                None | Some(Node::Null) => {}
                Some(Node::Object(_)) => facts.legacy_call(),
                Some(other) => {
                    return Err(wrong(
                        format!("{path}.function_call"),
                        "an object or null",
                        &other,
                    ))
                }
            }
        }
        "tool" => {
            let id = required_str(message, "tool_call_id", path)?;
            facts.answer(id);
            facts.message(Role::Tool, &text);
        }
        "function" => {
            facts.legacy_pending = facts.legacy_pending.saturating_sub(1);
            facts.message(Role::Tool, &text);
        }
        _ => facts.message(Role::Other, &text),
    }
    Ok(())
}

/// An assistant message's text with what chat templates render beside `content`: its
/// reasoning (vLLM passes `reasoning` or `reasoning_content` back to the template, which shows
/// it to the model) before it, its `refusal` after it.
fn with_assistant_extras<'a, O: Object>(
    message: &'a O,
    path: At<'_>,
    content: Cow<'a, str>,
) -> Result<Cow<'a, str>, RequestError> {
    let field = |key: &'static str| match message.get(key).map(Json::node) {
        None | Some(Node::Null) => Ok(None),
        Some(Node::String(text)) => Ok(Some(text)),
        Some(other) => Err(wrong(format!("{path}.{key}"), "a string or null", &other)),
    };
    let reasoning = match field("reasoning")? {
        Some(text) => Some(text),
        None => field("reasoning_content")?,
    };
    let refusal = field("refusal")?;
    if reasoning.is_none() && refusal.is_none() {
        return Ok(content);
    }
    let mut text = String::new();
    push_line(&mut text, reasoning.unwrap_or(""));
    push_line(&mut text, &content);
    push_line(&mut text, refusal.unwrap_or(""));
    Ok(Cow::Owned(text))
}

/// `model`, `stream` and `tools`, shared by both APIs.
fn read_common<O: Object>(obj: &O, view: &mut RequestView) -> Result<(), RequestError> {
    view.model = match obj.get("model").map(Json::node) {
        None | Some(Node::Null) => None,
        Some(Node::String(model)) => Some(model.to_owned()),
        Some(other) => return Err(wrong("model".into(), "a string", &other)),
    };
    view.stream = match obj.get("stream").map(Json::node) {
        None | Some(Node::Null) => false,
        Some(Node::Bool(stream)) => stream,
        Some(other) => return Err(wrong("stream".into(), "a boolean", &other)),
    };
    view.tools = array_len(obj, "tools")?;
    view.body_fields = body_fields(obj);
    Ok(())
}

fn role_of<'a, O: Object>(message: &'a O, path: At<'_>) -> Result<&'a str, RequestError> {
    required_str(message, "role", path)
}

fn required_str<'a, O: Object>(
    obj: &'a O,
    key: &str,
    path: At<'_>,
) -> Result<&'a str, RequestError> {
    match obj.get(key).map(Json::node) {
        None => Err(missing(&format!("{path}.{key}"))),
        Some(Node::String(s)) => Ok(s),
        Some(other) => Err(wrong(format!("{path}.{key}"), "a string", &other)),
    }
}

/// The length of an optional array field; absent or null is 0.
fn array_len<O: Object>(obj: &O, key: &str) -> Result<i64, RequestError> {
    match obj.get(key).map(Json::node) {
        None | Some(Node::Null) => Ok(0),
        Some(Node::Array(items)) => Ok(i64::try_from(items.len()).unwrap_or(i64::MAX)),
        Some(other) => Err(wrong(key.into(), "an array or null", &other)),
    }
}

/// A system, developer or user message is its content (OpenAI refuses one without): only
/// assistant turns that call tools, and results, may have none.
fn require_content<O: Object>(message: &O, path: At<'_>) -> Result<(), RequestError> {
    match message.get("content").map(Json::node) {
        None => Err(missing(&format!("{path}.content"))),
        Some(Node::Null) => Err(RequestError::WrongType {
            path: format!("{path}.content"),
            expected: "a string or an array of content parts",
            found: "null",
        }),
        Some(_) => Ok(()),
    }
}

/// The content parts of one API as the router reads them: those whose text the backend reads
/// (with the field holding it), and media, which the backend reads but no text signal does.
/// Any other part type is refused: its text would reach the model unseen by the policy.
pub(crate) struct Parts {
    text: &'static [(&'static str, &'static str)],
    media: &'static [&'static str],
}

/// Chat and Responses content parts, read alike because OpenAI-compatible servers read them
/// alike: vLLM takes `input_text` and `output_text` in chat messages, and renders `thinking`
/// and `refusal` parts as text.
pub(crate) const OPENAI_PARTS: Parts = Parts {
    text: &[
        ("text", "text"),
        ("input_text", "text"),
        ("output_text", "text"),
        ("thinking", "thinking"),
        ("refusal", "refusal"),
    ],
    media: &[
        "image_url",
        "input_image",
        "input_audio",
        "audio_url",
        "video_url",
        "file",
        "input_file",
    ],
};

/// A Responses `reasoning` item's `summary` and `content` parts.
pub(crate) const REASONING_PARTS: Parts = Parts {
    text: &[("summary_text", "text"), ("reasoning_text", "text")],
    media: &[],
};

/// Anthropic's text blocks where only text and images may stand (`system`, a document's
/// `content` source, a search result's `content`).
pub(crate) const TEXT_BLOCKS: Parts = Parts {
    text: &[("text", "text")],
    media: &["image"],
};

/// The text of a message's `content`: a string, null (no text), or content parts.
fn content_text<'a, J: Json>(
    content: Option<&'a J>,
    path: At<'_>,
    known: &Parts,
) -> Result<Cow<'a, str>, RequestError> {
    match content.map(Json::node) {
        None | Some(Node::Null) => Ok(Cow::Borrowed("")),
        Some(Node::String(text)) => Ok(Cow::Borrowed(text)),
        Some(Node::Array(parts)) => Ok(Cow::Owned(parts_text(parts, path.key("content"), known)?)),
        Some(other) => Err(wrong(format!("{path}.content"), CONTENT, &other)),
    }
}

/// The texts of `parts` joined by `\n`; media parts have none, and a part of any other type
/// is [`RequestError::Unreadable`].
fn parts_text<J: Json>(parts: &[J], path: At<'_>, known: &Parts) -> Result<String, RequestError> {
    let mut text = String::new();
    for (i, part) in parts.iter().enumerate() {
        let part_at = path.index(i);
        let part = match part.node() {
            Node::Object(part) => part,
            other => return Err(wrong(part_at.to_string(), "an object", &other)),
        };
        let kind = required_str(part, "type", part_at)?;
        if let Some((_, field)) = known.text.iter().find(|(k, _)| *k == kind) {
            push_line(&mut text, required_str(part, field, part_at)?);
        } else if !known.media.contains(&kind) {
            return Err(unreadable(part_at, kind));
        }
    }
    Ok(text)
}

fn unreadable(at: At<'_>, kind: &str) -> RequestError {
    RequestError::Unreadable {
        path: format!("{at}.type"),
        kind: kind.to_owned(),
    }
}

/// Appends `line` after a `\n`; empty lines are skipped so text-less messages (an assistant
/// turn that only calls tools) leave no blank lines behind.
fn push_line(out: &mut String, line: &str) {
    if line.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(line);
}

/// The request's credential, in every form a door accepts (the forms `client_auth` forwards):
/// the bearer token of `authorization`, else its whole value (`Basic …` and other schemes), else
/// Azure's `api-key`, else Anthropic's `x-api-key`. Whoever holds one credential is one tenant,
/// whichever header carries it.
fn credential(headers: &[(String, String)]) -> Option<String> {
    let value = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    };
    if let Some(auth) = value("authorization") {
        return Some(bearer_token(auth).unwrap_or_else(|| auth.to_owned()))
            .filter(|k| !k.is_empty() && !k.eq_ignore_ascii_case("bearer"));
    }
    value("api-key")
        .or_else(|| value("x-api-key"))
        .map(str::to_owned)
}

fn bearer_token(value: &str) -> Option<String> {
    let value = value.trim();
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then(|| token.to_owned())
}

fn body_object<J: Json>(body: &J) -> Result<&J::Object, RequestError> {
    match body.node() {
        Node::Object(obj) => Ok(obj),
        other => Err(RequestError::Body {
            found: json_kind(&other),
        }),
    }
}

fn missing(path: &str) -> RequestError {
    RequestError::Missing { path: path.into() }
}

/// The error of a value of the wrong kind: `found` is the value or its [`Node`].
fn wrong<K: Kind + ?Sized>(path: String, expected: &'static str, found: &K) -> RequestError {
    RequestError::WrongType {
        path,
        expected,
        found: found.kind(),
    }
}

/// What a wrong value is said to be, in an error.
trait Kind {
    fn kind(&self) -> &'static str;
}

impl<J: Json> Kind for J {
    fn kind(&self) -> &'static str {
        json_kind(&self.node())
    }
}

impl<J: Json> Kind for Node<'_, J> {
    fn kind(&self) -> &'static str {
        json_kind(self)
    }
}

fn json_kind<J: Json>(value: &Node<'_, J>) -> &'static str {
    match value {
        Node::Null => "null",
        Node::Bool(_) => "a boolean",
        Node::Number(_) => "a number",
        Node::String(_) => "a string",
        Node::Array(_) => "an array",
        Node::Object(_) => "an object",
    }
}
