//! `src explain`: evaluate one request offline and show why the policy decided what it did.
//!
//! Model-backed signals (classifiers, guards, similarity) run on the same ONNX runtime as
//! `src serve` when their model directories and ONNX Runtime are present; `--given` stubs them
//! otherwise, and a request that needs a model that cannot run is answered with an error naming
//! the signals to give.

use super::policy::{load_checked, Engine};
use crate::output::{Color, Format};
use crate::Outcome;
use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value as Json};
use src_compiler::eval::{ModelCall, ModelKind, ModelResult};
use src_compiler::hir::{CheckedPolicy, LabelId, TExprKind, Type, Value};
use src_compiler::interp::Trace;
use src_compiler::ir::CondOwner;
use src_compiler::procedure::SessionAnswer;
use src_compiler::request::RequestView;
use src_compiler::testing::display_value;
use src_compiler::{compile, CompiledPolicy};
use src_compiler::{Next, Procedure, ProcedureError};
use src_dsl::SourceMap;
use src_runtime::hooks::ModelSignals;
use src_runtime::models::OnnxModels;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The policy directory or file.
    policy: PathBuf,
    /// The last user message of the request to explain.
    #[arg(long, conflicts_with = "request", required_unless_present = "request")]
    prompt: Option<String>,
    /// A JSON chat completion (or responses) request body to explain.
    #[arg(long, value_name = "FILE.json")]
    request: Option<PathBuf>,
    /// A request header, `NAME=VALUE` (repeatable).
    #[arg(long = "header", value_name = "K=V")]
    headers: Vec<String>,
    /// Stub a signal's value, `SIGNAL=VALUE` (repeatable): needed for model-backed signals.
    #[arg(long = "given", value_name = "S=V")]
    givens: Vec<String>,
    #[arg(long, value_enum, default_value_t)]
    engine: Engine,
    /// Also print the compiled IR listing.
    #[arg(long)]
    ir: bool,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    #[arg(long, value_enum, default_value_t)]
    color: Color,
}

fn split_pair<'a>(flag: &str, pair: &'a str) -> Result<(&'a str, &'a str)> {
    pair.split_once('=')
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| anyhow!("{flag} expects NAME=VALUE, got `{pair}`"))
}

pub fn run(args: Args) -> Result<Outcome> {
    let Some(checked) = load_checked(&args.policy, args.color.enabled_for_stderr())? else {
        return Ok(Outcome::Failure);
    };
    let headers = args
        .headers
        .iter()
        .map(|h| split_pair("--header", h).map(|(k, v)| (k.to_ascii_lowercase(), v.to_string())))
        .collect::<Result<Vec<_>>>()?;
    let request = build_request(&args, &headers)?;
    let givens = args
        .givens
        .iter()
        .map(|g| parse_given(&checked, g))
        .collect::<Result<Vec<_>>>()?;
    let policy = compile(checked, args.engine.into()).context("cannot compile the policy")?;
    if args.ir {
        println!("{}", policy.program.listing());
    }
    let explanation = explain(&policy, &request, &givens)?;
    match args.format {
        Format::Json => println!("{}", explanation),
        Format::Human => print_human(&explanation),
    }
    Ok(Outcome::Success)
}

fn build_request(args: &Args, headers: &[(String, String)]) -> Result<RequestView> {
    if let Some(prompt) = &args.prompt {
        return Ok(RequestView::from_prompt(prompt, None, headers));
    }
    let path = args
        .request
        .as_ref()
        .ok_or_else(|| anyhow!("give --prompt or --request"))?;
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read `{}`", path.display()))?;
    let body: Json = serde_json::from_str(&text)
        .with_context(|| format!("`{}` is not valid JSON", path.display()))?;
    let view = if body.get("input").is_some() && body.get("messages").is_none() {
        RequestView::from_responses(&body, headers)
    } else {
        RequestView::from_chat(&body, headers)
    };
    view.with_context(|| format!("`{}` is not a valid request", path.display()))
}

