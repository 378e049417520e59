//! A Messages request rewritten as a chat completions request, for a backend that speaks only
//! OpenAI's API (NVIDIA Dynamo, vLLM, the built-in simulator).
//!
//! What has a chat equivalent is carried over: `system` becomes a leading system message, an
//! assistant's `tool_use` blocks its `tool_calls` (the input as JSON text), a user's
//! `tool_result` blocks `tool` messages ahead of the user's own text (an `is_error` result's
//! text after [`TOOL_ERROR_PREFIX`], a result's images in the user message after them, since a
//! `tool` message carries text only), images `image_url` parts, text documents text parts,
//! `tools` functions, `tool_choice`, `stop_sequences` as `stop`, `metadata.user_id` as `user`,
//! and sampling settings by their chat names. A streamed request asks for the final usage chunk
//! (`stream_options.include_usage`), which the streamed answer's `message_delta` reports.
//! Extended thinking blocks and cache-control marks have no chat meaning and are dropped. What
//! chat cannot carry makes the request untranslatable, named by its path, rather than being
//! dropped: Anthropic's server tools (web search, code execution), PDF and Files API documents,
//! Files API images, and block types chat has no form for.
//!
//! The chat form is a tree of typed structs borrowing the client's parsed body, serialised
//! once straight to bytes ([`ChatForm`]); each translated candidate's body is those bytes with
//! its served id as `model`, so no JSON tree is built and nothing is parsed again on the way.
//! It reads the body through the compiler's [`Json`] interface, so the borrowed tree the intake
//! reads a Messages body into translates as a `serde_json::Value` does, byte for byte.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;
use src_compiler::request::{Json, Node, Object};

/// Why a Messages request has no chat form; the client's to fix (400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Untranslatable(pub String);

/// The chat form of a Messages body, serialised without its `model`, which each candidate's
/// body gets first ([`ChatForm::body`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatForm {
    /// The form serialised without `model`: `{"messages":[..],..}` (it always has `messages`),
    /// of which a body takes the members after the opening brace.
    serialised: Vec<u8>,
}

impl ChatForm {
    /// The chat form of a Messages body (already checked by the request view's extraction): a
    /// `serde_json::Value` or the borrowed tree the intake reads bodies into.
    pub fn new<J: Json + Serialize>(body: &J) -> Result<ChatForm, Untranslatable> {
        let request = chat_request(body)?;
        // Serialising borrowed strings and `Value`s cannot fail; `model` is left out.
        let bytes = serde_json::to_vec(&ChatRequest {
            model: None,
            ..request
        })
        .unwrap_or_default();
        Ok(ChatForm { serialised: bytes })
    }

    /// The members after `model`: `"messages":[..],..}`.
    fn members(&self) -> &[u8] {
        self.serialised.get(1..).unwrap_or_default()
    }

    /// The body one candidate is sent: its served id (as JSON) as `model`, then the form.
    pub fn body(&self, served_json: &[u8]) -> Vec<u8> {
        let members = self.members();
        let mut out = Vec::with_capacity(10 + served_json.len() + members.len());
        out.extend_from_slice(b"{\"model\":");
        out.extend_from_slice(served_json);
        out.push(b',');
        out.extend_from_slice(members);
        out
    }

    /// The form as the client's `model` would have it: the body a route's plugins edit.
    pub fn with_model(&self, body: &Value) -> Vec<u8> {
        let model = body
            .get("model")
            .and_then(|m| serde_json::to_vec(m).ok())
            .unwrap_or_else(|| b"null".to_vec());
        self.body(&model)
    }
}

/// A chat completions request borrowing the Messages body it was made from. A field the body
/// does not have (an id, a name) is `None`, which is written as `null`.
#[derive(Debug, Serialize)]
struct ChatRequest<'a, J> {
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a J>,
    messages: Vec<Message<'a, J>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<&'a J>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<&'a J>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<&'a J>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_k: Option<&'a J>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stop: Option<&'a J>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<Tool<'a, J>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<ToolChoice<'a, J>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Message<'a, J> {
    Plain {
        role: &'a str,
        content: Content<'a>,
    },
    Assistant {
        role: &'static str,
        /// `null` when the turn is only tool calls.
        content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall<'a, J>>,
    },
    Tool {
        role: &'static str,
        tool_call_id: Option<&'a J>,
        content: Cow<'a, str>,
    },
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<Part<'a>>),
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text { text: Cow<'a, str> },
    ImageUrl { image_url: ImageUrl<'a> },
}

#[derive(Debug, Serialize)]
struct ImageUrl<'a> {
    url: Cow<'a, str>,
}

