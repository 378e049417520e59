//! The chat form of Messages requests: what is carried over, what is refused and by which path.

use super::*;
use serde_json::json;

/// The body a candidate serving `served` is sent, parsed back. The borrowed tree the intake
/// reads a body into gives the same form, to the byte, or the same refusal.
fn chat_body(body: &Value, served: &str) -> Result<Value, Untranslatable> {
    let form = ChatForm::new(body);
    let text = serde_json::to_vec(body).map_err(|e| Untranslatable(e.to_string()))?;
    let borrowed = src_compiler::request::Borrowed::parse(&text)
        .ok_or_else(|| Untranslatable("the borrowed tree refuses the body".into()))?;
    assert_eq!(ChatForm::new(&borrowed), form, "{body}");
    let form = form?;
    let served = serde_json::to_vec(served).unwrap_or_default();
    serde_json::from_slice(&form.body(&served)).map_err(|e| Untranslatable(e.to_string()))
}

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
    let chat = chat_body(&body, "served/id")?;
    assert_eq!(
        chat,
        json!({
            "model": "served/id", "max_tokens": 100, "temperature": 0.2, "stop": ["END"], "user": "u-1",
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
    let chat = chat_body(&body, "m")?;
    assert_eq!(chat["stream"], true);
    assert_eq!(chat["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        chat["messages"][0]["content"][0],
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}})
    );
    Ok(())
}

#[test]
fn blocks_are_joined_and_absent_parts_get_their_defaults() -> Result<(), Untranslatable> {
    let body = json!({"model": "m", "max_tokens": 5,
    "system": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
    "tools": [{"name": "noop"}],
    "tool_choice": {"type": "tool", "name": "noop"},
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "on "}, {"type": "text", "text": "it"},
            {"type": "tool_use", "id": "toolu_2", "name": "noop"}
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2"}]}
    ]});
    let chat = chat_body(&body, "m")?;
    assert_eq!(
        chat["messages"],
        json!([
            {"role": "system", "content": "one\ntwo"},
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": "on it", "tool_calls": [
                {"id": "toolu_2", "type": "function", "function": {"name": "noop", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "toolu_2", "content": ""}
        ])
    );
    assert_eq!(
        chat["tools"],
        json!([{"type": "function", "function": {"name": "noop", "parameters": {"type": "object"}}}])
    );
    assert_eq!(
        chat["tool_choice"],
        json!({"type": "function", "function": {"name": "noop"}})
    );
    assert!(chat.get("stream").is_none() && chat.get("parallel_tool_calls").is_none());
    Ok(())
}

#[test]
fn text_documents_reach_the_backend_with_the_question() -> Result<(), Untranslatable> {
    let body = json!({"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": [
            {"type": "document", "title": "notes", "context": "from the wiki",
             "source": {"type": "text", "media_type": "text/plain", "data": "the door code is 4711"}},
            {"type": "text", "text": "what is the door code?"}
        ]},
        {"role": "assistant", "content": "4711"},
        {"role": "user", "content": [
            {"type": "document", "source": {"type": "content", "content": [
                {"type": "text", "text": "page one"},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/p2.png"}}
            ]}}
        ]}
    ]});
    let chat = chat_body(&body, "m")?;
    assert_eq!(
        chat["messages"][0]["content"],
        json!([
            {"type": "text", "text": "notes"},
            {"type": "text", "text": "from the wiki"},
            {"type": "text", "text": "the door code is 4711"},
            {"type": "text", "text": "what is the door code?"}
        ])
    );
    assert_eq!(
        chat["messages"][2]["content"],
        json!([
            {"type": "text", "text": "page one"},
            {"type": "image_url", "image_url": {"url": "https://example.com/p2.png"}}
        ])
    );
    Ok(())
}

#[test]
fn what_chat_cannot_carry_is_refused_by_its_path() {
    let refused = |content: Value| {
        let body = json!({"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "user", "content": content}
        ]});
        ChatForm::new(&body).err().map(|e| e.0).unwrap_or_default()
    };
    let pdf = refused(json!([
        {"type": "text", "text": "summarise"},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}}
    ]));
    assert!(pdf.contains("`messages[1].content[1]`"), "{pdf}");
    assert!(pdf.contains("`base64` source (application/pdf)"), "{pdf}");
    let file = refused(json!([{"type": "image", "source": {"type": "file", "file_id": "file_1"}}]));
    assert!(
        file.contains("`messages[1].content[0]` is an `image` block with a `file` source"),
        "{file}"
    );
    let search =
        refused(json!([{"type": "search_result", "source": "s", "title": "t", "content": []}]));
    assert!(
        search.contains("`messages[1].content[0]` is a `search_result` block"),
        "{search}"
    );
    let nested = refused(
        json!([{"type": "tool_result", "tool_use_id": "t", "content": [
            {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}
        ]}]),
    );
    assert!(
        nested.contains("`messages[1].content[0].content[0]`"),
        "{nested}"
    );
}

#[test]
fn results_say_when_they_failed_and_their_images_follow_them() -> Result<(), Untranslatable> {
    let body = json!({"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": "look at both"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "screenshot", "input": {}},
            {"type": "tool_use", "id": "toolu_2", "name": "run", "input": {}}
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                {"type": "text", "text": "the screen"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
            ]},
            {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true, "content": "exit status 2"},
            {"type": "text", "text": "what went wrong?"}
        ]}
    ]});
    let chat = chat_body(&body, "m")?;
    assert_eq!(
        chat["messages"][2],
        json!({"role": "tool", "tool_call_id": "toolu_1",
               "content": "the screen\n[1 image(s) of this result follow in the next user message]"})
    );
    assert_eq!(
        chat["messages"][3],
        json!({"role": "tool", "tool_call_id": "toolu_2", "content": "Error: exit status 2"})
    );
    assert_eq!(
        chat["messages"][4],
        json!({"role": "user", "content": [
            {"type": "text", "text": "Images returned by tool call `toolu_1`:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "text", "text": "what went wrong?"}
        ]})
    );
    assert_eq!(chat["messages"].as_array().map(Vec::len), Some(5));
    Ok(())
}

#[test]
fn server_tools_cannot_be_translated() {
    let body = json!({"model": "m", "max_tokens": 5, "messages": [],
        "tools": [{"type": "web_search_20250305", "name": "web_search"}]});
    let error = ChatForm::new(&body).err().map(|e| e.0);
    assert!(error.is_some_and(|e| e.contains("web_search_20250305")));
}
