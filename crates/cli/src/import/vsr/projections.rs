//! A recipe's projections as boolean signals. A `PROJECTION score` is a weighted sum over
//! signals and a `PROJECTION mapping` cuts it into threshold bands; a route reads a band as
//! `projection("band")`. The language has no number made from a boolean, but every input of a
//! score is a signal that holds or not, so a band holds on a set of input combinations, and that
//! set is a boolean formula over the input signals. With few inputs the combinations can be
//! enumerated: each band becomes `signal band = <formula>`, equal to the band on every
//! combination.
//!
//! An input's value when its signal holds is `match` (1 unless given) or, with
//! `value_source: "confidence"`, the signal's confidence: 1 for a keyword rule, from its
//! threshold to 1 for an embedding or jailbreak rule, some value in [0, 1] for others. A band is
//! translated only when the sum's whole range decides it on every combination: where it depends
//! on a confidence's exact value, the band is reported, with the combination.

use super::signals::{Sig, Signals};
use super::syntax::{get, Projection, Signal, Val};
use crate::import::emit::{comment, Names};
use crate::import::Translation;
use std::fmt::Write as _;

/// Past this many inputs a score is not enumerated (2^N combinations).
const MAX_INPUTS: usize = 14;

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

/// A boolean formula over the inputs, as built from a truth table.
#[derive(Debug, Clone, PartialEq)]
pub enum Formula {
    True,
    False,
    /// Input `i` holds (`true`) or does not (`false`).
    Var(usize, bool),
    And(Vec<Formula>),
    Or(Vec<Formula>),
}

impl Formula {
    fn and(a: Formula, b: Formula) -> Formula {
        match (a, b) {
            (Formula::False, _) | (_, Formula::False) => Formula::False,
            (Formula::True, x) | (x, Formula::True) => x,
            (Formula::And(mut xs), Formula::And(ys)) => {
                xs.extend(ys);
                Formula::And(xs)
            }
            (Formula::And(mut xs), y) => {
                xs.push(y);
                Formula::And(xs)
            }
            (x, Formula::And(mut ys)) => {
                ys.insert(0, x);
                Formula::And(ys)
            }
            (x, y) => Formula::And(vec![x, y]),
        }
    }

    fn or(a: Formula, b: Formula) -> Formula {
        match (a, b) {
            (Formula::True, _) | (_, Formula::True) => Formula::True,
            (Formula::False, x) | (x, Formula::False) => x,
            (Formula::Or(mut xs), Formula::Or(ys)) => {
                xs.extend(ys);
                Formula::Or(xs)
            }
            (Formula::Or(mut xs), y) => {
                xs.push(y);
                Formula::Or(xs)
            }
            (x, Formula::Or(mut ys)) => {
                ys.insert(0, x);
                Formula::Or(ys)
            }
            (x, y) => Formula::Or(vec![x, y]),
        }
    }

    /// The formula's value when input `i` holds exactly where bit `i` of `mask` is set.
    #[cfg(test)]
    pub fn eval(&self, mask: usize) -> bool {
        match self {
            Formula::True => true,
            Formula::False => false,
            Formula::Var(i, held) => (mask >> i & 1 == 1) == *held,
            Formula::And(xs) => xs.iter().all(|x| x.eval(mask)),
            Formula::Or(xs) => xs.iter().any(|x| x.eval(mask)),
        }
    }

    /// `.sr` text, with `names[i]` for input `i`.
    pub fn render(&self, names: &[String]) -> String {
        match self {
            Formula::True => "true".into(),
            Formula::False => "false".into(),
            Formula::Var(i, true) => names[*i].clone(),
            Formula::Var(i, false) => format!("not {}", names[*i]),
            Formula::And(xs) => xs
                .iter()
                .map(|x| match x {
                    Formula::Or(_) => format!("({})", x.render(names)),
                    _ => x.render(names),
                })
                .collect::<Vec<_>>()
                .join(" and "),
            Formula::Or(xs) => xs
                .iter()
                .map(|x| x.render(names))
                .collect::<Vec<_>>()
                .join(" or "),
        }
    }
}