#[derive(Debug, Serialize)]
struct ToolCall<'a, J> {
    id: Option<&'a J>,
    #[serde(rename = "type")]
    kind: &'static str,
    function: CallFunction<'a, J>,
}

#[derive(Debug, Serialize)]
struct CallFunction<'a, J> {
    name: Option<&'a J>,
    /// The `tool_use` input as JSON text.
    arguments: String,
}

#[derive(Debug, Serialize)]
struct Tool<'a, J> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: ToolFunction<'a, J>,
}

#[derive(Debug, Serialize)]
struct ToolFunction<'a, J> {
    name: Option<&'a J>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a J>,
    parameters: Schema<'a, J>,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Schema<'a, J> {
    Given(&'a J),
    /// `{"type":"object"}`, for a tool without `input_schema`.
    AnyObject {
        #[serde(rename = "type")]
        kind: &'static str,
    },
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum ToolChoice<'a, J> {
    Mode(&'static str),
    Function {
        #[serde(rename = "type")]
        kind: &'static str,
        function: Named<'a, J>,
    },
}

#[derive(Debug, Serialize)]
struct Named<'a, J> {
    name: Option<&'a J>,
}

#[derive(Debug, Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// The member `key` of `value`, when it is an object that has one.
fn get<'a, J: Json>(value: &'a J, key: &str) -> Option<&'a J> {
    match value.node() {
        Node::Object(obj) => obj.get(key),
        _ => None,
    }
}

fn as_str<J: Json>(value: &J) -> Option<&str> {
    match value.node() {
        Node::String(text) => Some(text),
        _ => None,
    }
}

fn as_array<J: Json>(value: &J) -> Option<&[J]> {
    match value.node() {
        Node::Array(items) => Some(items),
        _ => None,
    }
}

fn as_bool<J: Json>(value: &J) -> Option<bool> {
    match value.node() {
        Node::Bool(b) => Some(b),
        _ => None,
    }
}

fn is_null<J: Json>(value: &J) -> bool {
    matches!(value.node(), Node::Null)
}

/// The chat form of a Messages body (already checked by the request view's extraction), as
/// typed structs borrowing from it.
fn chat_request<J: Json + Serialize>(body: &J) -> Result<ChatRequest<'_, J>, Untranslatable> {
    let Node::Object(obj) = body.node() else {
        return Err(Untranslatable(
            "the request body must be a JSON object".into(),
        ));
    };
    let field = |name: &str| obj.get(name).filter(|v| !is_null(*v));
    let mut messages = Vec::new();
    match obj.get("system").map(Json::node) {
        Some(Node::String(text)) => messages.push(Message::Plain {
            role: "system",
            content: Content::Text(Cow::Borrowed(text)),
        }),
        Some(Node::Array(blocks)) => messages.push(Message::Plain {
            role: "system",
            content: Content::Text(joined(blocks, "\n")),
        }),
        _ => {}
    }
    for (at, message) in obj
        .get("messages")
        .and_then(as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        translate_message(message, at, &mut messages)?;
    }
    let tools = match obj.get("tools").and_then(as_array) {
        Some(tools) => Some(tools.iter().map(tool).collect::<Result<Vec<_>, _>>()?),
        None => None,
    };
    let (tool_choice, parallel_tool_calls) = match field("tool_choice") {
        Some(choice) => tool_choice(choice)?,
        None => (None, None),
    };
    let stream = obj.get("stream").and_then(as_bool) == Some(true);
    Ok(ChatRequest {
        model: obj.get("model"),
        messages,
        max_tokens: field("max_tokens"),
        temperature: field("temperature"),
        top_p: field("top_p"),
        top_k: field("top_k"),
        stop: field("stop_sequences"),
        user: obj
            .get("metadata")
            .and_then(|m| get(m, "user_id"))
            .and_then(as_str),
        tools,
        tool_choice,
        parallel_tool_calls,
        stream: stream.then_some(true),
        stream_options: stream.then_some(StreamOptions {
            include_usage: true,
        }),
    })
}

