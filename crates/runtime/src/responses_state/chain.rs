//! A stored conversation turned into the next turn's input.
//!
//! The expanded history of a turn is the previous response's stored input, then its output
//! items as input items (OpenAI accepts output items back as input), then the turn's own
//! input. `reasoning` items are left out: they belong to the provider that produced them (an
//! id or an encrypted blob only it can read) and another model cannot take them. A turn's
//! `instructions` are its own, as with OpenAI: earlier turns' instructions do not carry over.
//!
//! Every item stays the JSON text it was stored or sent as; the expanded body is spliced from
//! the turn's members and those items ([`TurnBody::expanded`]).

use bytes::Bytes;
use serde_json::value::RawValue;

pub use crate::pipeline::continuation::Continuation;
use crate::responses_state::record::StoredResponse;
use crate::responses_state::turn::{self, Item, TurnBody};

/// A response's output items as the next turn's input items.
pub fn output_as_input<'o, 'a>(
    output: &'o [&'a RawValue],
) -> impl Iterator<Item = &'a RawValue> + 'o {
    output.iter().copied().filter(|item| {
        turn::member(item, "type").and_then(turn::text).as_deref() != Some("reasoning")
    })
}

/// The whole conversation of a turn continuing `previous`, in order.
pub fn history(previous: &StoredResponse, body: &TurnBody<'_>) -> Vec<Item> {
    let output = previous.output();
    let mut items = previous.input.clone();
    items.extend(output_as_input(&output).map(ToOwned::to_owned));
    items.extend(body.input_items());
    items
}

/// The turn's body for a model that never saw the conversation: `input` is the whole
/// `history`, `previous_response_id` is gone.
pub fn expanded_body(body: &TurnBody<'_>, history: &[Item]) -> Bytes {
    Bytes::from(body.expanded(history))
}

/// How the turn after `previous` is sent, its conversation expanded to `expanded`.
pub fn continuation(previous: &StoredResponse, expanded: Bytes) -> Continuation {
    Continuation::new(previous.backend.clone(), previous.served.clone(), expanded)
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn raw(value: &Value) -> Item {
        serde_json::value::to_raw_value(value).expect("JSON")
    }

    fn stored(input: Vec<Value>, output: Value) -> StoredResponse {
        StoredResponse {
            id: "resp_1".into(),
            backend: "a".into(),
            served: "m-a".into(),
            model: "first".into(),
            input: input.iter().map(raw).collect(),
            response: raw(&json!({"id": "resp_1", "object": "response", "output": output})),
            created_ms: 0,
            conversation: None,
        }
    }

    fn values(items: &[Item]) -> Vec<Value> {
        items
            .iter()
            .map(|i| serde_json::from_str(i.get()).unwrap_or(Value::Null))
            .collect()
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
        let text = json!({"model": "auto", "input": "three", "previous_response_id": "resp_1",
                          "instructions": "be brief"})
        .to_string();
        let body = TurnBody::parse(text.as_bytes()).expect("an object");
        let items = history(&first, &body);
        let texts: Vec<String> = values(&items)
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
        let expanded: Value = serde_json::from_slice(&expanded_body(&body, &items)).expect("JSON");
        assert!(expanded.get("previous_response_id").is_none());
        assert_eq!(expanded["instructions"], "be brief");
        assert_eq!(expanded["input"].as_array().map(Vec::len), Some(3));
    }

    #[test]
    fn stored_items_are_spliced_as_they_were_written() {
        let mut first = stored(Vec::new(), json!([]));
        first.input =
            vec![serde_json::from_str(r#"{ "role" : "user", "content" : "1.50" }"#).expect("JSON")];
        let body = TurnBody::parse(br#"{"input":[]}"#).expect("an object");
        let expanded = expanded_body(&body, &history(&first, &body));
        assert_eq!(
            &expanded[..],
            br#"{"input":[{ "role" : "user", "content" : "1.50" }]}"#
        );
    }

    #[test]
    fn only_the_owner_gets_the_body_as_written() {
        let first = stored(Vec::new(), json!([]));
        let continuation = continuation(
            &first,
            Bytes::from_static(br#"{"model":"auto","input":[]}"#),
        );
        assert!(continuation.owned_by("a", "m-a"));
        assert!(!continuation.owned_by("a", "m-b"));
        assert!(!continuation.owned_by("b", "m-a"));
    }
}
