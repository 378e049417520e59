//! A chat completion rewritten as a Messages answer: the first choice's text as a `text`
//! block, its tool calls as `tool_use` blocks (arguments parsed back into `input`), the finish
//! reason as `stop_reason` and the usage in Messages' names ([`super::wire::usage`]).

use serde_json::{json, Map, Value};

use crate::anthropic::wire;

/// The Messages form of a chat completion; `None` when `chat` has no choice to answer with.
pub fn message(chat: &Value) -> Option<Value> {
    let choice = chat.get("choices")?.as_array()?.first()?;
    let reply = choice.get("message")?;
    let mut content = Vec::new();
    if let Some(text) = reply
        .get("content")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        content.push(json!({"type": "text", "text": text}));
    }
    for call in reply
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let function = call.get("function");
        let arguments = function
            .and_then(|f| f.get("arguments"))
            .and_then(Value::as_str)
            .unwrap_or("");
        content.push(json!({
            "type": "tool_use",
            "id": call.get("id").cloned().unwrap_or(Value::Null),
            "name": function.and_then(|f| f.get("name")).cloned().unwrap_or(Value::Null),
            "input": tool_input(arguments),
        }));
    }
    let stop_reason = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .map(wire::stop_reason);
    let usage = chat.get("usage").map(wire::usage).unwrap_or_default();
    Some(json!({
        "id": message_id(chat.get("id").and_then(Value::as_str)),
        "type": "message",
        "role": "assistant",
        "model": chat.get("model").cloned().unwrap_or(Value::Null),
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": usage,
    }))
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
            message(&chat),
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
        assert_eq!(message(&json!({"choices": []})), None);
        assert_eq!(message(&json!({"error": {"message": "x"}})), None);
    }
}
