//! Fitting one threshold: sweep every cut point the observed scores allow and keep the one the
//! objective likes best, written as the shortest decimal that makes the same cut.
//!
//! Sorted distinct scores `u0 < u1 < … < u(m-1)` allow `m + 1` cuts: cut `j` calls the scores
//! from `uj` up positive (for `>` and `>=`; below `uj` for `<` and `<=`). Each cut is a whole
//! interval of thresholds that classify the observed scores alike, `[u(j-1), uj)` for `>` and
//! `<=`, `(u(j-1), uj]` for `>=` and `<`; the literal written is the decimal with the fewest
//! digits inside it, so writing it back and fitting again gives the same text. Among cuts the
//! objective rates equal, the one nearest the threshold in force wins: a refit on the same data
//! moves nothing.

use super::metrics::Counts;
use anyhow::{anyhow, bail, Result};

/// A comparison with the score on the left (`score > threshold`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Gt,
    Ge,
    Lt,
    Le,
}

impl Op {
    pub fn holds(self, score: f64, threshold: f64) -> bool {
        match self {
            Op::Gt => score > threshold,
            Op::Ge => score >= threshold,
            Op::Lt => score < threshold,
            Op::Le => score <= threshold,
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
        }
    }
}

/// What a fit maximises.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Objective {
    F1,
    /// The best recall with at least this precision (the best precision when none reaches it).
    Precision(f64),
    /// The best precision with at least this recall (the best recall when none reaches it).
    Recall(f64),
}

impl std::str::FromStr for Objective {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Objective> {
        let level = |v: &str| -> Result<f64> {
            let x: f64 = v.parse().map_err(|_| anyhow!("`{v}` is not a number"))?;
            if !(0.0..=1.0).contains(&x) {
                bail!("{x} is not in [0, 1]");
            }
            Ok(x)
        };
        match s.split_once('=') {
            None if s == "f1" => Ok(Objective::F1),
            Some(("precision", v)) => Ok(Objective::Precision(level(v)?)),
            Some(("recall", v)) => Ok(Objective::Recall(level(v)?)),
            _ => bail!("expected `f1`, `precision=P` or `recall=R`, got `{s}`"),
        }
    }
}

impl std::fmt::Display for Objective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Objective::F1 => write!(f, "f1"),
            Objective::Precision(p) => write!(f, "precision={p}"),
            Objective::Recall(r) => write!(f, "recall={r}"),
        }
    }
}

/// The values a threshold may take: `[0, 1]` for a score, `(0, 1]` for the `MIN` of `fuzzy`,
/// anything for a float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Domain {
    pub min: Option<f64>,
    /// Whether `min` itself is excluded.
    pub min_open: bool,
    pub max: Option<f64>,
}

impl Domain {
    pub const SCORE: Domain = Domain {
        min: Some(0.0),
        min_open: false,
        max: Some(1.0),
    };
    pub const FUZZY: Domain = Domain {
        min: Some(0.0),
        min_open: true,
        max: Some(1.0),
    };
    pub const FLOAT: Domain = Domain {
        min: None,
        min_open: false,
        max: None,
    };
}

/// The chosen threshold and how it does on the data it was fitted on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    pub threshold: f64,
    pub counts: Counts,
}

/// One end of an interval of thresholds.
#[derive(Debug, Clone, Copy, PartialEq)]
struct End {
    at: f64,
    closed: bool,
}

