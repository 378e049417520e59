//! Model-backed signals on the request path: the classifier, guard and encoder atoms the request
//! procedure asks for (for blocks, routes and the cache's `skip when`), computed by the
//! [`ModelSignals`] component and supplied back, with each model's latency observed.

use std::time::{Duration, Instant};

use src_compiler::eval::{ModelCall, ModelKind, ModelResult};
use src_compiler::hir::CheckedPolicy;
use src_compiler::Procedure;

use crate::hooks::ModelSignals;
use crate::openai::ApiError;
use crate::telemetry::{SignalLabels, Telemetry};

/// The model runtime a request's evaluation asks, and where its latency is reported.
#[derive(Clone, Copy)]
pub struct Signals<'a> {
    pub models: &'a dyn ModelSignals,
    pub telemetry: &'a Telemetry,
}

impl Signals<'_> {
    /// Computes the model-backed atoms of one procedure step and supplies them.
    pub async fn supply(
        &self,
        policy: &CheckedPolicy,
        procedure: &mut Procedure<'_>,
        calls: &[ModelCall],
    ) -> Result<Vec<ModelResult>, ApiError> {
        let started = Instant::now();
        let results = match self.models.compute(policy, calls).await {
            Ok(results) if results.len() == calls.len() => results,
            // The evaluator applies `failure.classifier`: open treats the signal as not holding,
            // closed ends in a failed step.
            Ok(_) | Err(_) => vec![ModelResult::Failed; calls.len()],
        };
        observe_signals(self.telemetry, policy, calls, started.elapsed());
        for (call, result) in calls.iter().zip(&results) {
            procedure.supply(call, *result).map_err(|err| {
                ApiError::internal(format!("a model-backed signal answered badly: {err}"))
            })?;
        }
        Ok(results)
    }
}

/// Model-backed signal latency, by the classifier, guard or encoder that computed it (one batch
/// serves every call of a step, so each model in it is charged the batch's time).
fn observe_signals(
    telemetry: &Telemetry,
    policy: &CheckedPolicy,
    calls: &[ModelCall],
    elapsed: Duration,
) {
    let mut seen: Vec<&str> = Vec::with_capacity(calls.len());
    for call in calls {
        let name = match call.model {
            ModelKind::Classifier(id) => {
                policy.classifiers.get(id.index()).map(|c| c.name.as_str())
            }
            ModelKind::Guard(id) => policy.guards.get(id.index()).map(|g| g.name.as_str()),
            ModelKind::Similarity(id) => policy.encoders.get(id.index()).map(|e| e.name.as_str()),
        };
        if let Some(name) = name.filter(|n| !seen.contains(n)) {
            seen.push(name);
            telemetry
                .signal
                .get_or_create(&SignalLabels {
                    signal: name.to_owned(),
                })
                .observe(elapsed.as_secs_f64());
        }
    }
}
