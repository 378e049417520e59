//! A chat completion rewritten as a Messages answer: the first choice's text as a `text`
//! block, its tool calls as `tool_use` blocks (arguments parsed back into `input`), the finish
//! reason as `stop_reason` and the usage in Messages' names ([`super::wire::MessagesUsage`]).
//!
//! The answer is read into typed structs that borrow its bytes (its text is copied only where
//! it has escapes) and written straight back as bytes, without a JSON tree either way. An
//! answer whose fields are not of chat's types is no chat completion.

use std::borrow::Cow;

use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{json, Map, Value};

use crate::anthropic::wire::{self, ChatUsage, MessagesUsage};

#[derive(Deserialize)]
struct ChatCompletion<'a> {
    #[serde(default, borrow, deserialize_with = "text")]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "text")]
    model: Option<Cow<'a, str>>,
    #[serde(borrow)]
    choices: Vec<Choice<'a>>,
    usage: Option<ChatUsage>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow)]
    message: Reply<'a>,
    #[serde(default, borrow, deserialize_with = "text")]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Reply<'a> {
    #[serde(default, borrow, deserialize_with = "text")]
    content: Option<Cow<'a, str>>,
    #[serde(borrow)]
    tool_calls: Option<Vec<Call<'a>>>,
}

#[derive(Deserialize)]
struct Call<'a> {
    #[serde(default, borrow, deserialize_with = "text")]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    function: Option<Function<'a>>,
}

#[derive(Deserialize)]
struct Function<'a> {
    #[serde(default, borrow, deserialize_with = "text")]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "text")]
    arguments: Option<Cow<'a, str>>,
}

/// A string or `null`, borrowed from the answer unless it has escapes (serde borrows a bare
/// `Cow` field, not one inside an `Option`).
fn text<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<Option<Cow<'a, str>>, D::Error> {
    #[derive(Deserialize)]
    struct Borrowed<'a>(#[serde(borrow)] Cow<'a, str>);
    Ok(Option::<Borrowed<'a>>::deserialize(d)?.map(|b| b.0))
}

#[derive(Serialize)]
struct Message<'a> {
    id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    model: Option<Cow<'a, str>>,
    content: Vec<Block<'a>>,
    stop_reason: Option<&'static str>,
    stop_sequence: Option<&'static str>,
    usage: MessagesUsage,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: Cow<'a, str>,
    },
    ToolUse {
        id: Option<Cow<'a, str>>,
        name: Option<Cow<'a, str>>,
        input: Value,
    },
}

/// The Messages form of a chat completion's bytes; `None` when they are no chat completion
/// with a choice to answer with.
pub fn message(chat: &[u8]) -> Option<Bytes> {
    let chat: ChatCompletion = serde_json::from_slice(chat).ok()?;
    let choice = chat.choices.into_iter().next()?;
    let reply = choice.message;
    let mut content = Vec::new();
    if let Some(text) = reply.content.filter(|t| !t.is_empty()) {
        content.push(Block::Text { text });
    }
    for call in reply.tool_calls.into_iter().flatten() {
        let (name, arguments) = match call.function {
            Some(f) => (f.name, f.arguments),
            None => (None, None),
        };
        content.push(Block::ToolUse {
            id: call.id,
            name,
            input: tool_input(arguments.as_deref().unwrap_or("")),
        });
    }
    let message = Message {
        id: message_id(chat.id.as_deref()),
        kind: "message",
        role: "assistant",
        model: chat.model,
        content,
        stop_reason: choice.finish_reason.as_deref().map(wire::stop_reason),
        stop_sequence: None,
        usage: chat.usage.map(MessagesUsage::from).unwrap_or_default(),
    };
    // Serialising strings, numbers and `Value`s cannot fail.
    serde_json::to_vec(&message).ok().map(Bytes::from)
}

/// A tool call's arguments as the object `tool_use.input` must be; arguments that are no JSON
/// object (a model's malformed call) are kept whole under `arguments` rather than lost.
pub fn tool_input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return Value::Object(Map::new());
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(input)) => Value::Object(input),
        _ => json!({"arguments": arguments}),
    }
}

/// `msg_` and the chat id, so a log line's id is found in both forms.
pub fn message_id(chat_id: Option<&str>) -> String {
    let id = chat_id.unwrap_or("");
    let id = id.strip_prefix("chatcmpl-").unwrap_or(id);
    format!("msg_{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`message`] over `chat`'s bytes, parsed back.
    fn translated(chat: &Value) -> Option<Value> {
        let bytes = message(chat.to_string().as_bytes())?;
        serde_json::from_slice(&bytes).ok()
    }

    #[test]
    fn text_and_tool_calls_become_blocks() {
        let chat = json!({
            "id": "chatcmpl-7", "object": "chat.completion", "model": "Qwen/Qwen3-0.6B",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "let me look",
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}]
            }}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17, "prompt_tokens_details": {"cached_tokens": 8}}
        });
        assert_eq!(
            translated(&chat),
            Some(json!({
                "id": "msg_7", "type": "message", "role": "assistant", "model": "Qwen/Qwen3-0.6B",
                "content": [
                    {"type": "text", "text": "let me look"},
                    {"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Paris"}}
                ],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 12, "output_tokens": 5, "cache_read_input_tokens": 8}
            }))
        );
    }

    #[test]
    fn malformed_arguments_are_kept_and_no_choice_is_no_message() {
        assert_eq!(tool_input("{not json"), json!({"arguments": "{not json"}));
        assert_eq!(tool_input(""), json!({}));
        assert_eq!(translated(&json!({"choices": []})), None);
        assert_eq!(translated(&json!({"error": {"message": "x"}})), None);
    }
}
