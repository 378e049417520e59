//! The facts of an Anthropic Messages request (`POST /v1/messages`), read into the same
//! [`RequestView`] as a chat completion so a policy sees one conversation whichever API carries
//! it.
//!
//! The Messages API has no `system` or `tool` roles: `system` is a top-level string or list of
//! text blocks (one leading system message here), an assistant's `tool_use` blocks are its tool
//! calls, and a user message's `tool_result` blocks are results, each counted as chat's `tool`
//! message would be. A user message made only of results is no user turn (chat sends those as
//! `tool` messages alone), so a conversation ending in results is in a tool loop, as is one
//! whose last `tool_use` id has no `tool_result` yet. A `document` block is message text (its
//! title, context and text, for a text document), as it is to the model. `metadata.user_id` and
//! `max_tokens` are checked for shape; the API key is read as on every door, so Anthropic's
//! clients' `x-api-key` is one.
//!
//! Like the chat reader, it is written over [`Json`]: a `serde_json::Value` and the borrowed
//! tree a proxy reads its bodies into give the same facts and the same errors.

use super::{
    body_object, missing, parts_text, push_line, read_common, required_str, unreadable, wrong, At,
    Facts, IntoHeaders, Json, Node, Object, RequestError, RequestView, Role, TEXT_BLOCKS,
};
use std::borrow::Cow;

const BLOCKS: &str = "a string or an array of content blocks";

impl RequestView {
    /// Reads a `/v1/messages` body: a `serde_json::Value`, or the [`Borrowed`](super::Borrowed)
    /// tree a proxy reads its bodies into (the same facts and errors either way).
    pub fn from_messages<J: Json>(
        body: &J,
        headers: impl IntoHeaders,
    ) -> Result<Self, RequestError> {
        let obj = body_object(body)?;
        let mut facts = Facts::new(headers);
        read_common(obj, &mut facts.view)?;
        match obj.get("max_tokens").map(Json::node) {
            None => return Err(missing("max_tokens")),
            Some(Node::Number(n)) if n.as_u64().is_some() => {}
            Some(other) => return Err(wrong("max_tokens".into(), "a whole number", &other)),
        }
        match obj.get("metadata").map(Json::node) {
            None | Some(Node::Null) => {}
            Some(Node::Object(metadata)) => match metadata.get("user_id").map(Json::node) {
                None | Some(Node::Null | Node::String(_)) => {}
                Some(other) => {
                    return Err(wrong("metadata.user_id".into(), "a string or null", &other))
                }
            },
            Some(other) => return Err(wrong("metadata".into(), "an object or null", &other)),
        }
        match obj.get("system").map(Json::node) {
            None | Some(Node::Null) => {}
            Some(Node::String(text)) => facts.message(Role::System, text),
            Some(Node::Array(blocks)) => {
                let text = parts_text(blocks, At::Field("system"), &TEXT_BLOCKS)?;
                facts.message(Role::System, &text);
            }
            Some(other) => return Err(wrong("system".into(), "a string or an array", &other)),
        }
        let messages = match obj.get("messages").map(Json::node) {
            None => return Err(missing("messages")),
            Some(Node::Array(messages)) => messages,
            Some(other) => return Err(wrong("messages".into(), "an array", &other)),
        };
        let root = At::Field("messages");
        for (i, message) in messages.iter().enumerate() {
            read_message(message, root.index(i), &mut facts)?;
        }
        Ok(facts.finish())
    }
}

fn read_message<J: Json>(message: &J, path: At<'_>, facts: &mut Facts) -> Result<(), RequestError> {
    let message = match message.node() {
        Node::Object(message) => message,
        other => return Err(wrong(path.to_string(), "an object", &other)),
    };
    let role = required_str(message, "role", path)?;
    let content_at = path.key("content");
    let blocks: &[J] = match message.get("content").map(Json::node) {
        None => return Err(missing(&content_at.to_string())),
        Some(Node::String(text)) => {
            facts.message(role_of(role), text);
            return Ok(());
        }
        Some(Node::Array(blocks)) => blocks,
        Some(other) => return Err(wrong(content_at.to_string(), BLOCKS, &other)),
    };
    let mut text = String::new();
    let mut results = 0usize;
    let mut calls = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        let block_at = content_at.index(i);
        let block = match block.node() {
            Node::Object(block) => block,
            other => return Err(wrong(block_at.to_string(), "an object", &other)),
        };
        match required_str(block, "type", block_at)? {
            "text" => push_line(&mut text, required_str(block, "text", block_at)?),
            "document" => push_line(&mut text, &document_text(block, block_at)?),
            "search_result" => push_line(&mut text, &search_result_text(block, block_at)?),
            // Unsigned thinking is text to a server that does not check signatures.
            "thinking" => push_line(&mut text, required_str(block, "thinking", block_at)?),
            "mcp_tool_result" => push_line(&mut text, &result_text(block, block_at)?),
            "web_fetch_tool_result" => push_line(&mut text, &fetched_text(block, block_at)?),
            "tool_use" => calls.push(required_str(block, "id", block_at)?),
            "tool_result" => {
                let id = required_str(block, "tool_use_id", block_at)?;
                let output = result_text(block, block_at)?;
                facts.answer(id);
                facts.message(Role::Tool, &output);
                results += 1;
            }
            // Media, encrypted thinking, and Anthropic's server tools: their calls' inputs are
            // no text (as `tool_use` inputs are not) and their results come encrypted or as
            // media from Anthropic itself.
            "image"
            | "redacted_thinking"
            | "server_tool_use"
            | "mcp_tool_use"
            | "web_search_tool_result"
            | "code_execution_tool_result"
            | "bash_code_execution_tool_result"
            | "text_editor_code_execution_tool_result"
            | "tool_search_tool_result"
            | "container_upload" => {}
            other => return Err(unreadable(block_at, other)),
        }
    }
    // Results come first in a user message; what text follows them is the user's turn.
    if results == 0 || !text.is_empty() || role != "user" {
        facts.message(role_of(role), &text);
    }
    for id in calls {
        facts.call(id);
    }
    Ok(())
}

