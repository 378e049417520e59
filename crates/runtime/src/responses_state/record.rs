//! One stored response: the conversation's whole input up to it, the response as its backend
//! answered it, and who produced it.
//!
//! Models are kept by their policy name, the backend by its policy name and the model by its
//! served id: a later turn is "the same owner" only when both the backend and the served id
//! match, whatever the policy generation or replica that stores or reads it.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::store::StoreError;

/// A response the router answered and keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    pub input: Vec<Value>,
    /// The response object as the backend answered it (`output` inside).
    pub response: Value,
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

    /// The response's output items.
    pub fn output(&self) -> &[Value] {
        self.response
            .get("output")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_stored_response_reads_back_as_written() {
        let stored = StoredResponse {
            id: "resp_1".into(),
            backend: "a".into(),
            served: "m-a".into(),
            model: "first".into(),
            input: vec![json!({"role": "user", "content": "hi"})],
            response: json!({"id": "resp_1", "output": [{"type": "message"}]}),
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
}
