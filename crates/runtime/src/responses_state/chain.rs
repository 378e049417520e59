//! A stored conversation turned into the next turn's input.
//!
//! The expanded history of a turn is the previous response's stored input, then its output
//! items as input items (OpenAI accepts output items back as input), then the turn's own
//! input. `reasoning` items are left out: they belong to the provider that produced them (an
//! id or an encrypted blob only it can read) and another model cannot take them. A turn's
//! `instructions` are its own, as with OpenAI: earlier turns' instructions do not carry over.

use serde_json::{json, Map, Value};

pub use crate::pipeline::continuation::Continuation;
use crate::responses_state::record::StoredResponse;

/// A request's `input` as a list of input items: a string is one user message.
pub fn input_items(body: &Value) -> Vec<Value> {
    match body.get("input") {
        Some(Value::String(text)) => vec![json!({"role": "user", "content": text})],
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    }
}

/// A response's output items as the next turn's input items.
pub fn output_as_input(output: &[Value]) -> impl Iterator<Item = &Value> {
    output
        .iter()
        .filter(|item| item.get("type").and_then(Value::as_str) != Some("reasoning"))
}

/// The whole conversation of a turn continuing `previous`, in order.
pub fn history(previous: &StoredResponse, body: &Value) -> Vec<Value> {
    let mut items = previous.input.clone();
    items.extend(output_as_input(previous.output()).cloned());
    items.extend(input_items(body));
    items
}

/// The turn's body for a model that never saw the conversation: `input` is the whole
/// `history`, `previous_response_id` is gone. `None` when the body is not an object.
pub fn expanded_body(body: &Value, history: Vec<Value>) -> Option<Value> {
    let mut object: Map<String, Value> = body.as_object()?.clone();
    object.remove("previous_response_id");
    object.insert("input".into(), Value::Array(history));
    Some(Value::Object(object))
}

/// How the turn after `previous` is sent, its conversation expanded to `expanded`.
pub fn continuation(previous: &StoredResponse, expanded: &Value) -> Continuation {
    Continuation::new(previous.backend.clone(), previous.served.clone(), expanded)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(input: Vec<Value>, output: Value) -> StoredResponse {
        StoredResponse {
            id: "resp_1".into(),
            backend: "a".into(),
            served: "m-a".into(),
            model: "first".into(),
            input,
            response: json!({"id": "resp_1", "object": "response", "output": output}),
            created_ms: 0,
            conversation: None,
        }
    }

    #[test]
    fn a_chain_expands_to_every_input_and_output_in_order() {
        let first = stored(
            vec![json!({"role": "user", "content": "one"})],
            json!([
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "two"}]},
            ]),
        );
        let body = json!({"model": "auto", "input": "three", "previous_response_id": "resp_1",
                          "instructions": "be brief"});
        let items = history(&first, &body);
        let texts: Vec<String> = items
            .iter()
            .map(|i| match &i["content"] {
                Value::String(s) => s.clone(),
                parts => parts[0]["text"].as_str().unwrap_or_default().to_owned(),
            })
            .collect();
        assert_eq!(
            texts,
            ["one", "two", "three"],
            "reasoning is the provider's own"
        );
        let expanded = expanded_body(&body, items).expect("an object");
        assert!(expanded.get("previous_response_id").is_none());
        assert_eq!(expanded["instructions"], "be brief");
        assert_eq!(expanded["input"].as_array().map(Vec::len), Some(3));
        assert_eq!(expanded_body(&json!([1]), Vec::new()), None);
    }

    #[test]
    fn input_items_read_both_shapes() {
        assert_eq!(
            input_items(&json!({"input": "hi"})),
            [json!({"role": "user", "content": "hi"})]
        );
        let items = json!([{"type": "function_call_output", "call_id": "c", "output": "ok"}]);
        assert_eq!(
            input_items(&json!({"input": items.clone()})),
            items.as_array().cloned().unwrap_or_default()
        );
        assert!(input_items(&json!({})).is_empty());
    }

    #[test]
    fn only_the_owner_gets_the_body_as_written() {
        let first = stored(Vec::new(), json!([]));
        let continuation = continuation(&first, &json!({"model": "auto", "input": []}));
        assert!(continuation.owned_by("a", "m-a"));
        assert!(!continuation.owned_by("a", "m-b"));
        assert!(!continuation.owned_by("b", "m-a"));
    }
}
