//! Response bodies: small local answers, and the relay that streams an upstream answer through.
//!
//! The relay forwards each upstream frame as the same `Bytes` the moment it arrives (an SSE
//! stream is never buffered whole), while it watches the bytes for usage evidence and times the
//! first byte. It owns the request's [`Completion`]: when the stream ends, fails, or the client
//! goes away (the body is dropped, which also drops the upstream connection and so cancels the
//! backend's work), the completion writes the request's log line and metrics exactly once. A
//! relay that carries a cache [`Fill`] hands the frames it kept to it once a 200 answer has
//! ended whole; nothing is held back from the client for it.
//!
//! An answer that fails after its head was relayed (the upstream resets the connection, or stays
//! silent longer than the backend's `timeout` between two pieces) must not look complete: an
//! event stream gets one OpenAI-style error event (`data: {"error": {..}}`) and then ends,
//! without a `[DONE]`; any other body is cut off with an error, so the client's HTTP reader sees
//! a truncated message. A stream that already carried its `[DONE]` simply ends.
//!
//! The relay also gives the model's cooldown its [`Verdict`] on the answer: whole when the body
//! ended (a reset after `[DONE]` included), broken when it failed, none when the client left.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::time::Sleep;

use crate::cache::fill::MAX_STREAM_BYTES;
use crate::cache::Fill;
use crate::cooldown::Verdict;
use crate::hooks::UpstreamOutcomes;
use crate::openai::{Usage, UsageScanner};
use crate::relay::completion::Completion;
use crate::relay::counted::Counted;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Non-streaming answers are kept (as shared `Bytes`, no copy) up to this size to read their
/// `usage`; larger ones go through unread.
const MAX_JSON_EVIDENCE: usize = 16 << 20;

/// Every response body the router sends.
pub enum ProxyBody {
    Full(Full<Bytes>),
    Relay(Box<Relay>),
    /// A body a later step wraps around one of these (a kept `/v1/responses` answer, a
    /// translated Messages stream).
    Boxed(UnsyncBoxBody<Bytes, BoxError>),
}

impl From<Bytes> for ProxyBody {
    fn from(bytes: Bytes) -> Self {
        ProxyBody::Full(Full::new(bytes))
    }
}

impl From<String> for ProxyBody {
    fn from(s: String) -> Self {
        ProxyBody::Full(Full::new(Bytes::from(s)))
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ProxyBody::Full(full) => Pin::new(full)
                .poll_frame(cx)
                .map_err(|never| match never {}),
            ProxyBody::Relay(relay) => Pin::new(relay.as_mut()).poll_frame(cx),
            ProxyBody::Boxed(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Full(full) => full.is_end_stream(),
            ProxyBody::Relay(relay) => relay.is_end_stream(),
            ProxyBody::Boxed(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Full(full) => full.size_hint(),
            ProxyBody::Relay(relay) => relay.size_hint(),
            ProxyBody::Boxed(body) => body.size_hint(),
        }
    }
}

/// How usage is read from the answer.
enum Evidence {
    Sse(UsageScanner),
    Json { parts: Vec<Bytes>, len: usize },
}

/// Rewrites a whole 2xx JSON answer into the one the client gets, and reads the usage it
/// reports: a relay given one ([`Relay::with_rewrite`]) reads the answer once for both, where
/// reading its usage and then rewriting it would read it twice. `None`: the answer is not of
/// the form the rewrite takes. The rewrite adds the answer's text to the router's own counts,
/// which stand in for what the backend did not report.
pub type Rewrite = fn(&[u8], &Counted) -> Option<(Bytes, Option<Usage>)>;

/// An upstream answer on its way to the client.
pub struct Relay {
    inner: Incoming,
    evidence: Evidence,
    sent_at: Instant,
    first_byte: Option<Instant>,
    completion: Option<Completion>,
    /// The session to tell, and the model to blame, when the answer turns out not to be one.
    outcomes: Option<(Arc<dyn UpstreamOutcomes>, String)>,
    /// Where a complete answer is stored (a cache miss's).
    fill: Option<Fill>,
    /// The event stream's frames, kept only for `fill` (a JSON answer's are in `evidence`).
    stream: Vec<Bytes>,
    stream_len: usize,
    /// The longest silence allowed between two pieces of the answer, and its timer.
    idle: Option<(Duration, Pin<Box<Sleep>>)>,
    /// The last two bytes relayed, to tell whether the stream stands between two events.
    tail: [u8; 2],
    /// Set once the answer failed and the client was told: nothing more is relayed.
    ended: bool,
    /// The model's cooldown, told how the answer ended.
    verdict: Option<Verdict>,
    /// Run on a whole 2xx JSON answer in place of reading its usage; its answer is kept for
    /// [`Relay::take_rewritten`].
    rewrite: Option<Rewrite>,
    rewritten: Option<Bytes>,
    /// The router's own counts, logged for what a 2xx answer's backend did not report (an
    /// answer translated into an API that always reports usage).
    counted: Option<Arc<Counted>>,
}

/// The error event that ends an event stream which failed after its first byte, in the shape
/// of OpenAI's stream errors (its Python client raises `APIError` with this message).
pub fn stream_error_event(message: &str) -> Bytes {
    let event = serde_json::json!({"error": {
        "message": message,
        "type": "server_error",
        "param": null,
        "code": "upstream_stream_failed",
    }});
    Bytes::from(format!("data: {event}\n\n"))
}

impl Relay {
    /// `sent_at` is when the request went upstream (for time to first byte); `sse` says whether
    /// the answer is an event stream.
    pub fn new(inner: Incoming, sse: bool, sent_at: Instant, completion: Completion) -> Relay {
        let evidence = if sse {
            Evidence::Sse(UsageScanner::new())
        } else {
            Evidence::Json {
                parts: Vec::new(),
                len: 0,
            }
        };
        Relay {
            inner,
            evidence,
            sent_at,
            first_byte: None,
            completion: Some(completion),
            outcomes: None,
            fill: None,
            stream: Vec::new(),
            stream_len: 0,
            idle: None,
            tail: *b"\n\n",
            ended: false,
            verdict: None,
            rewrite: None,
            rewritten: None,
            counted: None,
        }
    }

