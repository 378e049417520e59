//! `src explain`: evaluate one request offline and show why the policy decided what it did.
//!
//! Model-backed signals (classifiers, guards, similarity) run on the same ONNX runtime as
//! `src serve` when their model directories and ONNX Runtime are present; `--given` stubs them
//! otherwise, and a request that needs a model that cannot run is answered with an error naming
//! the signals to give.

use super::policy::{did_you_mean, load_checked, signal_names, Engine};
use crate::output::{Closed, Color, Format};
use crate::Outcome;
use anyhow::{anyhow, Context, Result};
use serde_json::Value as Json;
use src_compiler::eval::{ModelCall, ModelResult};
use src_compiler::explain::{ExplainError, ModelAnswers, ModelsUnavailable};
use src_compiler::failover::Wire;
use src_compiler::hir::{CheckedPolicy, LabelId, Type, Value};
use src_compiler::request::RequestView;
use src_compiler::{compile, CompiledPolicy};
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
    /// A JSON request body to explain: a chat completion, a Responses request or an Anthropic
    /// Messages request (told apart by what only each has; `--api` says which).
    #[arg(long, value_name = "FILE.json")]
    request: Option<PathBuf>,
    /// The door the `--request` body comes through, when telling it from the body is not wanted.
    #[arg(long, value_enum, requires = "request")]
    api: Option<ApiArg>,
    /// A request header, `NAME=VALUE` (repeatable).
    #[arg(long = "header", value_name = "K=V")]
    headers: Vec<String>,
    /// Stub a signal's value, `SIGNAL=VALUE` (repeatable): needed for model-backed signals; or a
    /// budget's used share, `BUDGET=SHARE` (0–1; a budget not given reads as unused).
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

/// The front doors of `src serve` whose bodies explain reads.
#[derive(Clone, Copy, clap::ValueEnum)]
enum ApiArg {
    /// `POST /v1/chat/completions`.
    Chat,
    /// `POST /v1/responses`.
    Responses,
    /// `POST /v1/messages` (Anthropic).
    Messages,
}

impl From<ApiArg> for Wire {
    fn from(api: ApiArg) -> Wire {
        match api {
            ApiArg::Chat => Wire::Chat,
            ApiArg::Responses => Wire::Responses,
            ApiArg::Messages => Wire::Messages,
        }
    }
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
    // `--given BUDGET=SHARE` stubs a budget's used share; any other name is a signal's.
    let (budget_pairs, signal_pairs): (Vec<&String>, Vec<&String>) =
        args.givens.iter().partition(|g| {
            split_pair("--given", g).is_ok_and(|(name, _)| {
                checked.signal_by_name(name).is_none() && checked.budget_by_name(name).is_some()
            })
        });
    let givens = signal_pairs
        .into_iter()
        .map(|g| parse_given(&checked, g))
        .collect::<Result<Vec<_>>>()?;
    let budget_givens = budget_pairs
        .into_iter()
        .map(|g| parse_budget_given(&checked, g))
        .collect::<Result<Vec<_>>>()?;
    let policy = compile(checked, args.engine.into()).context("cannot compile the policy")?;
    if args.ir {
        outln!("{}", policy.program.listing())?;
    }
    let explanation = explain(&policy, (&request.0, request.1), &givens, &budget_givens)?;
    match args.format {
        Format::Json => outln!("{}", explanation)?,
        Format::Human => print_human(&explanation)?,
    }
    Ok(Outcome::Success)
}

fn build_request(args: &Args, headers: &[(String, String)]) -> Result<(RequestView, Wire)> {
    if let Some(prompt) = &args.prompt {
        return Ok((RequestView::from_prompt(prompt, None, headers), Wire::Chat));
    }
    let path = args
        .request
        .as_ref()
        .ok_or_else(|| anyhow!("give --prompt or --request"))?;
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read `{}`", path.display()))?;
    let body: Json = serde_json::from_str(&text)
        .with_context(|| format!("`{}` is not valid JSON", path.display()))?;
    src_compiler::explain::read_body(&body, headers, args.api.map(Wire::from))
        .with_context(|| format!("`{}` is not a valid request", path.display()))
}

/// Parses `BUDGET=SHARE`: the share of the budget used before the request, in [0, 1].
fn parse_budget_given(
    checked: &CheckedPolicy,
    pair: &str,
) -> Result<(src_compiler::hir::BudgetId, f64)> {
    let (name, raw) = split_pair("--given", pair)?;
    let id = checked
        .budget_by_name(name)
        .ok_or_else(|| anyhow!("--given names `{name}`, which is not a budget"))?;
    let share: f64 = raw
        .parse()
        .ok()
        .filter(|v: &f64| (0.0..=1.0).contains(v))
        .ok_or_else(|| {
            anyhow!("--given {name}={raw}: a budget is given the share used, in [0, 1]")
        })?;
    Ok((id, share))
}

