//! The model runtime's Prometheus metrics: calls, batch sizes, inference latency and failures,
//! per model directory. Families are cheap clones, so one set serves every registry it is added
//! to (each server registers it once).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
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
            "Texts per inference batch, by model",
            self.batch_size.clone(),
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
    }
}
