//! Route plugins applied to a chat body (docs/language.md, "`route`"): `system_prompt`,
//! `reasoning` and `tools`, plus the `model` rewrite every forwarded request gets.
//!
//! Plugins only produce top-level field edits; [`super::json_edit`] splices them into the
//! client's bytes, so a request whose route has no plugins reaches the backend byte for byte as
//! sent, except for the `model` value.

use serde_json::{Map, Value};
use src_compiler::hir::{RouteDef, ToolsDef};
use src_dsl::ast::Reasoning;

use super::json_edit::{JsonEdit, NotAnObject};

/// A top-level field edit: `Some(json)` sets the field, `None` removes it.
pub type Edit = (&'static str, Option<Vec<u8>>);

/// The edits a route's plugins make to a `/v1/chat/completions` body.
pub fn chat_plugin_edits(body: &Value, route: &RouteDef) -> Vec<Edit> {
    let mut edits = Vec::new();
    if let Some((text, replace)) = &route.system_prompt {
        if let Some(messages) = system_prompt(body.get("messages"), text, *replace) {
            edits.push(("messages", Some(to_json(&messages))));
        }
    }
    if let Some(reasoning) = route.reasoning {
        reasoning_edits(body, reasoning, &mut edits);
    }
    tools_edits(body, &route.tools, &mut edits);
    edits
}

/// Whether `route` has plugins that edit a chat body ([`chat_plugin_edits`] makes none
/// without them).
pub fn has_plugins(route: &RouteDef) -> bool {
    route.system_prompt.is_some() || route.reasoning.is_some() || route.tools != ToolsDef::Keep
}

/// The body sent to one backend: the plugin edits and the served id as `model`.
pub fn build_body(
    original: &[u8],
    edits: &[Edit],
    served_json: &[u8],
) -> Result<Vec<u8>, NotAnObject> {
    let mut edit = JsonEdit::new(original)?;
    for (key, value) in edits {
        match value {
            Some(json) => edit.set(key, json.as_slice()),
            None => edit.remove(key),
        }
    }
    edit.set("model", served_json);
    Ok(edit.finish())
}

fn to_json(value: &Value) -> Vec<u8> {
    // Serialising a `Value` cannot fail.
    serde_json::to_vec(value).unwrap_or_else(|_| b"null".to_vec())
}

fn is_system(message: &Value) -> bool {
    matches!(
        message.get("role").and_then(Value::as_str),
        Some("system" | "developer")
    )
}

/// The system prompt goes first; with `replace`, existing system (and developer) messages go.
fn system_prompt(messages: Option<&Value>, text: &str, replace: bool) -> Option<Value> {
    let messages = messages?.as_array()?;
    let mut out = Vec::with_capacity(messages.len() + 1);
    let mut system = Map::new();
    system.insert("role".into(), Value::String("system".into()));
    system.insert("content".into(), Value::String(text.to_owned()));
    out.push(Value::Object(system));
    out.extend(
        messages
            .iter()
            .filter(|m| !(replace && is_system(m)))
            .cloned(),
    );
    Some(Value::Array(out))
}

/// `reasoning_effort` for OpenAI-style servers and `chat_template_kwargs.enable_thinking` for
/// vLLM/Dynamo-served hybrid models; other `chat_template_kwargs` keys are kept.
fn reasoning_edits(body: &Value, reasoning: Reasoning, edits: &mut Vec<Edit>) {
    let (effort, thinking) = match reasoning {
        Reasoning::Off => (None, false),
        Reasoning::Low => (Some("low"), true),
        Reasoning::Medium => (Some("medium"), true),
        Reasoning::High => (Some("high"), true),
    };
    match effort {
        Some(effort) => edits.push(("reasoning_effort", Some(to_json(&Value::from(effort))))),
        None if body.get("reasoning_effort").is_some() => edits.push(("reasoning_effort", None)),
        None => {}
    }
    let mut kwargs = match body.get("chat_template_kwargs") {
        Some(Value::Object(map)) => map.clone(),
        _ => Map::new(),
    };
    kwargs.insert("enable_thinking".into(), Value::Bool(thinking));
    edits.push((
        "chat_template_kwargs",
        Some(to_json(&Value::Object(kwargs))),
    ));
}

/// The name of an offered tool: `{"type":"function","function":{"name":..}}`, or a flat
/// `{"name":..}` (legacy `functions` entries and custom tools).
fn tool_name(tool: &Value) -> Option<&str> {
    tool.get("function")
        .and_then(|f| f.get("name"))
        .or_else(|| tool.get("name"))
        .and_then(Value::as_str)
}

const TOOL_FIELDS: [&str; 5] = [
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "functions",
    "function_call",
];

fn tools_edits(body: &Value, tools: &ToolsDef, edits: &mut Vec<Edit>) {
    match tools {
        ToolsDef::Keep => {}
        ToolsDef::None => remove_tools(body, edits),
        ToolsDef::Only(names) => {
            let keep = |t: &&Value| tool_name(t).is_some_and(|n| names.iter().any(|k| k == n));
            let mut kept_any = false;
            for field in ["tools", "functions"] {
                if let Some(Value::Array(offered)) = body.get(field) {
                    let kept: Vec<Value> = offered.iter().filter(keep).cloned().collect();
                    kept_any |= !kept.is_empty();
                    if kept.len() != offered.len() {
                        edits.push((field, Some(to_json(&Value::Array(kept)))));
                    }
                }
            }
            if !kept_any {
                remove_tools(body, edits);
                return;
            }
            // A forced choice of a tool that is no longer offered would be rejected upstream.
            for field in ["tool_choice", "function_call"] {
                if let Some(choice) = body.get(field) {
                    let forced = choice
                        .get("function")
                        .and_then(|f| f.get("name"))
                        .or_else(|| choice.get("name"))
                        .and_then(Value::as_str);
                    if forced.is_some_and(|n| !names.iter().any(|k| k == n)) {
                        edits.push((field, None));
                    }
                }
            }
        }
    }
}

fn remove_tools(body: &Value, edits: &mut Vec<Edit>) {
    edits.retain(|(k, _)| !TOOL_FIELDS.contains(k));
    for field in TOOL_FIELDS {
        if body.get(field).is_some() {
            edits.push((field, None));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use src_compiler::hir::ModelId;
    use src_dsl::{FileId, Span};

    fn route() -> RouteDef {
        RouteDef {
            name: "r".into(),
            span: Span::new(FileId(0), 0, 0),
            priority: None,
            when: None,
            to: ModelId(0),
            fallbacks: Vec::new(),
            system_prompt: None,
            headers: Vec::new(),
            header_fields: Vec::new(),
            reasoning: None,
            tools: ToolsDef::Keep,
            cache: true,
            redact: None,
        }
    }

    fn apply(body: &Value, route: &RouteDef) -> Result<Value, Box<dyn std::error::Error>> {
        let bytes = serde_json::to_vec(body)?;
        let edits = chat_plugin_edits(body, route);
        let out = build_body(&bytes, &edits, b"\"served/id\"")?;
        Ok(serde_json::from_slice(&out)?)
    }

    #[test]
    fn no_plugins_changes_only_the_model() -> Result<(), Box<dyn std::error::Error>> {
        let text =
            br#"{"model":"auto",  "messages":[{"role":"user","content":"hi"}],"temperature":0.70}"#;
        let out = build_body(
            text,
            &chat_plugin_edits(&serde_json::from_slice(text)?, &route()),
            b"\"m\"",
        )?;
        assert_eq!(
            String::from_utf8(out)?,
            r#"{"model":"m",  "messages":[{"role":"user","content":"hi"}],"temperature":0.70}"#
        );
        Ok(())
    }

    #[test]
    fn system_prompt_is_inserted_before_existing_ones() -> Result<(), Box<dyn std::error::Error>> {
        let mut r = route();
        r.system_prompt = Some(("be careful".into(), false));
        let body = json!({"model":"auto","messages":[
            {"role":"system","content":"client system"},
            {"role":"user","content":"hi"}]});
        let out = apply(&body, &r)?;
        assert_eq!(
            out["messages"][0],
            json!({"role":"system","content":"be careful"})
        );
        assert_eq!(out["messages"][1]["content"], "client system");
        assert_eq!(out["messages"].as_array().map(Vec::len), Some(3));
        assert_eq!(out["model"], "served/id");
        Ok(())
    }

    #[test]
    fn system_prompt_replace_drops_client_system_messages() -> Result<(), Box<dyn std::error::Error>>
    {
        let mut r = route();
        r.system_prompt = Some(("be careful".into(), true));
        let body = json!({"messages":[
            {"role":"developer","content":"dev"},
            {"role":"system","content":"sys"},
            {"role":"user","content":"hi"}]});
        let out = apply(&body, &r)?;
        assert_eq!(
            out["messages"],
            json!([{"role":"system","content":"be careful"},{"role":"user","content":"hi"}])
        );
        Ok(())
    }

    #[test]
    fn reasoning_sets_effort_and_thinking_keeping_other_kwargs(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let mut r = route();
        r.reasoning = Some(Reasoning::High);
        let body = json!({"messages":[],"chat_template_kwargs":{"custom":1}});
        let out = apply(&body, &r)?;
        assert_eq!(out["reasoning_effort"], "high");
        assert_eq!(
            out["chat_template_kwargs"],
            json!({"custom":1,"enable_thinking":true})
        );

        r.reasoning = Some(Reasoning::Off);
        let out = apply(&json!({"messages":[],"reasoning_effort":"high"}), &r)?;
        assert!(out.get("reasoning_effort").is_none());
        assert_eq!(
            out["chat_template_kwargs"],
            json!({"enable_thinking":false})
        );
        Ok(())
    }

    fn tool(name: &str) -> Value {
        json!({"type":"function","function":{"name":name,"parameters":{}}})
    }

    #[test]
    fn tools_none_removes_every_tool_field() -> Result<(), Box<dyn std::error::Error>> {
        let mut r = route();
        r.tools = ToolsDef::None;
        let body = json!({"messages":[],"tools":[tool("a")],"tool_choice":"auto",
                          "parallel_tool_calls":true});
        let out = apply(&body, &r)?;
        assert_eq!(out, json!({"messages":[],"model":"served/id"}));
        Ok(())
    }

    #[test]
    fn tools_only_filters_by_name() -> Result<(), Box<dyn std::error::Error>> {
        let mut r = route();
        r.tools = ToolsDef::Only(vec!["read".into(), "grep".into()]);
        let body = json!({"messages":[],"tools":[tool("read"),tool("write"),tool("grep")],
                          "tool_choice":{"type":"function","function":{"name":"write"}}});
        let out = apply(&body, &r)?;
        assert_eq!(out["tools"], json!([tool("read"), tool("grep")]));
        assert!(
            out.get("tool_choice").is_none(),
            "forced choice of a removed tool stays: {out}"
        );

        let body = json!({"messages":[],"tools":[tool("write")],"tool_choice":"required"});
        let out = apply(&body, &r)?;
        assert!(
            out.get("tools").is_none() && out.get("tool_choice").is_none(),
            "{out}"
        );
        Ok(())
    }
}
