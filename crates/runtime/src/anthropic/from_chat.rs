//! A chat completion rewritten as a Messages answer: the first choice's text as a `text`
//! block, its tool calls as `tool_use` blocks (arguments parsed back into `input`), the finish
//! reason as `stop_reason` and the usage in Messages' names ([`super::wire::MessagesUsage`]),
//! where a count the backend did not report is the router's own ([`Counted`]): Messages always
//! has both.
//!
//! The answer is read into typed structs that borrow its bytes, and its strings are kept as the
//! JSON tokens they arrived as (`&RawValue`): a chat string and a Messages string are the same
//! token, so the text, ids and model are copied across without being unescaped or escaped
//! again, and the Messages answer is written straight back as bytes around them. An answer
//! whose fields are not of chat's types is no chat completion.

use std::borrow::Cow;

use bytes::Bytes;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use crate::anthropic::wire::{self, ChatUsage, MessagesUsage};
use crate::openai::Usage;
use crate::relay::counted::Counted;

#[derive(Deserialize)]
struct ChatCompletion<'a> {
    #[serde(default, borrow, deserialize_with = "string")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "string")]
    model: Option<&'a RawValue>,
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
    #[serde(default, borrow, deserialize_with = "string")]
    content: Option<&'a RawValue>,
    #[serde(borrow)]
    tool_calls: Option<Vec<Call<'a>>>,
}

#[derive(Deserialize)]
struct Call<'a> {
    #[serde(default, borrow, deserialize_with = "string")]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    function: Option<Function<'a>>,
}

#[derive(Deserialize)]
struct Function<'a> {
    #[serde(default, borrow, deserialize_with = "string")]
    name: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "text")]
    arguments: Option<Cow<'a, str>>,
}

/// A string or `null`, as its JSON token; any other value fails the answer.
fn string<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<Option<&'a RawValue>, D::Error> {
    let raw = Option::<&'a RawValue>::deserialize(d)?;
    match raw {
        Some(token) if !token.get().starts_with('"') => {
            Err(serde::de::Error::custom("expected a string"))
        }
        _ => Ok(raw),
    }
}

/// A string or `null`, borrowed from the answer unless it has escapes (serde borrows a bare
/// `Cow` field, not one inside an `Option`).
fn text<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<Option<Cow<'a, str>>, D::Error> {
    #[derive(Deserialize)]
    struct Borrowed<'a>(#[serde(borrow)] Cow<'a, str>);
    Ok(Option::<Borrowed<'a>>::deserialize(d)?.map(|b| b.0))
}

/// The Messages form of a chat completion's bytes; `None` when they are no chat completion
/// with a choice to answer with. Its text is added to `counted`.
pub fn message(bytes: &[u8], counted: &Counted) -> Option<Bytes> {
    message_and_usage(bytes, counted).map(|(message, _)| message)
}

/// [`message`], and the usage the chat answer reports as the relay reads it: a relay that
/// rewrites the answer ([`crate::relay::body::Rewrite`]) reads it once for both.
pub fn message_and_usage(bytes: &[u8], counted: &Counted) -> Option<(Bytes, Option<Usage>)> {
    let chat: ChatCompletion = serde_json::from_slice(bytes).ok()?;
    let choice = chat.choices.into_iter().next()?;
    let reply = choice.message;
    // The answer is the chat answer's tokens and about a hundred bytes of names around them.
    let mut out = Vec::with_capacity(bytes.len() + 128);
    out.extend_from_slice(b"{\"id\":");
    write_message_id(&mut out, chat.id);
    out.extend_from_slice(b",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
    write_token(&mut out, chat.model);
    out.extend_from_slice(b",\"content\":[");
    let mut blocks = 0;
    if let Some(text) = reply.content.filter(|t| t.get() != "\"\"") {
        counted.add_output(text_len(text));
        out.extend_from_slice(b"{\"type\":\"text\",\"text\":");
        out.extend_from_slice(text.get().as_bytes());
        out.push(b'}');
        blocks += 1;
    }
    for call in reply.tool_calls.into_iter().flatten() {
        let (name, arguments) = match call.function {
            Some(f) => (f.name, f.arguments),
            None => (None, None),
        };
        if blocks > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"type\":\"tool_use\",\"id\":");
        write_token(&mut out, call.id);
        out.extend_from_slice(b",\"name\":");
        write_token(&mut out, name);
        out.extend_from_slice(b",\"input\":");
        let arguments = arguments.as_deref().unwrap_or("");
        counted.add_output(arguments.len());
        write_value(&mut out, &tool_input(arguments));
        out.push(b'}');
        blocks += 1;
    }
    out.extend_from_slice(b"],\"stop_reason\":");
    match choice.finish_reason.as_deref().map(wire::stop_reason) {
        Some(reason) => {
            out.push(b'"');
            out.extend_from_slice(reason.as_bytes());
            out.push(b'"');
        }
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"stop_sequence\":null,\"usage\":");
    MessagesUsage::counted(chat.usage, counted).write_json(&mut out);
    out.push(b'}');
    Some((Bytes::from(out), chat.usage.map(Usage::from)))
}

