//! Who may report outcomes (`POST /v1/router/outcomes`), as the policy's `session { outcomes =
//! any | admin | keys }` says.
//!
//! An outcome moves a session's `protect` holds (`outcomes(pinned).fail_rate`), so whoever can
//! report one for a session can keep it on a model or push it off. With `any`, every client
//! that knows a session id (within its tenant) can. `admin` and `keys` ask for a token in the
//! `x-sr-outcome-token` header: the admin token (`SRC_ADMIN_TOKEN`) or one of
//! `SRC_OUTCOME_KEYS`. The token has a header of its own so that `authorization` keeps naming
//! the tenant the outcome is recorded for.

use hyper::header::HeaderMap;
use src_compiler::hir::CheckedPolicy;
use src_dsl::ast::Outcomes;

use crate::config::{AdminToken, ServeConfig};
use crate::openai::ApiError;

/// The request header that carries the reporter's token.
pub use crate::headers::OUTCOME_TOKEN;

/// `Ok` when the policy lets this request report outcomes; 401 otherwise.
pub fn admit(
    policy: &CheckedPolicy,
    cfg: &ServeConfig,
    headers: &HeaderMap,
) -> Result<(), ApiError> {
    let Some(session) = &policy.session else {
        return Ok(());
    };
    let (tokens, source): (Vec<&AdminToken>, &str) = match session.outcomes {
        Outcomes::Any => return Ok(()),
        Outcomes::Admin => (cfg.admin_token.iter().collect(), AdminToken::ENV),
        Outcomes::Keys => (
            cfg.outcome_keys.iter().collect(),
            AdminToken::OUTCOME_KEYS_ENV,
        ),
    };
    let given = headers.get(OUTCOME_TOKEN).map(|v| v.as_bytes());
    if tokens.iter().any(|t| t.admits_bare(given)) {
        return Ok(());
    }
    let message = if tokens.is_empty() {
        format!("outcomes need a token from {source}, and none is set: nobody can report")
    } else {
        format!("outcomes need `{OUTCOME_TOKEN}` with a token from {source}")
    };
    Err(ApiError::unauthorized(message))
}
