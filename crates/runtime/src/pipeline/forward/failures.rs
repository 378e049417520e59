//! What the failover machine's failures become: the client's error when every candidate failed,
//! the fallback metric and debug line of each, and the session layer's word of the models that
//! failed the call.

use src_compiler::failover::{Attempts, Exhausted};
use src_compiler::hir::CheckedPolicy;

use crate::hooks::UpstreamOutcomes;
use crate::openai::ApiError;
use crate::pipeline::forward::{count_fallback, too_long};
use crate::telemetry::Telemetry;

/// The answer when every candidate failed (see [`Attempts::exhausted`]).
pub fn exhausted(policy: &CheckedPolicy, attempts: &Attempts<'_>) -> ApiError {
    let detail = attempts.detail(policy);
    match attempts.exhausted() {
        Exhausted::TooLong => too_long(&detail),
        Exhausted::Unspoken => ApiError::bad_request(format!(
            "no eligible model's backend speaks this API ({detail})"
        )),
        Exhausted::Timeout => {
            ApiError::gateway_timeout(format!("no backend could answer ({detail})"))
        }
        Exhausted::BadGateway => {
            ApiError::bad_gateway(format!("no backend could answer ({detail})"))
        }
        Exhausted::Unavailable => {
            ApiError::service_unavailable(format!("no backend could answer ({detail})"))
        }
    }
}

/// Counts each candidate that was skipped or failed, under its reason, with a debug line.
pub fn count(telemetry: &Telemetry, policy: &CheckedPolicy, attempts: &Attempts<'_>) {
    for failed in attempts.failures() {
        let Some(model) = policy.models.get(failed.model.index()) else {
            continue;
        };
        let reason = failed.why.reason();
        count_fallback(telemetry, &model.name, reason);
        tracing::debug!(model = %model.name, reason, detail = %failed.why.describe(), "trying the next model");
    }
}

/// Tells the session layer which models failed the call upstream (a context skip or a request
/// the router could not build is no fault of the model).
pub fn report(
    outcomes: Option<&dyn UpstreamOutcomes>,
    policy: &CheckedPolicy,
    attempts: &Attempts<'_>,
) {
    let Some(outcomes) = outcomes else {
        return;
    };
    for failed in attempts.failures() {
        if let (true, Some(model)) = (
            failed.why.is_model_failure(),
            policy.models.get(failed.model.index()),
        ) {
            outcomes.failed(&model.name, failed.why.reason());
        }
    }
}