/// Parses `SIGNAL=VALUE` by the signal's type.
fn parse_given(
    checked: &CheckedPolicy,
    pair: &str,
) -> Result<(src_compiler::hir::SignalId, Value)> {
    let (name, raw) = split_pair("--given", pair)?;
    let id = checked
        .signal_by_name(name)
        .ok_or_else(|| anyhow!("--given names `{name}`, which is not a signal of this policy"))?;
    let ty = checked.signals[id.index()].expr.ty;
    let bad = |what: &str| anyhow!("--given {name}={raw}: `{name}` is {what}");
    let value = match ty {
        Type::Bool => Value::Bool(raw.parse().map_err(|_| bad("a bool (true or false)"))?),
        Type::Int => Value::Int(raw.parse().map_err(|_| bad("an int"))?),
        Type::Float => Value::Float(raw.parse().map_err(|_| bad("a float"))?),
        Type::Score => {
            let v: f64 = raw.parse().map_err(|_| bad("a score in [0, 1]"))?;
            if !(0.0..=1.0).contains(&v) {
                return Err(bad("a score in [0, 1]"));
            }
            Value::Float(v)
        }
        Type::Text | Type::OptText => Value::Text(Some(raw.to_string())),
        Type::Class(set) => {
            let labels = checked.labels(set);
            let index = labels
                .iter()
                .position(|l| l == raw)
                .ok_or_else(|| bad(&format!("one of the labels {}", labels.join(", "))))?;
            Value::Label(set, LabelId(index as u32))
        }
        Type::Model => {
            let m = checked
                .model_by_name(raw)
                .ok_or_else(|| bad("a model name"))?;
            Value::Model(m)
        }
    };
    Ok((id, value))
}

/// The signals whose definitions call `model`, for a helpful "give these" error.
fn signals_calling(checked: &CheckedPolicy, model: ModelKind) -> Vec<String> {
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
                    (TExprKind::Similarity { encoder, .. }, ModelKind::Similarity(m)) if *encoder == m
                )
            })
        })
        .map(|s| s.name.clone())
        .collect()
}

fn explain(
    policy: &CompiledPolicy,
    request: &RequestView,
    givens: &[(src_compiler::hir::SignalId, Value)],
) -> Result<Json> {
    let checked = &policy.checked;
    // The procedure `src serve` runs, offline: a prompt without a model is routed, and nothing
    // is looked up in a cache or a session store.
    let mut procedure = Procedure::new(policy, request)
        .routing_unnamed()
        .without_cache();
    for (signal, value) in givens {
        procedure
            .give(*signal, value.clone())
            .map_err(|e| anyhow!("--given: {e}"))?;
    }
    let mut models: Option<ModelRunner> = None;
    let decision = loop {
        match procedure.advance() {
            Ok(Next::Done(decision)) => break decision,
            Ok(Next::Models(calls)) => {
                let runner = match &mut models {
                    Some(runner) => runner,
                    None => models.insert(
                        ModelRunner::start(checked)
                            .map_err(|why| missing_givens(checked, &calls, &why))?,
                    ),
                };
                let results = runner.compute(checked, &calls)?;
                for (call, result) in calls.iter().zip(results) {
                    procedure
                        .supply(call, result)
                        .map_err(|e| anyhow!("model answer does not fit: {e}"))?;
                }
            }
            Ok(Next::Cache(_)) => procedure.cache_answered(false),
            Ok(Next::Session(_)) => procedure.session_answered(SessionAnswer::Keep),
            Err(ProcedureError::UnknownModel(m)) => {
                bail!("the request names model `{m}`, which the policy does not declare")
            }
            Err(ProcedureError::ModelsFailed(_) | ProcedureError::SkipFailed(_)) => {
                bail!("a model-backed signal failed, and the policy fails closed")
            }
            Err(err) => bail!("{err}"),
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
    let model = decision.candidates.first().copied();
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
        "blocked": blocked,
        "route": route,
        "model": model_def.map(|m| m.name.clone()),
        "serves": model_def.map(|m| m.serves.clone()),
        "backend": model_def.map(|m| checked.backends[m.backend.index()].name.clone()),
        "candidates": candidates,
        "signals": signals,
        "skipped": skipped,
        "trace": trace_json(checked, &trace),
    }))
}