fn translate_message<'a, J: Json + Serialize>(
    message: &'a J,
    at: usize,
    out: &mut Vec<Message<'a, J>>,
) -> Result<(), Untranslatable> {
    let role = get(message, "role").and_then(as_str).unwrap_or("user");
    let blocks = match get(message, "content").map(Json::node) {
        Some(Node::String(text)) => {
            out.push(Message::Plain {
                role,
                content: Content::Text(Cow::Borrowed(text)),
            });
            return Ok(());
        }
        Some(Node::Array(blocks)) => blocks,
        _ => return Ok(()),
    };
    let path = |i: usize| format!("messages[{at}].content[{i}]");
    if role == "assistant" {
        for (i, block) in blocks.iter().enumerate() {
            match kind(block) {
                Some("text" | "tool_use" | "thinking" | "redacted_thinking") => {}
                other => return Err(no_chat_form(&path(i), other)),
            }
        }
        let text = joined(blocks, "");
        let tool_calls: Vec<ToolCall<'a, J>> = blocks
            .iter()
            .filter(|b| kind(*b) == Some("tool_use"))
            .map(|b| ToolCall {
                id: get(b, "id"),
                kind: "function",
                function: CallFunction {
                    name: get(b, "name"),
                    arguments: get(b, "input").map_or_else(
                        || "{}".to_owned(),
                        // Serialising a parsed tree cannot fail.
                        |input| serde_json::to_string(input).unwrap_or_default(),
                    ),
                },
            })
            .collect();
        let content = if text.is_empty() && !tool_calls.is_empty() {
            None
        } else {
            Some(text.into_owned())
        };
        out.push(Message::Assistant {
            role: "assistant",
            content,
            tool_calls,
        });
        return Ok(());
    }
    // Chat's `tool` messages carry text only: the images of results go in the user message
    // that follows them, each run introduced by the call it came from.
    let mut result_images = Vec::new();
    let mut parts = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        match kind(block) {
            Some("tool_result") => {
                let call = get(block, "tool_use_id");
                let images_before = result_images.len();
                let mut content = result_content(block, &path(i), &mut result_images)?;
                let images = result_images.len() - images_before;
                if images > 0 {
                    let id = call.and_then(as_str).unwrap_or("");
                    result_images.insert(
                        images_before,
                        Part::Text {
                            text: Cow::Owned(format!("Images returned by tool call `{id}`:")),
                        },
                    );
                    let note = format!(
                        "[{images} image(s) of this result follow in the next user message]"
                    );
                    content = Cow::Owned(if content.is_empty() {
                        note
                    } else {
                        format!("{content}\n{note}")
                    });
                }
                if get(block, "is_error").and_then(as_bool) == Some(true) {
                    content = Cow::Owned(format!("{TOOL_ERROR_PREFIX}{content}"));
                }
                out.push(Message::Tool {
                    role: "tool",
                    tool_call_id: call,
                    content,
                });
            }
            Some("text") => {
                if let Some(text) = get(block, "text").and_then(as_str) {
                    parts.push(Part::Text {
                        text: Cow::Borrowed(text),
                    });
                }
            }
            Some("image") => parts.push(image_part(block, &path(i))?),
            Some("document") => document_parts(block, &path(i), &mut parts)?,
            // Thinking has no meaning to another model (docs/anthropic.md).
            Some("thinking" | "redacted_thinking") => {}
            other => return Err(no_chat_form(&path(i), other)),
        }
    }
    let only_results = parts.is_empty() && blocks.iter().any(|b| kind(b) == Some("tool_result"));
    if !result_images.is_empty() || !only_results {
        result_images.append(&mut parts);
        out.push(Message::Plain {
            role,
            content: Content::Parts(result_images),
        });
    }
    Ok(())
}

