//! The router's Prometheus metrics: one registry, built once, shared by every request.
//!
//! Names come from [`crate::metrics`]; this module owns the label sets, bucket layouts and the
//! exposition of `GET /metrics` (in the formats of [`crate::exposition`]). Label values are bounded by the policy (route, model, block
//! and signal names) and a few fixed words, so cardinality cannot grow with traffic.

use std::sync::atomic::AtomicU64;
use std::sync::OnceLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::exposition::{self, Format};
use crate::metrics as names;
use crate::otel::export::DropLabels;
use crate::otel::Spans;

mod kept;

pub use kept::{Done, KeptSeries, Reported};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub route: String,
    pub model: String,
    pub status: u16,
    pub path: &'static str,
    /// The front door the request came through: one of [`crate::metrics::door`]'s values.
    pub door: &'static str,
}

/// The labels of the token counters: whose tokens, by which route, through which door.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    pub model: String,
    pub route: String,
    pub door: &'static str,
}

/// The labels of a request's whole duration: those of [`RequestLabels`] but `path`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DurationLabels {
    pub route: String,
    pub model: String,
    pub status: u16,
    pub door: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabels {
    pub model: String,
}

/// An upstream time's labels: the model, and the door whose view of the answer it is.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpstreamLabels {
    pub model: String,
    pub door: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SignalLabels {
    pub signal: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BlockLabels {
    pub block: String,
    pub action: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FallbackLabels {
    pub from: String,
    pub reason: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Which of a model's upstream times an observation is.
#[derive(Debug, Clone, Copy)]
pub enum UpstreamTime {
    /// [`Telemetry::upstream_headers`].
    Headers,
    /// [`Telemetry::upstream`].
    Total,
    /// [`Telemetry::upstream_ttft`].
    Ttft,
}

/// The doors a request's metrics can name, in [`UpstreamHandles`]' order.
const DOORS: [&str; 5] = [
    names::door::NONE,
    names::door::CHAT,
    names::door::RESPONSES,
    names::door::MESSAGES,
    names::door::EXTPROC,
];

/// One model's upstream-time histograms on each door, each resolved from its family on its
/// first observation and kept: `Family::get_or_create` clones and hashes its labels (SipHash)
/// and takes the family's lock on every call, three times a forwarded request.
#[derive(Debug, Default)]
pub struct UpstreamHandles([[OnceLock<Histogram>; 3]; DOORS.len()]);

impl UpstreamHandles {
    /// Observes `seconds` in `model`'s `time` on `door`.
    pub fn observe(
        &self,
        telemetry: &Telemetry,
        (model, door): (&str, &'static str),
        time: UpstreamTime,
        seconds: f64,
    ) {
        let Some(door_at) = DOORS.iter().position(|d| *d == door) else {
            telemetry.observe_upstream((model, door), time, seconds);
            return;
        };
        let slot = &self.0[door_at][time as usize];
        slot.get_or_init(|| {
            let labels = UpstreamLabels {
                model: model.to_owned(),
                door,
            };
            telemetry
                .upstream_family(time)
                .get_or_create(&labels)
                .clone()
        })
        .observe(seconds);
    }
}

/// Every metric the router exports.
pub struct Telemetry {
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub prompt_tokens: Family<TokenLabels, Counter>,
    pub completion_tokens: Family<TokenLabels, Counter>,
    pub request_duration: HistogramFamily<DurationLabels>,
    pub routing: Histogram,
    pub signal: HistogramFamily<SignalLabels>,
    pub upstream_ttft: HistogramFamily<UpstreamLabels>,
    pub upstream: HistogramFamily<UpstreamLabels>,
    pub upstream_headers: HistogramFamily<UpstreamLabels>,
    pub reloads: Family<ResultLabels, Counter>,
    pub blocks: Family<BlockLabels, Counter>,
    pub fallbacks: Family<FallbackLabels, Counter>,
    pub generation: Gauge<u64, AtomicU64>,
    /// Spans lost on their way to the collector (`queue_full`, `export_failed`).
    pub spans_dropped: Family<DropLabels, Counter>,
    /// The request phases' spans (off unless `--otlp` is given).
    pub spans: Spans,
    /// The console's stream of decisions (silent while no page watches).
    pub live: crate::watch::live::LiveFeed,
    /// Samples of `requests` for the console's per-minute and per-hour counts.
    pub counts: crate::watch::counts::Counts,
    /// The series of `requests`, `request_duration` and the token counters that requests have
    /// counted into, kept once resolved.
    pub kept: KeptSeries,
}

/// Routing takes microseconds: 1 µs to ~16 ms.
fn routing_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1e-6, 2.0, 15))
}

/// Model calls and upstream answers take milliseconds to minutes: 1 ms to ~131 s.
fn latency_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1e-3, 2.0, 18))
}

