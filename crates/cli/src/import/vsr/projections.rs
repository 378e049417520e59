//! A recipe's projections as boolean signals. A `PROJECTION score` is a weighted sum over
//! signals and a `PROJECTION mapping` cuts it into threshold bands; a route reads a band as
//! `projection("band")`. The language has no number made from a boolean, but every input of a
//! score is a signal that holds or not, so a band holds on a set of input combinations, and that
//! set is a boolean formula over the input signals ([`super::formula`]). With few inputs the
//! combinations can be enumerated: each band becomes `signal band = <formula>`, equal to the
//! band on every combination.
//!
//! An input's value when its signal holds is `match` (1 unless given) or, with
//! `value_source: "confidence"`, the signal's confidence: for a regex keyword rule that is
//! 0.5 + 0.5 × the share of its keywords that matched, for other signals some value in [0, 1].
//! A band is first enumerated with each confidence as its range; where the range leaves it
//! open, it is enumerated again over how many of each keyword rule's keywords match (an int
//! signal counting them). A band still open on some combination is reported, with it.

use super::formula::{formula, Formula};
use super::signals::{Sig, Signals};
use super::syntax::{get, Projection, Signal, Val};
use crate::import::emit::{comment, quote, quote_list, Names};
use crate::import::Translation;
use std::fmt::Write as _;

/// Past this many inputs a score is not enumerated (2^N combinations).
const MAX_INPUTS: usize = 14;

/// Past this many combinations (counts of keywords included) a band is not enumerated.
const MAX_COMBINATIONS: usize = 1 << 16;

/// One input of a score: the `.sr` signal, and the value it adds when it holds (a range) or not.
#[derive(Debug, Clone)]
struct Input {
    /// How the recipe names it (`keyword("x")`).
    what: String,
    ident: String,
    weight: f64,
    /// The input's value when its signal holds: the least and the most it can be.
    held: (f64, f64),
    /// Its value when the signal does not hold.
    missed: f64,
    /// Why the value when it holds is a range, for the report.
    range_why: Option<String>,
    /// For a keyword rule's confidence: how many keywords it has, and the `.sr` expression
    /// counting those that match (its confidence is 0.5 + 0.5 × count / N).
    counted: Option<(usize, String)>,
}

impl Input {
    /// How many states the input has when enumerated (`counts`: by its keyword count).
    fn card(&self, counts: bool) -> usize {
        match &self.counted {
            Some((n, _)) if counts => n + 1,
            _ => 2,
        }
    }

    /// The least and the most it adds to the score in `state`.
    fn adds(&self, state: usize, counts: bool) -> (f64, f64) {
        let (a, b) = match &self.counted {
            Some((n, _)) if counts => {
                let v = if state == 0 {
                    0.0
                } else {
                    0.5 + 0.5 * state as f64 / *n as f64
                };
                (v, v)
            }
            _ if state == 1 => self.held,
            _ => (self.missed, self.missed),
        };
        let (x, y) = (self.weight * a, self.weight * b);
        (x.min(y), x.max(y))
    }
}

/// The bounds of one band.
#[derive(Debug, Clone, Copy, Default)]
struct Band {
    gte: Option<f64>,
    gt: Option<f64>,
    lt: Option<f64>,
    lte: Option<f64>,
}

impl Band {
    fn of(v: &Val) -> Band {
        let n = |k: &str| v.get(k).and_then(Val::as_num);
        Band {
            gte: n("gte"),
            gt: n("gt"),
            lt: n("lt"),
            lte: n("lte"),
        }
    }

    /// `x` is not below the band.
    fn above_lower(&self, x: f64) -> bool {
        self.gte.is_none_or(|a| x >= a) && self.gt.is_none_or(|a| x > a)
    }

    /// `x` is not above the band.
    fn below_upper(&self, x: f64) -> bool {
        self.lt.is_none_or(|b| x < b) && self.lte.is_none_or(|b| x <= b)
    }

    /// Whether every sum in `[lo, hi]` is in the band (`Some(true)`), none is (`Some(false)`),
    /// or it depends on where in the range the sum lies (`None`). The band is an interval.
    fn decides(&self, lo: f64, hi: f64) -> Option<bool> {
        if self.above_lower(lo) && self.below_upper(hi) {
            Some(true)
        } else if !self.above_lower(hi) || !self.below_upper(lo) {
            Some(false)
        } else {
            None
        }
    }

    fn describe(&self) -> String {
        let mut parts = Vec::new();
        for (op, v) in [
            (">=", self.gte),
            (">", self.gt),
            ("<", self.lt),
            ("<=", self.lte),
        ] {
            if let Some(v) = v {
                parts.push(format!("{op} {v}"));
            }
        }
        parts.join(" and ")
    }
}

