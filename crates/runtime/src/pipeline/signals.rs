//! Model-backed signals on the request path: the classifier, guard and encoder atoms the request
//! procedure asks for (for blocks, routes and the cache's `skip when`), computed by the
//! [`ModelSignals`] component and supplied back, with each model's latency observed.

use std::time::{Duration, Instant, SystemTime};

use opentelemetry::{StringValue, Value};

use src_compiler::eval::{ModelCall, ModelKind, ModelResult};
use src_compiler::hir::CheckedPolicy;
use src_compiler::Procedure;

use crate::hooks::ModelSignals;
use crate::openai::ApiError;
use crate::otel::{key, name, text, Phase, RequestTrace};
use crate::telemetry::{SignalLabels, Telemetry};

/// The model runtime a request's evaluation asks, and where its latency is reported.
#[derive(Clone, Copy)]
pub struct Signals<'a> {
    pub models: &'a dyn ModelSignals,
    pub telemetry: &'a Telemetry,
}

impl Signals<'_> {
    /// Computes the model-backed atoms of one procedure step and supplies them.
    /// The step is a `src.signals` span under `traced`'s phase, with a `src.model` span per
    /// model in it.
    /// `tenant` scopes what the model runtime may remember between requests.
    pub async fn supply(
        &self,
        policy: &CheckedPolicy,
        procedure: &mut Procedure<'_>,
        (calls, tenant): (&[ModelCall], &str),
        traced: (&RequestTrace, &Phase),
    ) -> Result<Vec<ModelResult>, ApiError> {
        let (trace, parent) = traced;
        let started = Instant::now();
        let wall_start = trace_clock(parent);
        let computed = self.models.compute_scoped(policy, calls, tenant).await;
        let elapsed = started.elapsed();
        let failed = match &computed {
            Ok(results) if results.len() == calls.len() => None,
            Ok(_) => Some("the model runtime answered the wrong number of calls".to_owned()),
            Err(err) => Some(err.to_string()),
        };
        let results = match computed {
            Ok(results) if failed.is_none() => results,
            // The evaluator applies `failure.classifier`: open treats the signal as not holding,
            // closed ends in a failed step.
            Ok(_) | Err(_) => vec![ModelResult::Failed; calls.len()],
        };
        let names = model_names(policy, calls);
        observe_signals(self.telemetry, &names, elapsed);
        if let Some(start) = wall_start {
            trace_step(trace, parent, &names, calls.len(), start, failed);
        }
        for (call, result) in calls.iter().zip(&results) {
            procedure.supply(call, *result).map_err(|err| {
                ApiError::internal(format!("a model-backed signal answered badly: {err}"))
            })?;
        }
        Ok(results)
    }
}

/// The classifiers, guards, detectors and encoders a step's calls ask, each once, in order.
fn model_names<'p>(policy: &'p CheckedPolicy, calls: &[ModelCall]) -> Vec<&'p str> {
    let mut seen: Vec<&str> = Vec::with_capacity(calls.len());
    for call in calls {
        let name = match call.model {
            ModelKind::Classifier(id) => {
                policy.classifiers.get(id.index()).map(|c| c.name.as_str())
            }
            ModelKind::Guard(id) => policy.guards.get(id.index()).map(|g| g.name.as_str()),
            ModelKind::Detector(id) => policy.detectors.get(id.index()).map(|d| d.name.as_str()),
            ModelKind::Similarity(id) => policy.encoders.get(id.index()).map(|e| e.name.as_str()),
        };
        if let Some(name) = name.filter(|n| !seen.contains(n)) {
            seen.push(name);
        }
    }
    seen
}

/// Model-backed signal latency, by the classifier, guard, detector or encoder that computed it
/// (one batch serves every call of a step, so each model in it is charged the batch's time).
fn observe_signals(telemetry: &Telemetry, names: &[&str], elapsed: Duration) {
    for name in names {
        telemetry
            .signal
            .get_or_create(&SignalLabels {
                signal: (*name).to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }
}

/// When spans are recorded, the wall-clock start of a step (spans carry wall-clock times).
fn trace_clock(parent: &Phase) -> Option<SystemTime> {
    parent.is_on().then(SystemTime::now)
}

/// The step's span and one span per model in it, all over the step's interval: the models of a
/// step are computed together, so each is charged the whole step, as the metric does.
fn trace_step(
    trace: &RequestTrace,
    parent: &Phase,
    names: &[&str],
    calls: usize,
    start: SystemTime,
    failed: Option<String>,
) {
    let end = SystemTime::now();
    let mut step = trace.child(parent, name::SIGNALS, Some(start));
    let models: Vec<StringValue> = names
        .iter()
        .map(|n| StringValue::from((*n).to_owned()))
        .collect();
    step.set(key::SIGNAL_MODELS, || Value::Array(models.into()));
    step.set(key::SIGNAL_CALLS, || {
        i64::try_from(calls).unwrap_or(i64::MAX).into()
    });
    if let Some(message) = failed {
        step.fail(|| message);
    }
    for model in names {
        let mut span = trace.child(&step, name::MODEL, Some(start));
        span.set(key::MODEL, || text(model));
        span.end_at(end);
    }
    step.end_at(end);
}
