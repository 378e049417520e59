//! The live decision stream: one small JSON line per finished request, broadcast to the console
//! pages that are connected.
//!
//! The request path pays for it only while someone watches: [`LiveFeed::publish`] reads one
//! atomic counter of connected pages and returns at once when it is zero, before any line is
//! built (the channel's own `receiver_count` takes a lock, so the feed keeps its own count). A slow page loses lines
//! (the channel is bounded and lagging receivers skip ahead) instead of slowing requests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;
use tokio::sync::broadcast;

use crate::log::{rfc3339_now, RequestRecord};

/// Lines a connected page may fall behind before it skips ahead.
const BACKLOG: usize = 1024;

/// The sender every request's completion publishes to.
#[derive(Clone)]
pub struct LiveFeed {
    sender: broadcast::Sender<Arc<Bytes>>,
    watchers: Arc<AtomicUsize>,
    prompts: bool,
}

impl Default for LiveFeed {
    fn default() -> Self {
        LiveFeed::new(false)
    }
}

/// One connected page's receiver; the feed counts it until it is dropped.
pub struct Watcher {
    pub lines: broadcast::Receiver<Arc<Bytes>>,
    count: Arc<AtomicUsize>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::Relaxed);
    }
}

impl LiveFeed {
    /// A feed whose lines carry prompt text when `prompts` (the operator's choice), else only
    /// its length.
    pub fn new(prompts: bool) -> LiveFeed {
        LiveFeed {
            sender: broadcast::channel(BACKLOG).0,
            watchers: Arc::default(),
            prompts,
        }
    }

    /// Whether lines carry prompt text.
    pub fn shows_prompts(&self) -> bool {
        self.prompts
    }

    /// Sends the request's line to every connected page; nothing at all when none is.
    pub fn publish(&self, record: &RequestRecord) {
        if self.watchers.load(Ordering::Relaxed) == 0 {
            return;
        }
        // Every receiver may have left since the count: a lost line is fine.
        let _ = self.sender.send(Arc::new(Bytes::from(line(record))));
    }

    /// A new page's view of the stream, from now on.
    pub fn subscribe(&self) -> Watcher {
        self.watchers.fetch_add(1, Ordering::Relaxed);
        Watcher {
            lines: self.sender.subscribe(),
            count: Arc::clone(&self.watchers),
        }
    }

    /// Pages connected now.
    pub fn watchers(&self) -> usize {
        self.watchers.load(Ordering::Relaxed)
    }
}

/// What the console shows of one request: its decision and its timing; its text only when the
/// operator enabled prompt display (the watched part then holds it). Borrowed from the record
/// and written straight to bytes: the request that builds it pays for no JSON tree.
#[derive(Serialize)]
struct Line<'a> {
    time: String,
    request_id: &'a str,
    endpoint: &'a str,
    route: Option<&'a str>,
    block: Option<&'a str>,
    model: Option<&'a str>,
    served: Option<&'a str>,
    backend: Option<&'a str>,
    path: &'a str,
    status: u16,
    stream: bool,
    session: Option<&'a str>,
    protection: Option<&'a str>,
    cache: Option<&'a str>,
    latency_ms: f64,
    routing_us: f64,
    ttft_ms: Option<f64>,
    prompt_tokens: Option<u64>,
    cached_tokens: Option<u64>,
    fallbacks: &'a [String],
    error: Option<&'a str>,
    generation: u64,
    tenant: Option<&'a str>,
    session_id: Option<&'a str>,
    prompt_chars: Option<usize>,
    prompt: Option<&'a str>,
}

/// The JSON line of `record`.
pub fn line(record: &RequestRecord) -> Vec<u8> {
    let watched = record.watched.as_ref();
    let line = Line {
        time: rfc3339_now(),
        request_id: &record.request_id,
        endpoint: &record.endpoint,
        route: record.route.as_deref(),
        block: record.block.as_deref(),
        model: record.model.as_deref(),
        served: record.served.as_deref(),
        backend: record.backend.as_deref(),
        path: record.path,
        status: record.status,
        stream: record.stream,
        session: record.session,
        protection: record.protection.as_deref(),
        cache: record.cache,
        latency_ms: record.latency_ms,
        routing_us: record.routing_us,
        ttft_ms: record.ttft_ms,
        prompt_tokens: record.prompt_tokens,
        cached_tokens: record.cached_tokens,
        fallbacks: &record.fallbacks,
        error: record.error.as_deref(),
        generation: record.policy_generation,
        tenant: watched.map(|w| w.tenant.as_str()),
        session_id: watched.and_then(|w| w.session.as_deref()),
        prompt_chars: watched.map(|w| w.prompt_chars),
        prompt: watched.and_then(|w| w.prompt.as_deref()),
    };
    // Strings, numbers and options only: serialising cannot fail.
    serde_json::to_vec(&line).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_sent_without_a_watcher_and_every_watcher_gets_the_line() {
        let feed = LiveFeed::default();
        feed.publish(&RequestRecord::default());
        let mut page = feed.subscribe();
        assert!(
            page.lines.try_recv().is_err(),
            "a line sent before subscribing"
        );
        feed.publish(&RequestRecord {
            route: Some("math".into()),
            ..RequestRecord::default()
        });
        let got = page.lines.try_recv().expect("one line");
        let got: serde_json::Value = serde_json::from_slice(&got).expect("json");
        assert_eq!(got["route"], "math");
        assert_eq!(feed.watchers(), 1);
        drop(page);
        assert_eq!(feed.watchers(), 0);
    }
}
