//! The request procedure of docs/language.md, "What happens to a request": one step machine from
//! a [`RequestView`] to a [`Decision`], driven by every front door (`src serve`, `src explain`,
//! `src test`), so that none of them assembles the procedure again and they cannot disagree.
//!
//! It does no IO. Where a step needs what only its caller can get, [`Procedure::advance`] hands it
//! back and waits to be resumed:
//! - [`Next::Models`]: model-backed signals to compute, all those of one condition at once;
//!   answer each with [`Procedure::supply`] (a failed call is [`ModelResult::Failed`]);
//! - [`Next::Cache`]: look the response cache up for the proposal; answer with
//!   [`Procedure::cache_answered`];
//! - [`Next::Session`]: what the session layer makes of the proposal (a pin, a `protect` hold);
//!   answer with [`Procedure::session_answered`].
//!
//! The rules live here once: blocks in order (refuse, or `to MODEL`); a `model` that names a
//! router name asks for routing, a model name, alias or served id bound to one model is the
//! proposal (only blocks are then evaluated: models that only routes read are never run), a
//! served id bound to several is a 400 and anything else a 404 once no block holds; routes by priority; the cache unless bypassed (`cache = off`, or a request the caller
//! cannot cache) or skipped (`skip when`); the session unless a block redirected; then the order
//! in which models are tried.

use crate::compiled::target::{self, Target};
use crate::compiled::CompiledPolicy;
use crate::eval::{CacheStep, GiveError};
use crate::eval::{Evaluation, FailedModels, ModelCall, ModelResult, Step, SupplyError};
use crate::hir::{BlockActionDef, BlockId, CheckedPolicy, ModelId, RouteId, SignalId, Value};
use crate::ir::{CondOwner, Outcome, Verdict};
use crate::request::RequestView;
use src_dsl::ast::FailMode;

/// What the route step proposed, before the cache and the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proposal {
    /// The route that decided (`None` when the client named a model or a block redirected).
    pub route: Option<RouteId>,
    /// The block that redirected the request (`block ... to MODEL`).
    pub block: Option<BlockId>,
    pub model: ModelId,
}

/// A block's refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub message: String,
}

/// What the response cache did for the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheUse {
    /// A block refused the request first.
    NotReached,
    /// The policy has no `cache`.
    Undeclared,
    /// The cache does not apply: the route says `cache = off`, or the caller cannot cache this
    /// request ([`Procedure::without_cache`]).
    Bypass,
    /// `skip when` held.
    Skip,
    /// Looked up, and no stored answer was used.
    Miss,
    /// A stored answer of the proposed model answers the request.
    Hit,
}

/// Where the request goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The block that held: it refused (`refusal`) or redirected.
    pub block: Option<BlockId>,
    pub refusal: Option<Refusal>,
    /// The route whose decision this is (`None` for a named model or a block).
    pub route: Option<RouteId>,
    /// The model proposed by the block, the client or the route (`None` when refused).
    pub proposal: Option<ModelId>,
    pub cache: CacheUse,
    /// The models to try, in order: the session's choice (the proposal, or the pin a `hold`
    /// kept), then the route's `else` models when that choice is the route's own model, then
    /// (with `failure.backend = open`) the default route's model; each once. Empty when
    /// refused; the proposal alone on a cache hit.
    pub candidates: Vec<ModelId>,
}

/// What the session layer made of a proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionAnswer {
    /// Send the proposal.
    Keep,
    /// Send this model instead (a pin that a `hold` kept, or a race's winning pin).
    Use(ModelId),
}

/// What the caller must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Compute these, [`Procedure::supply`] each answer, and call [`Procedure::advance`] again.
    Models(Vec<ModelCall>),
    /// Look the cache up for this proposal, then [`Procedure::cache_answered`].
    Cache(Proposal),
    /// Ask the session layer about this proposal, then [`Procedure::session_answered`].
    Session(Proposal),
    Done(Decision),
}

