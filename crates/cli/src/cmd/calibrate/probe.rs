//! Evaluating labelled requests: every threshold's score, every reported signal and the route,
//! for one request, by driving the compiler's request procedure on a *probe* of the policy.
//!
//! The procedure computes only what the decision needs, but a fit needs every score of every
//! request. The probe is the policy as written plus one file read first: a signal per threshold
//! holding its score expression, and a block, checked before the policy's own, whose condition
//! (`s0 < s0 or s1 < s1 or … or (sig and not sig)`) can only be settled as false by computing
//! all of them. The block never holds, so the decision after it is the policy's own. Model
//! answers are kept by (model, text, examples), so the policy before and after calibration is
//! evaluated on the same scores and each model runs once per text.
//!
//! A `fuzzy` threshold's signal holds its text argument instead (text needs no model, so the
//! block need not force it), and the score is that text's reach of the phrases.

use super::sites::{Reading, Site};
use crate::cmd::explain::ModelRunner;
use anyhow::{anyhow, bail, Context, Result};
use src_compiler::eval::{ModelCall, ModelKind, ModelResult};
use src_compiler::hir::{CheckedPolicy, SignalId, Value};
use src_compiler::procedure::SessionAnswer;
use src_compiler::request::RequestView;
use src_compiler::text::FuzzySet;
use src_compiler::{check, compile, load, CheckOptions, CompiledPolicy, EngineKind};
use src_compiler::{Next, Procedure, ProcedureError};
use src_dsl::ast::ItemKind;
use src_dsl::render;
use src_runtime::models::{ModelOptions, OnnxModels};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Names the probe adds; no policy should use the prefix.
const PREFIX: &str = "__calibrate";

/// A policy's text: its root and its files, in load order.
#[derive(Debug, Clone)]
pub struct PolicyText {
    pub root: PathBuf,
    pub files: Vec<(PathBuf, String)>,
}

impl PolicyText {
    pub fn load(path: &Path) -> Result<PolicyText> {
        let source = load(path).with_context(|| format!("cannot load `{}`", path.display()))?;
        let files = source
            .files
            .iter()
            .filter_map(|(id, _)| source.sources.get(*id))
            .map(|f| (f.path.clone(), f.text.clone()))
            .collect();
        Ok(PolicyText {
            root: source.root,
            files,
        })
    }

    /// Checks the text; the error carries every diagnostic.
    pub fn check(&self) -> Result<CheckedPolicy> {
        check_source(load::from_texts(self.root.clone(), self.files.clone()))
    }

    /// Checks the text with `extra` read first and without its `test` blocks (a probe's own
    /// signals have no `given` in them, and tests are `src test`'s business).
    fn check_probe(&self, extra: (PathBuf, String)) -> Result<CheckedPolicy> {
        let files: Vec<(PathBuf, String)> =
            std::iter::once(extra).chain(self.files.clone()).collect();
        let mut source = load::from_texts(self.root.clone(), files);
        for (_, file) in &mut source.files {
            file.items
                .retain(|item| !matches!(item.kind, ItemKind::Test(_)));
        }
        check_source(source)
    }
}

fn check_source(source: load::PolicySource) -> Result<CheckedPolicy> {
    let sources = source.sources.clone();
    let outcome = check(source, &CheckOptions::default());
    let errors: Vec<_> = outcome
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .cloned()
        .collect();
    match outcome.policy {
        Some(policy) if errors.is_empty() => Ok(policy),
        _ => bail!("{}", render::human(&errors, &sources, false)),
    }
}

/// The probe of one policy text.
pub struct Probe {
    policy: CompiledPolicy,
    scores: Vec<(SignalId, Score)>,
    signals: Vec<SignalId>,
}

/// How a probe signal's value becomes a threshold's score.
enum Score {
    Value,
    /// The `rank`-th highest reach of the phrases in the signal's text.
    Reach(Box<FuzzySet>, usize),
}