/// What the `tool` message of a result says before anything else when the result is an error
/// (`is_error: true`): chat has no such flag, so the model reads it in the text.
pub const TOOL_ERROR_PREFIX: &str = "Error: ";

/// A `tool_result`'s content as the `tool` message's text: its text blocks and text documents,
/// joined by newlines; its images go to `images`.
fn result_content<'a, J: Json>(
    block: &'a J,
    path: &str,
    images: &mut Vec<Part<'a>>,
) -> Result<Cow<'a, str>, Untranslatable> {
    let blocks = match get(block, "content").map(Json::node) {
        Some(Node::String(text)) => return Ok(Cow::Borrowed(text)),
        Some(Node::Array(blocks)) => blocks,
        _ => return Ok(Cow::Borrowed("")),
    };
    let mut texts = Vec::new();
    for (i, inner) in blocks.iter().enumerate() {
        let at = format!("{path}.content[{i}]");
        match kind(inner) {
            Some("text") => texts.extend(get(inner, "text").and_then(as_str).map(Cow::Borrowed)),
            Some("image") => images.push(image_part(inner, &at)?),
            Some("document") => {
                let mut parts = Vec::new();
                document_parts(inner, &at, &mut parts)?;
                for part in parts {
                    match part {
                        Part::Text { text } => texts.push(text),
                        image @ Part::ImageUrl { .. } => images.push(image),
                    }
                }
            }
            other => return Err(no_chat_form(&at, other)),
        }
    }
    Ok(match texts.len() {
        0 => Cow::Borrowed(""),
        1 => texts.swap_remove(0),
        _ => Cow::Owned(texts.join("\n")),
    })
}

/// A `document` block as chat parts: a plain-text document (`source.type = "text"`) or one of
/// content blocks (`"content"`) is its `title` and `context` when given, then its text (and a
/// content document's images). A PDF (base64 or by URL) or a Files API document has no chat
/// form: an OpenAI-compatible server cannot be counted on to read it.
fn document_parts<'a, J: Json>(
    block: &'a J,
    path: &str,
    parts: &mut Vec<Part<'a>>,
) -> Result<(), Untranslatable> {
    let source = get(block, "source");
    let source_kind = source.and_then(kind);
    let text_of = |key: &str| get(block, key).and_then(as_str).filter(|t| !t.is_empty());
    let heading = |parts: &mut Vec<Part<'a>>| {
        for text in [text_of("title"), text_of("context")].into_iter().flatten() {
            parts.push(Part::Text {
                text: Cow::Borrowed(text),
            });
        }
    };
    match (source_kind, source) {
        (Some("text"), Some(source)) => {
            heading(parts);
            let data = get(source, "data").and_then(as_str).unwrap_or("");
            parts.push(Part::Text {
                text: Cow::Borrowed(data),
            });
        }
        (Some("content"), Some(source)) => {
            heading(parts);
            match get(source, "content").map(Json::node) {
                Some(Node::String(text)) => parts.push(Part::Text {
                    text: Cow::Borrowed(text),
                }),
                Some(Node::Array(blocks)) => {
                    for (i, inner) in blocks.iter().enumerate() {
                        let at = format!("{path}.source.content[{i}]");
                        match kind(inner) {
                            Some("text") => {
                                parts.extend(get(inner, "text").and_then(as_str).map(|text| {
                                    Part::Text {
                                        text: Cow::Borrowed(text),
                                    }
                                }))
                            }
                            Some("image") => parts.push(image_part(inner, &at)?),
                            other => return Err(no_chat_form(&at, other)),
                        }
                    }
                }
                _ => {}
            }
        }
        _ => {
            let media = source
                .and_then(|s| get(s, "media_type"))
                .and_then(as_str)
                .map(|m| format!(" ({m})"))
                .unwrap_or_default();
            return Err(Untranslatable(format!(
                "`{path}` is a `document` block with a `{}` source{media}, which an OpenAI backend \
                 cannot read; send its text (a `text` source) or route it to an `api = anthropic` \
                 backend",
                source_kind.unwrap_or("missing")
            )));
        }
    }
    Ok(())
}

