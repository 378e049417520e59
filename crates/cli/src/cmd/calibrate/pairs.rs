//! `src calibrate POLICY --pairs FILE.jsonl`: fit the `cache` block's `threshold` on labelled
//! question pairs (docs/calibrate.md, "The cache threshold").
//!
//! Each line is `{"a": "...", "b": "...", "same": true|false, "kind": "..."}`: whether a stored
//! answer to `a` may answer `b`. Both questions are embedded with the cache's encoder; a pair is
//! a *hit* at threshold `t` when the cosine reaches `t` and the look-alike check
//! (`src_compiler::lookalike`) agrees, as in `src serve`, and a *cosine-only hit* when the cosine
//! alone reaches it. The threshold is fitted on the training split (default objective:
//! `precision=0.99`, the best hit rate among thresholds whose hits are at least 99 % right) and
//! judged on the held-out split, against the threshold in force and against cosine alone. A hit
//! on a `same: false` pair is a false hit: the *false-hit rate* is their share of the different
//! pairs, the *hit rate* the share of same pairs that hit.

use super::fit::{self, Domain, Objective, Op};
use super::metrics::Counts;
use super::probe::{self, PolicyText};
use super::rewrite;
use super::split;
use crate::cmd::explain::ModelRunner;
use crate::output::Format;
use crate::Outcome;
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use src_compiler::hir::CheckedPolicy;
use src_compiler::lookalike;
use src_dsl::ast::ItemKind;
use src_runtime::models::{ModelOptions, OnnxModels};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// The objective when none is given: hits at least 99 % right.
pub const DEFAULT_OBJECTIVE: Objective = Objective::Precision(0.99);

/// One labelled pair.
#[derive(Debug, Clone, Deserialize)]
pub struct Pair {
    pub a: String,
    pub b: String,
    pub same: bool,
    #[serde(default)]
    pub kind: Option<String>,
}

/// A pair as measured: its cosine and the check's verdict.
#[derive(Debug, Clone)]
struct Measured {
    a: String,
    b: String,
    same: bool,
    kind: String,
    cosine: f64,
    /// The reason the look-alike check refused the pair, if it did.
    refused: Option<&'static str>,
}

/// How a threshold does on a set of pairs, with the check and by cosine alone.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Rates {
    pub threshold: f64,
    pub hit_rate: f64,
    pub false_hit_rate: f64,
    pub precision: f64,
    pub cosine_only_hit_rate: f64,
    pub cosine_only_false_hit_rate: f64,
    pub cosine_only_precision: f64,
}

/// A pair the report names: a false hit, or a same pair the check refused.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Named {
    pub a: String,
    pub b: String,
    pub kind: String,
    pub cosine: f64,
    /// Why the check refused it, for a refused same pair.
    pub refused: Option<&'static str>,
}

/// One kind of pair at the fitted threshold.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct KindRow {
    pub kind: String,
    pub same: bool,
    pub pairs: usize,
    /// Pairs that hit by cosine alone.
    pub cosine_hits: usize,
    /// Pairs that hit with the check.
    pub hits: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct PairsReport {
    pub policy: String,
    pub pairs: String,
    pub encoder: String,
    pub objective: String,
    pub seed: u64,
    pub train: usize,
    pub holdout: usize,
    /// The threshold in force, then the fitted one, on the held-out split.
    pub before: Rates,
    pub after: Rates,
    /// The threshold cosine alone needs for the same objective, on the held-out split.
    pub cosine_only_fit: Rates,
    /// Every pair at the fitted threshold, by kind.
    pub kinds: Vec<KindRow>,
    /// Why the check refused pairs (all pairs), by reason.
    pub refusals: BTreeMap<String, usize>,
    /// Different pairs that hit at the fitted threshold (all pairs).
    pub false_hits: Vec<Named>,
    /// Same pairs at the fitted threshold that the check refused (all pairs).
    pub refused_same: Vec<Named>,
    pub written: bool,
    pub diff: String,
}