/// A whole request takes from milliseconds (a refusal, a cache hit) to minutes (a long stream):
/// 5 ms to 300 s, with the round numbers dashboards and SLOs name.
fn request_buckets() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 180.0,
        300.0,
    ])
}

impl Telemetry {
    pub fn new() -> Telemetry {
        Telemetry::with_extra(|_| {})
    }

    /// The family of an upstream time.
    fn upstream_family(&self, time: UpstreamTime) -> &HistogramFamily<UpstreamLabels> {
        match time {
            UpstreamTime::Headers => &self.upstream_headers,
            UpstreamTime::Total => &self.upstream,
            UpstreamTime::Ttft => &self.upstream_ttft,
        }
    }

    /// Observes `seconds` in `model`'s `time` on `door`, looked up in its family.
    pub fn observe_upstream(
        &self,
        (model, door): (&str, &'static str),
        time: UpstreamTime,
        seconds: f64,
    ) {
        let labels = UpstreamLabels {
            model: model.to_owned(),
            door,
        };
        self.upstream_family(time)
            .get_or_create(&labels)
            .observe(seconds);
    }

    /// The router's metrics plus those `extra` registers (pluggable components' own).
    pub fn with_extra(extra: impl FnOnce(&mut Registry)) -> Telemetry {
        let mut registry = Registry::default();
        extra(&mut registry);
        let requests = Family::<RequestLabels, Counter>::default();
        let prompt_tokens = Family::<TokenLabels, Counter>::default();
        let completion_tokens = Family::<TokenLabels, Counter>::default();
        let request_duration: HistogramFamily<DurationLabels> =
            Family::new_with_constructor(request_buckets);
        let routing = routing_buckets();
        let signal: HistogramFamily<SignalLabels> = Family::new_with_constructor(latency_buckets);
        let upstream_ttft: HistogramFamily<UpstreamLabels> =
            Family::new_with_constructor(latency_buckets);
        let upstream: HistogramFamily<UpstreamLabels> =
            Family::new_with_constructor(latency_buckets);
        let upstream_headers: HistogramFamily<UpstreamLabels> =
            Family::new_with_constructor(latency_buckets);
        let reloads = Family::<ResultLabels, Counter>::default();
        let blocks = Family::<BlockLabels, Counter>::default();
        let fallbacks = Family::<FallbackLabels, Counter>::default();
        let generation = Gauge::<u64, AtomicU64>::default();
        let spans_dropped = Family::<DropLabels, Counter>::default();
        registry.register(
            names::REQUESTS,
            "Requests answered, by route, model, status, path and front door",
            requests.clone(),
        );
        registry.register(
            names::PROMPT_TOKENS,
            "Prompt tokens of answered requests, by model, route and front door",
            prompt_tokens.clone(),
        );
        registry.register(
            names::COMPLETION_TOKENS,
            "Completion tokens of answered requests, by model, route and front door",
            completion_tokens.clone(),
        );
        registry.register(
            names::REQUEST_DURATION_SECONDS,
            "Time from a request's first byte read to its last byte written",
            request_duration.clone(),
        );
        registry.register(
            names::ROUTING_SECONDS,
            "Time from a parsed request to its routing decision",
            routing.clone(),
        );
        registry.register(
            names::SIGNAL_SECONDS,
            "Time computing one model-backed signal",
            signal.clone(),
        );
        registry.register(
            names::UPSTREAM_TTFT_SECONDS,
            "Time from sending upstream to the first answer byte (proxy doors)",
            upstream_ttft.clone(),
        );
        registry.register(
            names::UPSTREAM_SECONDS,
            "Time from sending upstream to the end of the answer (proxy doors)",
            upstream.clone(),
        );
        registry.register(
            names::UPSTREAM_HEADERS_SECONDS,
            "Time from sending upstream to the answer's headers",
            upstream_headers.clone(),
        );
        registry.register(names::RELOADS, "Policy reloads by result", reloads.clone());
        registry.register(names::BLOCKS, "Requests decided by a block", blocks.clone());
        registry.register(
            names::FALLBACKS,
            "Moves to the next model after a backend failure",
            fallbacks.clone(),
        );
        registry.register(
            names::POLICY_GENERATION,
            "Generation of the policy being served",
            generation.clone(),
        );
        registry.register(
            names::TRACE_SPANS_DROPPED,
            "Spans lost on their way to the trace collector, by reason",
            spans_dropped.clone(),
        );
        Telemetry {
            registry,
            spans_dropped,
            spans: Spans::off(),
            live: Default::default(),
            counts: Default::default(),
            kept: KeptSeries::default(),
            requests,
            prompt_tokens,
            completion_tokens,
            request_duration,
            routing,
            signal,
            upstream_ttft,
            upstream,
            upstream_headers,
            reloads,
            blocks,
            fallbacks,
            generation,
        }
    }

    /// The exposition of every metric in `format`.
    /// The text exposition of `requests` alone (the console samples it).
    pub fn encode_requests(&self) -> String {
        let mut registry = Registry::default();
        registry.register(names::REQUESTS, "", self.requests.clone());
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }

    pub fn encode(&self, format: Format) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        exposition::render(out, format)
    }
}

