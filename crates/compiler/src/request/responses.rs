//! The facts of a `/v1/responses` request, read into the same [`RequestView`] as a chat
//! completion: `instructions` are a leading system message, message items are messages, a run
//! of (custom) function calls joins the assistant message before it, and each call output is a
//! `tool` message. Reasoning and the text built-in tools return are history but no messages;
//! an item type the router does not know is refused, since its text would reach the model
//! unseen by the policy.

use super::{
    body_object, content_text, missing, parts_text, read_common, required_str, role_of, unreadable,
    wrong, At, Facts, IntoHeaders, RequestError, RequestView, Role, OPENAI_PARTS, REASONING_PARTS,
};
use serde_json::{Map, Value};
use std::borrow::Cow;

impl RequestView {
    /// Reads a `/v1/responses` body: `input` is a string (one user message) or an array of
    /// input items; `instructions` is the system prompt.
    pub fn from_responses(body: &Value, headers: impl IntoHeaders) -> Result<Self, RequestError> {
        let obj = body_object(body)?;
        let mut facts = Facts::new(headers);
        read_common(obj, &mut facts.view)?;
        match obj.get("instructions") {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => facts.message(Role::System, text),
            Some(other) => return Err(wrong("instructions".into(), "a string or null", other)),
        }
        facts.view.provider_state = provider_state(obj)?;
        match obj.get("input") {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => facts.message(Role::User, text),
            Some(Value::Array(items)) => {
                let root = At::Field("input");
                for (i, item) in items.iter().enumerate() {
                    read_input_item(item, root.index(i), &mut facts)?;
                }
            }
            Some(other) => {
                return Err(wrong(
                    "input".into(),
                    "a string or an array of input items",
                    other,
                ))
            }
        }
        Ok(facts.finish())
    }
}

fn read_input_item(item: &Value, path: At<'_>, facts: &mut Facts) -> Result<(), RequestError> {
    let Value::Object(item) = item else {
        return Err(wrong(path.to_string(), "an object", item));
    };
    let kind = match item.get("type") {
        None | Some(Value::Null) => "message",
        Some(Value::String(kind)) => kind.as_str(),
        Some(other) => return Err(wrong(format!("{path}.type"), "a string", other)),
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
            let output = match item.get("output") {
                None => return Err(missing(&format!("{path}.output"))),
                Some(Value::Null) => Cow::Borrowed(""),
                Some(Value::String(text)) => Cow::Borrowed(text.as_str()),
                Some(Value::Array(parts)) => {
                    Cow::Owned(parts_text(parts, path.key("output"), &OPENAI_PARTS)?)
                }
                Some(other) => {
                    return Err(wrong(
                        format!("{path}.output"),
                        "a string or an array of content parts",
                        other,
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
                match item.get(key) {
                    None | Some(Value::Null) => {}
                    Some(Value::Array(parts)) => {
                        facts.text(&parts_text(parts, path.key(key), &REASONING_PARTS)?)
                    }
                    Some(other) => {
                        return Err(wrong(format!("{path}.{key}"), "an array or null", other))
                    }
                }
            }
        }
        // Built-in tools' outputs the model reads as text.
        "mcp_call" | "local_shell_call_output" | "apply_patch_call_output" => {
            match item.get("output") {
                None | Some(Value::Null) => {}
                Some(Value::String(text)) => facts.text(text),
                Some(other) => {
                    return Err(wrong(format!("{path}.output"), "a string or null", other))
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
fn entries_text(item: &Map<String, Value>, key: &str, fields: &[&str], facts: &mut Facts) {
    let Some(Value::Array(entries)) = item.get(key) else {
        return;
    };
    for entry in entries {
        for field in fields {
            if let Some(Value::String(text)) = entry.get(field) {
                facts.text(text);
            }
        }
    }
}

/// Whether a responses body names state its backend keeps: a `previous_response_id`, or a
/// `conversation` (an id, or an object with one).
fn provider_state(obj: &Map<String, Value>) -> Result<bool, RequestError> {
    let previous = match obj.get("previous_response_id") {
        None | Some(Value::Null) => false,
        Some(Value::String(id)) => !id.trim().is_empty(),
        Some(other) => {
            return Err(wrong(
                "previous_response_id".into(),
                "a string or null",
                other,
            ))
        }
    };
    let conversation = match obj.get("conversation") {
        None | Some(Value::Null) => false,
        Some(Value::String(id)) => !id.trim().is_empty(),
        Some(Value::Object(_)) => true,
        Some(other) => {
            return Err(wrong(
                "conversation".into(),
                "a string, an object or null",
                other,
            ))
        }
    };
    Ok(previous || conversation)
}