/// A request the procedure cannot decide.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProcedureError {
    /// A model-backed signal failed where the policy fails closed.
    #[error("{} model-backed signal(s) failed and the policy fails closed", .0.atoms.len())]
    ModelsFailed(FailedModels),
    /// A model-backed signal of `cache.skip_when` failed where the policy fails closed.
    #[error(
        "{} model-backed signal(s) of the cache's `skip when` failed and the policy fails closed",
        .0.atoms.len()
    )]
    SkipFailed(FailedModels),
    /// A route decided, and the request names no model.
    #[error("you must provide a `model` parameter")]
    MissingModel,
    /// No block holds, and the request's `model` is neither a router name nor a declared model.
    #[error("the model `{0}` does not exist")]
    UnknownModel(String),
    /// No block holds, and the request's `model` is a served id several models are bound to.
    #[error(
        "the served id `{id}` is bound to several models ({}); name one of them",
        .models.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ")
    )]
    AmbiguousModel { id: String, models: Vec<String> },
    /// The program named a block or route the policy does not have (a compiler bug).
    #[error("the decision named an unknown {0}")]
    Internal(&'static str),
}

/// What a request without a `model` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unnamed {
    /// An error once a route decides (`src serve`: the OpenAI APIs require `model`).
    Refuse,
    /// Routing (offline callers that explain a prompt).
    Route,
}

/// What the request's `model` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked<'a> {
    Route,
    Model(ModelId),
    Unknown(&'a str),
    /// A served id several models are bound to.
    Ambiguous(&'a str),
    Missing,
}

/// How the route step ended.
#[derive(Debug, Clone, Copy)]
enum Found {
    Blocked(BlockId),
    Route(RouteId),
    /// No block holds, and the request names a model: routes do not matter.
    Unblocked,
}

#[derive(Debug, Clone)]
enum Stage {
    Route,
    Cache(Proposal),
    AwaitCache(Proposal),
    Session(Proposal, CacheUse),
    AwaitSession(Proposal, CacheUse),
    Done(Decision),
}

/// The procedure for one request under one compiled policy.
pub struct Procedure<'a> {
    policy: &'a CompiledPolicy,
    evaluation: Evaluation<'a>,
    asked: Asked<'a>,
    unnamed: Unnamed,
    cacheable: bool,
    stage: Stage,
}

