//! Seams for the parts of the request path that other components provide: model-backed signals
//! (classifiers, guards, encoders, and the embeddings the response cache compares) and session
//! continuity (`session` + `protect`).
//!
//! The request pipeline calls these traits at fixed points of
//! docs/language.md, "What happens to a request", and knows nothing of how they are implemented. The defaults here are honest
//! about what this build does: [`NoModelSignals`] refuses, at load time and with a diagnostic
//! per declaration, any policy that needs a model; [`NoSessions`] keeps every route decision as
//! it is (and the load logs that `session` and `protect` are not enforced).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use src_compiler::eval::{ModelCall, ModelResult};
use src_compiler::hir::{CheckedPolicy, DetectorId, EncoderId, ModelId, RouteId};
use src_compiler::pii::Detected;
use src_compiler::request::RequestView;
use src_compiler::CompiledPolicy;
use src_dsl::{codes, Diagnostic};

use crate::openai::ApiError;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A model-backed signal could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{signal}: {message}")]
pub struct SignalError {
    pub signal: String,
    pub message: String,
}

/// Computes classifier, guard and similarity atoms the staged evaluation asks for.
pub trait ModelSignals: Send + Sync {
    /// Called on the blocking reload thread for every policy before it is served: load or check
    /// the model files the policy declares. Errors refuse the policy (the old one keeps serving).
    fn prepare(&self, policy: &CheckedPolicy) -> Vec<Diagnostic>;

    /// Answers every call of one evaluation step, in order. Implementations batch as they see
    /// fit and must time out rather than hang.
    fn compute<'a>(
        &'a self,
        policy: &'a CheckedPolicy,
        calls: &'a [ModelCall],
    ) -> BoxFuture<'a, Result<Vec<ModelResult>, SignalError>>;

    /// [`ModelSignals::compute`] for one tenant's request: an implementation that remembers
    /// answers keeps each tenant's apart (`scope` is the tenant), so no tenant can learn from a
    /// remembered answer, or from how fast it came, what another one sent. Offline callers
    /// (explain, calibrate) use `compute`, one scope of their own.
    fn compute_scoped<'a>(
        &'a self,
        policy: &'a CheckedPolicy,
        calls: &'a [ModelCall],
        _scope: &'a str,
    ) -> BoxFuture<'a, Result<Vec<ModelResult>, SignalError>> {
        self.compute(policy, calls)
    }

    /// Embeds `text` under the policy's `encoder` (one encoder call), for the response cache.
    /// `scope` is the request's tenant, as for [`ModelSignals::compute_scoped`]: an embedding
    /// remembered for one tenant is never another's. Implementations time out rather than hang.
    /// The default has no encoder to run.
    fn embed<'a>(
        &'a self,
        policy: &'a CheckedPolicy,
        encoder: EncoderId,
        _text: &'a str,
        _scope: &'a str,
    ) -> BoxFuture<'a, Result<Embedding, SignalError>> {
        let signal = policy
            .encoders
            .get(encoder.index())
            .map_or_else(|| format!("encoder #{}", encoder.0), |e| e.name.clone());
        Box::pin(std::future::ready(Err(SignalError {
            signal,
            message: "this model runtime cannot embed text".into(),
        })))
    }

    /// Runs `detector` over each of `texts` for one tenant (`scope`, as for
    /// [`ModelSignals::compute_scoped`]): the entities of each text scoring at least the
    /// detector's `threshold`, every type it tags. An error when the model cannot answer or a
    /// text is longer than the detector reads (`windows`): what was not read cannot be redacted.
    /// The default has no model to run.
    fn entities<'a>(
        &'a self,
        policy: &'a CheckedPolicy,
        detector: DetectorId,
        _texts: &'a [String],
        _scope: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Vec<Detected>>, SignalError>> {
        let signal = policy
            .detectors
            .get(detector.index())
            .map_or_else(|| format!("detector #{}", detector.0), |d| d.name.clone());
        Box::pin(std::future::ready(Err(SignalError {
            signal,
            message: "this model runtime cannot run a detector".into(),
        })))
    }

    /// Adds the model runtime's metrics to the server's registry.
    fn register_metrics(&self, _registry: &mut prometheus_client::registry::Registry) {}
}

