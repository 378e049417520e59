//! One request explained: the decision the request procedure reaches offline (no cache, no
//! session store, nothing sent upstream), the signals it computed and skipped, and the trace of
//! every condition checked in order (why each higher route lost).
//!
//! `src explain` and the operator console of `src serve` both call [`explain`], so the two
//! cannot disagree; each brings its own way of answering model-backed signals ([`ModelAnswers`]).

mod body;

pub use body::{detect, read_body};

use serde_json::{json, Value as Json};

use crate::eval::{ModelCall, ModelKind, ModelResult};
use crate::failover::{Attempts, Wire};
use crate::hir::{BudgetAction, BudgetId, CheckedPolicy, SignalId, TExprKind, Value};
use crate::interp::Trace;
use crate::ir::CondOwner;
use crate::procedure::budget::Budgets;
use crate::procedure::SessionAnswer;
use crate::request::RequestView;
use crate::testing::display_value;
use crate::{CompiledPolicy, Next, Procedure, ProcedureError};

/// Why a model-backed signal has no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelsUnavailable {
    /// The models cannot run here at all (the reason).
    CannotRun(String),
    /// They ran and failed (the reason).
    Failed(String),
}

/// Answers the model calls of one evaluation step, in order.
pub trait ModelAnswers {
    fn answer(
        &mut self,
        policy: &CheckedPolicy,
        calls: &[ModelCall],
    ) -> Result<Vec<ModelResult>, ModelsUnavailable>;
}

/// Why a request could not be explained.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExplainError {
    #[error("{0}")]
    Given(String),
    #[error(
        "this request needs model-backed signal(s) {} to decide, and the models cannot run here \
         ({why}); give their values with {}",
        signals.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
        signals.iter().map(|n| format!("--given {n}=VALUE")).collect::<Vec<_>>().join(" ")
    )]
    NeedsModels { signals: Vec<String>, why: String },
    #[error("model-backed signal failed: {0}")]
    ModelFailed(String),
    #[error("model answer does not fit: {0}")]
    AnswerMisfit(String),
    #[error("the request names model `{0}`, which the policy does not declare")]
    UnknownModel(String),
    #[error("a model-backed signal failed, and the policy fails closed")]
    FailedClosed,
    #[error("{0}")]
    Procedure(String),
}

/// Decides `request` (which came in through `wire`) offline and reports why, as `src explain
/// --format json` prints it. Its `model` is the candidate the failover machine sends to first
/// with every backend up and nothing cooling down (a backend that does not speak `wire`, or a
/// context too small, is skipped as `src serve` skips it, and listed under `unsendable`).
pub fn explain(
    policy: &CompiledPolicy,
    request: &RequestView,
    wire: Wire,
    givens: &[(SignalId, Value)],
    models: &mut dyn ModelAnswers,
) -> Result<Json, ExplainError> {
    explain_budgets(policy, request, wire, givens, &[], models)
}

