//! The model runtime's Prometheus metrics: calls, batch sizes, inference latency and failures,
//! per model directory, and the model memo's hits, misses and size. Families are cheap clones, so one set serves every registry it is added
//! to (each server registers it once).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::metrics as names;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabel {
    pub model: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    pub model: String,
    pub reason: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

#[derive(Clone)]
pub struct ModelMetrics {
    pub calls: Family<ModelLabel, Counter>,
    pub batch_size: HistogramFamily<ModelLabel>,
    pub inference: HistogramFamily<ModelLabel>,
    pub failures: Family<FailureLabels, Counter>,
    /// Signals whose text had more windows than the declaration reads.
    pub past_bound: Family<ModelLabel, Counter>,
    /// Texts answered from the memo (this process's or the shared one) instead of a model call.
    pub memo_hits: Family<ModelLabel, Counter>,
    /// The subset of `memo_hits` that another replica answered through Redis.
    pub memo_shared_hits: Family<ModelLabel, Counter>,
    /// Texts the memo did not hold: the model ran.
    pub memo_misses: Family<ModelLabel, Counter>,
    pub memo_entries: Gauge,
    pub memo_bytes: Gauge,
}

fn batch_buckets() -> Histogram {
    Histogram::new([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0])
}

fn latency_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 14))
}

impl Default for ModelMetrics {
    fn default() -> Self {
        ModelMetrics {
            calls: Family::default(),
            batch_size: Family::new_with_constructor(batch_buckets),
            inference: Family::new_with_constructor(latency_buckets),
            failures: Family::default(),
            past_bound: Family::default(),
            memo_hits: Family::default(),
            memo_shared_hits: Family::default(),
            memo_misses: Family::default(),
            memo_entries: Gauge::default(),
            memo_bytes: Gauge::default(),
        }
    }
}

impl ModelMetrics {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            names::MODEL_CALLS,
            "Texts sent to a model, by model",
            self.calls.clone(),
        );
        registry.register(
            names::MODEL_BATCH_SIZE,
            "Rows (texts' windows) per inference batch, by model",
            self.batch_size.clone(),
        );
        registry.register(
            names::MODEL_PAST_BOUND,
            "Model-backed signals whose text had more windows than the declaration reads, by model",
            self.past_bound.clone(),
        );
        registry.register(
            names::MODEL_INFERENCE_SECONDS,
            "Time of one inference batch, by model",
            self.inference.clone(),
        );
        registry.register(
            names::MODEL_FAILURES,
            "Model calls that failed or timed out, by model and reason",
            self.failures.clone(),
        );
        registry.register(
            names::MODEL_MEMO_HITS,
            "Texts answered from the model memo instead of a model call, by model",
            self.memo_hits.clone(),
        );
        registry.register(
            names::MODEL_MEMO_SHARED_HITS,
            "Memo hits another replica answered through Redis, by model",
            self.memo_shared_hits.clone(),
        );
        registry.register(
            names::MODEL_MEMO_MISSES,
            "Texts the model memo did not hold, so the model ran, by model",
            self.memo_misses.clone(),
        );
        registry.register(
            names::MODEL_MEMO_ENTRIES,
            "Answers held in the model memo",
            self.memo_entries.clone(),
        );
        registry.register(
            names::MODEL_MEMO_BYTES,
            "Bytes held in the model memo, as its bound counts them",
            self.memo_bytes.clone(),
        );
    }
}
