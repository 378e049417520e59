//! `protect`: whether a proposed switch away from a pinned model is held.
//!
//! The holds are conditions of the compiled policy, so they are answered by the same staged
//! evaluator as the routes ([`src_compiler::eval::Evaluation::hold_step`]) — one semantics for `src
//! test`, `src explain` and serving. The session layer asks through the small [`Holds`] trait so
//! the switch protocol can be exercised against a plain table too.

use src_compiler::eval::{HoldStep, ModelResult};
use src_compiler::hir::{CheckedPolicy, ModelId, ProtectDef, TExpr, TExprKind};
use src_compiler::request::RequestView;
use src_compiler::CompiledPolicy;

use crate::hooks::{BoxFuture, ModelSignals};
use crate::session::store::OutcomeStats;

/// The built-in hold, before the policy's own (see [`src_compiler::continuity`]).
pub use src_compiler::continuity::PROVIDER_STATE;

/// A switch under consideration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HoldQuery {
    pub pinned: ModelId,
    pub proposed: ModelId,
    /// Recent outcomes of the pinned model in this session.
    pub outcomes: OutcomeStats,
}

/// What the holds said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldVerdict {
    /// The hold at this position (in `protect` order) holds.
    Held(usize),
    NoHold,
    /// A model-backed hold could not be computed and `failure.classifier = closed` forbids
    /// guessing.
    Failed(String),
}

/// Answers `protect` for one request.
pub trait Holds: Send + Sync {
    fn first_hold(&self, query: HoldQuery) -> BoxFuture<'_, HoldVerdict>;
}

/// The policy's own holds over one request, through the staged evaluator. Model-backed atoms
/// go to `models` (the server's model runtime) in batches, as for routes; without one, or when
/// it fails, they are answered as failed, which the evaluator turns into "does not hold" under
/// `failure.classifier = open` and into [`HoldVerdict::Failed`] under `closed`.
pub struct PolicyHolds<'a> {
    pub compiled: &'a CompiledPolicy,
    pub view: &'a RequestView,
    pub models: Option<&'a dyn ModelSignals>,
}

impl Holds for PolicyHolds<'_> {
    fn first_hold(&self, query: HoldQuery) -> BoxFuture<'_, HoldVerdict> {
        Box::pin(evaluate_holds(self.compiled, self.view, self.models, query))
    }
}

/// Upper bound on evaluator rounds; each round settles at least one model atom, so this is
/// only reached by an evaluator that stops making progress.
const MAX_ROUNDS: usize = 64;

async fn evaluate_holds(
    compiled: &CompiledPolicy,
    view: &RequestView,
    models: Option<&dyn ModelSignals>,
    query: HoldQuery,
) -> HoldVerdict {
    let mut evaluation = compiled.evaluate(view);
    let count = i64::try_from(query.outcomes.count).unwrap_or(i64::MAX);
    for _ in 0..MAX_ROUNDS {
        match evaluation.hold_step(
            query.pinned,
            query.proposed,
            query.outcomes.fail_rate(),
            count,
        ) {
            HoldStep::Held(i) => return HoldVerdict::Held(i),
            HoldStep::NoHold => return HoldVerdict::NoHold,
            HoldStep::Failed(failed) => {
                return HoldVerdict::Failed(format!(
                    "{} model-backed value(s) of a `protect` hold could not be computed",
                    failed.atoms.len()
                ))
            }
            HoldStep::NeedModels(calls) => {
                let tenant = crate::session::identity::tenant(&compiled.checked, view);
                let answers = match models {
                    Some(models) => match models
                        .compute_scoped(&compiled.checked, &calls, &tenant)
                        .await
                    {
                        Ok(results) if results.len() == calls.len() => results,
                        Ok(_) | Err(_) => vec![ModelResult::Failed; calls.len()],
                    },
                    None => vec![ModelResult::Failed; calls.len()],
                };
                for (call, answer) in calls.iter().zip(answers) {
                    if evaluation.supply(call, answer).is_err() {
                        return HoldVerdict::Failed(
                            "a model answered a `protect` hold badly".into(),
                        );
                    }
                }
            }
        }
    }
    HoldVerdict::Failed("the `protect` holds did not settle".into())
}

/// Whether any hold reads `outcomes(pinned)`, so the store is asked for outcomes only then.
pub fn reads_outcomes(policy: &CheckedPolicy, protect: &ProtectDef) -> bool {
    protect
        .holds
        .iter()
        .any(|h| mentions_outcomes(policy, &h.when, 0))
}

fn mentions_outcomes(policy: &CheckedPolicy, e: &TExpr, depth: usize) -> bool {
    if depth > 64 {
        return false;
    }
    let sub = |x: &TExpr| mentions_outcomes(policy, x, depth + 1);
    match &e.kind {
        TExprKind::OutcomeFailRate | TExprKind::OutcomeCount => true,
        TExprKind::Signal(id) => policy.signals.get(id.index()).is_some_and(|s| sub(&s.expr)),
        TExprKind::Not(a)
        | TExprKind::Neg(a)
        | TExprKind::Confidence(a)
        | TExprKind::Cost(a)
        | TExprKind::IsLabel(a, _) => sub(a),
        TExprKind::And(a, b)
        | TExprKind::Or(a, b)
        | TExprKind::Arith(_, a, b)
        | TExprKind::Cmp(_, a, b)
        | TExprKind::Coalesce(a, b) => sub(a) || sub(b),
        _ => false,
    }
}
