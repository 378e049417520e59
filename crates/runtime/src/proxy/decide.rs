//! Steps 1–5 of docs/language.md, "What happens to a request" for one request, as the
//! compiler's [`Procedure`] runs them: this module answers the procedure's asks — model-backed
//! signals from the [`crate::hooks::ModelSignals`] component (in batches, only when a condition
//! still open needs them), the cache lookup ([`crate::cache::consult`]) and the session hook —
//! and ends in a [`Decision`] the forwarder (or, for a cache hit, [`crate::cache::replay`])
//! carries out.

use std::time::{Duration, Instant};

use serde_json::Value;
use src_compiler::eval::{Evaluation, ModelCall, ModelKind, ModelResult};
use src_compiler::hir::{BlockId, CheckedPolicy, ModelId, RouteId};
use src_compiler::procedure::{CacheUse, Decision as ProcedureDecision, SessionAnswer};
use src_compiler::request::RequestView;
use src_compiler::{Next, Procedure, ProcedureError};

use crate::app::App;
use crate::cache::{self, CacheQuery, CacheReport, CacheResult, CachedAnswer, Consulted};
use crate::hooks::{SessionInput, SessionOutcome, SessionReport};
use crate::openai::ApiError;
use crate::policy_store::Snapshot;
use crate::proxy::Api;
use crate::telemetry::SignalLabels;

/// Where a request goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// A block refuses it.
    Refuse {
        block: BlockId,
        status: u16,
        message: String,
    },
    /// A stored answer of the proposed model answers it.
    Cached(CachedAnswer),
    Forward(Box<Plan>),
}

/// The models to try, in order, and what decided them.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The route whose decision this is (`None` when the client named a model or a block
    /// redirected).
    pub route: Option<RouteId>,
    /// The block that redirected the request (`block ... to MODEL`).
    pub block: Option<BlockId>,
    /// First the proposal, then `else` models, then (with `failure.backend = open`) the default
    /// route's model.
    pub candidates: Vec<ModelId>,
    /// `x-sr-protection` when the session layer held a pin.
    pub protection: Option<String>,
    /// What the session layer reports, for a call of a session-managed policy.
    pub session: Option<SessionReport>,
    /// What the response cache did, for a policy with a `cache`.
    pub cache: Option<CacheReport>,
}

/// What the request's evaluation found, besides the decision.
#[derive(Debug, Default, Clone)]
pub struct Facts {
    /// Signals never computed because the decision did not need them.
    pub skipped_signals: Vec<String>,
    /// What the cache step did (`x-sr-cache`), once it ran.
    pub cache: Option<&'static str>,
}

/// The request as the deciding steps read it: its API, its parsed body and its facts.
#[derive(Clone, Copy)]
pub struct Asked<'a> {
    pub api: Api,
    pub parsed: &'a Value,
    pub view: &'a RequestView,
}

/// Decides `asked` under `snapshot`, driving the compiler's request procedure: this answers its
/// asks (model-backed signals, the cache lookup, the session) and turns its decision into what
/// the forwarder or the cache replay carries out.
pub async fn decide(
    app: &App,
    snapshot: &Snapshot,
    asked: Asked<'_>,
    facts: &mut Facts,
) -> Result<Decision, ApiError> {
    let view = asked.view;
    let mut procedure = Procedure::new(&snapshot.compiled, view);
    // A streamed `/v1/responses` answer cannot be stored or replayed.
    if asked.api == Api::Responses && view.stream {
        procedure = procedure.without_cache();
    }
    let mut answers = Answers::default();
    let decided = drive(app, snapshot, asked, &mut procedure, &mut answers).await;
    facts.skipped_signals = skipped(snapshot.policy(), procedure.evaluation());
    let decision = match decided {
        Ok(decision) => decision,
        Err(error) => {
            facts.cache = answers.cache_error.then_some(crate::headers::cache::ERROR);
            return Err(error);
        }
    };
    if let (Some(block), Some(refusal)) = (decision.block, decision.refusal) {
        return Ok(Decision::Refuse {
            block,
            status: refusal.status,
            message: refusal.message,
        });
    }
    let cache = match decision.cache {
        CacheUse::Hit => {
            if let Some(hit) = answers.hit {
                facts.cache = Some(crate::headers::cache::HIT);
                return Ok(Decision::Cached(hit));
            }
            return Err(ApiError::internal(
                "the cache answered without a stored answer",
            ));
        }
        CacheUse::Miss => answers.cache,
        CacheUse::Bypass => Some(cache::consult::passed(&app.cache, CacheResult::Bypass)),
        CacheUse::Skip => Some(cache::consult::passed(&app.cache, CacheResult::Skip)),
        CacheUse::Undeclared | CacheUse::NotReached => None,
    };
    facts.cache = cache.as_ref().map(|c| c.result.as_str());
    Ok(Decision::Forward(Box::new(Plan {
        route: decision.route,
        block: decision.block,
        candidates: decision.candidates,
        protection: answers.protection,
        session: answers.session,
        cache,
    })))
}

