//! The constraint algebra of the implication analysis: what a condition allows of one key's
//! value (a boolean, an interval, a set of labels), conjunctions of such constraints on distinct
//! keys, and disjunctions of those (DNF), with the operations the analysis asks of them:
//! intersection ([`merge`], [`and`]), union ([`or`]), emptiness, implication ([`implies`],
//! [`Constraint::within`]) and complement ([`Constraint::complement`]).
//!
//! Invariants the analysis keeps and the operations rely on: a conjunction holds its atoms
//! sorted by key, at most one per key, none of them empty or allowing every value; label sets
//! are sorted; an int expression's intervals have closed integer bounds.

use super::MAX_CONJUNCTS;
use crate::hir::CmpOp;
use std::collections::{HashMap, HashSet};

/// An interned expression structure.
pub(super) type Key = u32;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Range {
    pub(super) lo: f64,
    pub(super) lo_open: bool,
    pub(super) hi: f64,
    pub(super) hi_open: bool,
}

impl Range {
    pub(super) fn new(lo: f64, lo_open: bool, hi: f64, hi_open: bool) -> Range {
        Range {
            lo,
            lo_open,
            hi,
            hi_open,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.lo > self.hi || (self.lo == self.hi && (self.lo_open || self.hi_open))
    }

    pub(super) fn is_everything(&self) -> bool {
        self.lo == f64::NEG_INFINITY && self.hi == f64::INFINITY
    }

    pub(super) fn intersect(&self, o: &Range) -> Range {
        let (lo, lo_open) = if self.lo > o.lo || (self.lo == o.lo && self.lo_open) {
            (self.lo, self.lo_open)
        } else {
            (o.lo, o.lo_open)
        };
        let (hi, hi_open) = if self.hi < o.hi || (self.hi == o.hi && self.hi_open) {
            (self.hi, self.hi_open)
        } else {
            (o.hi, o.hi_open)
        };
        Range::new(lo, lo_open, hi, hi_open)
    }

    /// Whether every value of `self` lies in `outer`.
    pub(super) fn within(&self, outer: &Range) -> bool {
        let lo = outer.lo < self.lo || (outer.lo == self.lo && (!outer.lo_open || self.lo_open));
        let hi = outer.hi > self.hi || (outer.hi == self.hi && (!outer.hi_open || self.hi_open));
        lo && hi
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Constraint {
    Bool(bool),
    Range(Range),
    /// The allowed labels, sorted.
    Labels(Vec<u32>),
}

impl Constraint {
    /// Whether `self` allows only values `outer` allows.
    pub(super) fn within(&self, outer: &Constraint) -> bool {
        match (self, outer) {
            (Constraint::Bool(a), Constraint::Bool(b)) => a == b,
            (Constraint::Range(a), Constraint::Range(b)) => a.within(b),
            (Constraint::Labels(a), Constraint::Labels(b)) => a.iter().all(|l| b.contains(l)),
            _ => false,
        }
    }
}

impl Constraint {
    /// The values of `key` that `self` does not allow, as constraints whose union is exactly
    /// that (`None`: the domain of `key` is not known well enough to say).
    pub(super) fn complement(&self, key: Key, domains: &Domains) -> Option<Vec<Constraint>> {
        Some(match self {
            Constraint::Bool(b) => vec![Constraint::Bool(!b)],
            // An int expression's ranges are closed integer bounds (see `ranges`).
            Constraint::Range(r) if domains.integers.contains(&key) => {
                if r.lo_open || r.hi_open {
                    return None;
                }
                let mut out = Vec::with_capacity(2);
                if r.lo > f64::NEG_INFINITY {
                    out.push(Constraint::Range(Range::new(
                        f64::NEG_INFINITY,
                        false,
                        r.lo - 1.0,
                        false,
                    )));
                }
                if r.hi < f64::INFINITY {
                    out.push(Constraint::Range(Range::new(
                        r.hi + 1.0,
                        false,
                        f64::INFINITY,
                        false,
                    )));
                }
                out
            }
            Constraint::Range(r) => {
                let mut out = Vec::with_capacity(2);
                if r.lo > f64::NEG_INFINITY {
                    out.push(Constraint::Range(Range::new(
                        f64::NEG_INFINITY,
                        false,
                        r.lo,
                        !r.lo_open,
                    )));
                }
                if r.hi < f64::INFINITY {
                    out.push(Constraint::Range(Range::new(
                        r.hi,
                        !r.hi_open,
                        f64::INFINITY,
                        false,
                    )));
                }
                out
            }
            Constraint::Labels(allowed) => {
                let universe = *domains.labels.get(&key)?;
                let others: Vec<u32> = (0..u32::try_from(universe).ok()?)
                    .filter(|l| !allowed.contains(l))
                    .collect();
                if others.is_empty() {
                    Vec::new()
                } else {
                    vec![Constraint::Labels(others)]
                }
            }
        })
    }
}

/// Atoms sorted by key, at most one per key.
pub(super) type Conjunct = Vec<(Key, Constraint)>;
/// A disjunction of conjunctions; empty is `false`, `[[]]` is `true`.
pub(super) type Dnf = Vec<Conjunct>;

/// What went into merging two conjunctions.
pub(super) enum Merged {
    Sat(Conjunct),
    Unsat,
    /// Two kinds of constraint on one key: cannot happen for well-typed conditions, and is
    /// given up on rather than guessed.
    Unknown,
}

pub(super) fn merge(a: &Conjunct, b: &Conjunct) -> Merged {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (ka, ca) = &a[i];
        let (kb, cb) = &b[j];
        if ka < kb {
            out.push(a[i].clone());
            i += 1;
        } else if kb < ka {
            out.push(b[j].clone());
            j += 1;
        } else {
            let c = match (ca, cb) {
                (Constraint::Bool(x), Constraint::Bool(y)) if x == y => Constraint::Bool(*x),
                (Constraint::Bool(_), Constraint::Bool(_)) => return Merged::Unsat,
                (Constraint::Range(x), Constraint::Range(y)) => {
                    let r = x.intersect(y);
                    if r.is_empty() {
                        return Merged::Unsat;
                    }
                    Constraint::Range(r)
                }
                (Constraint::Labels(x), Constraint::Labels(y)) => {
                    let both: Vec<u32> = x.iter().copied().filter(|l| y.contains(l)).collect();
                    if both.is_empty() {
                        return Merged::Unsat;
                    }
                    Constraint::Labels(both)
                }
                _ => return Merged::Unknown,
            };
            out.push((*ka, c));
            i += 1;
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    Merged::Sat(out)
}

pub(super) fn and(a: &Dnf, b: &Dnf) -> Option<Dnf> {
    if a.len().saturating_mul(b.len()) > MAX_CONJUNCTS * MAX_CONJUNCTS {
        return None;
    }
    let mut out = Vec::new();
    for x in a {
        for y in b {
            match merge(x, y) {
                Merged::Sat(c) => out.push(c),
                Merged::Unsat => {}
                Merged::Unknown => return None,
            }
        }
    }
    (out.len() <= MAX_CONJUNCTS).then_some(out)
}

pub(super) fn or(mut a: Dnf, b: Dnf) -> Option<Dnf> {
    a.extend(b);
    (a.len() <= MAX_CONJUNCTS).then_some(a)
}

/// `b` implies `a`: every atom `a` constrains, `b` constrains at least as tightly.
pub(super) fn implies(b: &Conjunct, a: &Conjunct) -> bool {
    let mut j = 0;
    for (ka, ca) in a {
        while j < b.len() && b[j].0 < *ka {
            j += 1;
        }
        match b.get(j) {
            Some((kb, cb)) if kb == ka && cb.within(ca) => {}
            _ => return false,
        }
    }
    true
}

/// What the analysis knows of keys' values, for complements.
#[derive(Default)]
pub(super) struct Domains {
    /// The number of labels of each label-set key.
    pub(super) labels: HashMap<Key, usize>,
    /// Keys of int expressions (their ranges are closed integer bounds).
    pub(super) integers: HashSet<Key>,
}

pub(super) fn compare(op: CmpOp, x: f64, y: f64) -> bool {
    match op {
        CmpOp::Eq => x == y,
        CmpOp::Ne => x != y,
        CmpOp::Lt => x < y,
        CmpOp::Le => x <= y,
        CmpOp::Gt => x > y,
        CmpOp::Ge => x >= y,
    }
}

/// The values of `x` with `x OP c`, as intervals (two for `!=`). Integer expressions get
/// closed integer bounds.
pub(super) fn ranges(op: CmpOp, c: f64, int: bool) -> Vec<Range> {
    const INF: f64 = f64::INFINITY;
    let below = |hi: f64, open: bool| Range::new(-INF, false, hi, open);
    let above = |lo: f64, open: bool| Range::new(lo, open, INF, false);
    if int {
        let whole = c.fract() == 0.0;
        return match op {
            CmpOp::Lt => vec![below(c.ceil() - 1.0, false)],
            CmpOp::Le => vec![below(c.floor(), false)],
            CmpOp::Gt => vec![above(c.floor() + 1.0, false)],
            CmpOp::Ge => vec![above(c.ceil(), false)],
            CmpOp::Eq if whole => vec![Range::new(c, false, c, false)],
            CmpOp::Eq => Vec::new(),
            CmpOp::Ne if whole => vec![below(c - 1.0, false), above(c + 1.0, false)],
            CmpOp::Ne => vec![below(INF, false)],
        };
    }
    match op {
        CmpOp::Lt => vec![below(c, true)],
        CmpOp::Le => vec![below(c, false)],
        CmpOp::Gt => vec![above(c, true)],
        CmpOp::Ge => vec![above(c, false)],
        CmpOp::Eq => vec![Range::new(c, false, c, false)],
        CmpOp::Ne => vec![below(c, true), above(c, true)],
    }
}
