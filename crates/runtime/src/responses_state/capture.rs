//! A relayed `/v1/responses` answer kept once it has ended whole.
//!
//! [`Capture`] reads the relayed body (a [`Rewriter`] that passes every frame to the client
//! untouched and as it arrives), and keeps a copy (up to a bound). When the answer has ended whole, the copy is
//! read off the request path — a JSON answer is the response itself, an event stream carries it
//! in its `response.completed` (or `response.incomplete`) event — and stored with the
//! conversation's input and its producer. An answer cut off, abandoned by the client, over the
//! bound, or that is no response is not stored. On a redacting route the request's vault is kept
//! under the same response id ([`KeepVault`]), whether or not the response itself is.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use serde_json::value::RawValue;

use crate::cache::fill::MAX_STREAM_BYTES;
use crate::hooks::BoxFuture;
use crate::relay::body::ProxyBody;
use crate::relay::rewriting::{Rewriter, Rewritten};
use crate::responses_state::record::StoredResponse;
use crate::responses_state::turn::{self, Item};
use crate::responses_state::vault::KeepVault;
use crate::responses_state::Scope;
use crate::store::clock::Clock;

/// Statuses of a response worth continuing.
const KEPT_STATUSES: [&str; 2] = ["completed", "incomplete"];

/// Who answered, as the stored response records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Producer {
    pub backend: String,
    pub served: String,
    pub model: String,
}

/// What storing an answer needs besides the answer.
pub struct Keep {
    pub scope: Scope,
    pub producer: Producer,
    /// The conversation's input up to this answer (earlier turns expanded), as JSON text.
    pub input: Vec<Item>,
    /// The conversation's first response, when this answer continues one.
    pub conversation: Option<String>,
    pub ttl_ms: u64,
    pub max_bytes: usize,
    pub clock: Arc<dyn Clock>,
}

/// Stores a relayed body's whole answer once it has ended.
///
/// The answer's last frame (a JSON answer's last bytes, an event stream's final event) is held
/// back until the write is done, so a client that continues the conversation the moment it has
/// the answer finds the response stored, on this replica or another. The write is bounded by
/// the store's own timeout.
pub struct Capture {
    sse: bool,
    parts: Vec<Bytes>,
    len: usize,
    keep: Option<Keep>,
    /// The request's vault, kept under the answer's id.
    seal: Option<KeepVault>,
    /// The largest JSON answer read (an event stream's bound is the cache's).
    max_bytes: usize,
    /// Where the event stream stands with its final event.
    last_event: FinalEvent,
    /// The last frame ended the stream's final event.
    final_event_ended: bool,
}

/// Whether an event stream's final event (`response.completed` or `response.incomplete`) has
/// arrived whole. Its name may come in one frame and its data in the next: the answer is kept
/// only once the stream stands between two events again, or the response would be read cut.
#[derive(Debug, Default)]
struct FinalEvent {
    named: bool,
}

impl FinalEvent {
    /// Whether `data`, the stream's next frame, ends the final event.
    fn ends(&mut self, data: &[u8]) -> bool {
        if !self.named {
            self.named = FINAL_EVENTS
                .iter()
                .any(|event| data.windows(event.len()).any(|w| w == *event));
        }
        self.named
            && [&b"\n\n"[..], b"\r\n\r\n", b"\r\r"]
                .iter()
                .any(|end| data.ends_with(end))
    }
}

impl Capture {
    /// `inner` relayed as it comes, its whole answer stored as `keep` says and its vault as
    /// `seal` says; a JSON answer over `max_bytes` is neither.
    pub fn new(
        inner: ProxyBody,
        sse: bool,
        (keep, seal): (Option<Keep>, Option<KeepVault>),
        max_bytes: usize,
    ) -> Rewritten<Capture> {
        let capture = Capture {
            sse,
            parts: Vec::new(),
            len: 0,
            keep,
            seal,
            max_bytes,
            last_event: FinalEvent::default(),
            final_event_ended: false,
        };
        Rewritten::new(inner, capture)
    }