/// [`explain`] with budgets stubbed (`--given BUDGET=SHARE`): offline, a budget not given reads
/// as unused.
pub fn explain_budgets(
    policy: &CompiledPolicy,
    request: &RequestView,
    wire: Wire,
    givens: &[(SignalId, Value)],
    budget_givens: &[(BudgetId, f64)],
    models: &mut dyn ModelAnswers,
) -> Result<Json, ExplainError> {
    let checked = &policy.checked;
    // The procedure `src serve` runs, offline: a prompt without a model is routed, and nothing
    // is looked up in a cache or a session store.
    let mut procedure = Procedure::new(policy, request)
        .routing_unnamed()
        .without_cache();
    for (signal, value) in givens {
        procedure
            .give(*signal, value.clone())
            .map_err(|e| ExplainError::Given(e.to_string()))?;
    }
    for (budget, share) in budget_givens {
        procedure.give_budget(*budget, *share);
    }
    let decision = loop {
        match procedure.advance() {
            Ok(Next::Done(decision)) => break decision,
            // No store offline: a budget not given is unused.
            Ok(Next::Budgets(_)) => procedure.budgets_answered(&[]),
            Ok(Next::Models(calls)) => {
                let results = models.answer(checked, &calls).map_err(|why| match why {
                    ModelsUnavailable::CannotRun(why) => ExplainError::NeedsModels {
                        signals: signals_calling_any(checked, &calls),
                        why,
                    },
                    ModelsUnavailable::Failed(why) => ExplainError::ModelFailed(why),
                })?;
                for (call, result) in calls.iter().zip(results) {
                    procedure
                        .supply(call, result)
                        .map_err(|e| ExplainError::AnswerMisfit(e.to_string()))?;
                }
            }
            Ok(Next::Cache(_)) => procedure.cache_answered(false),
            Ok(Next::Session(_)) => procedure.session_answered(SessionAnswer::Keep),
            Err(ProcedureError::UnknownModel(m)) => return Err(ExplainError::UnknownModel(m)),
            Err(ProcedureError::ModelsFailed(_) | ProcedureError::SkipFailed(_)) => {
                return Err(ExplainError::FailedClosed)
            }
            Err(err) => return Err(ExplainError::Procedure(err.to_string())),
        }
    };
    let evaluation = procedure.evaluation();
    let (_, trace) = evaluation.trace();
    let blocked = decision
        .block
        .map(|b| checked.blocks[b.index()].name.clone());
    let route = decision
        .route
        .map(|r| checked.routes[r.index()].name.clone());
    let model = Attempts::first_up(checked, &decision.candidates, wire, request);
    // What the machine skipped before it (every candidate, when none can take the request).
    let mut attempts = Attempts::new(&decision.candidates, wire, None);
    attempts.next(checked, request, |_| None);
    let unsendable = attempts.fallback_list(checked);
    let signals: serde_json::Map<String, Json> = evaluation
        .signal_values()
        .into_iter()
        .map(|(id, v)| {
            (
                checked.signals[id.index()].name.clone(),
                v.map(|v| value_json(checked, &v)).unwrap_or(Json::Null),
            )
        })
        .collect();
    let skipped: Vec<String> = evaluation
        .skipped_signals()
        .into_iter()
        .map(|id| checked.signals[id.index()].name.clone())
        .collect();
    let model_def = model.map(|m| &checked.models[m.index()]);
    let candidates: Vec<&str> = decision
        .candidates
        .iter()
        .map(|m| checked.models[m.index()].name.as_str())
        .collect();
    Ok(json!({
        "budgets": budgets_json(checked, &decision.budgets),
        "blocked": blocked,
        "route": route,
        "model": model_def.map(|m| m.name.clone()),
        "serves": model_def.map(|m| m.serves.clone()),
        "backend": model_def.map(|m| checked.backends[m.backend.index()].name.clone()),
        "candidates": candidates,
        "redact": decision.redact.as_ref().map(|r| r.names()),
        "unsendable": unsendable,
        "signals": signals,
        "skipped": skipped,
        "trace": trace_json(checked, &trace),
    }))
}

/// Each budget that applied (its use before the request), and the one that acted.
fn budgets_json(checked: &CheckedPolicy, budgets: &Budgets) -> Json {
    let name = |b: BudgetId| {
        checked
            .budgets
            .get(b.index())
            .map_or_else(String::new, |d| d.name.clone())
    };
    let uses: Vec<Json> = budgets
        .uses
        .iter()
        .map(|u| {
            json!({
                "budget": name(u.budget),
                "unit": checked.budgets.get(u.budget.index()).map(|d| d.unit.as_str()),
                "used": u.used,
                "limit": u.limit,
                "share": u.share(),
                "remaining": u.remaining(),
                "exceeded": u.exceeded,
            })
        })
        .collect();
    let acting = budgets.acting.map(|(b, action)| {
        let action = match action {
            BudgetAction::Reject => "reject".to_string(),
            BudgetAction::Observe => "observe".to_string(),
            BudgetAction::To(m) => format!("to {}", checked.models[m.index()].name),
        };
        json!({ "budget": name(b), "action": action })
    });
    json!({ "uses": uses, "acting": acting })
}

