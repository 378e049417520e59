//! A stored answer replayed for a streaming chat request: the same completion as an event
//! stream, one `chat.completion.chunk` per choice carrying its whole message in one
//! delta, then one chunk with every choice's `finish_reason` and the stored `usage`, then
//! `data: [DONE]`.

use bytes::Bytes;
use serde_json::{json, Map, Value};

/// A stored `chat.completion` as the event stream a streaming request expects; `None` when
/// the body is not a chat completion with choices.
pub fn chat_stream(body: &[u8]) -> Option<Bytes> {
    let Value::Object(answer) = serde_json::from_slice::<Value>(body).ok()? else {
        return None;
    };
    let choices = answer.get("choices")?.as_array()?;
    if choices.is_empty() {
        return None;
    }
    let mut head = Map::new();
    head.insert(
        "id".into(),
        answer.get("id").cloned().unwrap_or(Value::Null),
    );
    head.insert("object".into(), Value::from("chat.completion.chunk"));
    for key in ["created", "model", "system_fingerprint", "service_tier"] {
        if let Some(v) = answer.get(key) {
            head.insert(key.into(), v.clone());
        }
    }
    let mut out = String::new();
    let mut finishes = Vec::with_capacity(choices.len());
    for (i, choice) in choices.iter().enumerate() {
        let index = choice
            .get("index")
            .cloned()
            .unwrap_or_else(|| Value::from(i));
        let mut delta = match choice.get("message") {
            Some(Value::Object(message)) => message.clone(),
            _ => Map::new(),
        };
        // Streamed tool calls carry their position.
        if let Some(Value::Array(calls)) = delta.get_mut("tool_calls") {
            for (n, call) in calls.iter_mut().enumerate() {
                if let Value::Object(call) = call {
                    call.entry("index").or_insert_with(|| Value::from(n));
                }
            }
        }
        let mut chunk_choice = json!({"index": index, "delta": delta, "finish_reason": null});
        if let Some(logprobs) = choice.get("logprobs") {
            chunk_choice["logprobs"] = logprobs.clone();
        }
        event(&mut out, &head, Value::Array(vec![chunk_choice]), None);
        finishes.push(json!({
            "index": index,
            "delta": {},
            "finish_reason": choice.get("finish_reason").cloned().unwrap_or(Value::Null),
        }));
    }
    event(&mut out, &head, Value::Array(finishes), answer.get("usage"));
    out.push_str("data: [DONE]\n\n");
    Some(Bytes::from(out))
}

fn event(out: &mut String, head: &Map<String, Value>, choices: Value, usage: Option<&Value>) {
    let mut chunk = head.clone();
    chunk.insert("choices".into(), choices);
    if let Some(usage) = usage {
        chunk.insert("usage".into(), usage.clone());
    }
    out.push_str("data: ");
    out.push_str(&Value::Object(chunk).to_string());
    out.push_str("\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(stream: &[u8]) -> Vec<String> {
        String::from_utf8_lossy(stream)
            .split("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn a_completion_replays_as_one_delta_a_finish_and_done() {
        let stored = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 7, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello there"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        });
        let stream = chat_stream(stored.to_string().as_bytes()).unwrap_or_default();
        let events = events(&stream);
        assert_eq!(events.len(), 3, "{events:?}");
        let first: Value = serde_json::from_str(&events[0]).unwrap_or(Value::Null);
        assert_eq!(first["object"], "chat.completion.chunk");
        assert_eq!(first["id"], "chatcmpl-1");
        assert_eq!(first["choices"][0]["delta"]["content"], "Hello there");
        assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
        assert!(first["choices"][0]["finish_reason"].is_null());
        assert!(first.get("usage").is_none());
        let last: Value = serde_json::from_str(&events[1]).unwrap_or(Value::Null);
        assert_eq!(last["choices"][0]["finish_reason"], "stop");
        assert_eq!(last["usage"], stored["usage"]);
        assert_eq!(events[2], "[DONE]");
    }

    #[test]
    fn tool_calls_get_their_stream_index() {
        let stored = json!({
            "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": "c1", "type": "function",
                                "function": {"name": "f", "arguments": "{}"}}]}}],
        });
        let stream = chat_stream(stored.to_string().as_bytes()).unwrap_or_default();
        let first: Value = serde_json::from_str(&events(&stream)[0]).unwrap_or(Value::Null);
        assert_eq!(first["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
    }

    #[test]
    fn what_is_not_a_completion_cannot_be_replayed() {
        assert_eq!(chat_stream(b"{}"), None);
        assert_eq!(chat_stream(b"nope"), None);
        assert_eq!(chat_stream(br#"{"choices":[]}"#), None);
    }
}
