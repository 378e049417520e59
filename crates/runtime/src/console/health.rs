//! `GET /v1/console/health`: backends with their last probe, the reload history (with the
//! rendered diagnostics of each failed reload), model-signal latency per model and per signal,
//! and the response cache's hit ratio. The figures are read back from the server's own metrics.
//!
//! Backend prefix-cache evidence (`cached_tokens` the backends report) is not kept here: the
//! page sums it from the live stream it watches, so it stays apart from the router's own cache.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::app::App;
use crate::exposition::Format;
use crate::log::rfc3339;
use crate::metrics as names;
use crate::watch::scrape::{self, Sample};

pub fn report(app: &App) -> Value {
    let snapshot = app.store.current();
    let (ready, readiness) = app.readiness.report(&snapshot);
    let reloads: Vec<Value> = app
        .store
        .history()
        .into_iter()
        .rev()
        .map(|e| {
            json!({
                "at": rfc3339(e.at),
                "generation": e.generation,
                "result": e.result,
                "message": e.failure.as_ref().map(|f| f.message.clone()),
                "rendered": e.failure.as_ref().map(|f| f.human()),
            })
        })
        .collect();
    let samples = scrape::samples(&app.telemetry.encode(Format::PrometheusText));
    json!({
        "ready": ready,
        "generation": snapshot.generation,
        "backends": readiness["backends"],
        "cooling_models": readiness["cooling_models"],
        "reloads": reloads,
        "model_latency": mean_seconds(&samples, names::MODEL_INFERENCE_SECONDS, "model"),
        "signal_latency": mean_seconds(&samples, names::SIGNAL_SECONDS, "signal"),
        "cache": cache(&samples),
        "live_watchers": app.telemetry.live.watchers(),
        "live_rate": app.telemetry.live.rate(),
    })
}

/// `{label value: {"count", "mean_ms"}}` of a histogram family.
fn mean_seconds(samples: &[Sample], family: &str, label: &str) -> Value {
    let mut sums: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    let (sum, count) = (format!("{family}_sum"), format!("{family}_count"));
    for s in samples {
        if s.name == sum {
            sums.entry(s.label(label)).or_default().0 += s.value;
        } else if s.name == count {
            sums.entry(s.label(label)).or_default().1 += s.value;
        }
    }
    let out: serde_json::Map<String, Value> = sums
        .into_iter()
        .filter(|(_, (_, n))| *n > 0.0)
        .map(|(k, (total, n))| {
            (
                k.to_owned(),
                json!({"count": n, "mean_ms": total / n * 1000.0}),
            )
        })
        .collect();
    Value::Object(out)
}

/// Lookups by result, and hits over hits and misses (`null` before any lookup).
fn cache(samples: &[Sample]) -> Value {
    let lookups = format!("{}_total", names::CACHE_LOOKUPS);
    let mut by_result: BTreeMap<&str, f64> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.name == lookups) {
        *by_result.entry(s.label("result")).or_default() += s.value;
    }
    let hits = by_result.get("hit").copied().unwrap_or(0.0);
    // A look-alike refused by the check is a miss too: the backend answered.
    let misses = by_result.get("miss").copied().unwrap_or(0.0)
        + by_result.get("miss-verified").copied().unwrap_or(0.0);
    let ratio = (hits + misses > 0.0).then(|| hits / (hits + misses));
    json!({"lookups": by_result, "hit_ratio": ratio})
}
