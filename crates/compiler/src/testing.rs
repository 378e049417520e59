//! Running a policy's `test` blocks: each case is evaluated offline, on a chosen engine, with its
//! `given` stubs standing in for signals, and compared with its `expect`.
//!
//! This is the engine behind `src test` and the decision corpus. Each case drives the request
//! procedure ([`crate::procedure`]) that `src serve` drives. A case never runs a model: a case
//! that reaches a model-backed signal without a `given` fails with `E050`, naming the model.

use crate::compiled::{compile, CompileError, CompiledPolicy};
use crate::engine::EngineKind;
use crate::eval::ModelKind;
use crate::hir::{CheckedPolicy, ExpectDef, ModelId, TestDef, TestInputDef, Value};
use crate::procedure::{Decision, Next, Procedure, ProcedureError, SessionAnswer};
use crate::request::RequestView;
use serde_json::json;
use src_dsl::{codes, Span};

/// What a case came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Actual {
    Route {
        route: String,
        model: String,
    },
    Blocked {
        block: String,
        model: Option<String>,
    },
    /// The case names a model, so routing was skipped.
    Model {
        model: String,
    },
    /// A budget (`exceeded = reject`) refused the case.
    BudgetRefused {
        budget: String,
    },
    /// The case could not be evaluated (a missing `given`, a bad request file).
    Error {
        code: codes::Code,
        message: String,
    },
}

impl std::fmt::Display for Actual {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Actual::Route { route, model } => write!(f, "route `{route}` (model `{model}`)"),
            Actual::Blocked { block, model: None } => write!(f, "blocked by `{block}`"),
            Actual::BudgetRefused { budget } => write!(f, "refused by budget `{budget}`"),
            Actual::Blocked {
                block,
                model: Some(m),
            } => write!(f, "blocked by `{block}`, sent to model `{m}`"),
            Actual::Model { model } => write!(f, "model `{model}` as named (routing skipped)"),
            Actual::Error { code, message } => write!(f, "error[{code}]: {message}"),
        }
    }
}

/// The result of one case on one engine.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseResult {
    pub name: String,
    pub span: Span,
    pub engine: EngineKind,
    /// The expectation as written (`coding model strong`, `blocked jailbreak`).
    pub expected: String,
    pub actual: Actual,
    pub passed: bool,
    /// Every signal with its value when known (`null` when not needed).
    pub signals: Vec<(String, Option<String>)>,
}

/// Compiles `checked` for `engine` and runs every test case on it.
pub fn run_tests(
    checked: &CheckedPolicy,
    engine: EngineKind,
) -> Result<Vec<CaseResult>, CompileError> {
    let policy = compile(checked.clone(), engine)?;
    Ok(policy
        .checked
        .tests
        .iter()
        .map(|case| run_case(&policy, case))
        .collect())
}

/// Runs one case on an already compiled policy.
pub fn run_case(policy: &CompiledPolicy, case: &TestDef) -> CaseResult {
    let checked = &policy.checked;
    let expected = describe_expectation(checked, case);
    let (actual, signals) = match request_of(case) {
        Ok(request) => evaluate(policy, case, &request),
        Err(message) => (
            Actual::Error {
                code: codes::TEST_MESSAGES_UNREADABLE,
                message,
            },
            Vec::new(),
        ),
    };
    let passed = matches_expectation(checked, case, &actual);
    CaseResult {
        name: case.name.clone(),
        span: case.span,
        engine: policy.engine_kind(),
        expected,
        actual,
        passed,
        signals,
    }
}

/// The request a case describes.
fn request_of(case: &TestDef) -> Result<RequestView, String> {
    match &case.input {
        TestInputDef::Prompt(prompt) => Ok(RequestView::from_prompt(
            prompt,
            case.system.as_deref(),
            &case.headers,
        )),
        TestInputDef::Messages(_) => {
            RequestView::from_chat(&chat_body(case), &case.headers).map_err(|e| e.to_string())
        }
    }
}

/// The case's request as a chat completion body (`messages` with the case's `system` first, and
/// whatever else a full request file holds), for sending the case to a live backend.
pub fn chat_body(case: &TestDef) -> serde_json::Value {
    let system = case
        .system
        .as_ref()
        .map(|s| json!({"role": "system", "content": s}));
    match &case.input {
        TestInputDef::Prompt(prompt) => {
            let user = json!({"role": "user", "content": prompt});
            json!({ "messages": system.into_iter().chain([user]).collect::<Vec<_>>() })
        }
        TestInputDef::Messages(value) => {
            let mut body = match value {
                serde_json::Value::Array(messages) => json!({ "messages": messages }),
                other => other.clone(),
            };
            if let (Some(system), Some(messages)) = (
                system,
                body.get_mut("messages").and_then(|m| m.as_array_mut()),
            ) {
                messages.insert(0, system);
            }
            body
        }
    }
}

type Signals = Vec<(String, Option<String>)>;

