//! A streamed chat answer turned back into the `chat.completion` it streams, so a streaming
//! request's answer can be stored like a whole one (and replayed to either kind of request).
//!
//! Only plain text answers are assembled: each choice's `delta.content` pieces joined, its role
//! and last `finish_reason`, and the `usage` chunk when the stream carried one. A stream with tool
//! calls, a refusal, log probabilities, an error event, a choice that never finished, or no
//! `data: [DONE]` is not assembled — it is not stored rather than stored wrong.

use bytes::Bytes;
use serde_json::{json, Map, Value};

/// One choice as the chunks build it.
#[derive(Default)]
struct Choice {
    role: Option<String>,
    content: String,
    finish_reason: Option<Value>,
}

/// The `chat.completion` an event stream carried, or `None` (see the module comment).
pub fn chat_completion(stream: &[u8]) -> Option<Bytes> {
    let text = std::str::from_utf8(stream).ok()?;
    let mut head: Option<Map<String, Value>> = None;
    let mut choices: Vec<Choice> = Vec::new();
    let mut usage: Option<Value> = None;
    let mut done = false;
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let data = data.trim();
        if data == "[DONE]" {
            done = true;
            break;
        }
        let Value::Object(chunk) = serde_json::from_str::<Value>(data).ok()? else {
            return None;
        };
        if chunk.get("object").and_then(Value::as_str) != Some("chat.completion.chunk") {
            return None;
        }
        if head.is_none() {
            let mut h = Map::new();
            for key in ["id", "created", "model", "system_fingerprint"] {
                if let Some(v) = chunk.get(key).filter(|v| !v.is_null()) {
                    h.insert(key.to_owned(), v.clone());
                }
            }
            head = Some(h);
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            usage = Some(u.clone());
        }
        for c in chunk.get("choices").and_then(Value::as_array)? {
            let index = usize::try_from(c.get("index")?.as_u64()?).ok()?;
            if index >= 128 {
                return None;
            }
            if c.get("logprobs").is_some_and(|l| !l.is_null()) {
                return None;
            }
            if choices.len() <= index {
                choices.resize_with(index + 1, Choice::default);
            }
            let choice = &mut choices[index];
            if let Some(delta) = c.get("delta").and_then(Value::as_object) {
                for (key, value) in delta {
                    match (key.as_str(), value) {
                        (_, Value::Null) => {}
                        ("role", Value::String(r)) => choice.role = Some(r.clone()),
                        ("content", Value::String(s)) => choice.content.push_str(s),
                        // Tool calls, refusals, reasoning and anything else: not assembled.
                        _ => return None,
                    }
                }
            }
            if let Some(reason) = c.get("finish_reason").filter(|r| !r.is_null()) {
                choice.finish_reason = Some(reason.clone());
            }
        }
    }
    if !done || choices.is_empty() || choices.iter().any(|c| c.finish_reason.is_none()) {
        return None;
    }
    let mut answer = head?;
    answer.insert("object".into(), json!("chat.completion"));
    let choices: Vec<Value> = choices
        .into_iter()
        .enumerate()
        .map(|(index, c)| {
            json!({
                "index": index,
                "message": {
                    "role": c.role.unwrap_or_else(|| "assistant".into()),
                    "content": c.content,
                },
                "finish_reason": c.finish_reason,
            })
        })
        .collect();
    answer.insert("choices".into(), Value::Array(choices));
    if let Some(usage) = usage {
        answer.insert("usage".into(), usage);
    }
    serde_json::to_vec(&Value::Object(answer))
        .ok()
        .map(Bytes::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(chunks: &[&str]) -> Vec<u8> {
        let mut out = String::new();
        for c in chunks {
            out.push_str("data: ");
            out.push_str(c);
            out.push_str("\n\n");
        }
        out.into_bytes()
    }

    const HEAD: &str = r#""id":"c1","object":"chat.completion.chunk","created":7,"model":"m""#;

    #[test]
    fn a_text_stream_becomes_its_completion() {
        let stream = events(&[
            &format!(
                r#"{{{HEAD},"choices":[{{"index":0,"delta":{{"role":"assistant","content":""}},"finish_reason":null}}]}}"#
            ),
            &format!(
                r#"{{{HEAD},"choices":[{{"index":0,"delta":{{"content":"Hel"}},"finish_reason":null}}]}}"#
            ),
            &format!(
                r#"{{{HEAD},"choices":[{{"index":0,"delta":{{"content":"lo"}},"finish_reason":"stop"}}]}}"#
            ),
            &format!(
                r#"{{{HEAD},"choices":[],"usage":{{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}}}"#
            ),
            "[DONE]",
        ]);
        let whole: Value =
            serde_json::from_slice(&chat_completion(&stream).expect("assembled")).expect("json");
        assert_eq!(whole["object"], "chat.completion");
        assert_eq!(whole["id"], "c1");
        assert_eq!(whole["model"], "m");
        assert_eq!(whole["choices"][0]["message"]["role"], "assistant");
        assert_eq!(whole["choices"][0]["message"]["content"], "Hello");
        assert_eq!(whole["choices"][0]["finish_reason"], "stop");
        assert_eq!(whole["usage"]["total_tokens"], 5);
    }

    #[test]
    fn streams_that_cannot_be_assembled_faithfully_are_refused() {
        let unfinished = events(&[
            &format!(
                r#"{{{HEAD},"choices":[{{"index":0,"delta":{{"content":"Hel"}},"finish_reason":null}}]}}"#
            ),
            "[DONE]",
        ]);
        assert!(
            chat_completion(&unfinished).is_none(),
            "a choice never finished"
        );
        let cut = events(&[&format!(
            r#"{{{HEAD},"choices":[{{"index":0,"delta":{{"content":"Hi"}},"finish_reason":"stop"}}]}}"#
        )]);
        assert!(chat_completion(&cut).is_none(), "no [DONE]");
        let tools = events(&[
            &format!(
                r#"{{{HEAD},"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"name":"f","arguments":"{{}}"}}}}]}},"finish_reason":"tool_calls"}}]}}"#
            ),
            "[DONE]",
        ]);
        assert!(chat_completion(&tools).is_none(), "tool calls");
        let error = events(&[r#"{"error":{"message":"overloaded"}}"#, "[DONE]"]);
        assert!(chat_completion(&error).is_none(), "an error event");
    }
}
