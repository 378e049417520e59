//! The live decision stream: one small JSON line per finished request, broadcast to the console
//! pages that are connected.
//!
//! The request path pays for it only while someone watches: [`LiveFeed::publish`] reads one
//! atomic counter of connected pages and returns at once when it is zero, before any line is
//! built (the channel's own `receiver_count` takes a lock, so the feed keeps its own count). A
//! slow page loses lines (the channel is bounded and lagging receivers skip ahead) instead of
//! slowing requests.
//!
//! A person reads a few lines a second, and at proxy rates a line per request would cost the
//! router more than the page can show, so the stream is paced: up to [`LiveFeed::rate`] lines a
//! second, with bursts of as many, leave the router, and a request past that builds no line;
//! the next line says how many were left out (`skipped`). Failed and blocked requests are paced
//! apart from the rest, so a flood of ordinary traffic never hides them. Below the rate every
//! request is shown; the counts per route and model come from the metrics and stay exact.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Serialize;
use tokio::sync::broadcast;

use crate::log::{rfc3339_now, RequestRecord};
use crate::store::clock::{Clock, SystemClock};
use crate::watch::recent::{Decision, Recent};

/// Lines a connected page may fall behind before it skips ahead.
const BACKLOG: usize = 1024;

/// The sender every request's completion publishes to.
#[derive(Clone)]
pub struct LiveFeed {
    sender: broadcast::Sender<Arc<Bytes>>,
    watchers: Arc<AtomicUsize>,
    prompts: bool,
    rate: u32,
    /// Pacing of ordinary lines, and of failed and blocked requests' lines.
    ordinary: Arc<Pacer>,
    notable: Arc<Pacer>,
    /// Each session's last decisions since a page connected, whatever the pace left out.
    recent: Arc<Recent>,
}

impl Default for LiveFeed {
    fn default() -> Self {
        LiveFeed::new(false, crate::config::DEFAULT_CONSOLE_LIVE_RATE)
    }
}

/// Lets through up to `rate` events a second with bursts of as many (the generic cell rate
/// algorithm: one atomic holding the time the bucket would be empty again), and counts the
/// events it holds back.
struct Pacer {
    start: Instant,
    /// Nanoseconds one event uses of the budget; 0 paces nothing.
    interval: u64,
    /// How far past now the budget may be spent: the burst.
    burst: u64,
    /// When, in nanoseconds since `start`, the budget spent so far is earned back.
    earned_at: AtomicU64,
    skipped: AtomicU64,
}

impl Pacer {
    fn new(rate: u32) -> Pacer {
        let interval = match rate {
            0 => 0,
            r => 1_000_000_000 / u64::from(r),
        };
        Pacer {
            start: Instant::now(),
            interval,
            burst: Duration::from_secs(1).as_nanos() as u64,
            earned_at: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
        }
    }