/// The signals whose definitions call one of the models of `calls`, sorted, each once.
fn signals_calling_any(checked: &CheckedPolicy, calls: &[ModelCall]) -> Vec<String> {
    let mut names: Vec<String> = calls
        .iter()
        .flat_map(|c| signals_calling(checked, c.model))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The signals whose definitions call `model`, for a helpful "give these" error.
pub fn signals_calling(checked: &CheckedPolicy, model: ModelKind) -> Vec<String> {
    checked
        .signals
        .iter()
        .filter(|s| {
            s.expr.any(&|e| {
                matches!(
                    (&e.kind, model),
                    (TExprKind::Classify(c, _), ModelKind::Classifier(m)) if *c == m
                ) || matches!(
                    (&e.kind, model),
                    (TExprKind::Guard(g, _), ModelKind::Guard(m)) if *g == m
                ) || matches!(
                    (&e.kind, model),
                    (TExprKind::Detect { detector, .. }, ModelKind::Detector(m)) if *detector == m
                ) || matches!(
                    (&e.kind, model),
                    (TExprKind::Similarity { encoder, .. }, ModelKind::Similarity(m)) if *encoder == m
                )
            })
        })
        .map(|s| s.name.clone())
        .collect()
}

fn value_json(checked: &CheckedPolicy, v: &Value) -> Json {
    match v {
        Value::Bool(b) => json!(b),
        Value::Int(i) => json!(i),
        Value::Float(f) => json!(f),
        Value::Text(t) => json!(t),
        Value::Label(..) | Value::Model(_) => json!(display_value(checked, v)),
    }
}

fn state_str(state: Option<bool>) -> &'static str {
    match state {
        Some(true) => "held",
        Some(false) => "not held",
        None => "unknown",
    }
}

/// The text of `span` as written in its file.
pub fn snippet(sources: &src_dsl::SourceMap, span: src_dsl::Span) -> String {
    sources
        .get(span.file)
        .and_then(|f| f.text.get(span.range()))
        .unwrap_or("")
        .to_string()
}

fn trace_json(checked: &CheckedPolicy, trace: &Trace) -> Json {
    let entries: Vec<Json> = trace
        .conds
        .iter()
        .map(|c| {
            let (kind, name) = match c.owner {
                CondOwner::Block(b) => ("block", checked.blocks[b.index()].name.clone()),
                CondOwner::Route(r) => ("route", checked.routes[r.index()].name.clone()),
                CondOwner::Hold(h) => (
                    "hold",
                    checked
                        .protect
                        .as_ref()
                        .and_then(|p| p.holds.get(h))
                        .map(|h| h.name.clone())
                        .unwrap_or_default(),
                ),
                CondOwner::CacheSkip => ("cache_skip", String::new()),
            };
            let (line, column) = checked.sources.line_col(c.span.file, c.span.start as usize);
            let because: Vec<Json> = c
                .parts
                .iter()
                .map(|p| json!({"condition": snippet(&checked.sources, p.span), "state": state_str(p.state)}))
                .collect();
            json!({
                "kind": kind,
                "name": name,
                "state": state_str(c.state),
                "condition": snippet(&checked.sources, c.span),
                "line": line,
                "column": column,
                "because": because,
            })
        })
        .collect();
    Json::Array(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{check, compile, CheckOptions, EngineKind};

    struct NoModels;

    impl ModelAnswers for NoModels {
        fn answer(
            &mut self,
            _: &CheckedPolicy,
            _: &[ModelCall],
        ) -> Result<Vec<ModelResult>, ModelsUnavailable> {
            Err(ModelsUnavailable::CannotRun("none here".into()))
        }
    }

    #[test]
    fn the_model_is_the_first_candidate_whose_backend_speaks_the_api() {
        let text = r#"
backend local  { url = "http://127.0.0.1:9/v1" }
backend claude { url = "http://127.0.0.1:8/v1"  api = anthropic }
model small { backend = local   serves = "org/small" }
model big   { backend = claude  serves = "claude-big" }
route default { to big else small }
"#;
        let source = crate::load::from_texts(
            std::path::PathBuf::from("."),
            vec![(std::path::PathBuf::from("p.sr"), text.to_string())],
        );
        let outcome = check(source, &CheckOptions::default());
        assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
        let policy = compile(outcome.policy.unwrap(), EngineKind::Interp).unwrap();
        let view = RequestView::from_prompt("hello", None, Vec::<(String, String)>::new());
        let chat = explain(&policy, &view, Wire::Chat, &[], &mut NoModels).unwrap();
        assert_eq!(chat["model"], "small");
        assert_eq!(chat["unsendable"], json!(["big:api"]));
        assert_eq!(chat["candidates"], json!(["big", "small"]));
        let messages = explain(&policy, &view, Wire::Messages, &[], &mut NoModels).unwrap();
        assert_eq!(messages["model"], "big");
    }
}