impl Default for Telemetry {
    fn default() -> Self {
        Telemetry::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_has_every_family_and_counts() {
        let t = Telemetry::new();
        t.requests
            .get_or_create(&RequestLabels {
                route: "coding".into(),
                model: "strong".into(),
                status: 200,
                path: "upstream",
                door: "chat",
            })
            .inc();
        t.reloads
            .get_or_create(&ResultLabels { result: "ok" })
            .inc();
        t.routing.observe(3e-6);
        let text = t.encode(Format::PrometheusText);
        assert!(text.contains(
            "src_requests_total{route=\"coding\",model=\"strong\",status=\"200\",path=\"upstream\",door=\"chat\"} 1"
        ), "{text}");
        assert!(
            text.contains("src_reloads_total{result=\"ok\"} 1"),
            "{text}"
        );
        assert!(text.contains("src_routing_seconds_count 1"), "{text}");
        // Families appear once they have a sample; the gauge always does.
        assert!(text.contains("src_policy_generation 0"), "{text}");
        assert!(!text.contains(names::FALLBACKS), "{text}");
        t.fallbacks
            .get_or_create(&FallbackLabels {
                from: "strong".into(),
                reason: "connect",
            })
            .inc();
        let text = t.encode(Format::PrometheusText);
        assert!(
            text.contains("src_fallbacks_total{from=\"strong\",reason=\"connect\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn kept_upstream_handles_observe_into_the_families_series() {
        let t = Telemetry::new();
        let handles = UpstreamHandles::default();
        let chat = ("strong", names::door::CHAT);
        handles.observe(&t, chat, UpstreamTime::Headers, 0.5);
        handles.observe(&t, chat, UpstreamTime::Headers, 0.5);
        // The same series as a lookup by label, and another door has its own.
        t.observe_upstream(chat, UpstreamTime::Headers, 0.5);
        handles.observe(
            &t,
            ("strong", names::door::EXTPROC),
            UpstreamTime::Headers,
            0.5,
        );
        handles.observe(&t, ("strong", "unlisted"), UpstreamTime::Headers, 0.5);
        let text = t.encode(Format::PrometheusText);
        let count = |door: &str| {
            format!("src_upstream_headers_seconds_count{{model=\"strong\",door=\"{door}\"}}")
        };
        assert!(text.contains(&format!("{} 3", count("chat"))), "{text}");
        assert!(text.contains(&format!("{} 1", count("extproc"))), "{text}");
        assert!(text.contains(&format!("{} 1", count("unlisted"))), "{text}");
        // A time never observed has no series, as before any was kept.
        assert!(!text.contains("src_upstream_ttft_seconds_count"), "{text}");
        assert!(!text.contains("src_upstream_seconds_count"), "{text}");
        handles.observe(&t, chat, UpstreamTime::Total, 2.0);
        let text = t.encode(Format::PrometheusText);
        assert!(
            text.contains("src_upstream_seconds_count{model=\"strong\",door=\"chat\"} 1"),
            "{text}"
        );
    }
}
