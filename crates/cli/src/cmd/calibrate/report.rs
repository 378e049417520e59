//! The calibration report: what it is made of, as JSON (`--format json`) and as text.

use super::metrics::Summary;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub policy: String,
    pub labelled: String,
    pub objective: String,
    pub seed: u64,
    pub holdout: f64,
    pub rows: Rows,
    pub thresholds: Vec<Threshold>,
    pub signals: Vec<SignalReport>,
    /// `None` when no labelled request names a route.
    pub routes: Option<Routes>,
    /// Whether the policy files were rewritten.
    pub written: bool,
    /// The unified diff of the rewrite (what `--write` writes, or wrote).
    pub diff: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Rows {
    pub train: usize,
    pub holdout: usize,
}

/// One threshold: where it was, where the fit put it, and how its comparison alone did on the
/// training split before and after.
#[derive(Debug, Clone, Serialize)]
pub struct Threshold {
    pub site: String,
    pub signal: String,
    pub comparison: String,
    pub before: f64,
    pub after: f64,
    /// Training requests with a label for the signal.
    pub samples: usize,
    pub train_before: Option<Summary>,
    pub train_after: Option<Summary>,
}

/// One signal on the held-out split, as the whole policy evaluates it.
#[derive(Debug, Clone, Serialize)]
pub struct SignalReport {
    pub signal: String,
    /// Held-out requests with a label for it.
    pub labelled: usize,
    /// Whether the labels came from `signals` in the file, from the labelled routes, both, or
    /// `none` (no held-out request labels the signal).
    pub labels_from: &'static str,
    pub before: Summary,
    pub after: Summary,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Agreement {
    /// The route decided is the labelled route.
    pub route: f64,
    /// The model sent to is the labelled route's model.
    pub model: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Routes {
    /// Held-out requests with a labelled route.
    pub labelled: usize,
    pub before: Agreement,
    pub after: Agreement,
    /// The share of those requests the calibrated policy sends to each model (`(refused)`
    /// for blocks that refuse).
    pub shares: BTreeMap<String, f64>,
    pub baselines: Baselines,
}

/// Model agreement of static rules with the calibrated policy's shares.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Baselines {
    /// The longest prompts to the dearest model, in the policy's shares.
    pub length: f64,
    /// The same shares at random (the mean of many seeded draws).
    pub random: f64,
}

/// A long score expression (a `similarity` with its examples) cut to fit a line.
fn shortened(text: &str) -> String {
    const WIDTH: usize = 60;
    if text.chars().count() <= WIDTH {
        return text.to_string();
    }
    let head: String = text.chars().take(WIDTH - 6).collect();
    format!(
        "{head} … {}",
        text.rsplit(' ')
            .take(2)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join(" ")
    )
}

fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

fn prf(s: &Summary) -> String {
    format!("P {:.3}  R {:.3}  F1 {:.3}", s.precision, s.recall, s.f1)
}

/// The report as text.
pub fn human(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "calibrated `{}` on `{}`: {} training, {} held-out requests (seed {}, objective {})",
        r.policy, r.labelled, r.rows.train, r.rows.holdout, r.seed, r.objective
    );
    let _ = writeln!(out, "\nthresholds (fitted on the training split):");
    for t in &r.thresholds {
        let moved = if t.before == t.after {
            " (unchanged)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "  {:<16} {}  {} -> {}{}",
            t.site,
            shortened(&t.comparison),
            t.before,
            t.after,
            moved
        );
        if let (Some(b), Some(a)) = (&t.train_before, &t.train_after) {
            let _ = writeln!(
                out,
                "  {:<16} train ({} labelled): before {}  after {}",
                "",
                t.samples,
                prf(b),
                prf(a)
            );
        } else {
            let _ = writeln!(out, "  {:<16} no labelled training requests: kept", "");
        }
    }
    let _ = writeln!(out, "\nsignals on the held-out split:");
    for s in &r.signals {
        let _ = writeln!(
            out,
            "  {:<16} {} labelled ({}): before {}  after {}",
            s.signal,
            s.labelled,
            s.labels_from,
            prf(&s.before),
            prf(&s.after)
        );
    }
    if let Some(routes) = &r.routes {
        let _ = writeln!(
            out,
            "\nroutes on the held-out split ({} labelled):",
            routes.labelled
        );
        let _ = writeln!(
            out,
            "  policy before      route {}  model {}",
            pct(routes.before.route),
            pct(routes.before.model)
        );
        let _ = writeln!(
            out,
            "  policy after       route {}  model {}",
            pct(routes.after.route),
            pct(routes.after.model)
        );
        let shares: Vec<String> = routes
            .shares
            .iter()
            .map(|(m, s)| format!("{m} {}", pct(*s)))
            .collect();
        let _ = writeln!(out, "  same shares ({}):", shares.join(", "));
        let _ = writeln!(
            out,
            "    by prompt length           model {}",
            pct(routes.baselines.length)
        );
        let _ = writeln!(
            out,
            "    at random                  model {}",
            pct(routes.baselines.random)
        );
        let best = routes.baselines.length.max(routes.baselines.random);
        let verdict = if routes.after.model > best {
            "the policy beats the cost-matched static baselines"
        } else {
            "the policy does not beat a cost-matched static baseline"
        };
        let _ = writeln!(out, "  {verdict}");
    }
    if r.diff.is_empty() {
        let _ = writeln!(out, "\nno threshold changes");
    } else if r.written {
        let _ = writeln!(out, "\nwrote:\n{}", r.diff);
    } else {
        let _ = writeln!(out, "\nwould write (run with --write):\n{}", r.diff);
    }
    out
}
