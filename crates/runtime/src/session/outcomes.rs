//! `POST /v1/router/outcomes`: a client's verdict on a step of its session.
//!
//! ```json
//! {"session": "task-42", "model": "strong", "verdict": "fail", "idempotency_key": "step-7"}
//! ```
//! HTTP 200 from a model says nothing about whether its answer was right, so the client (an
//! agent harness, a test runner) reports it; `protect` reads the result as
//! `outcomes(pinned).fail_rate` and `.count`. `model` defaults to the session's pinned model.
//! A retry with the same `idempotency_key` for the same session within ten minutes is
//! acknowledged and not counted twice.
//!
//! The tenant is derived from the reporting request exactly as for a chat call (its API key's
//! hash, or the policy's `tenant` expression), never taken from the body: a body's `tenant`
//! is only checked against it (403 on mismatch), so no caller can touch another tenant's
//! outcomes.

use hyper::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};
use src_compiler::hir::CheckedPolicy;
use src_compiler::request::RequestView;

use crate::openai::ApiError;
use crate::session::identity::{self, Identity};
use crate::session::layer::{verdict_word, SessionLayer};
use crate::session::store::{Recorded, Verdict};

/// Longest accepted idempotency key.
const MAX_KEY_BYTES: usize = 256;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Report {
    session: String,
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    model: Option<String>,
    verdict: Verdict,
    idempotency_key: String,
}

/// Records one report; the answer body on success.
pub async fn report(
    layer: &SessionLayer,
    policy: &CheckedPolicy,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<Value, ApiError> {
    let Some(def) = &policy.session else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            Some("no_sessions"),
            "the served policy declares no `session`, so there are no outcomes to record",
        ));
    };
    let report: Report = serde_json::from_slice(body).map_err(|e| {
        if e.is_syntax() || e.is_eof() {
            ApiError::invalid_json(e)
        } else {
            ApiError::bad_request(format!("invalid outcome report: {e}"))
        }
    })?;
    let id = identity::session_id(&report.session).ok_or_else(|| {
        ApiError::bad_request("`session` must be a non-empty session id").with_param("session")
    })?;
    let key = report.idempotency_key.trim();
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        return Err(ApiError::bad_request(format!(
            "`idempotency_key` must be 1 to {MAX_KEY_BYTES} bytes"
        ))
        .with_param("idempotency_key"));
    }
    let view = RequestView::from_prompt("", None, headers);
    let tenant = identity::tenant(policy, &view);
    if report.tenant.as_deref().is_some_and(|t| t != tenant) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "permission_error",
            Some("tenant_mismatch"),
            "`tenant` does not match the tenant of this request's credentials",
        )
        .with_param("tenant"));
    }
    let ticket = layer
        .ticket(def, Identity { tenant, id })
        .map_err(|e| ApiError::service_unavailable(e.to_string()))?;
    let unavailable =
        |e: crate::session::store::StoreError| ApiError::service_unavailable(e.to_string());
    let model = match report.model {
        Some(name) => known_model(policy, &name)?,
        None => match layer.pin_of(&ticket).await.map_err(unavailable)? {
            Some(pin) => pin.model,
            None => {
                return Err(ApiError::new(
                    StatusCode::NOT_FOUND,
                    "invalid_request_error",
                    Some("session_not_found"),
                    format!(
                        "session `{}` has no pin; name the `model` the outcome is about",
                        report.session.trim()
                    ),
                )
                .with_param("session"))
            }
        },
    };
    let recorded = ticket
        .record(&model, report.verdict, Some(key), "client")
        .await
        .map_err(unavailable)?;
    let stats = layer
        .outcomes_of(&ticket, &model)
        .await
        .map_err(unavailable)?;
    Ok(json!({
        "recorded": recorded == Recorded::New,
        "duplicate": recorded == Recorded::Duplicate,
        "model": model,
        "verdict": verdict_word(report.verdict),
        "outcomes": {"count": stats.count, "fail_rate": stats.fail_rate()},
    }))
}

/// The logical model `name` (or an alias of one) names.
fn known_model(policy: &CheckedPolicy, name: &str) -> Result<String, ApiError> {
    if let Some(m) = policy
        .models
        .iter()
        .find(|m| m.name == name || m.aliases.iter().any(|a| a == name))
    {
        return Ok(m.name.clone());
    }
    let nearest = policy
        .models
        .iter()
        .map(|m| (strsim::jaro_winkler(&m.name, name), &m.name))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let help = nearest.map_or(String::new(), |(_, m)| format!("; did you mean `{m}`?"));
    Err(
        ApiError::bad_request(format!("the policy declares no model `{name}`{help}"))
            .with_param("model"),
    )
}