    fn limit(&self) -> usize {
        if self.sse {
            MAX_STREAM_BYTES
        } else {
            self.max_bytes
        }
    }

    fn observe(&mut self, data: &Bytes) {
        if !self.holds() {
            return;
        }
        self.len += data.len();
        if self.len > self.limit() {
            tracing::debug!(bytes = self.len, "a response too large to keep");
            if self.seal.is_some() {
                tracing::warn!(bytes = self.len, "a redacted response too large to read keeps no vault: its chain cannot continue on a redacting route");
            }
            self.keep = None;
            self.seal = None;
            self.parts = Vec::new();
            return;
        }
        self.parts.push(data.clone());
    }

    /// The write of the kept answer, once.
    fn write(&mut self) -> Option<BoxFuture<'static, ()>> {
        if !self.holds() {
            return None;
        }
        let (keep, seal) = (self.keep.take(), self.seal.take());
        let parts = std::mem::take(&mut self.parts);
        let (len, sse) = (self.len, self.sse);
        Some(Box::pin(async move {
            let mut whole = BytesMut::with_capacity(len);
            for part in &parts {
                whole.extend_from_slice(part);
            }
            let answer = if sse {
                final_response(&whole)
            } else {
                serde_json::from_slice::<Box<RawValue>>(&whole).ok()
            };
            let Some(response) = answer else {
                tracing::debug!(sse, "an answer that carries no response is not kept");
                return;
            };
            match (seal, response_id(&response)) {
                (Some(seal), Some(id)) => seal.store(&id).await,
                (Some(_), None) => {
                    tracing::debug!("an answer that is no finished response keeps no vault");
                }
                (None, _) => {}
            }
            if let Some(keep) = keep {
                store(keep, response).await;
            }
        }))
    }
}

/// The event types that end a responses event stream with its response.
const FINAL_EVENTS: [&[u8]; 2] = [b"response.completed", b"response.incomplete"];

/// Stores `response` (a response object, as the backend wrote it) as `keep` says, when it is
/// one worth continuing.
pub async fn store(keep: Keep, response: Box<RawValue>) {
    let Some(id) = response_id(&response) else {
        tracing::debug!("an answer that is no finished response is not kept");
        return;
    };
    let now = keep.clock.now_ms();
    let stored = StoredResponse {
        id,
        backend: keep.producer.backend,
        served: keep.producer.served,
        model: keep.producer.model,
        input: keep.input,
        response,
        created_ms: now,
        conversation: keep.conversation,
    };
    let bytes = match stored.encode() {
        Ok(bytes) if bytes.len() <= keep.max_bytes => bytes,
        Ok(bytes) => {
            tracing::warn!(id = %stored.id, bytes = bytes.len(), limit = keep.max_bytes,
                "a response is larger than SRC_RESPONSES_MAX_BYTES and is not kept");
            return;
        }
        Err(err) => {
            tracing::warn!(%err, "cannot encode a response");
            return;
        }
    };
    let scope = &keep.scope;
    if let Err(err) = scope
        .store
        .put(&scope.tenant, &stored.id, bytes, now, keep.ttl_ms)
        .await
    {
        // An unreachable store was reported once by its link, not once a response.
        if err.is_outage() {
            tracing::debug!(%err, store = scope.store.kind(), id = %stored.id, "cannot keep a response");
        } else {
            tracing::warn!(%err, store = scope.store.kind(), id = %stored.id, "cannot keep a response");
        }
    }
}

/// The id of a response object whose status is worth continuing.
pub(crate) fn response_id(response: &RawValue) -> Option<String> {
    // One walk of the response for its three members.
    let [id, object, status] = turn::members(response, ["id", "object", "status"]);
    fn text(raw: Option<&RawValue>) -> Option<std::borrow::Cow<'_, str>> {
        raw.and_then(turn::text)
    }
    let status = text(status)?;
    (text(object).as_deref() == Some("response") && KEPT_STATUSES.contains(&status.as_ref()))
        .then(|| text(id).map(|id| id.into_owned()))
        .flatten()
}