impl<'a> Procedure<'a> {
    /// Starts the procedure for `request`; nothing is computed until [`Procedure::advance`].
    pub fn new(policy: &'a CompiledPolicy, request: &'a RequestView) -> Procedure<'a> {
        let asked = match request.model.as_deref() {
            None => Asked::Missing,
            Some(name) => match policy.target(name) {
                Some(Target::Route) => Asked::Route,
                Some(Target::Model(m)) => Asked::Model(m),
                Some(Target::Ambiguous) => Asked::Ambiguous(name),
                None => Asked::Unknown(name),
            },
        };
        Procedure {
            policy,
            evaluation: policy.evaluate(request),
            asked,
            unnamed: Unnamed::Refuse,
            cacheable: true,
            stage: Stage::Route,
        }
    }

    /// A request without a `model` is routed (instead of refused once a route decides).
    pub fn routing_unnamed(mut self) -> Self {
        self.unnamed = Unnamed::Route;
        self
    }

    /// The cache cannot serve this request (a streamed `/v1/responses` answer, an offline
    /// caller): it is bypassed, and `skip when` is not evaluated.
    pub fn without_cache(mut self) -> Self {
        self.cacheable = false;
        self
    }

    /// Pins a signal's value (`given` in tests, `--given` in `src explain`).
    pub fn give(&mut self, signal: SignalId, value: Value) -> Result<(), GiveError> {
        self.evaluation.give(signal, value)
    }

    /// Records the answer to a model call of the last [`Next::Models`].
    pub fn supply(&mut self, call: &ModelCall, result: ModelResult) -> Result<(), SupplyError> {
        self.evaluation.supply(call, result)
    }

    /// The evaluation so far: signal values, skipped signals, the trace of conditions.
    pub fn evaluation(&self) -> &Evaluation<'a> {
        &self.evaluation
    }

    /// The policy this procedure runs.
    pub fn policy(&self) -> &'a CheckedPolicy {
        &self.policy.checked
    }

    /// The answer to [`Next::Cache`]: whether a stored answer serves the request. Ignored when
    /// no lookup was asked for.
    pub fn cache_answered(&mut self, hit: bool) {
        if let Stage::AwaitCache(proposal) = self.stage {
            self.stage = if hit {
                Stage::Done(decision(proposal, CacheUse::Hit, vec![proposal.model]))
            } else {
                Stage::Session(proposal, CacheUse::Miss)
            };
        }
    }

    /// The answer to [`Next::Cache`] when the caller found the cache does not apply after all
    /// (the client's `cache-control` bypasses it, or the body has nothing the cache can key):
    /// the decision records [`CacheUse::Bypass`], as for `cache = off`. Ignored when no lookup
    /// was asked for.
    pub fn cache_bypassed(&mut self) {
        if let Stage::AwaitCache(proposal) = self.stage {
            self.stage = Stage::Session(proposal, CacheUse::Bypass);
        }
    }

    /// The answer to [`Next::Session`]. Ignored when the session was not asked.
    pub fn session_answered(&mut self, answer: SessionAnswer) {
        if let Stage::AwaitSession(proposal, cache) = self.stage {
            let first = match answer {
                SessionAnswer::Keep => proposal.model,
                SessionAnswer::Use(model) => model,
            };
            let candidates = candidates(&self.policy.checked, proposal.route, first);
            self.stage = Stage::Done(decision(proposal, cache, candidates));
        }
    }

    /// Runs the procedure as far as it can go without its caller.
    pub fn advance(&mut self) -> Result<Next, ProcedureError> {
        match self.stage.clone() {
            Stage::Route => self.route(),
            Stage::Cache(proposal) => self.cache(proposal),
            Stage::AwaitCache(proposal) => Ok(Next::Cache(proposal)),
            Stage::Session(proposal, cache) => Ok(self.session(proposal, cache)),
            Stage::AwaitSession(proposal, _) => Ok(Next::Session(proposal)),
            Stage::Done(decision) => Ok(Next::Done(decision)),
        }
    }

    /// Steps 1–3: blocks, the model asked for, routes.
    fn route(&mut self) -> Result<Next, ProcedureError> {
        let found = match self.evaluation.step() {
            Step::Decided(Verdict::Blocked(block)) => Found::Blocked(block),
            Step::Decided(Verdict::Route(route)) => Found::Route(route),
            Step::NeedModels(calls) => {
                if !(self.only_blocks_matter() && self.blocks_settled()) {
                    return Ok(Next::Models(calls));
                }
                Found::Unblocked
            }
            Step::Failed(failed) => return Err(ProcedureError::ModelsFailed(failed)),
        };
        let checked = &self.policy.checked;
        let proposal = match found {
            Found::Blocked(block) => {
                let def = checked
                    .blocks
                    .get(block.index())
                    .ok_or(ProcedureError::Internal("block"))?;
                match &def.action {
                    BlockActionDef::Refuse { status, message } => {
                        let message = message
                            .clone()
                            .unwrap_or_else(|| format!("request blocked by policy `{}`", def.name));
                        let decision = Decision {
                            block: Some(block),
                            refusal: Some(Refusal {
                                status: *status,
                                message,
                            }),
                            route: None,
                            proposal: None,
                            cache: CacheUse::NotReached,
                            candidates: Vec::new(),
                        };
                        self.stage = Stage::Done(decision.clone());
                        return Ok(Next::Done(decision));
                    }
                    BlockActionDef::Redirect(model) => Proposal {
                        route: None,
                        block: Some(block),
                        model: *model,
                    },
                }
            }
            Found::Route(_) | Found::Unblocked => match (self.asked, self.unnamed, found) {
                (Asked::Model(model), _, _) => Proposal {
                    route: None,
                    block: None,
                    model,
                },
                (Asked::Unknown(name), _, _) => {
                    return Err(ProcedureError::UnknownModel(name.to_string()))
                }
                (Asked::Ambiguous(id), _, _) => {
                    return Err(ProcedureError::AmbiguousModel {
                        id: id.to_string(),
                        models: target::models_serving(checked, id)
                            .into_iter()
                            .map(str::to_owned)
                            .collect(),
                    })
                }
                (Asked::Missing, Unnamed::Refuse, _) => return Err(ProcedureError::MissingModel),
                (Asked::Route | Asked::Missing, _, Found::Route(route)) => {
                    let def = checked
                        .routes
                        .get(route.index())
                        .ok_or(ProcedureError::Internal("route"))?;
                    Proposal {
                        route: Some(route),
                        block: None,
                        model: def.to,
                    }
                }
                // Routing was asked for, so routes were evaluated to the end.
                (Asked::Route | Asked::Missing, _, _) => {
                    return Err(ProcedureError::Internal("route"))
                }
            },
        };
        self.cache(proposal)
    }

    /// Routes matter only when the request asks for routing.
    fn only_blocks_matter(&self) -> bool {
        match self.asked {
            Asked::Route => false,
            Asked::Missing => self.unnamed == Unnamed::Refuse,
            Asked::Model(_) | Asked::Unknown(_) | Asked::Ambiguous(_) => true,
        }
    }

    /// Whether every block is known not to hold: the condition the evaluation waits on is a
    /// route's.
    fn blocks_settled(&self) -> bool {
        match self.evaluation.pending() {
            Outcome::Decided(Verdict::Route(_)) => true,
            Outcome::Decided(Verdict::Blocked(_)) => false,
            Outcome::Needs(cond) => self
                .policy
                .program
                .cond(cond)
                .is_some_and(|c| matches!(c.owner, CondOwner::Route(_))),
        }
    }

    /// Step 4: the response cache.
    fn cache(&mut self, proposal: Proposal) -> Result<Next, ProcedureError> {
        let checked = &self.policy.checked;
        if checked.cache.is_none() {
            return Ok(self.session(proposal, CacheUse::Undeclared));
        }
        let off = proposal
            .route
            .and_then(|r| checked.routes.get(r.index()))
            .is_some_and(|r| !r.cache);
        if off || !self.cacheable {
            return Ok(self.session(proposal, CacheUse::Bypass));
        }
        match self.evaluation.cache_step() {
            CacheStep::Skip => Ok(self.session(proposal, CacheUse::Skip)),
            CacheStep::Lookup => {
                self.stage = Stage::AwaitCache(proposal);
                Ok(Next::Cache(proposal))
            }
            CacheStep::NeedModels(calls) => {
                self.stage = Stage::Cache(proposal);
                Ok(Next::Models(calls))
            }
            CacheStep::Failed(failed) => Err(ProcedureError::SkipFailed(failed)),
        }
    }

    /// Step 5: the session. A block's redirect is a safety decision: no pin may override it,
    /// and it moves no pin.
    fn session(&mut self, proposal: Proposal, cache: CacheUse) -> Next {
        if proposal.block.is_some() {
            let candidates = candidates(&self.policy.checked, proposal.route, proposal.model);
            let decision = decision(proposal, cache, candidates);
            self.stage = Stage::Done(decision.clone());
            return Next::Done(decision);
        }
        self.stage = Stage::AwaitSession(proposal, cache);
        Next::Session(proposal)
    }
}

fn decision(proposal: Proposal, cache: CacheUse, candidates: Vec<ModelId>) -> Decision {
    Decision {
        block: proposal.block,
        refusal: None,
        route: proposal.route,
        proposal: Some(proposal.model),
        cache,
        candidates,
    }
}

/// The order in which models are tried (see [`Decision::candidates`]).
fn candidates(policy: &CheckedPolicy, route: Option<RouteId>, first: ModelId) -> Vec<ModelId> {
    let mut candidates = vec![first];
    if let Some(route) = route.and_then(|r| policy.routes.get(r.index())) {
        if first == route.to {
            candidates.extend(route.fallbacks.iter().copied());
        }
        if policy.failure.backend == FailMode::Open {
            if let Some(default) = policy.routes.get(policy.default_route().index()) {
                candidates.push(default.to);
            }
        }
    }
    let mut seen = Vec::with_capacity(candidates.len());
    candidates.retain(|m| {
        let new = !seen.contains(m);
        seen.push(*m);
        new
    });
    candidates
}

#[cfg(test)]
mod tests;