/// A text's embedding: a unit vector, and the fingerprint of the model that made it (vectors of
/// different models are never compared).
#[derive(Debug, Clone, PartialEq)]
pub struct Embedding {
    pub vector: Vec<f32>,
    pub model: String,
}

/// The default: no model runtime in this build.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoModelSignals;

impl ModelSignals for NoModelSignals {
    fn prepare(&self, policy: &CheckedPolicy) -> Vec<Diagnostic> {
        let declared = policy
            .classifiers
            .iter()
            .map(|c| ("classifier", &c.name, c.span))
            .chain(policy.guards.iter().map(|g| ("guard", &g.name, g.span)))
            .chain(policy.encoders.iter().map(|e| ("encoder", &e.name, e.span)))
            .chain(
                policy
                    .detectors
                    .iter()
                    .map(|d| ("detector", &d.name, d.span)),
            );
        declared
            .map(|(kind, name, span)| {
                Diagnostic::error(
                    codes::MODEL_UNAVAILABLE,
                    format!(
                        "{kind} `{name}` needs a model runtime, which this server does not have"
                    ),
                    span,
                )
                .with_label_message("declared here")
                .with_help(
                    "serve policies whose signals are cheap (phrases, regexes, tokens, headers), \
                     or remove the declaration and the signals that use it",
                )
            })
            .collect()
    }

    fn compute<'a>(
        &'a self,
        _policy: &'a CheckedPolicy,
        calls: &'a [ModelCall],
    ) -> BoxFuture<'a, Result<Vec<ModelResult>, SignalError>> {
        // `prepare` refuses every policy that could reach this; answer an error, never panic.
        let signal = format!("{} model call(s)", calls.len());
        Box::pin(async move {
            Err(SignalError {
                signal,
                message: "no model runtime in this server".into(),
            })
        })
    }
}

/// What the session layer knows when the route has proposed a model.
pub struct SessionInput<'a> {
    pub policy: &'a CheckedPolicy,
    /// The same policy compiled: `protect` holds run on its staged evaluator.
    pub compiled: &'a CompiledPolicy,
    pub request: &'a RequestView,
    /// The route that decided (`None` when the client named a model or a block redirected).
    pub route: Option<RouteId>,
    pub proposed: ModelId,
    /// The session's pin as the budgets' store step read it ([`Sessions::pin_read`]), when it did.
    pub ahead: Option<PinAhead>,
}

/// A read of a session's pin in a shared Redis that the request's budget reservation carries,
/// in the same script or beside it, so that a request under budgets waits for one round trip to
/// the store instead of two (docs/operations.md, "Budgets and sessions, one round trip").
/// Made by the session layer, which alone knows the request's identity; run by the budget store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinRead {
    /// The pin's key.
    pub key: String,
    /// The session layer's clock when it asked, and the session's idle ttl and retention: a live
    /// pin is touched as the session store's `get_and_touch` touches it.
    pub now_ms: u64,
    pub ttl_ms: u64,
    pub retain_ms: u64,
}

/// What a carried [`PinRead`] found: the pin hash's fields and values as Redis lists them
/// (`HGETALL`; empty when there is no pin), as they were before the touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinAhead {
    pub read: PinRead,
    pub fields: Vec<String>,
}

/// The session layer's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionOutcome {
    /// Forward to the proposal.
    Keep,
    /// Forward to another model (a pin that a `hold` kept); `protection` is the value of
    /// `x-sr-protection` (the hold's name, with the mode).
    Use {
        model: ModelId,
        protection: Option<String>,
    },
    /// Refuse (`missing = reject` without an identity, a failed store with `store = closed`).
    Reject { status: u16, message: String },
    /// Forward to `model` (the proposal, or the pin a `hold` kept) with what the session layer
    /// reports about the call.
    Session {
        model: ModelId,
        protection: Option<String>,
        report: SessionReport,
    },
}