/// The response an event stream ended with: the `response` of its last `response.completed`
/// or `response.incomplete` event, as the backend wrote it.
pub fn final_response(stream: &[u8]) -> Option<Box<RawValue>> {
    let text = String::from_utf8_lossy(stream).replace("\r\n", "\n");
    let mut found = None;
    for event in text.split("\n\n") {
        let data: Vec<&str> = event
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if data.is_empty() {
            continue;
        }
        let data = data.join("\n");
        let Ok(event) = serde_json::from_str::<&RawValue>(&data) else {
            continue;
        };
        let kind = turn::member(event, "type").and_then(turn::text);
        if matches!(
            kind.as_deref(),
            Some("response.completed" | "response.incomplete")
        ) {
            found = turn::member(event, "response").map(ToOwned::to_owned);
        }
    }
    found
}

impl Rewriter for Capture {
    /// The frame as it came; a copy is kept.
    fn feed(&mut self, data: &Bytes) -> Bytes {
        self.observe(data);
        self.final_event_ended = self.sse && self.last_event.ends(data);
        data.clone()
    }

    fn finish(&mut self) -> Bytes {
        Bytes::new()
    }

    /// The write, once the answer has ended: the inner body says so, or the last frame ended an
    /// event stream's final event.
    fn wait(&mut self, ended: bool) -> Option<BoxFuture<'static, ()>> {
        if ended || self.final_event_ended {
            self.write()
        } else {
            None
        }
    }

    fn passes_through(&self) -> bool {
        true
    }

    fn holds(&self) -> bool {
        self.keep.is_some() || self.seal.is_some()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_final_event_split_across_frames_ends_the_answer_once_whole() {
        let mut last = FinalEvent::default();
        assert!(!last.ends(b"event: response.output_item.done\ndata: {}\n\n"));
        assert!(!last.ends(b"event: response.completed\ndata: {\"type\":\"response.comp"));
        assert!(!last.ends(b"leted\",\"response\":{\"id\""));
        assert!(last.ends(b":\"resp_1\"}}\n\n"));
        let mut whole = FinalEvent::default();
        assert!(whole.ends(b"event: response.incomplete\r\ndata: {}\r\n\r\n"));
    }

    #[test]
    fn a_stream_s_final_event_carries_the_response() {
        let done =
            json!({"id": "resp_1", "object": "response", "status": "completed", "output": []});
        let stream = format!(
            "event: response.created\ndata: {}\n\n\
             event: response.output_text.delta\r\ndata: {}\r\n\r\n\
             event: response.completed\ndata: {}\n\n",
            json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}),
            json!({"type": "response.output_text.delta", "delta": "hi"}),
            json!({"type": "response.completed", "response": done}),
        );
        let found = final_response(stream.as_bytes()).map(|r| r.get().to_owned());
        assert_eq!(found, Some(done.to_string()));
        assert!(final_response(b"event: response.created\ndata: {}\n\n").is_none());
    }

    #[test]
    fn only_finished_responses_have_an_id_to_keep() {
        let id = |value: serde_json::Value| {
            serde_json::value::to_raw_value(&value)
                .ok()
                .and_then(|raw| response_id(&raw))
        };
        let response = |status: &str| json!({"id": "r", "object": "response", "status": status});
        assert_eq!(id(response("completed")).as_deref(), Some("r"));
        assert_eq!(id(response("incomplete")).as_deref(), Some("r"));
        assert_eq!(id(response("failed")), None);
        assert_eq!(
            id(json!({"id": "r", "object": "chat.completion", "status": "completed"})),
            None
        );
        assert_eq!(id(json!({"error": {"message": "no"}})), None);
        assert_eq!(id(json!(["r"])), None);
    }
}
