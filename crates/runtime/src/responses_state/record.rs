//! One stored response: the conversation's whole input up to it, the response as its backend
//! answered it, and who produced it.
//!
//! Models are kept by their policy name, the backend by its policy name and the model by its
//! served id: a later turn is "the same owner" only when both the backend and the served id
//! match, whatever the policy generation or replica that stores or reads it.
//!
//! The input items and the response are kept as the JSON text they came as (raw values, never
//! a tree), so that a continued turn is expanded by splicing them. The stored form is the same
//! JSON object it was when they were kept as trees: entries written either way read back.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::responses_state::turn::{self, Item, Listed};
use crate::store::StoreError;

/// A response the router answered and keeps.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredResponse {
    pub id: String,
    /// The backend (its policy name) that produced the response.
    pub backend: String,
    /// The served model id it was sent as.
    pub served: String,
    /// The logical model (policy name).
    pub model: String,
    /// Every input item of the conversation up to this response, earlier turns' outputs
    /// included, in order: what a model that never saw the conversation must be sent.
    pub input: Vec<Item>,
    /// The response object as the backend answered it (`output` inside).
    pub response: Box<RawValue>,
    pub created_ms: u64,
    /// The id of the conversation's first response, for a response that continues one: what
    /// names the whole conversation, turn after turn (the default session identity reads it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
}

impl StoredResponse {
    /// The stored form (JSON), as both stores keep it.
    pub fn encode(&self) -> Result<Bytes, StoreError> {
        serde_json::to_vec(self)
            .map(Bytes::from)
            .map_err(|e| StoreError::Corrupt(format!("cannot encode a response: {e}")))
    }

    pub fn decode(bytes: &[u8]) -> Result<StoredResponse, StoreError> {
        serde_json::from_slice(bytes)
            .map_err(|e| StoreError::Corrupt(format!("a stored response is unreadable: {e}")))
    }

    /// The conversation this response is part of: its first response's id.
    pub fn conversation(&self) -> &str {
        self.conversation.as_deref().unwrap_or(&self.id)
    }

    /// The response's output items (none when its `output` is no array).
    pub fn output(&self) -> Vec<&RawValue> {
        match turn::member(&self.response, "output").map(turn::listed) {
            Some(Listed::Items(items)) => items,
            _ => Vec::new(),
        }
    }
}

/// Two stored responses are equal when they hold the same text.
impl PartialEq for StoredResponse {
    fn eq(&self, other: &StoredResponse) -> bool {
        fn texts(items: &[Item]) -> Vec<&str> {
            items.iter().map(|i| i.get()).collect()
        }
        self.id == other.id
            && self.backend == other.backend
            && self.served == other.served
            && self.model == other.model
            && texts(&self.input) == texts(&other.input)
            && self.response.get() == other.response.get()
            && self.created_ms == other.created_ms
            && self.conversation == other.conversation
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn raw(value: &Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(value).expect("JSON")
    }

    #[test]
    fn a_stored_response_reads_back_as_written() {
        let stored = StoredResponse {
            id: "resp_1".into(),
            backend: "a".into(),
            served: "m-a".into(),
            model: "first".into(),
            input: vec![raw(&json!({"role": "user", "content": "hi"}))],
            response: raw(&json!({"id": "resp_1", "output": [{"type": "message"}]})),
            created_ms: 5,
            conversation: None,
        };
        let bytes = stored.encode().expect("encodes");
        assert_eq!(StoredResponse::decode(&bytes), Ok(stored.clone()));
        assert_eq!(stored.output().len(), 1);
        assert!(matches!(
            StoredResponse::decode(b"{"),
            Err(StoreError::Corrupt(_))
        ));
    }

    /// What a router that kept trees wrote (keys sorted, no whitespace) reads back, the same
    /// items and response; and what this one writes is the same JSON object.
    #[test]
    fn an_entry_kept_as_trees_reads_back() {
        let old = json!({"id": "resp_1", "backend": "a", "served": "m-a", "model": "first",
            "input": [{"content": "hi", "role": "user"}],
            "response": {"id": "resp_1", "object": "response", "output": [{"type": "message"}]},
            "created_ms": 5, "conversation": "resp_0"});
        let bytes = serde_json::to_vec(&old).expect("JSON");
        let stored = StoredResponse::decode(&bytes).expect("reads");
        assert_eq!(stored.conversation(), "resp_0");
        assert_eq!(stored.input[0].get(), r#"{"content":"hi","role":"user"}"#);
        assert_eq!(stored.output().len(), 1);
        let again: Value =
            serde_json::from_slice(&stored.encode().expect("encodes")).expect("JSON");
        assert_eq!(again, old);
    }

    #[test]
    fn a_response_without_an_output_list_has_no_output_items() {
        for response in [json!({"id": "r"}), json!({"output": {"a": 1}}), json!([1])] {
            let stored = StoredResponse {
                id: "r".into(),
                backend: "a".into(),
                served: "m".into(),
                model: "m".into(),
                input: Vec::new(),
                response: raw(&response),
                created_ms: 0,
                conversation: None,
            };
            assert!(stored.output().is_empty(), "{response}");
        }
    }
}