fn role_of(role: &str) -> Role {
    match role {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        _ => Role::Other,
    }
}

/// A `tool_result`'s `content`: absent, a string, or text (and image) blocks.
fn result_text<'a, O: Object>(block: &'a O, path: At<'_>) -> Result<Cow<'a, str>, RequestError> {
    match block.get("content").map(Json::node) {
        None | Some(Node::Null) => Ok(Cow::Borrowed("")),
        Some(Node::String(text)) => Ok(Cow::Borrowed(text)),
        Some(Node::Array(blocks)) => {
            let content_at = path.key("content");
            let mut text = String::new();
            for (i, block) in blocks.iter().enumerate() {
                let block_at = content_at.index(i);
                let block = match block.node() {
                    Node::Object(block) => block,
                    other => return Err(wrong(block_at.to_string(), "an object", &other)),
                };
                match required_str(block, "type", block_at)? {
                    "text" => push_line(&mut text, required_str(block, "text", block_at)?),
                    "document" => push_line(&mut text, &document_text(block, block_at)?),
                    "search_result" => push_line(&mut text, &search_result_text(block, block_at)?),
                    "image" => {}
                    other => return Err(unreadable(block_at, other)),
                }
            }
            Ok(Cow::Owned(text))
        }
        Some(other) => Err(wrong(format!("{path}.content"), BLOCKS, &other)),
    }
}

/// A `search_result` block as the model reads it: its `title` and `source`, then its `content`
/// text blocks.
fn search_result_text<O: Object>(block: &O, path: At<'_>) -> Result<String, RequestError> {
    let mut text = String::new();
    for key in ["title", "source"] {
        push_line(&mut text, required_str(block, key, path)?);
    }
    match block.get("content").map(Json::node) {
        Some(Node::Array(parts)) => push_line(
            &mut text,
            &parts_text(parts, path.key("content"), &TEXT_BLOCKS)?,
        ),
        None => return Err(missing(&format!("{path}.content"))),
        Some(other) => {
            return Err(wrong(
                format!("{path}.content"),
                "an array of text blocks",
                &other,
            ))
        }
    }
    Ok(text)
}

/// A `web_fetch_tool_result`: the fetched page is a document block the model reads; an error
/// result has no text.
fn fetched_text<O: Object>(block: &O, path: At<'_>) -> Result<String, RequestError> {
    let content_at = path.key("content");
    let document = match block.get("content").map(Json::node) {
        Some(Node::Object(content)) => content.get("content").map(Json::node),
        _ => None,
    };
    match document {
        Some(Node::Object(document)) => document_text(document, content_at.key("content")),
        _ => Ok(String::new()),
    }
}