/// Fits a threshold for `score OP t` predicting `label` over `samples` (`(score, label)`).
/// `None` when there is nothing to fit on.
pub fn fit(
    samples: &[(f64, bool)],
    op: Op,
    objective: Objective,
    current: f64,
    domain: Domain,
) -> Option<Fit> {
    let mut values: Vec<f64> = samples
        .iter()
        .map(|s| s.0)
        .filter(|v| v.is_finite())
        .collect();
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    values.dedup();
    let mut best: Option<(Key, Fit)> = None;
    for j in 0..=values.len() {
        let lower = j.checked_sub(1).map(|i| values[i]);
        let upper = values.get(j).copied();
        let Some((lo, hi)) = interval(lower, upper, op, domain) else {
            continue;
        };
        let Some(threshold) = shortest_decimal(lo, hi) else {
            continue;
        };
        let counts = Counts::of(samples.iter().map(|&(s, l)| (op.holds(s, threshold), l)));
        let key = Key::new(objective, &counts, distance(lo, hi, current));
        if best.as_ref().is_none_or(|(k, _)| key.better_than(k)) {
            best = Some((key, Fit { threshold, counts }));
        }
    }
    best.map(|(_, f)| f)
}

/// The thresholds of the cut between `lower` and `upper` (either missing at the ends).
fn interval(lower: Option<f64>, upper: Option<f64>, op: Op, domain: Domain) -> Option<(End, End)> {
    // `>` and `<=` include the lower score in the interval; `>=` and `<` the upper one.
    let lower_closed = matches!(op, Op::Gt | Op::Le);
    let mut lo = match (lower, domain.min) {
        (Some(v), _) => End {
            at: v,
            closed: lower_closed,
        },
        (None, Some(min)) => End {
            at: min,
            closed: !domain.min_open,
        },
        (None, None) => End {
            at: upper? - 1.0,
            closed: true,
        },
    };
    let mut hi = match (upper, domain.max) {
        (Some(v), _) => End {
            at: v,
            closed: !lower_closed,
        },
        (None, Some(max)) => End {
            at: max,
            closed: true,
        },
        (None, None) => End {
            at: lower? + 1.0,
            closed: true,
        },
    };
    if let Some(min) = domain.min {
        if lo.at < min || (lo.at == min && domain.min_open) {
            lo = End {
                at: min,
                closed: !domain.min_open,
            };
        }
    }
    if let Some(max) = domain.max {
        if hi.at > max {
            hi = End {
                at: max,
                closed: true,
            };
        }
    }
    let empty = lo.at > hi.at || (lo.at == hi.at && !(lo.closed && hi.closed));
    (!empty).then_some((lo, hi))
}

fn inside(v: f64, lo: End, hi: End) -> bool {
    let above = if lo.closed { v >= lo.at } else { v > lo.at };
    let below = if hi.closed { v <= hi.at } else { v < hi.at };
    above && below
}

/// The decimal with the fewest digits in the interval, nearest its middle among those.
fn shortest_decimal(lo: End, hi: End) -> Option<f64> {
    let middle = (lo.at + hi.at) / 2.0;
    for digits in 0..=9 {
        let scale = 10f64.powi(digits);
        let first = (lo.at * scale).floor() as i64;
        let last = (hi.at * scale).ceil() as i64;
        if last - first > 1_000_000 {
            // A wide interval: its middle, rounded to this many digits, lies inside.
            let v = (middle * scale).round() / scale;
            if inside(v, lo, hi) {
                return Some(v);
            }
            continue;
        }
        let found = (first..=last)
            .map(|k| k as f64 / scale)
            .filter(|&v| inside(v, lo, hi))
            .min_by(|a, b| (a - middle).abs().total_cmp(&(b - middle).abs()));
        if found.is_some() {
            return found;
        }
    }
    [lo, hi].into_iter().find(|e| e.closed).map(|e| e.at)
}

/// How far the threshold in force is from an interval (0 inside it).
fn distance(lo: End, hi: End, current: f64) -> f64 {
    if current < lo.at {
        lo.at - current
    } else if current > hi.at {
        current - hi.at
    } else {
        0.0
    }
}

/// What ranks cuts: larger is better, compared in order, and then nearer the current threshold.
#[derive(Debug, Clone, Copy)]
struct Key {
    rank: [f64; 3],
    distance: f64,
}