impl Score {
    fn of(&self, value: Option<Value>) -> Option<f64> {
        match (self, value?) {
            (Score::Value, Value::Float(f)) => Some(f),
            (Score::Value, Value::Int(i)) => Some(i as f64),
            (Score::Reach(set, rank), Value::Text(text)) => {
                // An absent `text?` reads as empty, as the builtins read it.
                let mut reach = set.reach(text.as_deref().unwrap_or(""));
                reach.sort_by(|a, b| b.total_cmp(a));
                Some(reach.get(rank.checked_sub(1)?).copied().unwrap_or(0.0))
            }
            _ => None,
        }
    }
}

/// What one request got under one policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// Per threshold, in the order of the sites given to [`Probe::build`].
    pub scores: Vec<Option<f64>>,
    /// Per reported signal, in the order given to [`Probe::build`].
    pub signals: Vec<Option<bool>>,
    pub route: Option<String>,
    pub block: Option<String>,
    /// The model the request is sent to first (`None` when refused).
    pub model: Option<String>,
}

impl Probe {
    /// The probe of `text` for `sites` (whose score expressions are read from `text`) and the
    /// bool signals `signals`.
    pub fn build(text: &PolicyText, sites: &[Site], signals: &[String]) -> Result<Probe> {
        let mut probe = String::new();
        let mut parts = Vec::new();
        for (i, site) in sites.iter().enumerate() {
            let name = format!("{PREFIX}_score_{i}");
            probe.push_str(&format!("signal {name} = ({})\n", site.score));
            if site.reading == Reading::Value {
                parts.push(format!("{name} < {name}"));
            }
        }
        for s in signals {
            parts.push(format!("({s} and not {s})"));
        }
        if !parts.is_empty() {
            probe.push_str(&format!(
                "block {PREFIX}_probe {{ when {} }}\n",
                parts.join(" or ")
            ));
        }
        let file = text.root.join(format!("{PREFIX}_probe.sr"));
        let checked = text
            .check_probe((file, probe))
            .context("the calibration probe of the policy does not check")?;
        let id = |name: &str| {
            checked
                .signal_by_name(name)
                .ok_or_else(|| anyhow!("the probe lost signal `{name}`"))
        };
        let scores = sites
            .iter()
            .enumerate()
            .map(|(i, site)| {
                let score = match &site.reading {
                    Reading::Value => Score::Value,
                    Reading::Fuzzy { phrases, rank } => {
                        Score::Reach(Box::new(FuzzySet::new(phrases, site.current)), *rank)
                    }
                };
                Ok((id(&format!("{PREFIX}_score_{i}"))?, score))
            })
            .collect::<Result<Vec<_>>>()?;
        let signals = signals.iter().map(|s| id(s)).collect::<Result<Vec<_>>>()?;
        let policy = compile(checked, EngineKind::Interp).context("cannot compile the policy")?;
        Ok(Probe {
            policy,
            scores,
            signals,
        })
    }
}

/// Model answers by what was asked, shared by every probe.
type Answers = HashMap<(ModelKind, String, Vec<String>), ModelResult>;

/// Runs probes on requests, computing model answers on the ONNX runtime (once per question).
#[derive(Default)]
pub struct Evaluator {
    runner: Option<ModelRunner>,
    answers: Answers,
}

/// Offline there is no request deadline: a slow machine must not turn a score into a failure.
const MODEL_TIMEOUT: Duration = Duration::from_secs(120);

