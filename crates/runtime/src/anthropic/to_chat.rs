//! A Messages request rewritten as a chat completions request, for a backend that speaks only
//! OpenAI's API (NVIDIA Dynamo, vLLM, the built-in simulator).
//!
//! What has a chat equivalent is carried over: `system` becomes a leading system message, an
//! assistant's `tool_use` blocks its `tool_calls` (the input as JSON text), a user's
//! `tool_result` blocks `tool` messages ahead of the user's own text, images `image_url` parts,
//! `tools` functions, `tool_choice`, `stop_sequences` as `stop`, `metadata.user_id` as `user`,
//! and sampling settings by their chat names. A streamed request asks for the final usage chunk
//! (`stream_options.include_usage`), which the streamed answer's `message_delta` reports.
//! Extended thinking blocks and cache-control marks have no chat meaning and are dropped;
//! Anthropic's server tools (web search, code execution) cannot run on such a backend and make
//! the request untranslatable.

use serde_json::{json, Map, Value};

/// Why a Messages request has no chat form; the client's to fix (400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Untranslatable(pub String);

/// The chat form of a Messages body (already checked by the request view's extraction).
pub fn chat_request(body: &Value) -> Result<Value, Untranslatable> {
    let Some(obj) = body.as_object() else {
        return Err(Untranslatable(
            "the request body must be a JSON object".into(),
        ));
    };
    let mut out = Map::new();
    if let Some(model) = obj.get("model") {
        out.insert("model".into(), model.clone());
    }
    let mut messages = Vec::new();
    match obj.get("system") {
        Some(Value::String(text)) => messages.push(json!({"role": "system", "content": text})),
        Some(Value::Array(blocks)) => {
            let text = block_texts(blocks).join("\n");
            messages.push(json!({"role": "system", "content": text}));
        }
        _ => {}
    }
    for message in obj
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        translate_message(message, &mut messages);
    }
    out.insert("messages".into(), Value::Array(messages));
    for (from, to) in [
        ("max_tokens", "max_tokens"),
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("top_k", "top_k"),
        ("stop_sequences", "stop"),
    ] {
        if let Some(value) = obj.get(from).filter(|v| !v.is_null()) {
            out.insert(to.into(), value.clone());
        }
    }
    if let Some(user) = obj
        .get("metadata")
        .and_then(|m| m.get("user_id"))
        .and_then(Value::as_str)
    {
        out.insert("user".into(), user.into());
    }
    if let Some(tools) = obj.get("tools").and_then(Value::as_array) {
        let tools = tools.iter().map(tool).collect::<Result<Vec<_>, _>>()?;
        out.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = obj.get("tool_choice").filter(|v| !v.is_null()) {
        tool_choice(choice, &mut out)?;
    }
    if obj.get("stream").and_then(Value::as_bool) == Some(true) {
        out.insert("stream".into(), true.into());
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok(Value::Object(out))
}

fn translate_message(message: &Value, out: &mut Vec<Value>) {
    let role = message
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or("user");
    let blocks = match message.get("content") {
        Some(Value::String(text)) => {
            out.push(json!({"role": role, "content": text}));
            return;
        }
        Some(Value::Array(blocks)) => blocks,
        _ => return,
    };
    if role == "assistant" {
        let text = block_texts(blocks).join("");
        let calls: Vec<Value> = blocks
            .iter()
            .filter(|b| kind(b) == Some("tool_use"))
            .map(|b| {
                let input = b.get("input").cloned().unwrap_or_else(|| json!({}));
                json!({
                    "id": b.get("id").cloned().unwrap_or(Value::Null),
                    "type": "function",
                    "function": {
                        "name": b.get("name").cloned().unwrap_or(Value::Null),
                        "arguments": input.to_string(),
                    },
                })
            })
            .collect();
        let mut assistant = Map::new();
        assistant.insert("role".into(), "assistant".into());
        let content = if text.is_empty() && !calls.is_empty() {
            Value::Null
        } else {
            Value::String(text)
        };
        assistant.insert("content".into(), content);
        if !calls.is_empty() {
            assistant.insert("tool_calls".into(), Value::Array(calls));
        }
        out.push(Value::Object(assistant));
        return;
    }
    let mut parts = Vec::new();
    for block in blocks {
        match kind(block) {
            Some("tool_result") => {
                let content = match block.get("content") {
                    Some(Value::String(text)) => text.clone(),
                    Some(Value::Array(parts)) => block_texts(parts).join("\n"),
                    _ => String::new(),
                };
                out.push(json!({
                    "role": "tool",
                    "tool_call_id": block.get("tool_use_id").cloned().unwrap_or(Value::Null),
                    "content": content,
                }));
            }
            Some("text") => {
                if let Some(text) = block.get("text") {
                    parts.push(json!({"type": "text", "text": text}));
                }
            }
            Some("image") => {
                if let Some(url) = image_url(block.get("source")) {
                    parts.push(json!({"type": "image_url", "image_url": {"url": url}}));
                }
            }
            _ => {}
        }
    }
    let only_results = parts.is_empty() && blocks.iter().any(|b| kind(b) == Some("tool_result"));
    if !only_results {
        out.push(json!({"role": role, "content": parts}));
    }
}

/// An image block's source as the URL chat takes: a `data:` URL for base64 data.
fn image_url(source: Option<&Value>) -> Option<String> {
    let source = source?;
    match source.get("type").and_then(Value::as_str)? {
        "base64" => Some(format!(
            "data:{};base64,{}",
            source.get("media_type").and_then(Value::as_str)?,
            source.get("data").and_then(Value::as_str)?
        )),
        "url" => source.get("url").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

fn tool(tool: &Value) -> Result<Value, Untranslatable> {
    match tool.get("type").and_then(Value::as_str) {
        None | Some("custom") => {}
        Some(other) => {
            return Err(Untranslatable(format!(
                "the tool type `{other}` runs on Anthropic's servers and cannot be sent to an OpenAI backend"
            )))
        }
    }
    let mut function = Map::new();
    function.insert(
        "name".into(),
        tool.get("name").cloned().unwrap_or(Value::Null),
    );
    if let Some(description) = tool.get("description") {
        function.insert("description".into(), description.clone());
    }
    function.insert(
        "parameters".into(),
        tool.get("input_schema")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object"})),
    );
    Ok(json!({"type": "function", "function": function}))
}

fn tool_choice(choice: &Value, out: &mut Map<String, Value>) -> Result<(), Untranslatable> {
    let translated = match choice.get("type").and_then(Value::as_str) {
        Some("auto") => json!("auto"),
        Some("any") => json!("required"),
        Some("none") => json!("none"),
        Some("tool") => {
            json!({"type": "function", "function": {"name": choice.get("name").cloned().unwrap_or(Value::Null)}})
        }
        _ => {
            return Err(Untranslatable(
                "`tool_choice.type` must be `auto`, `any`, `tool` or `none`".into(),
            ))
        }
    };
    out.insert("tool_choice".into(), translated);
    if choice
        .get("disable_parallel_tool_use")
        .and_then(Value::as_bool)
        == Some(true)
    {
        out.insert("parallel_tool_calls".into(), false.into());
    }
    Ok(())
}

fn kind(block: &Value) -> Option<&str> {
    block.get("type").and_then(Value::as_str)
}

fn block_texts(blocks: &[Value]) -> Vec<&str> {
    blocks
        .iter()
        .filter(|b| kind(b) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_with_tools_becomes_chat() -> Result<(), Untranslatable> {
        let body = json!({
            "model": "auto", "max_tokens": 100, "temperature": 0.2, "stop_sequences": ["END"],
            "system": [{"type": "text", "text": "be brief"}],
            "metadata": {"user_id": "u-1"},
            "tools": [{"name": "weather", "description": "the weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
            "messages": [
                {"role": "user", "content": "weather in Paris?"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "s"},
                    {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]},
                    {"type": "text", "text": "and tomorrow?"}
                ]}
            ]
        });
        let chat = chat_request(&body)?;
        assert_eq!(
            chat,
            json!({
                "model": "auto", "max_tokens": 100, "temperature": 0.2, "stop": ["END"], "user": "u-1",
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "weather in Paris?"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "toolu_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}
                    ]},
                    {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
                    {"role": "user", "content": [{"type": "text", "text": "and tomorrow?"}]}
                ],
                "tools": [{"type": "function", "function": {"name": "weather", "description": "the weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
                "tool_choice": "required",
                "parallel_tool_calls": false
            })
        );
        Ok(())
    }

    #[test]
    fn a_stream_asks_for_usage_and_images_become_data_urls() -> Result<(), Untranslatable> {
        let body = json!({"model": "m", "max_tokens": 5, "stream": true, "messages": [
            {"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                {"type": "text", "text": "what is this?"}
            ]}
        ]});
        let chat = chat_request(&body)?;
        assert_eq!(chat["stream"], true);
        assert_eq!(chat["stream_options"], json!({"include_usage": true}));
        assert_eq!(
            chat["messages"][0]["content"][0],
            json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}})
        );
        Ok(())
    }

    #[test]
    fn server_tools_cannot_be_translated() {
        let body = json!({"model": "m", "max_tokens": 5, "messages": [],
            "tools": [{"type": "web_search_20250305", "name": "web_search"}]});
        let error = chat_request(&body).err().map(|e| e.0);
        assert!(error.is_some_and(|e| e.contains("web_search_20250305")));
    }
}