    /// `Some(events held back since the last one let through)` when this one may go.
    fn admit(&self) -> Option<u64> {
        if self.interval == 0 {
            return Some(0);
        }
        let now = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mut earned_at = self.earned_at.load(Ordering::Relaxed);
        loop {
            let next = earned_at.max(now).saturating_add(self.interval);
            if next > now.saturating_add(self.burst) {
                self.skipped.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            match self.earned_at.compare_exchange_weak(
                earned_at,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(self.skipped.swap(0, Ordering::Relaxed)),
                Err(seen) => earned_at = seen,
            }
        }
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
    /// `rate` lines a second at most (0: one per request, whatever it costs).
    pub fn new(prompts: bool, rate: u32) -> LiveFeed {
        LiveFeed {
            sender: broadcast::channel(BACKLOG).0,
            watchers: Arc::default(),
            prompts,
            rate,
            ordinary: Arc::new(Pacer::new(rate)),
            notable: Arc::new(Pacer::new(rate)),
            recent: Arc::default(),
        }
    }

    /// Lines a second the stream carries at most (0: no bound).
    pub fn rate(&self) -> u32 {
        self.rate
    }

    /// Whether lines carry prompt text.
    pub fn shows_prompts(&self) -> bool {
        self.prompts
    }

    /// Sends the request's line to every connected page, within the pace; nothing at all when
    /// no page is connected.
    pub fn publish(&self, record: &RequestRecord) {
        if self.watchers.load(Ordering::Relaxed) == 0 {
            return;
        }
        self.recent.note(record, SystemClock.now_ms());
        let notable = matches!(record.path, "blocked" | "error") || record.status >= 500;
        let pacer = if notable {
            &self.notable
        } else {
            &self.ordinary
        };
        let Some(skipped) = pacer.admit() else {
            return;
        };
        // Every receiver may have left since the count: a lost line is fine.
        let _ = self
            .sender
            .send(Arc::new(Bytes::from(line(record, skipped))));
    }

    /// A new page's view of the stream, from now on.
    pub fn subscribe(&self) -> Watcher {
        self.watchers.fetch_add(1, Ordering::Relaxed);
        Watcher {
            lines: self.sender.subscribe(),
            count: Arc::clone(&self.watchers),
        }
    }

    /// A session's last decisions since a page connected, newest first.
    pub fn recent(&self, tenant: &str, id: &str) -> Vec<Decision> {
        self.recent.of(tenant, id)
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
    /// Requests of the same kind (ordinary, or failed and blocked) the pace left out since the
    /// previous line of that kind.
    skipped: u64,
}

/// The JSON line of `record`, after `skipped` requests that got none.
pub fn line(record: &RequestRecord, skipped: u64) -> Vec<u8> {
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
        skipped,
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
        assert_eq!(got["skipped"], 0);
        drop(page);
        assert_eq!(feed.watchers(), 0);
    }

    fn received(page: &mut Watcher) -> Vec<serde_json::Value> {
        std::iter::from_fn(|| page.lines.try_recv().ok())
            .map(|line| serde_json::from_slice(&line).expect("json"))
            .collect()
    }

    #[test]
    fn past_the_rate_lines_are_left_out_and_counted_and_failures_keep_their_own_pace() {
        let feed = LiveFeed::new(false, 10);
        let mut page = feed.subscribe();
        // Ten lines of burst, then nothing until the budget is earned back (a tenth of a second
        // a line; the loop takes far less).
        for i in 0..50 {
            feed.publish(&RequestRecord {
                request_id: format!("r{i}"),
                path: "upstream",
                ..RequestRecord::default()
            });
        }
        let lines = received(&mut page);
        assert!(
            (10..=12).contains(&lines.len()),
            "{} lines went out",
            lines.len()
        );
        assert!(lines.iter().all(|l| l["skipped"] == 0));
        // The ordinary budget is spent; a failure still gets its line.
        feed.publish(&RequestRecord {
            request_id: "failed".into(),
            path: "error",
            status: 502,
            ..RequestRecord::default()
        });
        let failed = received(&mut page);
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0]["request_id"], "failed");
        // Once a line's worth is earned back, the next line counts the ones left out.
        std::thread::sleep(Duration::from_millis(150));
        feed.publish(&RequestRecord {
            request_id: "later".into(),
            path: "upstream",
            ..RequestRecord::default()
        });
        let later = received(&mut page);
        assert_eq!(later.len(), 1);
        let shown = lines.len() as u64;
        assert_eq!(later[0]["skipped"], 50 - shown);
    }

    #[test]
    fn rate_zero_shows_every_request() {
        let feed = LiveFeed::new(false, 0);
        let mut page = feed.subscribe();
        for _ in 0..2000 {
            feed.publish(&RequestRecord::default());
        }
        // The channel holds `BACKLOG` lines; the page lags past them, which shows nothing
        // was held back by the pace.
        assert!(matches!(
            page.lines.try_recv(),
            Err(broadcast::error::TryRecvError::Lagged(976))
        ));
    }
}