/// The formula equal to `table` (entry `m` is the value where input `order[j]` holds exactly
/// where bit `order[j]` of `m` is set), splitting on the inputs in `order`, first the first.
pub fn formula(table: &[bool], order: &[usize]) -> Formula {
    // Re-index the table so that the first variable to split on is the highest bit.
    let n = order.len();
    let mut sorted = vec![false; table.len()];
    for (m, value) in table.iter().enumerate() {
        let mut k = 0usize;
        for (j, var) in order.iter().enumerate() {
            if m >> var & 1 == 1 {
                k |= 1 << (n - 1 - j);
            }
        }
        sorted[k] = *value;
    }
    split(&sorted, order)
}

/// Shannon expansion of `table` on `order[0]` (the table's highest bit), then the rest.
fn split(table: &[bool], order: &[usize]) -> Formula {
    if table.iter().all(|v| *v) {
        return Formula::True;
    }
    if !table.iter().any(|v| *v) {
        return Formula::False;
    }
    let half = table.len() / 2;
    let (without, with) = table.split_at(half);
    let var = order[0];
    let rest = &order[1..];
    if without == with {
        return split(without, rest);
    }
    let f0 = split(without, rest);
    let f1 = split(with, rest);
    let holds = Formula::Var(var, true);
    let not = Formula::Var(var, false);
    let implies = |a: &[bool], b: &[bool]| a.iter().zip(b).all(|(x, y)| !x || *y);
    if implies(without, with) {
        // Monotone in this input: what holds without it, or it and what it adds.
        Formula::or(Formula::and(holds, f1), f0)
    } else if implies(with, without) {
        Formula::or(f1, Formula::and(not, f0))
    } else {
        Formula::or(Formula::and(holds, f1), Formula::and(not, f0))
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
        let why = if p.kind == "partition" {
            "a partition keeps the one member whose confidence wins a softmax over the members', \
             and confidences are not read as numbers here; a `classifier` over the members \
             stands in for that choice"
        } else {
            "only `score` (a weighted sum) and `mapping` (its threshold bands) have a counterpart"
        };
        out.skip(
            file,
            p.decl.line,
            format!("PROJECTION {} {}", p.kind, p.name),
            why,
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
            match band_formula(&inputs, &band) {
                Ok(formula) => {
                    let ident = names.fresh(name);
                    let idents: Vec<String> = inputs.iter().map(|i| i.ident.clone()).collect();
                    let terms: Vec<String> = inputs
                        .iter()
                        .map(|i| {
                            let value = if i.held.0 == i.held.1 {
                                format!("{}", i.held.0)
                            } else {
                                format!("[{}, {}]", i.held.0, i.held.1)
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
        let (held, missed, range_why) = if source == "confidence" {
            let decl = recipe_signals
                .iter()
                .find(|s| s.kind == kind && s.name == name)
                .map(|s| s.decl.fields.as_slice())
                .unwrap_or_default();
            let (lo, hi, why) = confidence(kind, decl);
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

/// The range of a signal's confidence when it holds, and why it is a range. The router scores
/// keyword rules 1 (they record no confidence of their own, and a matched input without one
/// counts 1); an embedding rule by its similarity and a jailbreak rule by its risk, both at
/// least the rule's threshold when it matched; any other signal somewhere in [0, 1].
fn confidence(kind: &str, f: &[(String, Val)]) -> (f64, f64, Option<String>) {
    match kind {
        "keyword" | "authz" => (1.0, 1.0, None),
        "embedding" | "jailbreak" => {
            let t = get(f, "threshold")
                .and_then(Val::as_num)
                .unwrap_or(0.0)
                .clamp(0.0, 1.0);
            (
                t,
                1.0,
                Some(format!(
                    "its confidence is its score, from its threshold {t} to 1"
                )),
            )
        }
        _ => (
            0.0,
            1.0,
            Some("its confidence can be any value in [0, 1]".into()),
        ),
    }
}

/// The formula for `band` over `inputs`, or why the combinations do not decide it.
fn band_formula(inputs: &[Input], band: &Band) -> Result<Formula, String> {
    let n = inputs.len();
    let mut table = Vec::with_capacity(1 << n);
    for mask in 0..1usize << n {
        // Summed in the recipe's order, as the router sums them.
        let (mut lo, mut hi) = (0.0f64, 0.0f64);
        for (j, i) in inputs.iter().enumerate() {
            let (a, b) = if mask >> j & 1 == 1 {
                (i.weight * i.held.0, i.weight * i.held.1)
            } else {
                (i.weight * i.missed, i.weight * i.missed)
            };
            lo += a.min(b);
            hi += a.max(b);
        }
        match band.decides(lo, hi) {
            Some(v) => table.push(v),
            None => {
                let held: Vec<String> = inputs
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| mask >> j & 1 == 1)
                    .map(|(_, i)| i.what.clone())
                    .collect();
                let why: Vec<String> = inputs
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| mask >> j & 1 == 1)
                    .filter_map(|(_, i)| i.range_why.as_ref().map(|w| format!("`{}`: {w}", i.what)))
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
    let mut order: Vec<usize> = (0..n).collect();
    let reach = |i: &Input| {
        (i.weight * (i.held.1 - i.missed))
            .abs()
            .max((i.weight * (i.held.0 - i.missed)).abs())
    };
    order.sort_by(|a, b| reach(&inputs[*b]).total_cmp(&reach(&inputs[*a])));
    Ok(formula(&table, &order))
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
        }
    }

    /// The weighted sum of boolean inputs, as the router computes it.
    fn sum(weights: &[f64], mask: usize) -> f64 {
        let mut total = 0.0;
        for (j, w) in weights.iter().enumerate() {
            if mask >> j & 1 == 1 {
                total += w;
            }
        }
        total
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
            let f = band_formula(&inputs, band).expect("boolean inputs decide every band");
            for mask in 0..1 << weights.len() {
                let s = sum(&weights, mask);
                let inside = band.above_lower(s) && band.below_upper(s);
                assert_eq!(
                    f.eval(mask),
                    inside,
                    "mask {mask:b}, sum {s}, band {}",
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
        let f = band_formula(&inputs, &band).expect("decided");
        assert_eq!(f, Formula::Var(0, true));
        assert_eq!(f.render(&["a".into(), "b".into()]), "a");
        // With the band at 0.4, the first alone lies in [0.33, 0.6]: it depends.
        let band = Band {
            gte: Some(0.4),
            ..Band::default()
        };
        let err = band_formula(&inputs, &band).expect_err("undecided");
        assert!(err.contains("[0.3300, 0.6000]"), "{err}");
    }

    #[test]
    fn formulas_read_as_the_sum_does() {
        // a + b >= 1 with weights 0.5 each: both.
        let inputs = vec![input(0.5, (1.0, 1.0)), input(0.5, (1.0, 1.0))];
        let band = Band {
            gte: Some(1.0),
            ..Band::default()
        };
        let names = ["a".to_string(), "b".to_string()];
        assert_eq!(
            band_formula(&inputs, &band).expect("ok").render(&names),
            "a and b"
        );
        let band = Band {
            gte: Some(0.5),
            ..Band::default()
        };
        assert_eq!(
            band_formula(&inputs, &band).expect("ok").render(&names),
            "a or b"
        );
        let band = Band {
            lt: Some(0.5),
            ..Band::default()
        };
        assert_eq!(
            band_formula(&inputs, &band).expect("ok").render(&names),
            "not a and not b"
        );
    }
}