/// The error for a request that needs models this machine cannot run: name the signals to give.
fn missing_givens(checked: &CheckedPolicy, calls: &[ModelCall], why: &str) -> anyhow::Error {
    let mut names: Vec<String> = calls
        .iter()
        .flat_map(|c| signals_calling(checked, c.model))
        .collect();
    names.sort();
    names.dedup();
    anyhow!(
        "this request needs model-backed signal(s) {} to decide, and the models cannot run here \
         ({why}); give their values with {}",
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", "),
        names
            .iter()
            .map(|n| format!("--given {n}=VALUE"))
            .collect::<Vec<_>>()
            .join(" ")
    )
}

/// The ONNX model runtime `src serve` uses, run here on a small async runtime.
pub(crate) struct ModelRunner {
    models: OnnxModels,
    runtime: tokio::runtime::Runtime,
}

impl ModelRunner {
    /// Loads the policy's models; the error says why they cannot run.
    pub(crate) fn start(checked: &CheckedPolicy) -> Result<ModelRunner, String> {
        ModelRunner::start_with(checked, OnnxModels::default())
    }

    /// [`ModelRunner::start`] on models built with other options (`src calibrate` waits longer).
    pub(crate) fn start_with(
        checked: &CheckedPolicy,
        models: OnnxModels,
    ) -> Result<ModelRunner, String> {
        let problems: Vec<String> = models
            .prepare(checked)
            .into_iter()
            .filter(|d| d.is_error())
            .map(|d| d.message)
            .collect();
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        Ok(ModelRunner { models, runtime })
    }

    pub(crate) fn compute(
        &self,
        checked: &CheckedPolicy,
        calls: &[ModelCall],
    ) -> Result<Vec<ModelResult>> {
        self.runtime
            .block_on(self.models.compute(checked, calls))
            .map_err(|e| anyhow!("model-backed signal failed: {e}"))
    }
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

fn snippet(sources: &SourceMap, span: src_dsl::Span) -> String {
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

fn print_human(e: &Json) {
    let s = |k: &str| e[k].as_str().map(str::to_string);
    match (s("blocked"), s("route")) {
        (Some(block), _) => match s("model") {
            Some(m) => println!("blocked by `{block}`: sent to model `{m}`"),
            None => println!("blocked by `{block}`: refused"),
        },
        (None, Some(route)) => println!("route `{route}`"),
        (None, None) => println!("explicit model (routing skipped)"),
    }
    if let (Some(m), Some(serves), Some(backend)) = (s("model"), s("serves"), s("backend")) {
        println!("  model `{m}` = `{serves}` on backend `{backend}`");
    }
    let tried: Vec<&str> = e["candidates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Json::as_str)
        .collect();
    if tried.len() > 1 {
        println!("  on a backend failure, then: {}", tried[1..].join(", "));
    }
    println!("signals:");
    if let Some(map) = e["signals"].as_object() {
        for (name, value) in map {
            let shown = if value.is_null() {
                "(not computed: not needed)".to_string()
            } else {
                value.to_string()
            };
            println!("  {name} = {shown}");
        }
    }
    println!("conditions checked, in order:");
    for c in e["trace"].as_array().into_iter().flatten() {
        println!(
            "  {} `{}` {}: {}",
            c["kind"].as_str().unwrap_or(""),
            c["name"].as_str().unwrap_or(""),
            c["state"].as_str().unwrap_or(""),
            c["condition"].as_str().unwrap_or("(default)"),
        );
        for part in c["because"].as_array().into_iter().flatten() {
            println!(
                "      because `{}` {}",
                part["condition"].as_str().unwrap_or(""),
                part["state"].as_str().unwrap_or("")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_pair_requires_a_name() {
        assert!(split_pair("--given", "=1").is_err());
        assert!(split_pair("--given", "x").is_err());
        assert_eq!(split_pair("--given", "a=b=c").unwrap(), ("a", "b=c"));
    }
}