/// An `image` block as an `image_url` part; an image chat cannot be given by URL or data (a
/// Files API `file_id`) has no chat form.
fn image_part<'a, J: Json>(block: &'a J, path: &str) -> Result<Part<'a>, Untranslatable> {
    match image_url(get(block, "source")) {
        Some(url) => Ok(Part::ImageUrl {
            image_url: ImageUrl { url },
        }),
        None => Err(Untranslatable(format!(
            "`{path}` is an `image` block with a `{}` source, which an OpenAI backend cannot \
             read; send the image as base64 data or by URL",
            get(block, "source").and_then(kind).unwrap_or("missing")
        ))),
    }
}

/// The refusal of a block chat has no form for, naming it: no content is dropped unsaid.
fn no_chat_form(path: &str, kind: Option<&str>) -> Untranslatable {
    Untranslatable(match kind {
        Some(kind) => format!(
            "`{path}` is a `{kind}` block, which has no chat completions form for an OpenAI backend"
        ),
        None => format!("`{path}` is a content block without a `type`"),
    })
}

/// An image block's source as the URL chat takes: a `data:` URL for base64 data.
fn image_url<J: Json>(source: Option<&J>) -> Option<Cow<'_, str>> {
    let source = source?;
    match get(source, "type").and_then(as_str)? {
        "base64" => Some(Cow::Owned(format!(
            "data:{};base64,{}",
            get(source, "media_type").and_then(as_str)?,
            get(source, "data").and_then(as_str)?
        ))),
        "url" => get(source, "url").and_then(as_str).map(Cow::Borrowed),
        _ => None,
    }
}

fn tool<J: Json>(tool: &J) -> Result<Tool<'_, J>, Untranslatable> {
    match get(tool, "type").and_then(as_str) {
        None | Some("custom") => {}
        Some(other) => {
            return Err(Untranslatable(format!(
                "the tool type `{other}` runs on Anthropic's servers and cannot be sent to an OpenAI backend"
            )))
        }
    }
    Ok(Tool {
        kind: "function",
        function: ToolFunction {
            name: get(tool, "name"),
            description: get(tool, "description"),
            parameters: get(tool, "input_schema")
                .map_or(Schema::AnyObject { kind: "object" }, Schema::Given),
        },
    })
}

/// `tool_choice` and `parallel_tool_calls` in chat's terms.
fn tool_choice<J: Json>(
    choice: &J,
) -> Result<(Option<ToolChoice<'_, J>>, Option<bool>), Untranslatable> {
    let translated = match get(choice, "type").and_then(as_str) {
        Some("auto") => ToolChoice::Mode("auto"),
        Some("any") => ToolChoice::Mode("required"),
        Some("none") => ToolChoice::Mode("none"),
        Some("tool") => ToolChoice::Function {
            kind: "function",
            function: Named {
                name: get(choice, "name"),
            },
        },
        _ => {
            return Err(Untranslatable(
                "`tool_choice.type` must be `auto`, `any`, `tool` or `none`".into(),
            ))
        }
    };
    let serial = get(choice, "disable_parallel_tool_use").and_then(as_bool) == Some(true);
    Ok((Some(translated), serial.then_some(false)))
}

fn kind<J: Json>(block: &J) -> Option<&str> {
    get(block, "type").and_then(as_str)
}

/// The text of the `text` blocks among `blocks`, joined by `separator` (borrowed when there is
/// one).
fn joined<'a, J: Json>(blocks: &'a [J], separator: &str) -> Cow<'a, str> {
    let mut texts = blocks
        .iter()
        .filter(|b| kind(*b) == Some("text"))
        .filter_map(|b| get(b, "text").and_then(as_str));
    let Some(first) = texts.next() else {
        return Cow::Borrowed("");
    };
    let Some(second) = texts.next() else {
        return Cow::Borrowed(first);
    };
    let mut out = format!("{first}{separator}{second}");
    for text in texts {
        out.push_str(separator);
        out.push_str(text);
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests;