impl Key {
    fn new(objective: Objective, c: &Counts, distance: f64) -> Key {
        let (p, r, f1) = (c.precision(), c.recall(), c.f1());
        let rank = match objective {
            Objective::F1 => [f1, 0.0, 0.0],
            Objective::Precision(level) if p >= level && c.tp > 0 => [1.0, r, f1],
            Objective::Precision(_) => [0.0, p, r],
            Objective::Recall(level) if r >= level => [1.0, p, f1],
            Objective::Recall(_) => [0.0, r, p],
        };
        Key { rank, distance }
    }

    fn better_than(&self, other: &Key) -> bool {
        for (a, b) in self.rank.iter().zip(&other.rank) {
            if a != b {
                return a > b;
            }
        }
        self.distance < other.distance
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(pos: &[f64], neg: &[f64]) -> Vec<(f64, bool)> {
        pos.iter()
            .map(|&s| (s, true))
            .chain(neg.iter().map(|&s| (s, false)))
            .collect()
    }

    #[test]
    fn a_separable_set_is_cut_between_its_classes() {
        // Positives at 0.861 and above, negatives at 0.86 and below: the only perfect cut is
        // between 0.86 and 0.861, far from the copied 0.5.
        let data = samples(&[0.861, 0.9, 0.95], &[0.2, 0.5, 0.856, 0.86]);
        for op in [Op::Gt, Op::Ge] {
            let f = fit(&data, op, Objective::F1, 0.5, Domain::SCORE).unwrap();
            assert_eq!(f.counts.f1(), 1.0, "{op:?}");
            assert!(
                f.threshold >= 0.86 && f.threshold <= 0.861,
                "{op:?} {}",
                f.threshold
            );
            assert!(data.iter().all(|&(s, l)| op.holds(s, f.threshold) == l));
        }
        let f = fit(&data, Op::Gt, Objective::F1, 0.5, Domain::SCORE).unwrap();
        assert_eq!(f.threshold, 0.86, "the shortest decimal of [0.86, 0.861)");
        let f = fit(&data, Op::Ge, Objective::F1, 0.5, Domain::SCORE).unwrap();
        assert_eq!(f.threshold, 0.861, "the shortest decimal of (0.86, 0.861]");
    }

    #[test]
    fn a_wide_gap_gets_a_short_literal() {
        let data = samples(&[0.71, 0.8], &[0.1, 0.33]);
        let f = fit(&data, Op::Gt, Objective::F1, 0.9, Domain::SCORE).unwrap();
        assert_eq!(f.threshold, 0.5);
        let f = fit(&data, Op::Lt, Objective::F1, 0.9, Domain::SCORE).unwrap();
        // `score < t` positive for low scores: the best is all wrong or the trivial cuts.
        assert!(f.counts.f1() < 1.0);
    }

    #[test]
    fn downward_comparisons_cut_the_other_way() {
        let data = samples(&[0.1, 0.2], &[0.6, 0.9]);
        for op in [Op::Lt, Op::Le] {
            let f = fit(&data, op, Objective::F1, 0.95, Domain::SCORE).unwrap();
            assert_eq!(f.counts.f1(), 1.0);
            assert!(data.iter().all(|&(s, l)| op.holds(s, f.threshold) == l));
        }
    }

    #[test]
    fn the_best_overlapping_cut_is_found() {
        // Scores 1..=10; positives are 4, 6, 7, 8, 9, 10 and the negatives 1, 2, 3, 5.
        // Cut at 4 (t in [3, 4)): tp 6, fp 1 → F1 12/13. Cut at 6: tp 5, fn 1 → F1 10/11.
        // 12/13 > 10/11, so the threshold lies in [3, 4).
        let data = samples(&[4.0, 6.0, 7.0, 8.0, 9.0, 10.0], &[1.0, 2.0, 3.0, 5.0]);
        let f = fit(&data, Op::Gt, Objective::F1, 0.0, Domain::FLOAT).unwrap();
        assert!((f.counts.f1() - 12.0 / 13.0).abs() < 1e-12);
        assert_eq!(f.threshold, 3.0);
        let f = fit(&data, Op::Ge, Objective::F1, 0.0, Domain::FLOAT).unwrap();
        assert_eq!(f.threshold, 4.0);
    }

    #[test]
    fn precision_and_recall_targets() {
        let data = samples(&[4.0, 6.0, 7.0, 8.0, 9.0, 10.0], &[1.0, 2.0, 3.0, 5.0]);
        // Precision 1 needs the cut above 5: the widest such cut keeps 5 of the 6 positives.
        let f = fit(&data, Op::Gt, Objective::Precision(1.0), 0.0, Domain::FLOAT).unwrap();
        assert_eq!((f.counts.tp, f.counts.fp), (5, 0));
        assert!(f.threshold >= 5.0 && f.threshold < 6.0);
        // Recall 1 needs everything from 4 up; the best precision with it cuts at 4.
        let f = fit(&data, Op::Gt, Objective::Recall(1.0), 0.0, Domain::FLOAT).unwrap();
        assert_eq!((f.counts.tp, f.counts.fp), (6, 1));
    }

    #[test]
    fn ties_keep_the_threshold_in_force() {
        // Every cut between 0.3 and 0.7 separates; the current 0.62 lies in [0.3, 0.7) so it
        // stays there, and a refit from the written value gives the same value.
        let data = samples(&[0.7, 0.8], &[0.2, 0.3]);
        let first = fit(&data, Op::Gt, Objective::F1, 0.62, Domain::SCORE).unwrap();
        assert_eq!(first.threshold, 0.5);
        let again = fit(&data, Op::Gt, Objective::F1, first.threshold, Domain::SCORE).unwrap();
        assert_eq!(again.threshold, first.threshold);
    }

    #[test]
    fn score_thresholds_stay_in_the_unit_interval() {
        let data = samples(&[], &[0.0, 1.0]);
        let f = fit(&data, Op::Gt, Objective::F1, 0.5, Domain::SCORE).unwrap();
        assert!((0.0..=1.0).contains(&f.threshold));
        assert!(fit(&[], Op::Gt, Objective::F1, 0.5, Domain::SCORE).is_none());
    }

    #[test]
    fn a_fuzzy_threshold_stays_above_zero() {
        // Every request positive: a score may cut at 0, but `fuzzy` needs MIN in (0, 1], so
        // the request at 0 (a text shorter than every phrase) stays negative.
        let data = samples(&[0.0, 0.5, 1.0], &[]);
        let f = fit(&data, Op::Ge, Objective::F1, 0.9, Domain::FUZZY).unwrap();
        assert!(f.threshold > 0.0 && f.threshold <= 0.5, "{}", f.threshold);
        assert_eq!((f.counts.tp, f.counts.fn_), (2, 1));
        let f = fit(&data, Op::Ge, Objective::F1, 0.9, Domain::SCORE).unwrap();
        assert_eq!(f.threshold, 0.0, "a score threshold may be 0");
        // Scores just above 1 (the slack of `fuzzy`'s comparison) cut at 1 at most.
        let data = samples(&[1.0 + 1e-9], &[0.5]);
        let f = fit(&data, Op::Ge, Objective::F1, 0.9, Domain::FUZZY).unwrap();
        assert!(f.threshold > 0.5 && f.threshold <= 1.0, "{}", f.threshold);
    }

    #[test]
    fn objectives_parse() {
        assert_eq!("f1".parse::<Objective>().unwrap(), Objective::F1);
        assert_eq!(
            "precision=0.9".parse::<Objective>().unwrap(),
            Objective::Precision(0.9)
        );
        assert!("recall=2".parse::<Objective>().is_err());
        assert!("accuracy".parse::<Objective>().is_err());
    }
}