/// What the runtime answered the procedure, kept for the plan.
#[derive(Default)]
struct Answers {
    hit: Option<CachedAnswer>,
    cache: Option<CacheReport>,
    cache_error: bool,
    protection: Option<String>,
    session: Option<SessionReport>,
}

/// Answers the procedure's asks until it decides.
async fn drive(
    app: &App,
    snapshot: &Snapshot,
    asked: Asked<'_>,
    procedure: &mut Procedure<'_>,
    answers: &mut Answers,
) -> Result<ProcedureDecision, ApiError> {
    let policy = snapshot.policy();
    loop {
        let next = procedure.advance().map_err(|error| {
            answers.cache_error = matches!(error, ProcedureError::SkipFailed(_));
            procedure_error(error)
        })?;
        match next {
            Next::Done(decision) => return Ok(decision),
            Next::Models(calls) => supply_models(app, policy, procedure, &calls).await?,
            Next::Cache(proposal) => {
                let query = CacheQuery {
                    api: asked.api,
                    parsed: asked.parsed,
                    view: asked.view,
                    route: proposal.route,
                    block: proposal.block,
                    proposal: proposal.model,
                };
                match cache::consult::lookup(app, snapshot, query).await {
                    Ok(Consulted::Hit(hit)) => {
                        answers.hit = Some(hit);
                        procedure.cache_answered(true);
                    }
                    Ok(Consulted::Forward(report)) => {
                        answers.cache = report;
                        procedure.cache_answered(false);
                    }
                    Err(error) => {
                        answers.cache_error = true;
                        return Err(error);
                    }
                }
            }
            Next::Session(proposal) => {
                let input = SessionInput {
                    policy,
                    compiled: &snapshot.compiled,
                    request: asked.view,
                    route: proposal.route,
                    proposed: proposal.model,
                };
                let answer = match app.components.sessions.after_route(input).await {
                    SessionOutcome::Keep => SessionAnswer::Keep,
                    SessionOutcome::Use { model, protection } => {
                        answers.protection = protection;
                        SessionAnswer::Use(model)
                    }
                    SessionOutcome::Session {
                        model,
                        protection,
                        report,
                    } => {
                        answers.protection = protection;
                        answers.session = Some(report);
                        SessionAnswer::Use(model)
                    }
                    SessionOutcome::Reject { status, message } => {
                        let status = hyper::StatusCode::from_u16(status)
                            .unwrap_or(hyper::StatusCode::BAD_REQUEST);
                        // A missing identity is the client's to fix; a failed store is the
                        // server's.
                        let kind = if status.is_server_error() {
                            "server_error"
                        } else {
                            "invalid_request_error"
                        };
                        return Err(ApiError::new(status, kind, Some("session"), message));
                    }
                };
                procedure.session_answered(answer);
            }
        }
    }
}

/// The OpenAI error for a request the procedure cannot decide.
fn procedure_error(error: ProcedureError) -> ApiError {
    match error {
        ProcedureError::ModelsFailed(_) | ProcedureError::SkipFailed(_) => {
            ApiError::service_unavailable(error.to_string())
        }
        ProcedureError::MissingModel => {
            ApiError::bad_request(error.to_string()).with_param("model")
        }
        ProcedureError::UnknownModel(model) => ApiError::model_not_found(&model),
        ProcedureError::Internal(_) => ApiError::internal(error.to_string()),
    }
}

fn skipped(policy: &CheckedPolicy, evaluation: &Evaluation<'_>) -> Vec<String> {
    evaluation
        .skipped_signals()
        .into_iter()
        .filter_map(|s| policy.signals.get(s.index()).map(|d| d.name.clone()))
        .collect()
}

/// Computes the model-backed atoms of one procedure step and supplies them.
async fn supply_models(
    app: &App,
    policy: &CheckedPolicy,
    procedure: &mut Procedure<'_>,
    calls: &[ModelCall],
) -> Result<(), ApiError> {
    let started = Instant::now();
    let results = match app.components.models.compute(policy, calls).await {
        Ok(results) if results.len() == calls.len() => results,
        // The evaluator applies `failure.classifier`: open treats the signal as not holding,
        // closed ends in a failed step.
        Ok(_) | Err(_) => vec![ModelResult::Failed; calls.len()],
    };
    observe_signals(app, policy, calls, started.elapsed());
    for (call, result) in calls.iter().zip(results) {
        procedure.supply(call, result).map_err(|err| {
            ApiError::internal(format!("a model-backed signal answered badly: {err}"))
        })?;
    }
    Ok(())
}

/// Model-backed signal latency, by the classifier, guard or encoder that computed it (one batch
/// serves every call of a step, so each model in it is charged the batch's time).
fn observe_signals(app: &App, policy: &CheckedPolicy, calls: &[ModelCall], elapsed: Duration) {
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
            app.telemetry
                .signal
                .get_or_create(&SignalLabels {
                    signal: name.to_owned(),
                })
                .observe(elapsed.as_secs_f64());
        }
    }
}