fn evaluate(policy: &CompiledPolicy, case: &TestDef, request: &RequestView) -> (Actual, Signals) {
    let checked = &policy.checked;
    // Offline: a case is routed when it names no model, and never reaches a cache or a session.
    let mut procedure = Procedure::new(policy, request)
        .routing_unnamed()
        .without_cache();
    for (budget, share) in &case.budget_givens {
        procedure.give_budget(*budget, *share);
    }
    for (signal, value) in &case.givens {
        if let Err(e) = procedure.give(*signal, value.clone()) {
            return (
                Actual::Error {
                    code: codes::TEST_BAD_GIVEN,
                    message: e.to_string(),
                },
                Vec::new(),
            );
        }
    }
    let actual = loop {
        match procedure.advance() {
            Ok(Next::Done(decision)) => break actual_of(checked, &decision),
            Ok(Next::Session(_)) => procedure.session_answered(SessionAnswer::Keep),
            Ok(Next::Cache(_)) => procedure.cache_answered(false),
            // No store offline: a budget the case does not give is unused.
            Ok(Next::Budgets(_)) => procedure.budgets_answered(&[]),
            Ok(Next::Models(calls)) => {
                let mut models: Vec<String> = calls
                    .iter()
                    .map(|c| model_label(checked, c.model))
                    .collect();
                models.sort();
                models.dedup();
                break Actual::Error {
                    code: codes::TEST_MISSING_GIVEN,
                    message: format!(
                        "the case reaches {} without a `given` for the signal that uses it",
                        models.join(", ")
                    ),
                };
            }
            Err(ProcedureError::ModelsFailed(_) | ProcedureError::SkipFailed(_)) => {
                break Actual::Error {
                    code: codes::TEST_MISSING_GIVEN,
                    message: "a model-backed signal failed during an offline test".to_string(),
                }
            }
            Err(err) => {
                break Actual::Error {
                    code: codes::TEST_MESSAGES_UNREADABLE,
                    message: err.to_string(),
                }
            }
        }
    };
    let signals = procedure
        .evaluation()
        .signal_values()
        .into_iter()
        .map(|(id, value)| {
            let name = checked.signals[id.index()].name.clone();
            (name, value.map(|v| display_value(checked, &v)))
        })
        .collect();
    (actual, signals)
}

fn model_label(checked: &CheckedPolicy, model: ModelKind) -> String {
    match model {
        ModelKind::Classifier(c) => format!("classifier `{}`", checked.classifiers[c.index()].name),
        ModelKind::Guard(g) => format!("guard `{}`", checked.guards[g.index()].name),
        ModelKind::Detector(d) => format!("detector `{}`", checked.detectors[d.index()].name),
        ModelKind::Similarity(e) => format!("encoder `{}`", checked.encoders[e.index()].name),
    }
}

/// The route or block a decision names, with the model it selects.
pub fn actual_of(checked: &CheckedPolicy, decision: &Decision) -> Actual {
    let name = |m: ModelId| {
        checked
            .models
            .get(m.index())
            .map_or_else(|| format!("#{}", m.0), |m| m.name.clone())
    };
    let first = decision.candidates.first().copied().map(name);
    if let (Some(_), None, Some((budget, _))) =
        (&decision.refusal, decision.block, decision.budgets.acting)
    {
        return Actual::BudgetRefused {
            budget: checked
                .budgets
                .get(budget.index())
                .map_or_else(String::new, |b| b.name.clone()),
        };
    }
    match (decision.block, decision.route) {
        (Some(b), _) => Actual::Blocked {
            block: checked.blocks[b.index()].name.clone(),
            model: first,
        },
        (None, Some(r)) => Actual::Route {
            route: checked.routes[r.index()].name.clone(),
            model: first.unwrap_or_default(),
        },
        (None, None) => Actual::Model {
            model: first.unwrap_or_default(),
        },
    }
}

fn describe_expectation(checked: &CheckedPolicy, case: &TestDef) -> String {
    let model = |m: &Option<ModelId>| {
        m.map(|m| format!(" model {}", checked.models[m.index()].name))
            .unwrap_or_default()
    };
    match case.expect {
        ExpectDef::Route(r) => format!(
            "{}{}",
            checked.routes[r.index()].name,
            model(&case.expect_model)
        ),
        ExpectDef::Blocked(b) => format!(
            "blocked {}{}",
            checked.blocks[b.index()].name,
            model(&case.expect_model)
        ),
        ExpectDef::Rejected(b) => format!("rejected {}", checked.budgets[b.index()].name),
    }
}

fn matches_expectation(checked: &CheckedPolicy, case: &TestDef, actual: &Actual) -> bool {
    let model_ok = |got: Option<&String>| match case.expect_model {
        None => true,
        Some(m) => got == Some(&checked.models[m.index()].name),
    };
    match (&case.expect, actual) {
        (ExpectDef::Route(r), Actual::Route { route, model }) => {
            *route == checked.routes[r.index()].name && model_ok(Some(model))
        }
        (ExpectDef::Blocked(b), Actual::Blocked { block, model }) => {
            *block == checked.blocks[b.index()].name && model_ok(model.as_ref())
        }
        (ExpectDef::Rejected(b), Actual::BudgetRefused { budget }) => {
            *budget == checked.budgets[b.index()].name
        }
        _ => false,
    }
}

/// A value as a policy author would write it.
pub fn display_value(checked: &CheckedPolicy, value: &Value) -> String {
    match value {
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => format!("{f}"),
        Value::Text(Some(t)) => format!("{t:?}"),
        Value::Text(None) => "absent".to_string(),
        Value::Label(set, label) => checked
            .labels(*set)
            .get(label.index())
            .cloned()
            .unwrap_or_else(|| format!("#{}", label.0)),
        Value::Model(m) => checked
            .models
            .get(m.index())
            .map(|m| m.name.clone())
            .unwrap_or_else(|| format!("#{}", m.0)),
    }
}