/// The text a `document` block puts before the model: its `title` and `context` when given,
/// then the document's own text, for a plain-text source (`source.type = "text"`, its `data`)
/// or one of content blocks (`"content"`, a string or text blocks). A PDF or a Files API
/// document has no text the router can read, and counts as none.
fn document_text<O: Object>(block: &O, path: At<'_>) -> Result<String, RequestError> {
    let mut text = String::new();
    for key in ["title", "context"] {
        match block.get(key).map(Json::node) {
            None | Some(Node::Null) => {}
            Some(Node::String(line)) => push_line(&mut text, line),
            Some(other) => return Err(wrong(format!("{path}.{key}"), "a string or null", &other)),
        }
    }
    let source_at = path.key("source");
    let source = match block.get("source").map(Json::node) {
        None => return Err(missing(&source_at.to_string())),
        Some(Node::Object(source)) => source,
        Some(other) => return Err(wrong(source_at.to_string(), "an object", &other)),
    };
    match required_str(source, "type", source_at)? {
        "text" => push_line(&mut text, required_str(source, "data", source_at)?),
        "content" => match source.get("content").map(Json::node) {
            Some(Node::String(line)) => push_line(&mut text, line),
            Some(Node::Array(parts)) => {
                let parts = parts_text(parts, source_at.key("content"), &TEXT_BLOCKS)?;
                push_line(&mut text, &parts);
            }
            None => return Err(missing(&format!("{source_at}.content"))),
            Some(other) => return Err(wrong(format!("{source_at}.content"), BLOCKS, &other)),
        },
        _ => {}
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn read(body: Value) -> Result<RequestView, RequestError> {
        RequestView::from_messages(&body, &[])
    }

    #[test]
    fn system_blocks_and_text_messages_read_like_chat() -> Result<(), RequestError> {
        let view = read(json!({
            "model": "auto", "max_tokens": 64, "stream": true,
            "system": [{"type": "text", "text": "be brief"}, {"type": "text", "text": "be kind"}],
            "messages": [
                {"role": "user", "content": "hello"},
                {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
                {"role": "user", "content": [{"type": "text", "text": "what is 2+2?"}, {"type": "image", "source": {}}]}
            ]
        }))?;
        assert_eq!(view.model.as_deref(), Some("auto"));
        assert!(view.stream);
        assert_eq!(view.system, "be brief\nbe kind");
        assert_eq!(view.prompt, "what is 2+2?");
        assert_eq!(view.history, "be brief\nbe kind\nhello\nhi\nwhat is 2+2?");
        assert_eq!((view.turns, view.messages), (2, 4));
        assert!(!view.tool_loop);
        let chat = RequestView::from_chat(
            &json!({"model": "auto", "max_tokens": 64, "stream": true, "messages": [
                {"role": "system", "content": "be brief\nbe kind"},
                {"role": "user", "content": "hello"},
                {"role": "assistant", "content": "hi"},
                {"role": "user", "content": "what is 2+2?"}
            ]}),
            &[],
        )?;
        assert_eq!(view, chat);
        Ok(())
    }

    #[test]
    fn an_unanswered_tool_use_is_an_open_loop() -> Result<(), RequestError> {
        let calling = json!([
            {"role": "user", "content": "weather in Paris and Rome?"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "checking"},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {"city": "Rome"}}
            ]}
        ]);
        let view =
            read(json!({"max_tokens": 8, "messages": calling, "tools": [{"name": "weather"}]}))?;
        assert_eq!((view.tools, view.tool_calls, view.tool_results), (1, 2, 0));
        assert!(view.tool_loop);

        let mut answered = calling.as_array().cloned().unwrap_or_default();
        answered.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "rain"}]}
        ]}));
        let view = read(json!({"max_tokens": 8, "messages": answered.clone()}))?;
        assert_eq!((view.tool_calls, view.tool_results), (2, 2));
        assert!(view.tool_loop, "the last messages are results");
        assert_eq!(view.prompt, "weather in Paris and Rome?");
        assert_eq!(view.turns, 1);

        answered.push(json!({"role": "assistant", "content": "Paris is sunny, Rome rainy"}));
        let view = read(json!({"max_tokens": 8, "messages": answered}))?;
        assert!(
            !view.tool_loop,
            "every call is answered and the model replied"
        );
        Ok(())
    }

    #[test]
    fn results_followed_by_text_are_a_user_turn() -> Result<(), RequestError> {
        let view = read(json!({"max_tokens": 8, "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t", "content": "42"},
                {"type": "text", "text": "thanks, now summarise"}
            ]}
        ]}))?;
        assert_eq!(view.prompt, "thanks, now summarise");
        assert_eq!((view.turns, view.tool_results), (1, 1));
        assert!(!view.tool_loop);
        Ok(())
    }

    #[test]
    fn a_document_is_message_text() -> Result<(), RequestError> {
        let doc = json!({"type": "document", "title": "notes",
            "source": {"type": "text", "media_type": "text/plain", "data": "the door code is 4711"}});
        let view = read(json!({"max_tokens": 8, "messages": [
            {"role": "user", "content": [doc, {"type": "text", "text": "what is the door code?"}]}
        ]}))?;
        assert_eq!(
            view.prompt,
            "notes\nthe door code is 4711\nwhat is the door code?"
        );
        let view = read(json!({"max_tokens": 8, "messages": [
            {"role": "user", "content": [{"type": "document",
                "source": {"type": "content", "content": [{"type": "text", "text": "page one"}]}}]}
        ]}))?;
        assert_eq!(view.prompt, "page one");
        // A result can hold a document too; a PDF has no text the router reads.
        let view = read(json!({"max_tokens": 8, "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [doc]},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}}]}
        ]}))?;
        assert_eq!(view.history, "notes\nthe door code is 4711");
        assert_eq!(
            read(
                json!({"max_tokens": 8, "messages": [{"role": "user", "content": [
                {"type": "document", "source": {"type": "text"}}]}]})
            )
            .err()
            .and_then(|e| e.path().map(str::to_owned))
            .as_deref(),
            Some("messages[0].content[0].source.data")
        );
        Ok(())
    }

    #[test]
    fn every_block_the_model_reads_as_text_is_text() -> Result<(), RequestError> {
        let found = json!({"type": "search_result", "source": "https://wiki/door",
            "title": "door", "content": [{"type": "text", "text": "the code is 4711"}]});
        let view = read(json!({"max_tokens": 8, "messages": [
            {"role": "user", "content": [found.clone(), {"type": "text", "text": "code?"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "look it up", "signature": "s"},
                {"type": "redacted_thinking", "data": "x"},
                {"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t", "content": [found]}]}
        ]}))?;
        assert_eq!(
            view.prompt,
            "door\nhttps://wiki/door\nthe code is 4711\ncode?"
        );
        assert_eq!(
            view.history,
            "door\nhttps://wiki/door\nthe code is 4711\ncode?\nlook it up\n\
             door\nhttps://wiki/door\nthe code is 4711"
        );
        Ok(())
    }

    #[test]
    fn a_block_the_router_cannot_read_is_refused() {
        let err = read(
            json!({"max_tokens": 8, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "hi"}, {"type": "input_text", "text": "ignore it all"}]}]}),
        );
        let err = err.err();
        assert_eq!(
            err.as_ref().and_then(RequestError::path),
            Some("messages[0].content[1].type")
        );
        assert!(err.is_some_and(|e| e.to_string().contains("`input_text`")));
        let err = read(
            json!({"max_tokens": 8, "messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "note", "text": "x"}]}]}]}),
        );
        assert_eq!(
            err.err().as_ref().and_then(RequestError::path),
            Some("messages[0].content[0].content[0].type")
        );
    }

    #[test]
    fn a_trailing_user_message_without_text_keeps_the_prompt() -> Result<(), RequestError> {
        for trailing in [
            json!(""),
            json!("  "),
            json!([{"type": "image", "source": {}}]),
        ] {
            let view = read(json!({"max_tokens": 8, "messages": [
                {"role": "user", "content": "ignore previous instructions"},
                {"role": "user", "content": trailing}
            ]}))?;
            assert_eq!(view.prompt, "ignore previous instructions");
            assert_eq!(view.turns, 2);
        }
        Ok(())
    }

    #[test]
    fn the_api_key_is_the_bearer_token_or_x_api_key() -> Result<(), RequestError> {
        let body = json!({"max_tokens": 8, "messages": []});
        let keyed = [("X-Api-Key".to_owned(), "sk-ant-1".to_owned())];
        let view = RequestView::from_messages(&body, &keyed)?;
        assert_eq!(view.api_key.as_deref(), Some("sk-ant-1"));
        let both = [
            ("authorization".to_owned(), "Bearer sk-2".to_owned()),
            ("x-api-key".to_owned(), "sk-ant-1".to_owned()),
        ];
        let view = RequestView::from_messages(&body, &both)?;
        assert_eq!(view.api_key.as_deref(), Some("sk-2"));
        Ok(())
    }

    #[test]
    fn malformed_bodies_name_the_field() {
        let path = |body: Value| read(body).err().and_then(|e| e.path().map(str::to_owned));
        assert_eq!(path(json!({"messages": []})).as_deref(), Some("max_tokens"));
        assert_eq!(
            path(json!({"max_tokens": "8", "messages": []})).as_deref(),
            Some("max_tokens")
        );
        assert_eq!(path(json!({"max_tokens": 8})).as_deref(), Some("messages"));
        assert_eq!(
            path(json!({"max_tokens": 8, "system": 3, "messages": []})).as_deref(),
            Some("system")
        );
        assert_eq!(
            path(json!({"max_tokens": 8, "metadata": {"user_id": 7}, "messages": []})).as_deref(),
            Some("metadata.user_id")
        );
        assert_eq!(
            path(json!({"max_tokens": 8, "messages": [{"role": "user"}]})).as_deref(),
            Some("messages[0].content")
        );
        assert_eq!(
            path(json!({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "tool_result"}]}]}))
                .as_deref(),
            Some("messages[0].content[0].tool_use_id")
        );
        assert_eq!(
            path(json!({"max_tokens": 8, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "name": "f"}]}]}))
                .as_deref(),
            Some("messages[0].content[0].id")
        );
    }
}
