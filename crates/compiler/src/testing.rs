//! Running a policy's `test` blocks: each case is evaluated offline, on a chosen engine, with its
//! `given` stubs standing in for signals, and compared with its `expect`.
//!
//! This is the engine behind `src test` and the decision corpus. A case never runs a model: a
//! case that reaches a model-backed signal without a `given` fails with `E050`, naming the model.

use crate::compiled::{compile, CompileError, CompiledPolicy};
use crate::engine::EngineKind;
use crate::eval::{ModelKind, Step};
use crate::hir::{CheckedPolicy, ExpectDef, ModelId, TestDef, TestInputDef, Value};
use crate::ir::Verdict;
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
            Actual::Blocked {
                block,
                model: Some(m),
            } => write!(f, "blocked by `{block}`, sent to model `{m}`"),
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
        TestInputDef::Messages(value) => {
            let mut body = match value {
                serde_json::Value::Array(messages) => json!({ "messages": messages }),
                other => other.clone(),
            };
            if let (Some(system), Some(messages)) = (
                &case.system,
                body.get_mut("messages").and_then(|m| m.as_array_mut()),
            ) {
                messages.insert(0, json!({"role": "system", "content": system}));
            }
            RequestView::from_chat(&body, &case.headers).map_err(|e| e.to_string())
        }
    }
}

type Signals = Vec<(String, Option<String>)>;

fn evaluate(policy: &CompiledPolicy, case: &TestDef, request: &RequestView) -> (Actual, Signals) {
    let checked = &policy.checked;
    let mut evaluation = policy.evaluate(request);
    for (signal, value) in &case.givens {
        if let Err(e) = evaluation.give(*signal, value.clone()) {
            return (
                Actual::Error {
                    code: codes::TEST_BAD_GIVEN,
                    message: e.to_string(),
                },
                Vec::new(),
            );
        }
    }
    let actual = match evaluation.step() {
        Step::Decided(verdict) => verdict_of(checked, verdict),
        Step::NeedModels(calls) => {
            let mut models: Vec<String> = calls
                .iter()
                .map(|c| model_label(checked, c.model))
                .collect();
            models.sort();
            models.dedup();
            Actual::Error {
                code: codes::TEST_MISSING_GIVEN,
                message: format!(
                    "the case reaches {} without a `given` for the signal that uses it",
                    models.join(", ")
                ),
            }
        }
        Step::Failed(_) => Actual::Error {
            code: codes::TEST_MISSING_GIVEN,
            message: "a model-backed signal failed during an offline test".to_string(),
        },
    };
    let signals = evaluation
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
        ModelKind::Similarity(e) => format!("encoder `{}`", checked.encoders[e.index()].name),
    }
}

/// The route or block a verdict names, with the model it selects.
pub fn verdict_of(checked: &CheckedPolicy, verdict: Verdict) -> Actual {
    match verdict {
        Verdict::Route(r) => {
            let route = &checked.routes[r.index()];
            Actual::Route {
                route: route.name.clone(),
                model: checked.models[route.to.index()].name.clone(),
            }
        }
        Verdict::Blocked(b) => {
            let block = &checked.blocks[b.index()];
            let model = match block.action {
                crate::hir::BlockActionDef::Redirect(m) => {
                    Some(checked.models[m.index()].name.clone())
                }
                crate::hir::BlockActionDef::Refuse { .. } => None,
            };
            Actual::Blocked {
                block: block.name.clone(),
                model,
            }
        }
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