    /// Rewrites a whole 2xx JSON answer with `rewrite`, whose usage is reported; the answer is
    /// still relayed as it came, and the rewritten one is there to take once it has ended.
    pub fn with_rewrite(mut self, rewrite: Rewrite) -> Relay {
        self.rewrite = Some(rewrite);
        self
    }

    /// Logs `counted` for the counts a whole 2xx answer does not report.
    pub fn with_counts(mut self, counted: Arc<Counted>) -> Relay {
        self.counted = Some(counted);
        self
    }

    /// The rewritten answer, once the answer has ended whole and the rewrite took it.
    pub fn take_rewritten(&mut self) -> Option<Bytes> {
        self.rewritten.take()
    }

    /// Ends the answer as failed when no piece of it arrives for `limit`.
    pub fn with_idle_timeout(mut self, limit: Duration) -> Relay {
        self.idle = Some((limit, Box::pin(tokio::time::sleep(limit))));
        self
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        match self.evidence {
            // An event stream may gain an error event: its length is never promised.
            Evidence::Sse(_) => SizeHint::default(),
            Evidence::Json { .. } => self.inner.size_hint(),
        }
    }

    /// The answer failed after its head went out (`error` says how): tells the client in a way
    /// it cannot take for a complete answer, and reports the request.
    fn fail(&mut self, error: String) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.judge_broken();
        let done = match &self.evidence {
            Evidence::Sse(scanner) => Some(scanner.saw_done()),
            Evidence::Json { .. } => None,
        };
        if let Some(verdict) = self.verdict.take() {
            if done == Some(true) {
                verdict.whole();
            } else {
                verdict.broken();
            }
        }
        self.complete(Some(error.clone()));
        self.ended = true;
        match done {
            Some(true) => Poll::Ready(None),
            Some(false) => {
                let event = stream_error_event(&format!("the model's answer failed: {error}"));
                // A half-written event is closed first, so the error is an event of its own
                // (blank lines after a whole event are no event: readers skip them).
                let event = if self.tail == *b"\n\n" {
                    event
                } else {
                    let mut closed = b"\n\n".to_vec();
                    closed.extend_from_slice(&event);
                    Bytes::from(closed)
                };
                Poll::Ready(Some(Ok(Frame::data(event))))
            }
            None => Poll::Ready(Some(Err(error.into()))),
        }
    }

