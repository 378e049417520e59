//! Storing an answer once it has been relayed.
//!
//! A missed request carries a [`Fill`] to the relay. The relay forwards every frame untouched
//! and as it arrives; only when the answer has ended whole (status 200, no error, the client
//! still there) does it hand the frames it kept to [`Fill::offer`], which moves everything else
//! off the request path: joining the frames, assembling a streamed chat answer into its
//! completion ([`crate::cache::assemble`]), checking that the body is a complete answer, and the
//! store's write run on a task of their own. Only the proposed model's own answer is offered (not a fallback's), so an entry
//! is always an answer of the model its scope names.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use serde_json::Value;
use src_compiler::hir::ModelId;

use crate::cache::metrics::CacheMetrics;
use crate::cache::scope::Scope;
use crate::cache::store::{CacheStore, Inserted};
use crate::openai::Api;
use crate::store::clock::Clock;

/// The most of an event stream kept for assembly: streaming costs many bytes per token of text,
/// so a stream may be far larger than the answer it assembles into.
pub const MAX_STREAM_BYTES: usize = 16 << 20;

/// Values of the stores metric's `result` label.
pub mod result {
    pub const STORED: &str = "stored";
    pub const TOO_LARGE: &str = "too_large";
    pub const INVALID: &str = "invalid";
    pub const ERROR: &str = "error";
}

/// Where a missed request's answer goes.
#[derive(Clone)]
pub struct Fill {
    /// The proposed model: only its answer is stored.
    pub model: ModelId,
    pub(crate) api: Api,
    pub(crate) store: Arc<dyn CacheStore>,
    pub(crate) scope: Scope,
    pub(crate) vector: Arc<[f32]>,
    /// The final user message the vector embeds, kept for the look-alike check.
    pub(crate) question: Arc<str>,
    pub(crate) ttl_ms: u64,
    pub(crate) max_bytes: usize,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) metrics: CacheMetrics,
}

impl std::fmt::Debug for Fill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fill")
            .field("model", &self.model)
            .field("api", &self.api)
            .field("store", &self.store.kind())
            .field("scope", &self.scope)
            .field("ttl_ms", &self.ttl_ms)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Fill {
    fn eq(&self, other: &Self) -> bool {
        self.model == other.model
            && self.api == other.api
            && Arc::ptr_eq(&self.store, &other.store)
            && self.scope == other.scope
            && self.vector == other.vector
            && self.question == other.question
            && self.ttl_ms == other.ttl_ms
    }
}

impl Fill {
    /// Offers a relayed answer: `parts` are its frames in order, `len` their total length (the
    /// relay stops keeping frames past its own limit, so a `len` over `max_bytes` is never
    /// joined). Returns at once; the store's write runs on its own task.
    /// `streamed` says the frames are a chat event stream, assembled before it is stored (its
    /// size limit applies to the assembled answer; `len` may then be larger).
    pub fn offer(self, parts: Vec<Bytes>, len: usize, streamed: bool) {
        let limit = if streamed {
            MAX_STREAM_BYTES
        } else {
            self.max_bytes
        };
        if len > limit || parts.iter().map(Bytes::len).sum::<usize>() != len {
            self.metrics.stored(result::TOO_LARGE);
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(self.store_answer(parts, len, streamed));
    }

    async fn store_answer(self, parts: Vec<Bytes>, len: usize, streamed: bool) {
        let body = match parts.len() {
            1 => parts.into_iter().next().unwrap_or_default(),
            _ => {
                let mut whole = BytesMut::with_capacity(len);
                for part in &parts {
                    whole.extend_from_slice(part);
                }
                whole.freeze()
            }
        };
        let body = if streamed {
            match crate::cache::assemble::chat_completion(&body) {
                Some(assembled) => assembled,
                None => {
                    self.metrics.stored(result::INVALID);
                    return;
                }
            }
        } else {
            body
        };
        if body.len() > self.max_bytes {
            self.metrics.stored(result::TOO_LARGE);
            return;
        }
        if !complete_answer(self.api, &body) {
            self.metrics.stored(result::INVALID);
            return;
        }
        let now = self.clock.now_ms();
        let stored = self
            .store
            .insert(
                &self.scope,
                &self.vector,
                &self.question,
                body,
                now,
                self.ttl_ms,
            )
            .await;
        match stored {
            Ok(Inserted::Stored) => self.metrics.stored(result::STORED),
            Ok(Inserted::TooLarge) => self.metrics.stored(result::TOO_LARGE),
            Err(err) => {
                // An unreachable store was reported once by its link, not once an answer.
                if err.is_outage() {
                    tracing::debug!(%err, store = self.store.kind(), "cannot store an answer in the cache");
                } else {
                    tracing::warn!(%err, store = self.store.kind(), "cannot store an answer in the cache");
                }
                self.metrics.stored(result::ERROR);
                self.metrics
                    .store_error(self.store.kind(), "store", err.kind());
            }
        }
        self.metrics.observe(self.store.as_ref());
    }
}

/// Whether `body` is a whole answer of `api`: a `chat.completion` with choices, a `response`
/// whose status is `completed`, or a Messages `message` that has stopped.
pub fn complete_answer(api: Api, body: &[u8]) -> bool {
    let Ok(Value::Object(answer)) = serde_json::from_slice::<Value>(body) else {
        return false;
    };
    let object = answer.get("object").and_then(Value::as_str);
    match api {
        Api::Chat => {
            object == Some("chat.completion")
                && answer
                    .get("choices")
                    .and_then(Value::as_array)
                    .is_some_and(|c| !c.is_empty())
        }
        Api::Responses => {
            object == Some("response")
                && answer.get("status").and_then(Value::as_str) == Some("completed")
        }
        Api::Messages => {
            answer.get("type").and_then(Value::as_str) == Some("message")
                && answer.get("content").is_some_and(Value::is_array)
                && answer.get("stop_reason").is_some_and(|r| !r.is_null())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_complete_answers_are_stored() {
        let chat = br#"{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}]}"#;
        assert!(complete_answer(Api::Chat, chat));
        assert!(!complete_answer(Api::Responses, chat));
        assert!(!complete_answer(
            Api::Chat,
            br#"{"object":"chat.completion","choices":[]}"#
        ));
        assert!(!complete_answer(Api::Chat, br#"{"error":{"message":"x"}}"#));
        assert!(!complete_answer(Api::Chat, b"not json"));
        let response = br#"{"object":"response","status":"completed","error":null,"output":[]}"#;
        assert!(complete_answer(Api::Responses, response));
        let message = br#"{"type":"message","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn"}"#;
        assert!(complete_answer(Api::Messages, message));
        assert!(!complete_answer(Api::Chat, message));
        assert!(!complete_answer(Api::Messages, chat));
        let partial = br#"{"object":"response","status":"incomplete","output":[]}"#;
        assert!(!complete_answer(Api::Responses, partial));
    }
}