/// Reads every non-blank line of `path`.
pub fn read(path: &Path) -> Result<Vec<Pair>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read `{}`", path.display()))?;
    let pairs = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            serde_json::from_str::<Pair>(l).with_context(|| {
                format!(
                    "`{}` line {}: expected {{\"a\": TEXT, \"b\": TEXT, \"same\": BOOL}}",
                    path.display(),
                    n + 1
                )
            })
        })
        .collect::<Result<Vec<Pair>>>()?;
    if !pairs.iter().any(|p| p.same) || !pairs.iter().any(|p| !p.same) {
        bail!(
            "`{}` needs both same and different pairs to fit a threshold",
            path.display()
        );
    }
    Ok(pairs)
}

/// What `src calibrate --pairs` was given.
pub struct PairsArgs<'a> {
    pub policy: &'a Path,
    pub pairs: &'a Path,
    pub objective: Option<Objective>,
    pub holdout: f64,
    pub seed: u64,
    pub write: bool,
    pub format: Format,
}

pub fn run(args: PairsArgs<'_>) -> Result<Outcome> {
    let text = PolicyText::load(args.policy)?;
    let checked = text.check()?;
    let Some(cache) = &checked.cache else {
        bail!(
            "`{}` declares no `cache`: there is no threshold to fit",
            args.policy.display()
        );
    };
    let encoder = checked
        .encoders
        .get(cache.encoder.index())
        .map(|e| e.name.clone())
        .ok_or_else(|| anyhow!("the cache names an unknown encoder"))?;
    probe::require_models(&checked)?;
    let pairs = read(args.pairs)?;
    let split = split::split(pairs.len(), args.holdout, args.seed)?;
    let measured = measure(&checked, &pairs)?;
    let objective = args.objective.unwrap_or(DEFAULT_OBJECTIVE);
    let current = cache.threshold;

    let train: Vec<&Measured> = split.train.iter().map(|&i| &measured[i]).collect();
    let held: Vec<&Measured> = split.holdout.iter().map(|&i| &measured[i]).collect();
    let fitted = fit_threshold(&train, objective, current, true)?;
    let cosine_fit = fit_threshold(&train, objective, current, false)?;

    let mut refusals: BTreeMap<String, usize> = BTreeMap::new();
    for m in &measured {
        if let Some(why) = m.refused {
            *refusals.entry(why.to_owned()).or_default() += 1;
        }
    }
    let (changed, diff) = rewrite_threshold(&text, current, fitted)?;
    if args.write {
        for c in &changed {
            std::fs::write(&c.path, &c.after)
                .with_context(|| format!("cannot write `{}`", c.path.display()))?;
        }
    }
    let report = PairsReport {
        policy: args.policy.display().to_string(),
        pairs: args.pairs.display().to_string(),
        encoder,
        objective: objective.to_string(),
        seed: args.seed,
        train: train.len(),
        holdout: held.len(),
        before: rates(&held, current),
        after: rates(&held, fitted),
        cosine_only_fit: rates(&held, cosine_fit),
        kinds: kinds(&measured, fitted),
        refusals,
        false_hits: named(&measured, |m| !m.same && score(m, true) >= fitted),
        refused_same: named(&measured, |m| {
            m.same && m.cosine >= fitted && m.refused.is_some()
        }),
        written: args.write && !changed.is_empty(),
        diff,
    };
    match args.format {
        Format::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&report).context("cannot render the report")?
        )?,
        Format::Human => out!("{}", human(&report))?,
    }
    Ok(Outcome::Success)
}

/// Embeds every question once and runs the check on every pair.
fn measure(checked: &CheckedPolicy, pairs: &[Pair]) -> Result<Vec<Measured>> {
    let Some(cache) = &checked.cache else {
        bail!("the policy declares no `cache`");
    };
    let models = OnnxModels::new(ModelOptions {
        timeout: Duration::from_secs(120),
        ..ModelOptions::from_env()
    });
    let runner = ModelRunner::start_with(checked, models)
        .map_err(|why| anyhow!("the policy's models cannot run here: {why}"))?;
    let mut vectors: BTreeMap<&str, Vec<f32>> = BTreeMap::new();
    for text in pairs.iter().flat_map(|p| [p.a.as_str(), p.b.as_str()]) {
        if !vectors.contains_key(text) {
            vectors.insert(text, runner.embed(checked, cache.encoder, text)?);
        }
    }
    Ok(pairs
        .iter()
        .map(|p| {
            let cosine = match (vectors.get(p.a.as_str()), vectors.get(p.b.as_str())) {
                (Some(a), Some(b)) => f64::from(a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>()),
                _ => 0.0,
            };
            Measured {
                a: p.a.clone(),
                b: p.b.clone(),
                same: p.same,
                kind: p
                    .kind
                    .clone()
                    .unwrap_or_else(|| if p.same { "same" } else { "different" }.to_owned()),
                cosine,
                refused: lookalike::agree(&p.b, &p.a).err().map(|m| m.as_str()),
            }
        })
        .collect())
}