    /// Tells `verdict` how the answer ended (see the module comment).
    pub fn with_verdict(mut self, verdict: Verdict) -> Relay {
        self.verdict = Some(verdict);
        self
    }

    /// Offers the answer to the response cache once it has ended whole with status 200.
    pub fn with_cache(mut self, fill: Fill) -> Relay {
        self.fill = Some(fill);
        self
    }

    /// Reports to `outcomes` a failure of `model` when the answer breaks off or, for a 2xx
    /// JSON answer, is not a JSON object without `error` (HTTP 200 alone is no success).
    pub fn with_outcomes(mut self, outcomes: Arc<dyn UpstreamOutcomes>, model: &str) -> Relay {
        self.outcomes = Some((outcomes, model.to_owned()));
        self
    }

    /// At the end of the answer: reports a malformed one.
    fn judge_answer(&mut self) {
        let Some((outcomes, model)) = self.outcomes.take() else {
            return;
        };
        let success = self
            .completion
            .as_ref()
            .is_some_and(|c| (200..300).contains(&c.record.status));
        let Evidence::Json { parts, len } = &self.evidence else {
            return;
        };
        if !success || *len > MAX_JSON_EVIDENCE {
            return;
        }
        let well_formed = read_whole(parts, well_formed);
        if !well_formed {
            outcomes.failed(&model, "malformed");
        }
    }

    /// The upstream cut the answer off.
    fn judge_broken(&mut self) {
        if let Some((outcomes, model)) = self.outcomes.take() {
            outcomes.failed(&model, "broken");
        }
    }

    fn observe(&mut self, data: &Bytes) {
        if self.first_byte.is_none() && !data.is_empty() {
            self.first_byte = Some(Instant::now());
        }
        match data.len() {
            0 => {}
            1 => self.tail = [self.tail[1], data[0]],
            n => self.tail = [data[n - 2], data[n - 1]],
        }
        match &mut self.evidence {
            Evidence::Sse(scanner) => {
                scanner.feed(data);
                if self.fill.is_some() && self.stream_len <= MAX_STREAM_BYTES {
                    self.stream_len += data.len();
                    self.stream.push(data.clone());
                }
            }
            Evidence::Json { parts, len } => {
                if *len <= MAX_JSON_EVIDENCE {
                    *len += data.len();
                    parts.push(data.clone());
                }
            }
        }
    }

    fn usage(&mut self) -> Option<Usage> {
        match &mut self.evidence {
            Evidence::Sse(scanner) => {
                scanner.finish();
                scanner.usage()
            }
            Evidence::Json { parts, len } => {
                if *len > MAX_JSON_EVIDENCE {
                    return None;
                }
                read_whole(parts, Usage::from_body)
            }
        }
    }

    /// Runs `rewrite` over a whole JSON answer, keeping what it wrote; the usage it read.
    fn rewritten_usage(&mut self, rewrite: Rewrite) -> Option<Usage> {
        let Evidence::Json { parts, len } = &self.evidence else {
            return self.usage();
        };
        if *len > MAX_JSON_EVIDENCE {
            return None;
        }
        let counted = self.counted.clone().unwrap_or_default();
        let (rewritten, usage) = read_whole(parts, |answer| rewrite(answer, &counted))?;
        self.rewritten = Some(rewritten);
        usage
    }

    /// Reports the request once: `error` says how the answer ended early, if it did.
    fn complete(&mut self, error: Option<String>) {
        // A failure told the verdict already; an error left here is the client's going away.
        if let (Some(verdict), None) = (self.verdict.take(), &error) {
            verdict.whole();
        }
        if let Some(completion) = self.completion.take() {
            let success = (200..300).contains(&completion.record.status);
            let whole = success && error.is_none();
            let mut usage = match self.rewrite.filter(|_| whole) {
                Some(rewrite) => self.rewritten_usage(rewrite),
                None => self.usage(),
            };
            let mut completion = completion;
            if let Some(counted) = self.counted.as_ref().filter(|_| whole) {
                let (filled, estimated) = counted.fill(usage);
                usage = Some(filled);
                completion.record.usage_estimated = estimated;
            }
            if let (Some(fill), None, 200) = (self.fill.take(), &error, completion.record.status) {
                match &mut self.evidence {
                    Evidence::Json { parts, len } => fill.offer(std::mem::take(parts), *len, false),
                    Evidence::Sse(_) => {
                        fill.offer(std::mem::take(&mut self.stream), self.stream_len, true)
                    }
                }
            }
            let ttft = self.first_byte.map(|t| t.duration_since(self.sent_at));
            completion.finish_upstream(self.sent_at.elapsed(), ttft, usage, error);
        }
    }
}