impl Evaluator {
    /// Evaluates `request` on `probe`.
    pub fn observe(&mut self, probe: &Probe, request: &RequestView) -> Result<Observation> {
        let checked = &probe.policy.checked;
        let mut procedure = Procedure::new(&probe.policy, request)
            .routing_unnamed()
            .without_cache();
        let decision = loop {
            match procedure.advance() {
                Ok(Next::Done(decision)) => break decision,
                Ok(Next::Models(calls)) => {
                    let results = self.answer(checked, &calls)?;
                    for (call, result) in calls.iter().zip(results) {
                        procedure
                            .supply(call, result)
                            .map_err(|e| anyhow!("model answer does not fit: {e}"))?;
                    }
                }
                Ok(Next::Cache(_)) => procedure.cache_answered(false),
                Ok(Next::Budgets(_)) => procedure.budgets_answered(&[]),
                Ok(Next::Session(_)) => procedure.session_answered(SessionAnswer::Keep),
                Err(ProcedureError::UnknownModel(m)) => {
                    bail!("the request names model `{m}`, which the policy does not declare")
                }
                Err(err) => bail!("{err}"),
            }
        };
        let values = procedure.evaluation().signal_values();
        let value = |id: SignalId| values.get(id.index()).and_then(|(_, v)| v.clone());
        let scores = probe
            .scores
            .iter()
            .map(|(id, score)| score.of(value(*id)))
            .collect();
        let signals = probe
            .signals
            .iter()
            .map(|&id| match value(id) {
                Some(Value::Bool(b)) => Some(b),
                _ => None,
            })
            .collect();
        Ok(Observation {
            scores,
            signals,
            route: decision
                .route
                .map(|r| checked.routes[r.index()].name.clone()),
            block: decision
                .block
                .map(|b| checked.blocks[b.index()].name.clone()),
            model: decision
                .candidates
                .first()
                .map(|m| checked.models[m.index()].name.clone()),
        })
    }

    fn answer(&mut self, checked: &CheckedPolicy, calls: &[ModelCall]) -> Result<Vec<ModelResult>> {
        let key = |c: &ModelCall| (c.model, c.text.clone(), c.examples.to_vec());
        let missing: Vec<ModelCall> = calls
            .iter()
            .filter(|c| !self.answers.contains_key(&key(c)))
            .cloned()
            .collect();
        if !missing.is_empty() {
            let runner = match &mut self.runner {
                Some(r) => r,
                None => {
                    let models = OnnxModels::new(ModelOptions {
                        timeout: MODEL_TIMEOUT,
                        ..ModelOptions::from_env()
                    });
                    let started = ModelRunner::start_with(checked, models)
                        .map_err(|why| anyhow!("the policy's models cannot run here: {why}"))?;
                    self.runner.insert(started)
                }
            };
            let results = runner.compute(checked, &missing)?;
            for (call, result) in missing.iter().zip(results) {
                if result == ModelResult::Failed {
                    bail!(
                        "{} failed on a labelled request",
                        model_name(checked, call.model)
                    );
                }
                self.answers.insert(key(call), result);
            }
        }
        calls
            .iter()
            .map(|c| {
                self.answers
                    .get(&key(c))
                    .copied()
                    .ok_or_else(|| anyhow!("a model answer went missing"))
            })
            .collect()
    }
}

fn model_name(checked: &CheckedPolicy, kind: ModelKind) -> String {
    match kind {
        ModelKind::Classifier(c) => format!("classifier `{}`", checked.classifiers[c.index()].name),
        ModelKind::Guard(g) => format!("guard `{}`", checked.guards[g.index()].name),
        ModelKind::Detector(d) => format!("detector `{}`", checked.detectors[d.index()].name),
        ModelKind::Similarity(e) => format!("encoder `{}`", checked.encoders[e.index()].name),
    }
}