/// The score a threshold is compared with: the cosine, or nothing when the check refuses.
fn score(m: &Measured, checked: bool) -> f64 {
    if checked && m.refused.is_some() {
        f64::NEG_INFINITY
    } else {
        m.cosine
    }
}

fn fit_threshold(
    train: &[&Measured],
    objective: Objective,
    current: f64,
    checked: bool,
) -> Result<f64> {
    let samples: Vec<(f64, bool)> = train.iter().map(|m| (score(m, checked), m.same)).collect();
    fit::fit(&samples, Op::Ge, objective, current, Domain::SCORE)
        .map(|f| f.threshold)
        .ok_or_else(|| anyhow!("no pair has a score to fit a threshold on"))
}

fn counts(set: &[&Measured], threshold: f64, checked: bool) -> Counts {
    Counts::of(set.iter().map(|m| (score(m, checked) >= threshold, m.same)))
}

fn rates(set: &[&Measured], threshold: f64) -> Rates {
    let (with, alone) = (counts(set, threshold, true), counts(set, threshold, false));
    let false_rate = |c: &Counts| ratio(c.fp, c.fp + c.tn);
    Rates {
        threshold,
        hit_rate: round4(with.recall()),
        false_hit_rate: round4(false_rate(&with)),
        precision: round4(with.precision()),
        cosine_only_hit_rate: round4(alone.recall()),
        cosine_only_false_hit_rate: round4(false_rate(&alone)),
        cosine_only_precision: round4(alone.precision()),
    }
}

fn kinds(measured: &[Measured], threshold: f64) -> Vec<KindRow> {
    let mut rows: BTreeMap<(bool, String), KindRow> = BTreeMap::new();
    for m in measured {
        let row = rows
            .entry((!m.same, m.kind.clone()))
            .or_insert_with(|| KindRow {
                kind: m.kind.clone(),
                same: m.same,
                pairs: 0,
                cosine_hits: 0,
                hits: 0,
            });
        row.pairs += 1;
        row.cosine_hits += usize::from(m.cosine >= threshold);
        row.hits += usize::from(score(m, true) >= threshold);
    }
    rows.into_values().collect()
}

fn named(measured: &[Measured], keep: impl Fn(&Measured) -> bool) -> Vec<Named> {
    measured
        .iter()
        .filter(|m| keep(m))
        .map(|m| Named {
            a: m.a.clone(),
            b: m.b.clone(),
            kind: m.kind.clone(),
            cosine: round4(m.cosine),
            refused: m.refused,
        })
        .collect()
}

/// The `cache` block's `threshold` literal rewritten to `fitted`, and the diff.
fn rewrite_threshold(
    text: &PolicyText,
    current: f64,
    fitted: f64,
) -> Result<(Vec<rewrite::Changed>, String)> {
    let source = src_compiler::load::from_texts(text.root.clone(), text.files.clone());
    let literal = source
        .files
        .iter()
        .flat_map(|(_, f)| &f.items)
        .find_map(|item| match &item.kind {
            ItemKind::Cache(c) => c.threshold.as_ref().map(|t| t.span),
            _ => None,
        });
    let Some(literal) = literal else {
        // The threshold is the default; there is no literal to rewrite.
        return Ok((Vec::new(), String::new()));
    };
    let edit = rewrite::Edit {
        literal,
        value: fitted,
        current,
    };
    let (_, changed) = rewrite::apply(text, &[edit])?;
    let diff = changed.iter().map(rewrite::diff).collect();
    Ok((changed, diff))
}