/// Parses `SIGNAL=VALUE` by the signal's type.
fn parse_given(
    checked: &CheckedPolicy,
    pair: &str,
) -> Result<(src_compiler::hir::SignalId, Value)> {
    let (name, raw) = split_pair("--given", pair)?;
    let id = checked.signal_by_name(name).ok_or_else(|| {
        anyhow!(
            "--given names `{name}`, which is not a signal of this policy{}",
            did_you_mean(name, signal_names(checked))
        )
    })?;
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

/// Decides the request with the compiler's explainer, answering model-backed signals on the
/// ONNX runtime (started on the first call that needs it).
fn explain(
    policy: &CompiledPolicy,
    (request, wire): (&RequestView, Wire),
    givens: &[(src_compiler::hir::SignalId, Value)],
    budget_givens: &[(src_compiler::hir::BudgetId, f64)],
) -> Result<Json> {
    let mut models = LazyRunner(None);
    src_compiler::explain::explain_budgets(
        policy,
        request,
        wire,
        givens,
        budget_givens,
        &mut models,
    )
    .map_err(|e| match e {
        ExplainError::Given(e) => anyhow!("--given: {e}"),
        other => anyhow!("{other}"),
    })
}

/// The model runtime, loaded when a request first needs it.
struct LazyRunner(Option<ModelRunner>);

impl ModelAnswers for LazyRunner {
    fn answer(
        &mut self,
        checked: &CheckedPolicy,
        calls: &[ModelCall],
    ) -> Result<Vec<ModelResult>, ModelsUnavailable> {
        let runner = match &mut self.0 {
            Some(runner) => runner,
            None => self
                .0
                .insert(ModelRunner::start(checked).map_err(ModelsUnavailable::CannotRun)?),
        };
        runner
            .runtime
            .block_on(runner.models.compute(checked, calls))
            .map_err(|e| ModelsUnavailable::Failed(e.to_string()))
    }
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

    /// The embedding of `text` under `encoder` (`src calibrate --pairs`).
    pub(crate) fn embed(
        &self,
        checked: &CheckedPolicy,
        encoder: src_compiler::hir::EncoderId,
        text: &str,
    ) -> Result<Vec<f32>> {
        use src_runtime::hooks::ModelSignals as _;
        self.runtime
            // Offline, one scope of its own, as `compute` has.
            .block_on(self.models.embed(checked, encoder, text, ""))
            .map(|e| e.vector)
            .map_err(|e| anyhow!("cannot embed a question: {e}"))
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

fn print_human(e: &Json) -> Result<(), Closed> {
    let s = |k: &str| e[k].as_str().map(str::to_string);
    let acting = &e["budgets"]["acting"];
    if acting["action"] == "reject" {
        let name = acting["budget"].as_str().unwrap_or("");
        return outln!("refused by budget `{name}` (429)");
    }
    match (s("blocked"), s("route")) {
        (Some(block), _) => match s("model") {
            Some(m) => outln!("blocked by `{block}`: sent to model `{m}`")?,
            None => outln!("blocked by `{block}`: refused")?,
        },
        (None, Some(route)) => outln!("route `{route}`")?,
        (None, None) => outln!("explicit model (routing skipped)")?,
    }
    if let Some(acting) = e["budgets"]["acting"].as_object() {
        let name = acting.get("budget").and_then(Json::as_str).unwrap_or("");
        let action = acting.get("action").and_then(Json::as_str).unwrap_or("");
        outln!("  budget `{name}` is spent: {action}")?;
    }
    if let (Some(m), Some(serves), Some(backend)) = (s("model"), s("serves"), s("backend")) {
        outln!("  model `{m}` = `{serves}` on backend `{backend}`")?;
    }
    let redacted: Vec<&str> = e["redact"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Json::as_str)
        .collect();
    if !redacted.is_empty() {
        outln!("  redacts before sending: {}", redacted.join(", "))?;
    }
    let unsendable: Vec<&str> = e["unsendable"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Json::as_str)
        .collect();
    if !unsendable.is_empty() {
        outln!("  skipped before it: {}", unsendable.join(", "))?;
    }
    let tried: Vec<&str> = e["candidates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Json::as_str)
        .collect();
    if tried.len() > 1 {
        outln!("  on a backend failure, then: {}", tried[1..].join(", "))?;
    }
    outln!("signals:")?;
    if let Some(map) = e["signals"].as_object() {
        for (name, value) in map {
            let shown = if value.is_null() {
                "(not computed: not needed)".to_string()
            } else {
                value.to_string()
            };
            outln!("  {name} = {shown}")?;
        }
    }
    outln!("conditions checked, in order:")?;
    for c in e["trace"].as_array().into_iter().flatten() {
        outln!(
            "  {} `{}` {}: {}",
            c["kind"].as_str().unwrap_or(""),
            c["name"].as_str().unwrap_or(""),
            c["state"].as_str().unwrap_or(""),
            c["condition"].as_str().unwrap_or("(default)"),
        )?;
        for part in c["because"].as_array().into_iter().flatten() {
            outln!(
                "      because `{}` {}",
                part["condition"].as_str().unwrap_or(""),
                part["state"].as_str().unwrap_or("")
            )?;
        }
    }
    Ok(())
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