/// Translates the recipe's projections: each band of a mapping whose score's inputs all
/// translated, and whose membership the combinations of those inputs decide, becomes a signal.
pub fn translate(
    file: &str,
    projections: &[Projection],
    recipe_signals: &[Signal],
    sigs: &mut Signals,
    names: &mut Names,
    out: &mut Translation,
) {
    for p in projections
        .iter()
        .filter(|p| p.kind != "score" && p.kind != "mapping")
    {
        out.skip(
            file,
            p.decl.line,
            format!("PROJECTION {} {}", p.kind, p.name),
            "only `score` (a weighted sum) and `mapping` (its threshold bands) have a counterpart",
        );
    }
    let source_of = |m: &Projection| {
        get(&m.decl.fields, "source")
            .and_then(Val::as_str)
            .map(str::to_string)
    };
    for s in projections.iter().filter(|p| p.kind == "score") {
        let read = projections
            .iter()
            .any(|m| m.kind == "mapping" && source_of(m).as_deref() == Some(s.name.as_str()));
        if !read {
            out.skip(
                file,
                s.decl.line,
                format!("PROJECTION score {}", s.name),
                "no `PROJECTION mapping` cuts it into bands, and a route reads only bands",
            );
        }
    }
    let mut text = String::new();
    // The count signal of each keyword rule whose count a band reads: signal → counter.
    let mut counters: std::collections::HashMap<String, String> = Default::default();
    for m in projections.iter().filter(|p| p.kind == "mapping") {
        let f = &m.decl.fields;
        let what = format!("PROJECTION mapping {}", m.name);
        let method = get(f, "method")
            .and_then(Val::as_str)
            .unwrap_or("threshold_bands");
        if method != "threshold_bands" {
            out.skip(
                file,
                m.decl.line,
                what,
                format!("a `{method}` mapping: only `threshold_bands` has a counterpart"),
            );
            continue;
        }
        let source = get(f, "source").and_then(Val::as_str).unwrap_or_default();
        let Some(score) = projections
            .iter()
            .find(|p| p.kind == "score" && p.name == source)
        else {
            out.skip(
                file,
                m.decl.line,
                what,
                format!("its score `{source}` is not a `PROJECTION score` of the recipe"),
            );
            continue;
        };
        let inputs = match inputs(score, recipe_signals, sigs) {
            Ok(i) => i,
            Err(why) => {
                out.skip(
                    file,
                    score.decl.line,
                    format!("PROJECTION score {}", score.name),
                    why.clone(),
                );
                out.skip(
                    file,
                    m.decl.line,
                    what,
                    format!("its score `{source}` was not translated"),
                );
                continue;
            }
        };
        let outputs = get(f, "outputs").map(Val::as_list).unwrap_or_default();
        for o in outputs {
            let Some(name) = o.get("name").and_then(Val::as_str) else {
                continue;
            };
            let band = Band::of(o);
            let found = band_formula(&inputs, &band, false)
                .map(|f| (f, false))
                .or_else(|why| {
                    if inputs.iter().any(|i| i.counted.is_some()) {
                        band_formula(&inputs, &band, true).map(|f| (f, true))
                    } else {
                        Err(why)
                    }
                });
            match found {
                Ok((formula, counts)) => {
                    let ident = names.fresh(name);
                    let mut idents = Vec::new();
                    for i in &inputs {
                        match (&i.counted, counts) {
                            (Some((_, expr)), true) => {
                                let hits = counters.entry(i.ident.clone()).or_insert_with(|| {
                                    let hits = names.fresh(&format!("{}_hits", i.ident));
                                    let _ = writeln!(
                                        text,
                                        "# How many of `{}`'s keywords match (its confidence counts them).\nsignal {hits} = {expr}\n",
                                        i.ident
                                    );
                                    hits
                                });
                                idents.push(hits.clone());
                            }
                            _ => idents.push(i.ident.clone()),
                        }
                    }
                    let terms: Vec<String> = inputs
                        .iter()
                        .map(|i| {
                            let value = match (&i.counted, counts) {
                                (Some((n, _)), true) => format!("0.5 + 0.5 × count / {n}"),
                                _ if i.held.0 == i.held.1 => format!("{}", i.held.0),
                                _ => format!("[{}, {}]", i.held.0, i.held.1),
                            };
                            let miss = if i.missed == 0.0 {
                                String::new()
                            } else {
                                format!(", else {}", i.missed)
                            };
                            format!("{} × {} ({value}{miss})", i.weight, i.ident)
                        })
                        .collect();
                    text.push_str(&comment(
                        "",
                        &format!(
                            "Band `{name}` of `{}`: {source} = {} is {}.\n\
                             On every combination of these signals this holds exactly where the band does.",
                            m.name,
                            terms.join(" + "),
                            band.describe()
                        ),
                    ));
                    let _ = writeln!(text, "signal {ident} = {}\n", formula.render(&idents));
                    sigs.map.insert(
                        ("projection".to_string(), name.to_string()),
                        Sig { ident, given: None },
                    );
                }
                Err(why) => out.skip(
                    file,
                    m.decl.line,
                    format!("PROJECTION mapping {} band {name}", m.name),
                    why,
                ),
            }
        }
        if let Some(c) = get(f, "calibration") {
            let method = c.get("method").and_then(Val::as_str).unwrap_or("?");
            out.decisions.push(format!(
                "mapping `{}` calibrates its bands' confidence (`{method}`); a band here holds or not, \
                 and its confidence is not carried",
                m.name
            ));
        }
    }
    sigs.text.push_str(&text);
}