/// Refuses, naming the model and where its files were expected, when a model directory the
/// policy declares is missing or incomplete.
pub fn require_models(checked: &CheckedPolicy) -> Result<()> {
    let declared = checked
        .classifiers
        .iter()
        .map(|c| ("classifier", &c.name, &c.path))
        .chain(checked.guards.iter().map(|g| ("guard", &g.name, &g.path)))
        .chain(
            checked
                .detectors
                .iter()
                .map(|d| ("detector", &d.name, &d.path)),
        )
        .chain(
            checked
                .encoders
                .iter()
                .map(|e| ("encoder", &e.name, &e.path)),
        );
    for (kind, name, path) in declared {
        // `check` already resolved the path against the policy directory.
        let model = path.join("model.onnx");
        if !model.is_file() {
            bail!(
                "{kind} `{name}` is missing: expected `{}` (build the shipped models with \
                 scripts/models.sh; docs/models.md)",
                model.display()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::calibrate::sites;

    #[test]
    fn the_probe_computes_every_score_and_keeps_the_policys_decision() {
        let text = PolicyText {
            root: PathBuf::from("."),
            files: vec![(
                PathBuf::from("p.sr"),
                concat!(
                    "backend b { url = \"http://127.0.0.1:1/v1\" }\n",
                    "model m { backend = b serves = \"m\" }\n",
                    "model n { backend = b serves = \"n\" }\n",
                    "signal a = density(prompt, [\"x\"]) > 0.1\n",
                    "signal c = density(prompt, [\"y\"]) > 0.1\n",
                    "route r priority 1 { when a or c to n }\n",
                    "route default { to m }\n",
                    "test t { prompt = \"x\" expect r }\n",
                )
                .to_string(),
            )],
        };
        let checked = text.check().unwrap();
        let sites = sites::find(&checked, &[]);
        let probe = Probe::build(&text, &sites, &["a".into(), "c".into()]).unwrap();
        let mut evaluator = Evaluator::default();
        // `a` alone settles the route; the probe still learns `c` and its score.
        let request = RequestView::from_prompt("x x y z", None, &[]);
        let seen = evaluator.observe(&probe, &request).unwrap();
        assert_eq!(seen.scores, [Some(0.5), Some(0.25)]);
        assert_eq!(seen.signals, [Some(true), Some(true)]);
        assert_eq!(seen.route.as_deref(), Some("r"));
        assert_eq!(seen.model.as_deref(), Some("n"));
        assert_eq!(seen.block, None);
        let quiet = evaluator
            .observe(&probe, &RequestView::from_prompt("z", None, &[]))
            .unwrap();
        assert_eq!(quiet.scores, [Some(0.0), Some(0.0)]);
        assert_eq!(quiet.route.as_deref(), Some("default"));
    }

    #[test]
    fn a_fuzzy_threshold_is_probed_as_the_reach_of_its_text() {
        let text = PolicyText {
            root: PathBuf::from("."),
            files: vec![(
                PathBuf::from("p.sr"),
                concat!(
                    "backend b { url = \"http://127.0.0.1:1/v1\" }\n",
                    "model m { backend = b serves = \"m\" }\n",
                    "signal u = fuzzy(prompt, [\"urgent\", \"outage\"], 0.95)\n",
                    "signal two = fuzzy_hits(prompt, [\"urgent\", \"outage\"], 0.95) >= 2\n",
                    "route r priority 1 { when u or two to m }\n",
                    "route default { to m }\n",
                )
                .to_string(),
            )],
        };
        let checked = text.check().unwrap();
        let sites = sites::find(&checked, &[]);
        let probe = Probe::build(&text, &sites, &["u".into(), "two".into()]).unwrap();
        let mut evaluator = Evaluator::default();
        let request = RequestView::from_prompt("an urgnet outage", None, &[]);
        let seen = evaluator.observe(&probe, &request).unwrap();
        // `urgnet` is 1 - 1/6 similar to `urgent`, `outage` exact: below 0.95 and above it.
        let best = seen.scores[0].unwrap();
        let second = seen.scores[1].unwrap();
        assert!((best - 1.0).abs() < 1e-6, "{seen:?}");
        assert!((second - 5.0 / 6.0).abs() < 1e-6, "{seen:?}");
        assert_eq!(seen.signals, [Some(true), Some(false)]);
    }
}
