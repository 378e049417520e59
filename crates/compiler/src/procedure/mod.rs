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
//!   answer with [`Procedure::session_answered`];
//! - [`Next::Budgets`]: first of all, the budgets the request counts against, to look up and
//!   reserve from in the store (see [`budget`]), and whether the session's pin may be read in
//!   the same store step ([`BudgetStep`]); answer with [`Procedure::budgets_answered`].
//!
//! The rules live here once: budgets first (the first exceeded one refuses with 429 before
//! anything is computed, proposes its model once a route or the client proposed one, or only
//! reports), then blocks in order (refuse, or `to MODEL`); a `model` that names a
//! router name asks for routing, a model name, alias or served id bound to one model is the
//! proposal (only blocks are then evaluated: models that only routes read are never run), a
//! served id bound to several is a 400 and anything else a 404 once no block holds; routes by priority; the cache unless bypassed (`cache = off`, or a request the caller
//! cannot cache) or skipped (`skip when`); the session unless a block redirected; then the order
//! in which models are tried.

pub mod budget;

use crate::compiled::target::{self, Target};
use crate::compiled::CompiledPolicy;
use crate::eval::{CacheStep, GiveError};
use crate::eval::{Evaluation, FailedModels, ModelCall, ModelResult, Step, SupplyError};
use crate::hir::{
    BlockActionDef, BlockId, BudgetAction, BudgetId, CheckedPolicy, ModelId, RouteId, SignalId,
    Value,
};
use crate::ir::{CondOwner, Outcome, Verdict};
use crate::pii::Redact;
use crate::request::RequestView;
use budget::{BudgetAsk, BudgetKey, BudgetStep, BudgetUse, Budgets};
use src_dsl::ast::FailMode;