/// The score's inputs, each bound to its translated signal.
fn inputs(
    score: &Projection,
    recipe_signals: &[Signal],
    sigs: &Signals,
) -> Result<Vec<Input>, String> {
    let f = &score.decl.fields;
    let method = get(f, "method")
        .and_then(Val::as_str)
        .unwrap_or("weighted_sum");
    if method != "weighted_sum" {
        return Err(format!(
            "a `{method}` score: only `weighted_sum` has a counterpart"
        ));
    }
    let list = get(f, "inputs").map(Val::as_list).unwrap_or_default();
    if list.len() > MAX_INPUTS {
        return Err(format!(
            "{} inputs: a band is enumerated over every combination of its inputs, {MAX_INPUTS} at most",
            list.len()
        ));
    }
    let mut out = Vec::new();
    let mut missing = Vec::new();
    for i in list {
        let kind = i.get("type").and_then(Val::as_str).unwrap_or_default();
        let name = i.get("name").and_then(Val::as_str).unwrap_or_default();
        let what = format!("{kind}(\"{name}\")");
        let weight = i.get("weight").and_then(Val::as_num).unwrap_or(0.0);
        if weight == 0.0 {
            continue;
        }
        let source = i
            .get("value_source")
            .and_then(Val::as_str)
            .unwrap_or("")
            .to_lowercase();
        if kind == "projection" || kind == "kb_metric" || source == "raw" {
            missing.push(format!(
                "`{what}` (a numeric value, not a signal that holds or not)"
            ));
            continue;
        }
        let Some(sig) = sigs.map.get(&(kind.to_string(), name.to_string())) else {
            missing.push(format!("`{what}` (not translated)"));
            continue;
        };
        let mut counted = None;
        let (held, missed, range_why) = if source == "confidence" {
            let decl = recipe_signals
                .iter()
                .find(|s| s.kind == kind && s.name == name)
                .map(|s| s.decl.fields.as_slice())
                .unwrap_or_default();
            let (lo, hi, why) = confidence(kind, decl);
            counted = counter(kind, decl);
            ((lo, hi), 0.0, why)
        } else {
            let matched = i
                .get("match")
                .and_then(Val::as_num)
                .filter(|m| *m != 0.0)
                .unwrap_or(1.0);
            let miss = i.get("miss").and_then(Val::as_num).unwrap_or(0.0);
            ((matched, matched), miss, None)
        };
        out.push(Input {
            what,
            ident: sig.ident.clone(),
            weight,
            held,
            missed,
            range_why,
            counted,
        });
    }
    if !missing.is_empty() {
        return Err(format!(
            "its inputs {} have no boolean counterpart",
            missing.join(", ")
        ));
    }
    if out.is_empty() {
        return Err("no input with a weight".into());
    }
    Ok(out)
}

/// The range of a signal's confidence when it holds, and why it is a range.
fn confidence(kind: &str, f: &[(String, Val)]) -> (f64, f64, Option<String>) {
    let method = get(f, "method")
        .and_then(Val::as_str)
        .unwrap_or("regex")
        .to_lowercase();
    if kind == "keyword" && method != "bm25" && method != "ngram" {
        let n = get(f, "keywords")
            .map(Val::as_list)
            .unwrap_or_default()
            .len()
            .max(1);
        let operator = get(f, "operator")
            .and_then(Val::as_str)
            .unwrap_or("OR")
            .to_uppercase();
        return match operator.as_str() {
            // Every keyword matched, or none of them did.
            "AND" => (1.0, 1.0, None),
            "NOR" => (0.5, 0.5, None),
            _ if n == 1 => (1.0, 1.0, None),
            _ => (
                0.5 + 0.5 / n as f64,
                1.0,
                Some(format!(
                    "its confidence grows with how many of its {n} keywords match"
                )),
            ),
        };
    }
    (
        0.0,
        1.0,
        Some("its confidence can be any value in [0, 1]".into()),
    )
}