fn ratio(n: usize, d: usize) -> f64 {
    if d == 0 {
        0.0
    } else {
        n as f64 / d as f64
    }
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn line(out: &mut String, label: &str, r: &Rates) {
    let _ = writeln!(
        out,
        "  {label:<22} threshold {:<6}  hits {:>6}  false hits {:>6}  | cosine only: hits {:>6}  false hits {:>6}",
        r.threshold,
        pct(r.hit_rate),
        pct(r.false_hit_rate),
        pct(r.cosine_only_hit_rate),
        pct(r.cosine_only_false_hit_rate),
    );
}

pub fn human(r: &PairsReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "cache threshold of `{}` on `{}` (encoder `{}`, objective {}, {} pairs fitted, {} held out, seed {})",
        r.policy, r.pairs, r.encoder, r.objective, r.train, r.holdout, r.seed
    );
    let _ = writeln!(
        out,
        "\nheld-out split (hits: of same pairs; false hits: of different pairs):"
    );
    line(&mut out, "before", &r.before);
    line(&mut out, "after (with the check)", &r.after);
    line(&mut out, "cosine-only fit", &r.cosine_only_fit);
    let _ = writeln!(
        out,
        "\nevery pair at threshold {}, by kind:",
        r.after.threshold
    );
    for k in &r.kinds {
        let _ = writeln!(
            out,
            "  {:<12} {:<9} {:>4} pairs  cosine-only hits {:>4}  hits {:>4}",
            k.kind,
            if k.same { "same" } else { "different" },
            k.pairs,
            k.cosine_hits,
            k.hits
        );
    }
    let refusals: Vec<String> = r.refusals.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let _ = writeln!(
        out,
        "\nrefused by the look-alike check: {}",
        refusals.join(", ")
    );
    for (title, list) in [
        ("false hits", &r.false_hits),
        ("same pairs refused by the check", &r.refused_same),
    ] {
        let _ = writeln!(
            out,
            "\n{title} at threshold {}: {}",
            r.after.threshold,
            list.len()
        );
        for n in list.iter().take(20) {
            let why = n.refused.map(|w| format!(" ({w})")).unwrap_or_default();
            let _ = writeln!(
                out,
                "  {:.3} {:<10} {:?} / {:?}{why}",
                n.cosine, n.kind, n.a, n.b
            );
        }
    }
    if r.diff.is_empty() {
        let _ = writeln!(out, "\nno threshold change");
    } else if r.written {
        let _ = writeln!(out, "\nwrote:\n{}", r.diff);
    } else {
        let _ = writeln!(out, "\nwould write (run with --write):\n{}", r.diff);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(same: bool, cosine: f64, refused: Option<&'static str>) -> Measured {
        Measured {
            a: String::new(),
            b: String::new(),
            same,
            kind: "k".into(),
            cosine,
            refused,
        }
    }

    #[test]
    fn the_check_lets_a_lower_threshold_keep_precision() {
        // A look-alike at 0.99 that the check refuses; paraphrases from 0.80 up, one above the
        // look-alike, so cosine alone reaches the precision only above 0.99.
        let set = [
            m(false, 0.99, Some("direction")),
            m(false, 0.70, None),
            m(true, 0.80, None),
            m(true, 0.85, None),
            m(true, 0.95, None),
            m(true, 0.995, None),
        ];
        let refs: Vec<&Measured> = set.iter().collect();
        let with = fit_threshold(&refs, DEFAULT_OBJECTIVE, 0.92, true).unwrap_or(1.0);
        let alone = fit_threshold(&refs, DEFAULT_OBJECTIVE, 0.92, false).unwrap_or(0.0);
        assert!(with <= 0.8 && with > 0.7, "{with}");
        assert!(alone > 0.99, "{alone}");
        let r = rates(&refs, with);
        assert_eq!((r.hit_rate, r.false_hit_rate), (1.0, 0.0));
        assert_eq!(r.cosine_only_false_hit_rate, 0.5);
    }

    #[test]
    fn pairs_need_both_labels() {
        let dir = std::env::temp_dir().join(format!("src-pairs-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("p.jsonl");
        let _ = std::fs::write(&path, "{\"a\":\"x\",\"b\":\"y\",\"same\":true}\n");
        assert!(read(&path).is_err());
        let _ = std::fs::write(
            &path,
            "{\"a\":\"x\",\"b\":\"y\",\"same\":true}\n\n{\"a\":\"x\",\"b\":\"z\",\"same\":false,\"kind\":\"numbers\"}\n",
        );
        let pairs = read(&path).unwrap_or_default();
        assert_eq!(pairs.len(), 2);
        assert_eq!(pairs[1].kind.as_deref(), Some("numbers"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