/// The length of the text a string token stands for: the token less its quotes, unless it has
/// escapes to decode first.
fn text_len(token: &RawValue) -> usize {
    let raw = token.get();
    if raw.contains('\\') {
        serde_json::from_str::<String>(raw).map_or(0, |text| text.len())
    } else {
        raw.len().saturating_sub(2)
    }
}

/// A string token as it came, or `null`.
fn write_token(out: &mut Vec<u8>, token: Option<&RawValue>) {
    match token {
        Some(token) => out.extend_from_slice(token.get().as_bytes()),
        None => out.extend_from_slice(b"null"),
    }
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    // Writing a `Value` into memory cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

/// [`message_id`] of the chat id token. An id without escapes is rewritten on its token (the
/// prefix is plain ASCII, so the token starts with it exactly when the id does); one with
/// escapes is decoded first.
fn write_message_id(out: &mut Vec<u8>, token: Option<&RawValue>) {
    let inner = token
        .map(|t| t.get())
        .and_then(|t| t.strip_prefix('"'))
        .and_then(|t| t.strip_suffix('"'));
    match inner {
        Some(inner) if !inner.contains('\\') => {
            out.extend_from_slice(b"\"msg_");
            out.extend_from_slice(
                inner
                    .strip_prefix(CHAT_ID_PREFIX)
                    .unwrap_or(inner)
                    .as_bytes(),
            );
            out.push(b'"');
        }
        Some(_) => {
            let id: Option<String> = token.and_then(|t| serde_json::from_str(t.get()).ok());
            write_value(out, &Value::String(message_id(id.as_deref())));
        }
        None => write_value(out, &Value::String(message_id(None))),
    }
}

/// What an OpenAI-compatible server puts before a chat completion's id.
const CHAT_ID_PREFIX: &str = "chatcmpl-";

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
    let id = id.strip_prefix(CHAT_ID_PREFIX).unwrap_or(id);
    format!("msg_{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`message`] over `chat`'s bytes, parsed back.
    fn translated(chat: &Value) -> Option<Value> {
        let bytes = message(chat.to_string().as_bytes(), &Counted::default())?;
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
    fn strings_keep_their_escapes_and_other_types_are_no_answer() {
        // Escapes, a quote, a control character and non-ASCII text cross unchanged in meaning.
        let text = "line one\nsaid \"hi\" \u{1} café \u{1F600}";
        let chat = json!({
            "id": "chatcmpl-\"odd\"", "model": null,
            "choices": [{"message": {"content": text}, "finish_reason": null}]
        });
        assert_eq!(
            translated(&chat),
            Some(json!({
                "id": "msg_\"odd\"", "type": "message", "role": "assistant", "model": null,
                "content": [{"type": "text", "text": text}],
                "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 0, "output_tokens": text.len().div_ceil(4)}
            }))
        );
        // A chat id escaped where the prefix is still loses the prefix.
        let escaped = br#"{"id":"\u0063hatcmpl-9","choices":[{"message":{"content":""}}]}"#;
        let message: Option<Value> =
            message(escaped, &Counted::default()).and_then(|b| serde_json::from_slice(&b).ok());
        assert_eq!(message.as_ref().map(|m| &m["id"]), Some(&json!("msg_9")));
        assert_eq!(message.as_ref().map(|m| &m["content"]), Some(&json!([])));
        for wrong in [
            json!({"id": 7, "choices": [{"message": {"content": "x"}}]}),
            json!({"model": ["m"], "choices": [{"message": {"content": "x"}}]}),
            json!({"choices": [{"message": {"content": [{"type": "text"}]}}]}),
            json!({"choices": [{"message": {"tool_calls": [{"id": {}, "function": {}}]}}]}),
        ] {
            assert_eq!(translated(&wrong), None, "{wrong}");
        }
    }

    #[test]
    fn counts_the_backend_left_out_are_the_routers() {
        let counted = Counted::of_request("what is the weather in Paris today?");
        let chat = json!({"id": "chatcmpl-1", "model": "m", "choices": [{"finish_reason": "tool_calls",
            "message": {"content": "let me look",
                "tool_calls": [{"id": "c", "function": {"name": "w", "arguments": "{\"city\":\"Paris\"}"}}]}}]});
        let bytes = message(chat.to_string().as_bytes(), &counted).unwrap_or_default();
        let answer: Value = serde_json::from_slice(&bytes).unwrap_or_default();
        // 35 bytes of history; 11 of text and 16 of arguments.
        assert_eq!(
            answer["usage"],
            json!({"input_tokens": 9, "output_tokens": 7})
        );
        assert_eq!(counted.output_tokens(), 7);
        let mut half = chat.clone();
        half["usage"] = json!({"prompt_tokens": 40});
        let bytes = message(half.to_string().as_bytes(), &Counted::default()).unwrap_or_default();
        let answer: Value = serde_json::from_slice(&bytes).unwrap_or_default();
        assert_eq!(
            answer["usage"],
            json!({"input_tokens": 40, "output_tokens": 7})
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
