//! The facts of a `/v1/responses` request, read into the same [`RequestView`] as a chat
//! completion: `instructions` are a leading system message, message items are messages, a run
//! of (custom) function calls joins the assistant message before it, and each call output is a
//! `tool` message. Reasoning and the text built-in tools return are history but no messages;
//! an item type the router does not know is refused, since its text would reach the model
//! unseen by the policy.
//!
//! Like the chat reader, it is written over [`Json`]: a `serde_json::Value` and the borrowed
//! tree a proxy reads its bodies into give the same facts and the same errors.

use super::{
    body_object, content_text, missing, parts_text, read_common, required_str, role_of, unreadable,
    wrong, At, Facts, IntoHeaders, Json, Node, Object, RequestError, RequestView, Role,
    OPENAI_PARTS, REASONING_PARTS,
};
use std::borrow::Cow;

impl RequestView {
    /// Reads a `/v1/responses` body: `input` is a string (one user message) or an array of
    /// input items; `instructions` is the system prompt. The body is a `serde_json::Value`, or
    /// the [`Borrowed`](super::Borrowed) tree a proxy reads its bodies into (the same facts and
    /// errors either way).
    pub fn from_responses<J: Json>(
        body: &J,
        headers: impl IntoHeaders,
    ) -> Result<Self, RequestError> {
        let obj = body_object(body)?;
        let mut facts = Facts::new(headers);
        read_common(obj, &mut facts.view)?;
        match obj.get("instructions").map(Json::node) {
            None | Some(Node::Null) => {}
            Some(Node::String(text)) => facts.message(Role::System, text),
            Some(other) => return Err(wrong("instructions".into(), "a string or null", &other)),
        }
        facts.view.provider_state = provider_state(obj)?;
        match obj.get("input").map(Json::node) {
            None | Some(Node::Null) => {}
            Some(Node::String(text)) => facts.message(Role::User, text),
            Some(Node::Array(items)) => {
                let root = At::Field("input");
                for (i, item) in items.iter().enumerate() {
                    read_input_item(item, root.index(i), &mut facts)?;
                }
            }
            Some(other) => {
                return Err(wrong(
                    "input".into(),
                    "a string or an array of input items",
                    &other,
                ))
            }
        }
        Ok(facts.finish())
    }
}

fn read_input_item<J: Json>(item: &J, path: At<'_>, facts: &mut Facts) -> Result<(), RequestError> {
    let item = match item.node() {
        Node::Object(item) => item,
        other => return Err(wrong(path.to_string(), "an object", &other)),
    };
    let kind = match item.get("type").map(Json::node) {
        None | Some(Node::Null) => "message",
        Some(Node::String(kind)) => kind,
        Some(other) => return Err(wrong(format!("{path}.type"), "a string", &other)),
    };
    match kind {
        "message" => {
            let role = role_of(item, path)?;
            let text = content_text(item.get("content"), path, &OPENAI_PARTS)?;
            let role = match role {
                "system" | "developer" => Role::System,
                "user" => Role::User,
                "assistant" => Role::Assistant,
                _ => Role::Other,
            };
            facts.message(role, &text);
        }
        "function_call" | "custom_tool_call" => {
            let id = required_str(item, "call_id", path)?;
            if !facts.last_is_assistant {
                facts.message(Role::Assistant, "");
            }
            facts.call(id);
        }
        "function_call_output" | "custom_tool_call_output" => {
            let id = required_str(item, "call_id", path)?;
            let output = match item.get("output").map(Json::node) {
                None => return Err(missing(&format!("{path}.output"))),
                Some(Node::Null) => Cow::Borrowed(""),
                Some(Node::String(text)) => Cow::Borrowed(text),
                Some(Node::Array(parts)) => {
                    Cow::Owned(parts_text(parts, path.key("output"), &OPENAI_PARTS)?)
                }
                Some(other) => {
                    return Err(wrong(
                        format!("{path}.output"),
                        "a string or an array of content parts",
                        &other,
                    ))
                }
            };
            facts.answer(id);
            facts.message(Role::Tool, &output);
        }
        // Reasoning is passed back to the model (vLLM renders it), so it is history; it is no
        // message, and a call after it still joins the assistant message before it.
        "reasoning" => {
            for key in ["summary", "content"] {
                match item.get(key).map(Json::node) {
                    None | Some(Node::Null) => {}
                    Some(Node::Array(parts)) => {
                        facts.text(&parts_text(parts, path.key(key), &REASONING_PARTS)?)
                    }
                    Some(other) => {
                        return Err(wrong(format!("{path}.{key}"), "an array or null", &other))
                    }
                }
            }
        }
        // Built-in tools' outputs the model reads as text.
        "mcp_call" | "local_shell_call_output" | "apply_patch_call_output" => {
            match item.get("output").map(Json::node) {
                None | Some(Node::Null) => {}
                Some(Node::String(text)) => facts.text(text),
                Some(other) => {
                    return Err(wrong(format!("{path}.output"), "a string or null", &other))
                }
            }
        }
        "file_search_call" => entries_text(item, "results", &["text"], facts),
        "code_interpreter_call" => entries_text(item, "outputs", &["logs"], facts),
        "shell_call_output" => entries_text(item, "output", &["stdout", "stderr"], facts),
        // Items without text the router could read: references to stored items, calls of
        // built-in tools (their arguments are not text, as a function call's are not), and
        // outputs that are media or encrypted.
        "item_reference"
        | "web_search_call"
        | "computer_call"
        | "computer_call_output"
        | "image_generation_call"
        | "local_shell_call"
        | "shell_call"
        | "apply_patch_call"
        | "mcp_list_tools"
        | "mcp_approval_request"
        | "mcp_approval_response"
        | "compaction" => {}
        other => return Err(unreadable(path, other)),
    }
    Ok(())
}

/// The strings at `fields` of the entries of a built-in tool item's `key` array, as history.
/// The backend checks these items' shape; what has no string there has no text to read.
fn entries_text<O: Object>(item: &O, key: &str, fields: &[&str], facts: &mut Facts) {
    let Some(Node::Array(entries)) = item.get(key).map(Json::node) else {
        return;
    };
    for entry in entries {
        let Node::Object(entry) = entry.node() else {
            continue;
        };
        for field in fields {
            if let Some(Node::String(text)) = entry.get(field).map(Json::node) {
                facts.text(text);
            }
        }
    }
}

/// Whether a responses body names state its backend keeps: a `previous_response_id`, or a
/// `conversation` (an id, or an object with one).
fn provider_state<O: Object>(obj: &O) -> Result<bool, RequestError> {
    let previous = match obj.get("previous_response_id").map(Json::node) {
        None | Some(Node::Null) => false,
        Some(Node::String(id)) => !id.trim().is_empty(),
        Some(other) => {
            return Err(wrong(
                "previous_response_id".into(),
                "a string or null",
                &other,
            ))
        }
    };
    let conversation = match obj.get("conversation").map(Json::node) {
        None | Some(Node::Null) => false,
        Some(Node::String(id)) => !id.trim().is_empty(),
        Some(Node::Object(_)) => true,
        Some(other) => {
            return Err(wrong(
                "conversation".into(),
                "a string, an object or null",
                &other,
            ))
        }
    };
    Ok(previous || conversation)
}