/// What a session-managed call carries to the forwarder.
#[derive(Clone)]
pub struct SessionReport {
    /// The value of `x-sr-session`.
    pub state: &'static str,
    /// The session id, forwarded upstream as `x-dynamo-session-id`.
    pub identity: Option<String>,
    /// Told when a model fails the call upstream (an error, or an answer that is not one).
    pub outcomes: Option<Arc<dyn UpstreamOutcomes>>,
    /// Set when the call follows a live pin: what to do should that model fail it.
    pub owner: Option<OwnerRule>,
}

/// What the forwarder does when the model a call's live pin names fails it before its first
/// byte: the failover machine's rule.
pub use src_compiler::failover::OwnerRule;

impl std::fmt::Debug for SessionReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionReport")
            .field("state", &self.state)
            .field("identity", &self.identity)
            .field("outcomes", &self.outcomes.is_some())
            .field("owner", &self.owner)
            .finish()
    }
}

impl PartialEq for SessionReport {
    fn eq(&self, other: &Self) -> bool {
        let same_sink = match (&self.outcomes, &other.outcomes) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        self.state == other.state
            && self.identity == other.identity
            && self.owner == other.owner
            && same_sink
    }
}

/// Receives upstream failures of the models a session's call tried. Called on the request path
/// (also from a response body's poll), so implementations must not block.
pub trait UpstreamOutcomes: Send + Sync {
    /// `model` (a logical model name) failed the call; `reason` is a short fixed word.
    fn failed(&self, model: &str, reason: &'static str);

    /// The pinned model `from` failed the call: `action` is what `owner_lost` did (`fail`,
    /// `fallback`, `move` or `observed`), and `to` the model that answered instead. A `move`
    /// moves the pin to `to` before the answer is relayed, so the next call follows it.
    fn owner_lost<'a>(
        &'a self,
        from: &'a str,
        to: Option<&'a str>,
        action: &'static str,
    ) -> BoxFuture<'a, ()> {
        let _ = (from, to, action);
        Box::pin(async {})
    }
}

/// Session pinning and `protect`, called after the route decision and before forwarding.
pub trait Sessions: Send + Sync {
    /// Whether `session` and `protect` declarations take effect (the default hook says no, and
    /// the server warns at load when a policy declares them).
    fn enforces(&self) -> bool {
        true
    }

    fn after_route<'a>(&'a self, input: SessionInput<'a>) -> BoxFuture<'a, SessionOutcome>;

    /// The read of the request's pin that its budget reservation can carry (the procedure's
    /// budget step says the policy keeps sessions); `None` when there is nothing to carry (no
    /// identity, a store in memory): [`Sessions::after_route`] then reads the pin itself.
    fn pin_read(&self, _policy: &CheckedPolicy, _request: &RequestView) -> Option<PinRead> {
        None
    }

    /// Adds the layer's metrics to the server's registry.
    fn register_metrics(&self, _registry: &mut prometheus_client::registry::Registry) {}

    /// `POST /v1/router/outcomes`: records a client's verdict; answers the JSON body.
    fn record_outcome<'a>(
        &'a self,
        _policy: &'a CheckedPolicy,
        _headers: &'a [(String, String)],
        _body: &'a [u8],
    ) -> BoxFuture<'a, Result<serde_json::Value, ApiError>> {
        Box::pin(std::future::ready(Err(ApiError::new(
            hyper::StatusCode::NOT_FOUND,
            "invalid_request_error",
            Some("no_sessions"),
            "this server does not keep sessions",
        ))))
    }

    /// The operator console's listing of at most `limit` pins under `policy`.
    fn list_pins<'a>(
        &'a self,
        _policy: &'a CheckedPolicy,
        _limit: usize,
    ) -> BoxFuture<'a, Result<serde_json::Value, ApiError>> {
        Box::pin(std::future::ready(Err(ApiError::new(
            hyper::StatusCode::NOT_FOUND,
            "invalid_request_error",
            Some("no_sessions"),
            "this server does not keep sessions",
        ))))
    }
}

/// The default: every decision stands.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoSessions;

impl Sessions for NoSessions {
    fn enforces(&self) -> bool {
        false
    }

    fn after_route<'a>(&'a self, _input: SessionInput<'a>) -> BoxFuture<'a, SessionOutcome> {
        Box::pin(std::future::ready(SessionOutcome::Keep))
    }
}