/// For an `OR` keyword rule of several keywords read by its confidence, without fuzzy
/// matching: its keyword count and an int expression counting the keywords that match (each
/// once, as the router counts them).
fn counter(kind: &str, f: &[(String, Val)]) -> Option<(usize, String)> {
    let method = get(f, "method")
        .and_then(Val::as_str)
        .unwrap_or("")
        .to_lowercase();
    let operator = get(f, "operator")
        .and_then(Val::as_str)
        .unwrap_or("OR")
        .to_uppercase();
    let words = get(f, "keywords").map(Val::strings).unwrap_or_default();
    if kind != "keyword"
        || operator != "OR"
        || words.len() < 2
        || !matches!(method.as_str(), "" | "regex")
        || get(f, "fuzzy_match") == Some(&Val::Bool(true))
    {
        return None;
    }
    let case_sensitive = get(f, "case_sensitive") == Some(&Val::Bool(true));
    let expr = if method == "regex" || case_sensitive {
        words
            .iter()
            .map(|w| {
                let re = match (method == "regex", case_sensitive) {
                    (true, true) => w.clone(),
                    (true, false) => format!("(?i){w}"),
                    _ => super::signals::literal(w),
                };
                format!("min(count(prompt, {}), 1)", quote(&re))
            })
            .collect::<Vec<_>>()
            .join(" + ")
    } else {
        format!("hits(prompt, {})", quote_list(&words))
    };
    Some((words.len(), expr))
}

