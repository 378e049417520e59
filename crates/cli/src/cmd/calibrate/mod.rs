//! `src calibrate POLICY --labelled FILE.jsonl`: fit the policy's score thresholds on labelled
//! requests, judge them on a held-out split against cost-matched static baselines, and
//! optionally write them back (docs/calibrate.md). `--pairs FILE.jsonl` fits the `cache`
//! threshold on labelled question pairs instead ([`pairs`]).
//!
//! - [`labelled`]: reading the labelled file.
//! - [`split`]: the seeded train/held-out split.
//! - [`sites`]: where the thresholds are.
//! - [`probe`]: every score, signal and route of a request, through the request procedure.
//! - [`fit`]: the threshold sweep.
//! - [`metrics`]: precision, recall, F1, agreement.
//! - [`baseline`]: the same traffic shares by prompt length and at random.
//! - [`rewrite`]: the literals written back through the formatter, and the diff.
//! - [`pairs`]: the cache threshold fitted on same/different question pairs.
//! - [`report`]: the report as JSON and text.

pub mod baseline;
pub mod fit;
pub mod labelled;
pub mod metrics;
pub mod pairs;
pub mod probe;
pub mod report;
pub mod rewrite;
pub mod sites;
pub mod split;

use crate::cmd::policy::{did_you_mean, signal_names};
use crate::output::Format;
use crate::Outcome;
use anyhow::{anyhow, bail, Context, Result};
use fit::{Fit, Objective};
use labelled::Labelled;
use metrics::{agreement, Counts};
use probe::{Evaluator, Observation, PolicyText, Probe};
use report::{Agreement, Baselines, Report, Routes, SignalReport, Threshold};

use src_compiler::hir::{CheckedPolicy, SignalId, TExpr, TExprKind, Type};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The policy directory or file.
    policy: PathBuf,
    /// Labelled requests, one JSON object a line (docs/calibrate.md).
    #[arg(long, value_name = "FILE.jsonl", required_unless_present = "pairs")]
    labelled: Option<PathBuf>,
    /// Labelled question pairs for the `cache` threshold instead, one
    /// `{"a", "b", "same", "kind"}` object a line (docs/calibrate.md).
    #[arg(long, value_name = "FILE.jsonl", conflicts_with_all = ["labelled", "signals"])]
    pairs: Option<PathBuf>,
    /// Calibrate this signal's thresholds only (repeatable; default: every signal).
    #[arg(long = "signal", value_name = "NAME")]
    signals: Vec<String>,
    /// What a fit maximises: `f1`, `precision=P` (best recall at that precision) or `recall=R`
    /// (default: `f1`, and `precision=0.99` with `--pairs`).
    #[arg(long)]
    objective: Option<Objective>,
    /// The share of labelled requests held out to judge the fit.
    #[arg(long, default_value_t = 0.3)]
    holdout: f64,
    /// Seeds the split and the random baseline.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Rewrite the thresholds in the policy files (formatted; the diff is printed).
    #[arg(long)]
    write: bool,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

/// What the label "signal should hold" is for a request, when known.
fn label(checked: &CheckedPolicy, row: &Labelled, signal: SignalId) -> Option<bool> {
    let name = &checked.signals[signal.index()].name;
    if let Some(&b) = row.signals.get(name) {
        return Some(b);
    }
    // A route label says the signals its condition reads should hold, and no others.
    let route = checked
        .routes
        .iter()
        .find(|r| Some(&r.name) == row.route.as_ref())?;
    Some(
        route
            .when
            .as_ref()
            .is_some_and(|w| mentions(checked, w, signal)),
    )
}

/// Whether `e` reads `signal`, directly or through other signals.
fn mentions(checked: &CheckedPolicy, e: &TExpr, signal: SignalId) -> bool {
    e.any(&|x| match x.kind {
        TExprKind::Signal(s) => {
            s == signal
                || checked
                    .signals
                    .get(s.index())
                    .is_some_and(|d| mentions(checked, &d.expr, signal))
        }
        _ => false,
    })
}