/// `read` over a JSON answer's pieces as one slice: the piece itself when the answer came in
/// one (the common case, no copy), else the pieces joined.
fn read_whole<T>(parts: &[Bytes], read: impl FnOnce(&[u8]) -> T) -> T {
    match parts {
        [one] => read(one),
        _ => read(&parts.concat()),
    }
}

/// Whether a JSON answer is an object without an `error` member: what a backend that answers
/// 2xx but reports a failure, or cuts its JSON short, fails. The answer is checked by the
/// parser without being built into a tree.
fn well_formed(answer: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Shape {
        #[serde(default)]
        error: Present,
    }
    /// Whether the member is there, whatever its value (`null` included).
    #[derive(Default)]
    struct Present(bool);
    impl<'de> serde::Deserialize<'de> for Present {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Present, D::Error> {
            serde::de::IgnoredAny::deserialize(d)?;
            Ok(Present(true))
        }
    }
    // A struct would also be read from an array; skipped strings are not checked for UTF-8.
    answer.trim_ascii_start().starts_with(b"{")
        && std::str::from_utf8(answer).is_ok()
        && serde_json::from_slice::<Shape>(answer).is_ok_and(|shape| !shape.error.0)
}

impl Body for Relay {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let Some((limit, timer)) = &mut this.idle {
            if polled.is_pending() {
                if timer.as_mut().poll(cx).is_ready() {
                    let limit = crate::upstream::human_duration(*limit);
                    return this.fail(format!("the backend sent nothing for {limit}"));
                }
            } else {
                let limit = *limit;
                timer.as_mut().reset(tokio::time::Instant::now() + limit);
            }
        }
        match polled {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                this.judge_answer();
                this.complete(None);
                Poll::Ready(None)
            }
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.observe(data);
                }
                // A sized body may be dropped right after its last frame without another poll.
                // A translated stream's counts grow only once the translation has read this
                // frame: it is reported on the next poll, which the translation always makes.
                let counting = this.counted.is_some() && matches!(this.evidence, Evidence::Sse(_));
                if this.inner.is_end_stream() && !counting {
                    this.judge_answer();
                    this.complete(None);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(err))) => this.fail(format!(
                "upstream answer broke off: {}",
                crate::upstream::error_chain(&err)
            )),
        }
    }

    fn is_end_stream(&self) -> bool {
        Relay::is_end_stream(self)
    }

    fn size_hint(&self) -> SizeHint {
        Relay::size_hint(self)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if self.completion.is_some() {
            // Hyper drops the body when the client disconnects; the upstream connection goes
            // with `inner`, which stops the backend's generation.
            let error = (!self.ended && !self.inner.is_end_stream())
                .then(|| "client disconnected before the answer ended".to_owned());
            self.complete(error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::well_formed;

    /// The definition [`well_formed`] keeps: an object, as a tree, without an `error` key.
    fn as_tree(answer: &[u8]) -> bool {
        serde_json::from_slice::<serde_json::Value>(answer)
            .ok()
            .and_then(|v| v.as_object().map(|o| !o.contains_key("error")))
            .unwrap_or(false)
    }

    #[test]
    fn well_formed_answers_are_told_as_a_tree_would_tell_them() {
        let cases: [&[u8]; 12] = [
            br#"{"id":"c","choices":[{"message":{"content":"hi"}}]}"#,
            br#" {"error":{"message":"busy"}}"#,
            br#"{"error":null}"#,
            br#"{"choices":[],"error":"late"}"#,
            br#"{"choices":[{"message":{"content":"cut"#,
            br#"[{"id":"c"}]"#,
            br#""text""#,
            b"",
            br#"{"a":1} trailing"#,
            b"{\"content\":\"\xff\xfe\"}",
            br#"{"nested":{"error":1}}"#,
            br#"{"content":"escaped \" quote \u00e9"}"#,
        ];
        for case in cases {
            assert_eq!(
                well_formed(case),
                as_tree(case),
                "{}",
                String::from_utf8_lossy(case)
            );
        }
    }
}