/// The formula for `band` over `inputs` (with `counts`, over how many keywords of each counted
/// input match), or why the combinations do not decide it.
fn band_formula(inputs: &[Input], band: &Band, counts: bool) -> Result<Formula, String> {
    let cards: Vec<usize> = inputs.iter().map(|i| i.card(counts)).collect();
    let total = cards
        .iter()
        .try_fold(1usize, |acc, c| {
            acc.checked_mul(*c).filter(|t| *t <= MAX_COMBINATIONS)
        })
        .ok_or_else(|| {
            format!("its inputs have more than {MAX_COMBINATIONS} combinations to enumerate")
        })?;
    let mut table = Vec::with_capacity(total);
    for m in 0..total {
        let mut rest = m;
        let states: Vec<usize> = cards
            .iter()
            .map(|c| {
                let s = rest % c;
                rest /= c;
                s
            })
            .collect();
        // Summed in the recipe's order, as the router sums them.
        let (mut lo, mut hi) = (0.0f64, 0.0f64);
        for (i, state) in inputs.iter().zip(&states) {
            let (a, b) = i.adds(*state, counts);
            lo += a;
            hi += b;
        }
        match band.decides(lo, hi) {
            Some(v) => table.push(v),
            None => {
                let held: Vec<String> = inputs
                    .iter()
                    .zip(&states)
                    .filter(|(_, s)| **s > 0)
                    .map(|(i, s)| match (&i.counted, counts) {
                        (Some(_), true) => format!("{} ({s} keywords)", i.what),
                        _ => i.what.clone(),
                    })
                    .collect();
                let why: Vec<String> = inputs
                    .iter()
                    .zip(&states)
                    .filter(|(i, s)| **s > 0 && !(counts && i.counted.is_some()))
                    .filter_map(|(i, _)| i.range_why.as_ref().map(|w| format!("`{}`: {w}", i.what)))
                    .collect();
                return Err(format!(
                    "where {} and no other input holds, the score lies in [{lo:.4}, {hi:.4}] and the band ({}) \
                     depends on where: {}",
                    if held.is_empty() { "nothing".to_string() } else { held.join(", ") },
                    band.describe(),
                    why.join("; ")
                ));
            }
        }
    }
    // Split first on the inputs that move the score most.
    let mut order: Vec<usize> = (0..inputs.len()).collect();
    let reach = |i: &Input| {
        (i.weight * (i.held.1 - i.missed))
            .abs()
            .max((i.weight * (i.held.0 - i.missed)).abs())
    };
    order.sort_by(|a, b| reach(&inputs[*b]).total_cmp(&reach(&inputs[*a])));
    Ok(formula(&table, &cards, &order))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(weight: f64, held: (f64, f64)) -> Input {
        Input {
            what: "x".into(),
            ident: "x".into(),
            weight,
            held,
            missed: 0.0,
            range_why: None,
            counted: None,
        }
    }

    #[test]
    fn each_band_formula_equals_the_band_on_every_combination() {
        let weights = [0.36, 0.24, -0.46, 0.18, 0.3, 0.06];
        let bands = [
            Band {
                gte: Some(0.24),
                lt: Some(0.55),
                ..Band::default()
            },
            Band {
                gte: Some(0.55),
                lt: Some(0.85),
                ..Band::default()
            },
            Band {
                gte: Some(0.85),
                ..Band::default()
            },
            Band {
                lt: Some(0.0),
                ..Band::default()
            },
        ];
        let inputs: Vec<Input> = weights.iter().map(|w| input(*w, (1.0, 1.0))).collect();
        for band in &bands {
            let f = band_formula(&inputs, band, false).expect("boolean inputs decide every band");
            for mask in 0..1usize << weights.len() {
                let states: Vec<usize> = (0..weights.len()).map(|j| mask >> j & 1).collect();
                let mut sum = 0.0;
                for (w, s) in weights.iter().zip(&states) {
                    sum += w * *s as f64;
                }
                let inside = band.above_lower(sum) && band.below_upper(sum);
                assert_eq!(
                    f.eval(&states),
                    inside,
                    "{states:?}, sum {sum}, band {}",
                    band.describe()
                );
            }
        }
    }

    #[test]
    fn a_confidence_that_cannot_change_the_band_still_translates() {
        // 0.6 × a keyword's confidence (at least 0.55 of ten keywords) + 0.2 × another's: the
        // band `>= 0.3` holds exactly where the first matched.
        let inputs = vec![input(0.6, (0.55, 1.0)), input(0.2, (0.55, 1.0))];
        let band = Band {
            gte: Some(0.3),
            ..Band::default()
        };
        let f = band_formula(&inputs, &band, false).expect("decided");
        assert_eq!(f, Formula::Var(0, true));
        assert_eq!(f.render(&["a".into(), "b".into()]), "a");
        // With the band at 0.4, the first alone lies in [0.33, 0.6]: it depends.
        let band = Band {
            gte: Some(0.4),
            ..Band::default()
        };
        let err = band_formula(&inputs, &band, false).expect_err("undecided");
        assert!(err.contains("[0.3300, 0.6000]"), "{err}");
    }

    #[test]
    fn a_band_open_on_a_confidence_is_decided_by_counting_keywords() {
        // 0.6 × the confidence of a rule of 12 keywords + 0.35 × a signal: `>= 0.35` needs two
        // of the keywords alone (0.6 × (0.5 + 0.5 × 2/12) = 0.35), one with the signal.
        let fields = super::super::syntax::parse(
            "t",
            r#"SIGNAL keyword k { operator: "OR" method: "regex" keywords: ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"] }"#,
            None,
        )
        .expect("parses")
        .signals[0]
            .decl
            .fields
            .clone();
        let (lo, hi, why) = confidence("keyword", &fields);
        let mut heavy = input(0.6, (lo, hi));
        heavy.range_why = why;
        heavy.counted = counter("keyword", &fields);
        let inputs = vec![heavy, input(0.35, (1.0, 1.0))];
        let band = Band {
            gte: Some(0.35),
            ..Band::default()
        };
        assert!(band_formula(&inputs, &band, false).is_err());
        let f = band_formula(&inputs, &band, true).expect("decided by the count");
        for count in 0..=12usize {
            for other in 0..2usize {
                let conf = if count == 0 {
                    0.0
                } else {
                    0.5 + 0.5 * count as f64 / 12.0
                };
                let mut sum = 0.0;
                sum += 0.6 * conf;
                sum += 0.35 * other as f64;
                assert_eq!(
                    f.eval(&[count, other]),
                    sum >= 0.35,
                    "{count} keywords, {other}"
                );
            }
        }
        assert_eq!(f.render(&["k_hits".into(), "s".into()]), "s or k_hits >= 2");
        let (n, expr) = counter("keyword", &fields).expect("counted");
        assert_eq!(n, 12);
        assert!(
            expr.starts_with(r#"min(count(prompt, "(?i)a"), 1) + min(count(prompt, "(?i)b"), 1)"#),
            "{expr}"
        );
        // Phrases, case-insensitive, are counted as distinct phrases.
        let plain = vec![(
            "keywords".to_string(),
            Val::List(vec![Val::Str("x y".into()), Val::Str("z".into())]),
        )];
        assert_eq!(
            counter("keyword", &plain).map(|c| c.1),
            Some(r#"hits(prompt, ["x y", "z"])"#.to_string())
        );
    }
}
