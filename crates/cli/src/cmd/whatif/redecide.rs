//! Deciding one recorded request again under another policy, offline, with the one request
//! procedure `src serve` runs.
//!
//! Cheap signals are recomputed from the recorded body and headers. A model-backed signal is
//! answered from the record (same kind, model name, input text and, for a similarity, the same
//! examples); when the record does not have it, the model is run if its files and ONNX Runtime
//! are present, and otherwise the request is reported undecided rather than guessed. The
//! response cache is not consulted (its entries are not recorded). The session step uses the
//! recorded pin (the model the session's previous recorded call was answered by): when the new
//! policy proposes another model, its `protect` holds are evaluated as serve would, and a switch
//! that none of them holds inside a tool loop is a continuity break.

use crate::cmd::explain::ModelRunner;
use serde_json::Value;
use src_compiler::continuity::{self, Switch};
use src_compiler::eval::{HoldStep, ModelCall, ModelKind, ModelResult};
use src_compiler::failover::{Attempts, Wire};
use src_compiler::hir::{CheckedPolicy, LabelId, ModelId};
use src_compiler::procedure::SessionAnswer;
use src_compiler::request::RequestView;
use src_compiler::{CompiledPolicy, Next, Procedure, ProcedureError};
use src_runtime::record::model_name;

/// A decision in names, as recorded and as re-decided.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Outcome {
    pub block: Option<String>,
    pub route: Option<String>,
    pub model: Option<String>,
    /// The status of a refusal or an error.
    pub refused: Option<u64>,
}

impl Outcome {
    /// The outcome a record says serve decided.
    pub fn recorded(record: &Value) -> Outcome {
        let d = &record["decision"];
        let text = |k: &str| d[k].as_str().map(str::to_string);
        Outcome {
            block: text("block"),
            route: text("route"),
            model: text("model"),
            refused: d["refused"].as_u64().or_else(|| d["error"].as_u64()),
        }
    }
}

/// What re-deciding one record found.
#[derive(Debug, Clone)]
pub enum Redecided {
    Decided {
        outcome: Outcome,
        /// The new policy switches the session's pin inside a tool loop.
        breaks_continuity: bool,
    },
    /// It could not be decided offline.
    Undecided(String),
}

/// The recorded session identity of a request, when the session layer managed it.
pub fn recorded_identity(record: &Value) -> Option<&str> {
    record["session"]["state"].as_str()?;
    record["session"]["identity"].as_str()
}

/// Answers model calls from the record, or from the models when present.
struct ModelAnswers<'a> {
    record: &'a Value,
    policy: &'a CheckedPolicy,
    runner: &'a mut Option<Result<ModelRunner, String>>,
}

impl ModelAnswers<'_> {
    fn answer(&mut self, calls: &[ModelCall]) -> Result<Vec<ModelResult>, String> {
        let mut missing = Vec::new();
        let mut results = Vec::with_capacity(calls.len());
        for call in calls {
            let found = from_record(self.record, self.policy, call);
            if found.is_none() {
                missing.push(call.clone());
            }
            results.push(found);
        }
        if missing.is_empty() {
            return Ok(results.into_iter().flatten().collect());
        }
        let runner = self
            .runner
            .get_or_insert_with(|| ModelRunner::start(self.policy));
        let runner = runner.as_ref().map_err(|why| {
            let names: Vec<String> = missing
                .iter()
                .filter_map(|c| model_name(self.policy, c.model).map(|(_, n)| format!("`{n}`")))
                .collect();
            format!(
                "model-backed signal(s) of {} are not in the record and the models cannot run here ({why})",
                names.join(", ")
            )
        })?;
        let computed = runner
            .compute(self.policy, &missing)
            .map_err(|e| e.to_string())?;
        let mut computed = computed.into_iter();
        Ok(results
            .into_iter()
            .map(|r| r.or_else(|| computed.next()).unwrap_or(ModelResult::Failed))
            .collect())
    }
}

/// The recorded result of `call`, mapped onto the new policy's labels.
fn from_record(record: &Value, policy: &CheckedPolicy, call: &ModelCall) -> Option<ModelResult> {
    let (kind, name) = model_name(policy, call.model)?;
    let entry = record["models"].as_array()?.iter().find(|m| {
        m["kind"] == kind
            && m["model"] == name.as_str()
            && m["text"] == call.text.as_str()
            && (!matches!(kind, "similarity" | "detector")
                || m["examples"].as_array().is_some_and(|e| {
                    e.len() == call.examples.len()
                        && e.iter()
                            .zip(call.examples.iter())
                            .all(|(a, b)| a == b.as_str())
                }))
    })?;
    let result = &entry["result"];
    if result == "failed" {
        return Some(ModelResult::Failed);
    }
    if let Some(score) = result["score"].as_f64() {
        return Some(ModelResult::Score(score));
    }
    let ModelKind::Classifier(id) = call.model else {
        return None;
    };
    let label = result["label"].as_str()?;
    let index = policy
        .classifiers
        .get(id.index())?
        .labels
        .iter()
        .position(|l| l == label)?;
    Some(ModelResult::Class {
        label: LabelId(index as u32),
        confidence: result["confidence"].as_f64()?,
    })
}