fn validate(checked: &CheckedPolicy, rows: &[Labelled], path: &std::path::Path) -> Result<()> {
    for row in rows {
        let at = || format!("`{}` line {}", path.display(), row.line);
        if let Some(route) = &row.route {
            if !checked.routes.iter().any(|r| &r.name == route) {
                let names: Vec<&str> = checked.routes.iter().map(|r| r.name.as_str()).collect();
                bail!(
                    "{}: `route` names `{route}`, which is not a route of the policy (routes: {}){}",
                    at(),
                    names.join(", "),
                    did_you_mean(route, names.iter().copied())
                );
            }
        }
        for name in row.signals.keys() {
            match checked.signal_by_name(name) {
                None => bail!(
                    "{}: `signals` names `{name}`, which is not a signal of the policy{}",
                    at(),
                    did_you_mean(name, signal_names(checked))
                ),
                Some(id) if checked.signals[id.index()].expr.ty != Type::Bool => {
                    bail!(
                        "{}: signal `{name}` is not a bool, so it cannot be labelled true or false",
                        at()
                    )
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

fn select(checked: &CheckedPolicy, names: &[String]) -> Result<Vec<SignalId>> {
    names
        .iter()
        .map(|n| {
            checked.signal_by_name(n).ok_or_else(|| {
                anyhow!(
                    "--signal `{n}` is not a signal of the policy{}",
                    did_you_mean(n, signal_names(checked))
                )
            })
        })
        .collect()
}

/// Observes `rows` (by index) on `probe`.
fn observe_all(
    evaluator: &mut Evaluator,
    probe: &Probe,
    rows: &[Labelled],
    which: &[usize],
) -> Result<BTreeMap<usize, Observation>> {
    which
        .iter()
        .map(|&i| {
            evaluator
                .observe(probe, &rows[i].request)
                .with_context(|| format!("labelled request on line {}", rows[i].line))
                .map(|o| (i, o))
        })
        .collect()
}

pub fn run(args: Args) -> Result<Outcome> {
    if let Some(pairs) = &args.pairs {
        return pairs::run(pairs::PairsArgs {
            policy: &args.policy,
            pairs,
            objective: args.objective,
            holdout: args.holdout,
            seed: args.seed,
            write: args.write,
            format: args.format,
        });
    }
    let Some(labelled_path) = args.labelled.clone() else {
        bail!("give `--labelled FILE.jsonl` (requests) or `--pairs FILE.jsonl` (cache pairs)");
    };
    let objective = args.objective.unwrap_or(Objective::F1);
    let text = PolicyText::load(&args.policy)?;
    let checked = match text.check() {
        Ok(c) => c,
        Err(e) => {
            err!("{e:#}")?;
            errln!(
                "`{}` has errors; run `src check` for details",
                args.policy.display()
            )?;
            return Ok(Outcome::Failure);
        }
    };
    let selected = select(&checked, &args.signals)?;
    let sites = sites::find(&checked, &selected);
    for &s in &selected {
        if !sites.iter().any(|site| site.signal == s) {
            bail!(
                "signal `{}` compares no score with a number literal and has no `fuzzy` \
                 threshold: nothing to calibrate",
                checked.signals[s.index()].name
            );
        }
    }
    if sites.is_empty() {
        bail!(
            "the policy's signals compare no score with a number literal and have no `fuzzy` \
             threshold: nothing to calibrate"
        );
    }
    probe::require_models(&checked)?;
    let rows = labelled::read(&labelled_path)?;
    validate(&checked, &rows, &labelled_path)?;
    let split = split::split(rows.len(), args.holdout, args.seed)?;

    // The signals whose thresholds are fitted, each once, in order.
    let mut reported: Vec<SignalId> = Vec::new();
    for s in &sites {
        if !reported.contains(&s.signal) && checked.signals[s.signal.index()].expr.ty == Type::Bool
        {
            reported.push(s.signal);
        }
    }
    let reported_names: Vec<String> = reported
        .iter()
        .map(|s| checked.signals[s.index()].name.clone())
        .collect();

    let mut evaluator = Evaluator::default();
    let before = Probe::build(&text, &sites, &reported_names)?;
    let all: Vec<usize> = (0..rows.len()).collect();
    let seen = observe_all(&mut evaluator, &before, &rows, &all)?;

    let mut thresholds = Vec::new();
    let mut edits = Vec::new();
    for (index, site) in sites.iter().enumerate() {
        let samples: Vec<(f64, bool)> = split
            .train
            .iter()
            .filter_map(|&i| {
                let score = seen.get(&i)?.scores.get(index).copied().flatten()?;
                let l = label(&checked, &rows[i], site.signal)?;
                Some((score, l != site.negated))
            })
            .collect();
        let fitted = fit::fit(&samples, site.op, objective, site.current, site.domain);
        let counts_at = |t: f64| Counts::of(samples.iter().map(|&(s, l)| (site.op.holds(s, t), l)));
        let after = fitted.map_or(site.current, |Fit { threshold, .. }| threshold);
        thresholds.push(Threshold {
            site: site.id.clone(),
            signal: checked.signals[site.signal.index()].name.clone(),
            comparison: site.shown.clone(),
            before: site.current,
            after,
            samples: samples.len(),
            train_before: fitted.map(|_| counts_at(site.current).summary()),
            train_after: fitted.map(|f| f.counts.summary()),
        });
        edits.push(rewrite::Edit {
            literal: site.literal,
            value: after,
            current: site.current,
        });
    }

    let (after_text, changed) = rewrite::apply(&text, &edits)?;
    let after_checked = after_text
        .check()
        .context("the calibrated policy does not check")?;
    let after_sites = sites::find(&after_checked, &selected);
    let after = Probe::build(&after_text, &after_sites, &reported_names)?;
    let seen_after = observe_all(&mut evaluator, &after, &rows, &split.holdout)?;

    let signals = signal_reports(
        &checked,
        &rows,
        &split.holdout,
        &reported,
        &seen,
        &seen_after,
    );
    let routes = route_report(
        &checked,
        &rows,
        &split.holdout,
        &seen,
        &seen_after,
        args.seed,
    );

    if args.write {
        for c in &changed {
            std::fs::write(&c.path, &c.after)
                .with_context(|| format!("cannot write `{}`", c.path.display()))?;
        }
    }
    let report = Report {
        policy: args.policy.display().to_string(),
        labelled: labelled_path.display().to_string(),
        objective: objective.to_string(),
        seed: args.seed,
        holdout: args.holdout,
        rows: report::Rows {
            train: split.train.len(),
            holdout: split.holdout.len(),
        },
        thresholds,
        signals,
        routes,
        written: args.write && !changed.is_empty(),
        diff: changed.iter().map(rewrite::diff).collect(),
    };
    match args.format {
        Format::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&report).context("cannot render the report")?
        )?,
        Format::Human => out!("{}", report::human(&report))?,
    }
    Ok(Outcome::Success)
}

fn signal_reports(
    checked: &CheckedPolicy,
    rows: &[Labelled],
    holdout: &[usize],
    reported: &[SignalId],
    before: &BTreeMap<usize, Observation>,
    after: &BTreeMap<usize, Observation>,
) -> Vec<SignalReport> {
    reported
        .iter()
        .enumerate()
        .map(|(k, &signal)| {
            let name = &checked.signals[signal.index()].name;
            let labelled: Vec<(usize, bool)> = holdout
                .iter()
                .filter_map(|&i| label(checked, &rows[i], signal).map(|l| (i, l)))
                .collect();
            let value = |seen: &BTreeMap<usize, Observation>, i: usize| {
                seen.get(&i)
                    .and_then(|o| o.signals.get(k).copied().flatten())
                    .unwrap_or(false)
            };
            let explicit = labelled
                .iter()
                .filter(|(i, _)| rows[*i].signals.contains_key(name))
                .count();
            SignalReport {
                signal: name.clone(),
                labelled: labelled.len(),
                labels_from: match (explicit, labelled.len() - explicit) {
                    (0, 0) => "none",
                    (_, 0) => "signals",
                    (0, _) => "routes",
                    _ => "signals and routes",
                },
                before: Counts::of(labelled.iter().map(|&(i, l)| (value(before, i), l))).summary(),
                after: Counts::of(labelled.iter().map(|&(i, l)| (value(after, i), l))).summary(),
            }
        })
        .collect()
}

/// Where a request went, for agreement and shares: the model, or `(refused)`.
const REFUSED: &str = "(refused)";

fn route_report(
    checked: &CheckedPolicy,
    rows: &[Labelled],
    holdout: &[usize],
    before: &BTreeMap<usize, Observation>,
    after: &BTreeMap<usize, Observation>,
    seed: u64,
) -> Option<Routes> {
    let labelled: Vec<(usize, &str)> = holdout
        .iter()
        .filter_map(|&i| rows[i].route.as_deref().map(|r| (i, r)))
        .collect();
    if labelled.is_empty() {
        return None;
    }
    let model_of_route = |r: &str| -> String {
        checked
            .routes
            .iter()
            .find(|d| d.name == r)
            .map(|d| checked.models[d.to.index()].name.clone())
            .unwrap_or_default()
    };
    let truth: Vec<String> = labelled.iter().map(|(_, r)| model_of_route(r)).collect();
    let sent = |seen: &BTreeMap<usize, Observation>, i: usize| -> String {
        seen.get(&i)
            .and_then(|o| o.model.clone())
            .unwrap_or_else(|| REFUSED.to_string())
    };
    let agree = |seen: &BTreeMap<usize, Observation>| Agreement {
        route: metrics::round4(
            agreement(
                labelled
                    .iter()
                    .map(|&(i, r)| (seen.get(&i).and_then(|o| o.route.as_deref()), Some(r))),
            )
            .unwrap_or(0.0),
        ),
        model: metrics::round4(
            agreement(
                labelled
                    .iter()
                    .zip(&truth)
                    .map(|(&(i, _), t)| (sent(seen, i), t.clone())),
            )
            .unwrap_or(0.0),
        ),
    };
    let decided: Vec<String> = labelled.iter().map(|&(i, _)| sent(after, i)).collect();
    let mut shares = BTreeMap::new();
    for d in &decided {
        *shares.entry(d.clone()).or_insert(0.0) += 1.0 / decided.len() as f64;
    }
    for v in shares.values_mut() {
        *v = metrics::round4(*v);
    }
    let cost = |d: &String| {
        checked
            .model_by_name(d)
            .map_or(f64::NEG_INFINITY, |m| checked.models[m.index()].cost)
    };
    let lengths: Vec<usize> = labelled
        .iter()
        .map(|&(i, _)| rows[i].request.prompt.chars().count())
        .collect();
    let by_length = baseline::by_length(&lengths, &decided, cost);
    Some(Routes {
        labelled: labelled.len(),
        before: agree(before),
        after: agree(after),
        shares,
        baselines: Baselines {
            length: metrics::round4(agreement(by_length.iter().zip(&truth)).unwrap_or(0.0)),
            random: metrics::round4(
                baseline::random_agreement(&decided, &truth, seed).unwrap_or(0.0),
            ),
        },
    })
}
