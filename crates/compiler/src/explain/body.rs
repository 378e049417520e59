//! Which front door a pasted request body belongs to, and the request view that door reads
//! from it, so `src explain` and the console's explain box decide a body exactly as the door of
//! `src serve` that takes it: a chat completion, a Responses request or an Anthropic Messages
//! request.
//!
//! A body that could be either chat or Messages (one user string and `max_tokens`) reads the
//! same way in both, so only what one API has and the other lacks decides: `input` without
//! `messages` is Responses; a top-level `system`, an `anthropic-version` header or a content
//! block only Messages has (`tool_use`, `tool_result`, `document`, `thinking`, an image with a
//! `source`) is Messages; anything else is chat.

use serde_json::Value;

use crate::failover::Wire;
use crate::request::{RequestError, RequestView};

/// The content block types only the Messages API has.
const MESSAGES_ONLY_BLOCKS: &[&str] = &[
    "tool_use",
    "tool_result",
    "document",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
];

/// The API `body` speaks, as [`detect`] decides when the caller does not say.
pub fn detect(body: &Value, headers: &[(String, String)]) -> Wire {
    if body.get("input").is_some() && body.get("messages").is_none() {
        return Wire::Responses;
    }
    let anthropic_header = headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("anthropic-version"));
    if anthropic_header || body.get("system").is_some() || has_messages_only_block(body) {
        return Wire::Messages;
    }
    Wire::Chat
}

fn has_messages_only_block(body: &Value) -> bool {
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return false;
    };
    messages
        .iter()
        .filter_map(|m| m.get("content").and_then(Value::as_array))
        .flatten()
        .any(|block| {
            let kind = block
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default();
            MESSAGES_ONLY_BLOCKS.contains(&kind)
                || (kind == "image" && block.get("source").is_some())
        })
}

/// Reads `body` as the door for `api` (or the detected one) reads it.
pub fn read_body(
    body: &Value,
    headers: &[(String, String)],
    api: Option<Wire>,
) -> Result<(RequestView, Wire), RequestError> {
    let wire = api.unwrap_or_else(|| detect(body, headers));
    let view = match wire {
        Wire::Chat => RequestView::from_chat(body, headers),
        Wire::Responses => RequestView::from_responses(body, headers),
        Wire::Messages => RequestView::from_messages(body, headers),
    }?;
    Ok((view, wire))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_api_is_told_by_what_only_it_has() {
        let none: &[(String, String)] = &[];
        let chat = json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 9});
        assert_eq!(detect(&chat, none), Wire::Chat);
        let responses = json!({"input": "hi"});
        assert_eq!(detect(&responses, none), Wire::Responses);
        let system = json!({"system": "be brief", "max_tokens": 9,
            "messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(detect(&system, none), Wire::Messages);
        let tool_loop = json!({"max_tokens": 9, "messages": [
            {"role": "user", "content": "run it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "sh", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}
        ]});
        assert_eq!(detect(&tool_loop, none), Wire::Messages);
        let versioned = [("Anthropic-Version".to_string(), "2023-06-01".to_string())];
        assert_eq!(detect(&chat, &versioned), Wire::Messages);
        let chat_image = json!({"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:,"}}]}]});
        assert_eq!(detect(&chat_image, none), Wire::Chat);
    }

    #[test]
    fn a_messages_body_reads_its_top_level_system() {
        let body = json!({"system": "you review code", "max_tokens": 9,
            "messages": [{"role": "user", "content": "hi"}]});
        let (view, wire) = read_body(&body, &[], None).expect("a Messages body");
        assert_eq!(wire, Wire::Messages);
        assert_eq!(view.system, "you review code");
        let (as_chat, _) = read_body(&body, &[], Some(Wire::Chat)).expect("chat ignores system");
        assert_eq!(as_chat.system, "", "chat has no top-level system");
    }
}