/// Re-decides `record` under `policy`; `pin` is the model the recording shows the session's
/// previous call answered by (`None` for a session's first recorded call).
pub fn redecide(
    policy: &CompiledPolicy,
    record: &Value,
    pin: Option<&str>,
    runner: &mut Option<Result<ModelRunner, String>>,
) -> Redecided {
    let checked = &policy.checked;
    let headers: Vec<(String, String)> = record["headers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| Some((h[0].as_str()?.to_string(), h[1].as_str()?.to_string())))
        .collect();
    let body = &record["body"];
    let (view, wire) = match record["api"].as_str() {
        Some("responses") => (RequestView::from_responses(body, &headers), Wire::Responses),
        Some("messages") => (RequestView::from_messages(body, &headers), Wire::Messages),
        _ => (RequestView::from_chat(body, &headers), Wire::Chat),
    };
    let view = match view {
        Ok(v) => v,
        Err(e) => return Redecided::Undecided(format!("the recorded body cannot be read: {e}")),
    };
    let mut answers = ModelAnswers {
        record,
        policy: checked,
        runner,
    };
    let mut procedure = Procedure::new(policy, &view).without_cache();
    let mut breaks_continuity = false;
    let mut refused_status = None;
    let decision = loop {
        match procedure.advance() {
            Ok(Next::Done(decision)) => break decision,
            Ok(Next::Models(calls)) => match answers.answer(&calls) {
                Ok(results) => {
                    for (call, result) in calls.iter().zip(results) {
                        if let Err(e) = procedure.supply(call, result) {
                            return Redecided::Undecided(format!(
                                "a recorded model answer does not fit: {e}"
                            ));
                        }
                    }
                }
                Err(why) => return Redecided::Undecided(why),
            },
            Ok(Next::Cache(_)) => procedure.cache_answered(false),
            // A recording keeps no budget store: budgets read as unused.
            Ok(Next::Budgets(_)) => procedure.budgets_answered(&[]),
            Ok(Next::Session(proposal)) => {
                let pinned = pin.and_then(|model| checked.model_by_name(model));
                let answer = match pinned {
                    Some(pin) if pin != proposal.model => {
                        match held(policy, &view, pin, proposal.model, &mut answers) {
                            Err(why) => return Redecided::Undecided(why),
                            Ok(true) => SessionAnswer::Use(pin),
                            Ok(false) => {
                                breaks_continuity = view.tool_loop;
                                SessionAnswer::Keep
                            }
                        }
                    }
                    _ => SessionAnswer::Keep,
                };
                procedure.session_answered(answer);
            }
            Err(
                error @ (ProcedureError::UnknownModel(_)
                | ProcedureError::MissingModel
                | ProcedureError::AmbiguousModel { .. }),
            ) => {
                // Serve answers these itself: 404 for a model it does not know, 400 without one
                // or for a served id several models are bound to.
                refused_status = Some(if matches!(error, ProcedureError::UnknownModel(_)) {
                    404
                } else {
                    400
                });
                break src_compiler::procedure::Decision {
                    block: None,
                    refusal: None,
                    route: None,
                    proposal: None,
                    cache: src_compiler::procedure::CacheUse::NotReached,
                    candidates: Vec::new(),
                    budgets: Default::default(),
                    redact: None,
                };
            }
            Err(e) => return Redecided::Undecided(e.to_string()),
        }
    };
    let name = |m: ModelId| checked.models.get(m.index()).map(|d| d.name.clone());
    let outcome = Outcome {
        block: decision
            .block
            .and_then(|b| checked.blocks.get(b.index()))
            .map(|b| b.name.clone()),
        route: decision
            .route
            .and_then(|r| checked.routes.get(r.index()))
            .map(|r| r.name.clone()),
        model: Attempts::first_up(checked, &decision.candidates, wire, &view).and_then(name),
        refused: decision
            .refusal
            .as_ref()
            .map(|r| u64::from(r.status))
            .or(refused_status),
    };
    Redecided::Decided {
        outcome,
        breaks_continuity,
    }
}

/// Whether the new policy keeps `pinned` against `proposed`: the switch settled as the session
/// layer settles it (the built-in `provider state` hold, then `protect`'s; observe mode records
/// the hold but switches, so it keeps nothing).
fn held(
    policy: &CompiledPolicy,
    view: &RequestView,
    pinned: ModelId,
    proposed: ModelId,
    answers: &mut ModelAnswers<'_>,
) -> Result<bool, String> {
    let policy_hold = if continuity::asks_holds(&policy.checked, view) {
        first_hold(policy, view, pinned, proposed, answers)?
    } else {
        None
    };
    Ok(matches!(
        continuity::settle(&policy.checked, view, policy_hold),
        Switch::Held(_)
    ))
}

/// The name of the first of `protect`'s holds that holds for the switch.
fn first_hold(
    policy: &CompiledPolicy,
    view: &RequestView,
    pinned: ModelId,
    proposed: ModelId,
    answers: &mut ModelAnswers<'_>,
) -> Result<Option<String>, String> {
    let Some(protect) = &policy.checked.protect else {
        return Ok(None);
    };
    let mut evaluation = policy.evaluate(view);
    // Recent outcomes are not recorded: a hold that reads them does not hold, as for a new pin.
    for _ in 0..64 {
        match evaluation.hold_step(pinned, proposed, None, 0) {
            HoldStep::Held(i) => return Ok(protect.holds.get(i).map(|h| h.name.clone())),
            HoldStep::NoHold => return Ok(None),
            HoldStep::Failed(_) => return Err("a model-backed `protect` hold failed".into()),
            HoldStep::NeedModels(calls) => {
                let results = answers.answer(&calls)?;
                for (call, result) in calls.iter().zip(results) {
                    evaluation.supply(call, result).map_err(|e| e.to_string())?;
                }
            }
        }
    }
    Err("the `protect` holds did not settle".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use src_compiler::{check, compile, CheckOptions, EngineKind};

    const POLICY: &str = r#"
backend local { url = "http://127.0.0.1:9/v1" }
model small { backend = local  serves = "org/small" }
model big   { backend = local  serves = "org/big" }
session { id = header("x-task") }
signal hard = contains(prompt, ["prove"])
route hard priority 10 { when hard  to big }
route default { to small }
"#;

    fn policy() -> CompiledPolicy {
        let source = src_compiler::load::from_texts(
            std::path::PathBuf::from("."),
            vec![(std::path::PathBuf::from("policy.sr"), POLICY.to_string())],
        );
        let outcome = check(source, &CheckOptions::default());
        let checked = outcome.policy.unwrap_or_else(|| {
            panic!("the policy checks: {:?}", outcome.diagnostics);
        });
        compile(checked, EngineKind::Interp).unwrap()
    }

    fn record(body: Value) -> Value {
        json!({"api": "responses", "headers": [["x-task", "t1"]], "body": body,
               "decision": {}, "session": {}, "models": []})
    }

    #[test]
    fn a_turn_on_provider_state_stays_on_its_pin_as_serve_keeps_it() {
        let policy = policy();
        let mut runner = None;
        // The router does not hold `resp_other`: the provider does, so the built-in hold keeps
        // the turn on the pinned model although the route now proposes another.
        let owned = record(json!({"model": "auto", "input": "prove it",
                                  "previous_response_id": "resp_other"}));
        let Redecided::Decided { outcome, .. } =
            redecide(&policy, &owned, Some("small"), &mut runner)
        else {
            panic!("decided");
        };
        assert_eq!(outcome.model.as_deref(), Some("small"));
        let fresh = record(json!({"model": "auto", "input": "prove it"}));
        let Redecided::Decided { outcome, .. } =
            redecide(&policy, &fresh, Some("small"), &mut runner)
        else {
            panic!("decided");
        };
        assert_eq!(outcome.model.as_deref(), Some("big"));
    }

    #[test]
    fn the_model_is_the_one_serve_sends_to_when_the_first_backend_cannot_take_the_api() {
        let text = r#"
backend local  { url = "http://127.0.0.1:9/v1" }
backend claude { url = "http://127.0.0.1:8/v1"  api = anthropic }
model small { backend = local   serves = "org/small" }
model big   { backend = claude  serves = "claude-big" }
route default { to big else small }
"#;
        let source = src_compiler::load::from_texts(
            std::path::PathBuf::from("."),
            vec![(std::path::PathBuf::from("policy.sr"), text.to_string())],
        );
        let checked = check(source, &CheckOptions::default()).policy.unwrap();
        let policy = compile(checked, EngineKind::Interp).unwrap();
        let chat = json!({"api": "chat", "headers": [], "decision": {}, "session": {},
            "models": [], "body": {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}});
        let Redecided::Decided { outcome, .. } = redecide(&policy, &chat, None, &mut None) else {
            panic!("decided");
        };
        assert_eq!(outcome.model.as_deref(), Some("small"));
        let mut messages = chat.clone();
        messages["api"] = json!("messages");
        messages["body"]["max_tokens"] = json!(8);
        let Redecided::Decided { outcome, .. } = redecide(&policy, &messages, None, &mut None)
        else {
            panic!("decided");
        };
        assert_eq!(outcome.model.as_deref(), Some("big"));
    }
}