/// What the route step proposed, before the cache and the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proposal {
    /// The route that decided (`None` when the client named a model or a block redirected).
    pub route: Option<RouteId>,
    /// The block that redirected the request (`block ... to MODEL`).
    pub block: Option<BlockId>,
    /// The exceeded budget whose `to MODEL` replaced the route's or the client's model.
    pub budget: Option<BudgetId>,
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
    /// The budgets the request counted against, and the exceeded one that acted.
    pub budgets: Budgets,
    /// The personal data replaced by placeholders in what is forwarded (the deciding route's or
    /// redirecting block's `redact`); the answer gets the values back.
    pub redact: Option<Redact>,
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
    /// Look these budgets up in the store and reserve from them (see [`budget::settle`]), the
    /// session's pin read with them where the step says so, then
    /// [`Procedure::budgets_answered`].
    Budgets(BudgetStep),
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
    Budgets,
    AwaitBudgets(Vec<BudgetAsk>),
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
    /// `given BUDGET = SHARE` (tests, `src explain`): not asked of the store.
    budget_givens: Vec<(BudgetId, f64)>,
    budgets: Budgets,
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
            stage: if policy.checked.budgets.is_empty() {
                Stage::Route
            } else {
                Stage::Budgets
            },
            budget_givens: Vec::new(),
            budgets: Budgets::default(),
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

    /// Stubs a budget's used share (0–1; `given` in tests, `--given` in `src explain`): the
    /// store is not asked about it, and at 1 it is exceeded.
    pub fn give_budget(&mut self, budget: BudgetId, share: f64) {
        self.budget_givens.retain(|(b, _)| *b != budget);
        self.budget_givens.push((budget, share.clamp(0.0, 1.0)));
    }

    /// The answer to [`Next::Budgets`]: what the store found for each ask, in any order. An ask
    /// without an answer counts as unused. Ignored when no budgets were asked for.
    pub fn budgets_answered(&mut self, uses: &[BudgetUse]) {
        if let Stage::AwaitBudgets(asks) = &self.stage {
            let asked: Vec<BudgetId> = asks.iter().map(|a| a.budget).collect();
            let answered: Vec<BudgetUse> = uses
                .iter()
                .filter(|u| asked.contains(&u.budget))
                .copied()
                .collect();
            self.settle_budgets(answered);
        }
    }

    /// The budgets so far (empty until [`Next::Budgets`] is answered).
    pub fn budgets(&self) -> &Budgets {
        &self.budgets
    }

    /// Records the request's budgets: every budget's `.used` and `.remaining` (a budget that
    /// does not apply reads as unused), and the first exceeded one.
    fn settle_budgets(&mut self, mut uses: Vec<BudgetUse>) {
        let checked = &self.policy.checked;
        for (b, share) in &self.budget_givens {
            if let Some(def) = checked.budgets.get(b.index()) {
                uses.retain(|u| u.budget != *b);
                uses.push(BudgetUse {
                    budget: *b,
                    used: share * def.limit,
                    limit: def.limit,
                    exceeded: *share >= 1.0,
                    retry_after_s: (def.window_ms / 1000).max(1),
                });
            }
        }
        uses.sort_by_key(|u| u.budget);
        for (i, def) in checked.budgets.iter().enumerate() {
            let id = BudgetId(i as u32);
            let (used, remaining) = match uses.iter().find(|u| u.budget == id) {
                Some(u) => (u.share(), u.remaining()),
                None => (0.0, def.limit),
            };
            self.evaluation.set_budget(id, used, remaining);
        }
        let acting = uses.iter().find(|u| u.exceeded).and_then(|u| {
            let def = checked.budgets.get(u.budget.index())?;
            Some((u.budget, def.exceeded))
        });
        self.budgets = Budgets { uses, acting };
        self.stage = Stage::Route;
    }

    /// Step 0: the budgets this request counts against (those whose `per` has a value).
    fn budget_asks(&mut self) -> Next {
        let checked = &self.policy.checked;
        let mut asks = Vec::new();
        for (i, def) in checked.budgets.iter().enumerate() {
            let id = BudgetId(i as u32);
            if self.budget_givens.iter().any(|(b, _)| *b == id) {
                continue;
            }
            let key = match &def.per {
                crate::hir::BudgetPerDef::Tenant => BudgetKey::Tenant,
                crate::hir::BudgetPerDef::Text(_) => match self.evaluation.budget_text(id) {
                    Some(text) => BudgetKey::Text(text.to_owned()),
                    None => continue,
                },
            };
            asks.push(BudgetAsk {
                budget: id,
                key,
                unit: def.unit,
                limit: def.limit,
                window_ms: def.window_ms,
                reserve: budget::reserve_of(def.unit),
                refuses: def.exceeded == BudgetAction::Reject,
            });
        }
        if asks.is_empty() {
            self.settle_budgets(Vec::new());
            return Next::Budgets(self.budget_step(Vec::new()));
        }
        self.stage = Stage::AwaitBudgets(asks.clone());
        Next::Budgets(self.budget_step(asks))
    }

    /// The store step of `asks`: the session's pin rides along when the policy keeps sessions.
    fn budget_step(&self, asks: Vec<BudgetAsk>) -> BudgetStep {
        BudgetStep {
            asks,
            session: self.policy.checked.session.is_some(),
        }
    }

    /// A refusal by the budget that acted (`exceeded = reject`).
    fn budget_refusal(&mut self) -> Option<Decision> {
        let (budget, BudgetAction::Reject) = self.budgets.acting? else {
            return None;
        };
        let def = self.policy.checked.budgets.get(budget.index())?;
        let decision = Decision {
            block: None,
            refusal: Some(Refusal {
                status: 429,
                message: format!(
                    "budget `{}` is spent: {} {} per {} s",
                    def.name,
                    def.limit,
                    def.unit.as_str(),
                    def.window_ms / 1000
                ),
            }),
            route: None,
            proposal: None,
            cache: CacheUse::NotReached,
            candidates: Vec::new(),
            budgets: self.budgets.clone(),
            redact: None,
        };
        self.stage = Stage::Done(decision.clone());
        Some(decision)
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
                Stage::Done(self.decision(proposal, CacheUse::Hit, vec![proposal.model]))
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
            self.stage = Stage::Done(self.decision(proposal, cache, candidates));
        }
    }

    /// Runs the procedure as far as it can go without its caller.
    pub fn advance(&mut self) -> Result<Next, ProcedureError> {
        match self.stage.clone() {
            Stage::Budgets => match self.budget_asks() {
                Next::Budgets(step) if step.asks.is_empty() => self.advance(),
                next => Ok(next),
            },
            Stage::AwaitBudgets(asks) => Ok(Next::Budgets(self.budget_step(asks))),
            Stage::Route => match self.budget_refusal() {
                Some(refused) => Ok(Next::Done(refused)),
                None => self.route(),
            },
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
                            budgets: self.budgets.clone(),
                            redact: None,
                        };
                        self.stage = Stage::Done(decision.clone());
                        return Ok(Next::Done(decision));
                    }
                    BlockActionDef::Redirect(model) => Proposal {
                        route: None,
                        block: Some(block),
                        budget: None,
                        model: *model,
                    },
                }
            }
            Found::Route(_) | Found::Unblocked => match (self.asked, self.unnamed, found) {
                (Asked::Model(model), _, _) => Proposal {
                    route: None,
                    block: None,
                    budget: None,
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
                        budget: None,
                        model: def.to,
                    }
                }
                // Routing was asked for, so routes were evaluated to the end.
                (Asked::Route | Asked::Missing, _, _) => {
                    return Err(ProcedureError::Internal("route"))
                }
            },
        };
        // A block's redirect is a safety decision: no budget overrides it.
        let proposal = match self.budgets.acting {
            Some((budget, BudgetAction::To(model))) if proposal.block.is_none() => Proposal {
                budget: Some(budget),
                model,
                ..proposal
            },
            _ => proposal,
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
            let decision = self.decision(proposal, cache, candidates);
            self.stage = Stage::Done(decision.clone());
            return Next::Done(decision);
        }
        self.stage = Stage::AwaitSession(proposal, cache);
        Next::Session(proposal)
    }
}

impl Procedure<'_> {
    fn decision(&self, proposal: Proposal, cache: CacheUse, candidates: Vec<ModelId>) -> Decision {
        let checked = &self.policy.checked;
        let redact = match (proposal.block, proposal.route) {
            (Some(block), _) => checked
                .blocks
                .get(block.index())
                .and_then(|b| b.redact.clone()),
            (None, Some(route)) => checked
                .routes
                .get(route.index())
                .and_then(|r| r.redact.clone()),
            (None, None) => None,
        };
        Decision {
            redact,
            block: proposal.block,
            refusal: None,
            route: proposal.route,
            proposal: Some(proposal.model),
            cache,
            candidates,
            budgets: self.budgets.clone(),
        }
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

#[cfg(test)]
mod budget_tests;
