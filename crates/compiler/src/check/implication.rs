//! Routes that can never win (W004): a route whose every matching request is already taken by
//! routes tried before it.
//!
//! Each condition becomes a disjunction of conjunctions (DNF) over atoms, with negation pushed
//! down to the atoms and boolean signals expanded into their definitions:
//! - a comparison of one numeric expression with a literal is an interval of that expression
//!   (int expressions use closed integer bounds, so `n > 3` and `n >= 4` are the same atom);
//! - `is`, `in`, `==` and `!=` of one class value against labels is a set of its labels, so
//!   distinct labels of one classifier exclude each other;
//! - any other boolean expression is an opaque atom, true or false.
//!
//! Atoms are keyed by the structure of the expression they constrain (hash-consed, spans and
//! signal names ignored), so `topic is math` in two routes, or written once through a signal,
//! is the same atom. A conjunction C of route B is implied by a conjunction A of an earlier route
//! when every atom A constrains is constrained at least as tightly by C; B can never win when
//! each of its conjunctions is implied by one of the earlier routes'. The default route is
//! analysed too, as the one conjunction `true`. A condition that is unsatisfiable (`n > 5 and
//! n < 3`) also never wins.
//!
//! When no single earlier conjunction implies C, earlier routes may still take C's requests
//! together (`n > 5` in one route, `n <= 5 and flag` in another, then `flag`): if an earlier
//! conjunction A is met by C in every constraint but one, the part of C inside that constraint
//! is implied by A, and the parts outside it must be implied by one earlier conjunction or split
//! again. The pieces partition C, so this adds warnings only where they are true.
//!
//! The analysis is sound (it never warns wrongly) and bounded:
//! - a condition whose DNF has more than [`MAX_CONJUNCTS`] conjunctions is not analysed, and is
//!   not used to shadow later routes;
//! - earlier conjunctions are indexed by their smallest atom key (any conjunction implying C
//!   constrains only keys C constrains, so it is found under one of C's keys), and at most
//!   [`MAX_CANDIDATES`] candidates are examined per conjunction.
//!
//! - splitting considers only earlier conjunctions that constrain a key the piece constrains
//!   (for `true`, those of a single atom), and stops after [`MAX_PIECES`] pieces and
//!   [`MAX_OVERLAPS`] candidates per conjunction.
//!
//! So the work is at most routes × 64 × 256 implication tests, each linear in the atoms of a
//! conjunction: linear in the number of routes, never quadratic without bound. Giving up only
//! ever means missing a warning.

use super::Checker;
use crate::hir::{ClassSet, CmpOp, TExpr, TExprKind, Type};
use src_dsl::{codes, Diagnostic};
use std::collections::HashMap;

/// A condition with more conjunctions than this is not analysed.
pub(super) const MAX_CONJUNCTS: usize = 64;
/// At most this many earlier conjunctions are examined per conjunction.
pub(super) const MAX_CANDIDATES: usize = 256;
/// At most this many pieces are made of one conjunction when several routes may cover it.
pub(super) const MAX_PIECES: usize = 8;
/// At most this many earlier conjunctions are tested for overlap while splitting one.
pub(super) const MAX_OVERLAPS: usize = 32;

/// An interned expression structure.
type Key = u32;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Range {
    lo: f64,
    lo_open: bool,
    hi: f64,
    hi_open: bool,
}

impl Range {
    fn new(lo: f64, lo_open: bool, hi: f64, hi_open: bool) -> Range {
        Range {
            lo,
            lo_open,
            hi,
            hi_open,
        }
    }

    fn is_empty(&self) -> bool {
        self.lo > self.hi || (self.lo == self.hi && (self.lo_open || self.hi_open))
    }

    fn is_everything(&self) -> bool {
        self.lo == f64::NEG_INFINITY && self.hi == f64::INFINITY
    }

    fn intersect(&self, o: &Range) -> Range {
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
    fn within(&self, outer: &Range) -> bool {
        let lo = outer.lo < self.lo || (outer.lo == self.lo && (!outer.lo_open || self.lo_open));
        let hi = outer.hi > self.hi || (outer.hi == self.hi && (!outer.hi_open || self.hi_open));
        lo && hi
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Constraint {
    Bool(bool),
    Range(Range),
    /// The allowed labels, sorted.
    Labels(Vec<u32>),
}

impl Constraint {
    /// Whether `self` allows only values `outer` allows.
    fn within(&self, outer: &Constraint) -> bool {
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
    fn complement(&self, key: Key, domains: &Domains) -> Option<Vec<Constraint>> {
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
type Conjunct = Vec<(Key, Constraint)>;
/// A disjunction of conjunctions; empty is `false`, `[[]]` is `true`.
type Dnf = Vec<Conjunct>;

/// What went into merging two conjunctions.
enum Merged {
    Sat(Conjunct),
    Unsat,
    /// Two kinds of constraint on one key: cannot happen for well-typed conditions, and is
    /// given up on rather than guessed.
    Unknown,
}

fn merge(a: &Conjunct, b: &Conjunct) -> Merged {
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

fn and(a: &Dnf, b: &Dnf) -> Option<Dnf> {
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

fn or(mut a: Dnf, b: Dnf) -> Option<Dnf> {
    a.extend(b);
    (a.len() <= MAX_CONJUNCTS).then_some(a)
}

/// `b` implies `a`: every atom `a` constrains, `b` constrains at least as tightly.
fn implies(b: &Conjunct, a: &Conjunct) -> bool {
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
struct Domains {
    /// The number of labels of each label-set key.
    labels: HashMap<Key, usize>,
    /// Keys of int expressions (their ranges are closed integer bounds).
    integers: std::collections::HashSet<Key>,
}

/// What one conjunction's search for covering routes may still spend.
struct Budget {
    pieces: usize,
    overlaps: usize,
}

/// Earlier routes' conjunctions, indexed by their smallest key.
#[derive(Default)]
struct Pool {
    conjuncts: Vec<(Conjunct, usize)>,
    by_key: HashMap<Key, Vec<usize>>,
    /// Every conjunction constraining each key (split candidates).
    by_any_key: HashMap<Key, Vec<usize>>,
    /// Conjunctions of one atom (split candidates for `true`).
    singles: Vec<usize>,
    /// An earlier route whose condition has the conjunction `true`.
    always: Option<usize>,
}

impl Pool {
    fn add(&mut self, c: Conjunct, route: usize) {
        match c.first() {
            None => {
                self.always.get_or_insert(route);
            }
            Some((k, _)) => {
                let id = self.conjuncts.len();
                self.by_key.entry(*k).or_default().push(id);
                for (k, _) in &c {
                    self.by_any_key.entry(*k).or_default().push(id);
                }
                if c.len() == 1 {
                    self.singles.push(id);
                }
                self.conjuncts.push((c, route));
            }
        }
    }

    /// An earlier route with a conjunction implied by `c`, if one is found within the bound.
    fn cover(&self, c: &Conjunct) -> Option<usize> {
        if self.always.is_some() {
            return self.always;
        }
        let mut examined = 0;
        for (k, _) in c {
            for &i in self.by_key.get(k).into_iter().flatten() {
                examined += 1;
                if examined > MAX_CANDIDATES {
                    return None;
                }
                let (a, route) = &self.conjuncts[i];
                if implies(c, a) {
                    return Some(*route);
                }
            }
        }
        None
    }

    /// Whether earlier conjunctions together imply `c` (see the module comment), adding the
    /// routes that do to `routes`.
    fn cover_together(
        &self,
        c: &Conjunct,
        domains: &Domains,
        budget: &mut Budget,
        routes: &mut Vec<usize>,
    ) -> bool {
        if let Some(r) = self.cover(c) {
            if !routes.contains(&r) {
                routes.push(r);
            }
            return true;
        }
        if budget.pieces == 0 {
            return false;
        }
        budget.pieces -= 1;
        // An earlier conjunction that `c` meets in every constraint but one: the part of `c`
        // inside that constraint is implied by it, and only the parts outside are left.
        let candidates: Box<dyn Iterator<Item = &usize>> = if c.is_empty() {
            Box::new(self.singles.iter())
        } else {
            Box::new(
                c.iter()
                    .flat_map(|(k, _)| self.by_any_key.get(k).into_iter().flatten()),
            )
        };
        let mut split = None;
        for &i in candidates {
            if budget.overlaps == 0 {
                return false;
            }
            budget.overlaps -= 1;
            let Some((a, route)) = self.conjuncts.get(i) else {
                continue;
            };
            let mut unmet = a.iter().filter(|(k, ca)| {
                !c.iter()
                    .find(|(kc, _)| kc == k)
                    .is_some_and(|(_, cc)| cc.within(ca))
            });
            if let (Some(one), None) = (unmet.next(), unmet.next()) {
                if matches!(merge(c, &vec![one.clone()]), Merged::Sat(_)) {
                    split = Some((one.clone(), *route));
                    break;
                }
            }
        }
        let Some(((key, inside), route)) = split else {
            return false;
        };
        let Some(outside) = inside.complement(key, domains) else {
            return false;
        };
        if !routes.contains(&route) {
            routes.push(route);
        }
        for part in outside {
            match merge(c, &vec![(key, part)]) {
                Merged::Unsat => {}
                Merged::Unknown => return false,
                Merged::Sat(piece) => {
                    if !self.cover_together(&piece, domains, budget, routes) {
                        return false;
                    }
                }
            }
        }
        true
    }
}

/// Interned structures and signal expansions.
struct Analysis {
    /// Number of labels of each classifier.
    class_sizes: Vec<usize>,
    nodes: HashMap<(&'static str, String, Vec<Key>), Key>,
    signal_keys: Vec<Key>,
    /// DNF of each boolean signal when true and when false (`None`: too large).
    signal_dnfs: Vec<[Option<Dnf>; 2]>,
    domains: Domains,
}

impl Analysis {
    fn new(signal_exprs: &[Option<TExpr>], class_sizes: Vec<usize>) -> Self {
        let mut a = Analysis {
            class_sizes,
            nodes: HashMap::new(),
            signal_keys: Vec::with_capacity(signal_exprs.len()),
            signal_dnfs: Vec::with_capacity(signal_exprs.len()),
            domains: Domains::default(),
        };
        // Signals come in dependency order, so each one's parts are ready before it.
        for (i, e) in signal_exprs.iter().enumerate() {
            let key = match e {
                Some(e) => a.canon(e),
                None => a.intern("signal", i.to_string(), Vec::new()),
            };
            a.signal_keys.push(key);
            let dnfs = match e {
                Some(e) if e.ty == Type::Bool => [a.dnf(e, true), a.dnf(e, false)],
                _ => [None, None],
            };
            a.signal_dnfs.push(dnfs);
        }
        a
    }

    fn intern(&mut self, tag: &'static str, payload: String, kids: Vec<Key>) -> Key {
        let next = self.nodes.len() as Key;
        *self.nodes.entry((tag, payload, kids)).or_insert(next)
    }

    /// The structural key of an expression; a signal has the key of its definition.
    fn canon(&mut self, e: &TExpr) -> Key {
        use TExprKind as K;
        if let K::Signal(s) = &e.kind {
            if let Some(k) = self.signal_keys.get(s.index()) {
                return *k;
            }
        }
        let kids: Vec<Key> = e.children().into_iter().map(|c| self.canon(c)).collect();
        let ty = format!("{:?}", e.ty);
        let (tag, extra): (&'static str, String) = match &e.kind {
            K::Bool(b) => ("bool", b.to_string()),
            K::Int(i) => ("int", i.to_string()),
            K::Float(f) => ("float", f.to_bits().to_string()),
            K::Str(s) => ("str", s.clone()),
            K::Label(l) => ("label", l.0.to_string()),
            K::Model(m) => ("model", m.0.to_string()),
            K::Signal(s) => ("signal", s.0.to_string()),
            K::Prompt => ("prompt", String::new()),
            K::History => ("history", String::new()),
            K::System => ("system", String::new()),
            K::ApiKey => ("api_key", String::new()),
            K::Header(h) => ("header", h.clone()),
            K::Body(p) => ("body", p.clone()),
            K::Request(f) => ("request", format!("{f:?}")),
            K::Contains { phrases, .. } => ("contains", phrases.join("\u{0}")),
            K::Hits { phrases, .. } => ("hits", phrases.join("\u{0}")),
            K::Density { phrases, .. } => ("density", phrases.join("\u{0}")),
            K::Sequence { phrases, .. } => ("sequence", phrases.join("\u{0}")),
            K::Fuzzy { phrases, min, .. } => ("fuzzy", fuzzy_key(phrases, *min)),
            K::FuzzyHits { phrases, min, .. } => ("fuzzy_hits", fuzzy_key(phrases, *min)),
            K::Bm25 { phrases, .. } => ("bm25", phrases.join("\u{0}")),
            K::Count { regex, .. } => ("count", regex.clone()),
            K::Matches { regex, .. } => ("matches", regex.clone()),
            K::Words(_) => ("words", String::new()),
            K::Language(_) => ("language", String::new()),
            K::Tokens(_) => ("tokens", String::new()),
            K::Classify(c, _) => ("classify", c.0.to_string()),
            K::Guard(g, _) => ("guard", g.0.to_string()),
            K::Similarity {
                encoder, examples, ..
            } => (
                "similarity",
                format!("{}\u{0}{}", encoder.0, examples.join("\u{0}")),
            ),
            K::Confidence(_) => ("confidence", String::new()),
            K::Pinned => ("pinned", String::new()),
            K::Proposed => ("proposed", String::new()),
            K::Cost(_) => ("cost", String::new()),
            K::OutcomeFailRate => ("fail_rate", String::new()),
            K::OutcomeCount => ("outcome_count", String::new()),
            K::Not(_) => ("not", String::new()),
            K::And(..) => ("and", String::new()),
            K::Or(..) => ("or", String::new()),
            K::Neg(_) => ("neg", String::new()),
            K::Arith(op, ..) => ("arith", format!("{op:?}")),
            K::Cmp(op, ..) => ("cmp", format!("{op:?}")),
            K::Coalesce(..) => ("coalesce", String::new()),
            K::IsLabel(_, labels) => ("is", format!("{labels:?}")),
        };
        self.intern(tag, format!("{ty}|{extra}"), kids)
    }

    fn atom(&mut self, key: Key, c: Constraint) -> Dnf {
        let trivial = match &c {
            Constraint::Range(r) if r.is_empty() => return Vec::new(),
            Constraint::Range(r) => r.is_everything(),
            Constraint::Labels(l) if l.is_empty() => return Vec::new(),
            _ => false,
        };
        if trivial {
            vec![Vec::new()]
        } else {
            vec![vec![(key, c)]]
        }
    }

    fn opaque(&mut self, e: &TExpr, holds: bool) -> Dnf {
        let key = self.canon(e);
        vec![vec![(key, Constraint::Bool(holds))]]
    }

    /// The DNF of `e` being `holds`; `None` when it grows past the cap.
    fn dnf(&mut self, e: &TExpr, holds: bool) -> Option<Dnf> {
        use TExprKind as K;
        match &e.kind {
            K::Bool(b) => Some(if *b == holds {
                vec![Vec::new()]
            } else {
                Vec::new()
            }),
            K::Not(x) => self.dnf(x, !holds),
            K::And(a, b) | K::Or(a, b) => {
                let (x, y) = (self.dnf(a, holds)?, self.dnf(b, holds)?);
                if matches!(e.kind, K::And(..)) == holds {
                    and(&x, &y)
                } else {
                    or(x, y)
                }
            }
            K::Signal(s) if e.ty == Type::Bool => {
                let slot = self.signal_dnfs.get(s.index())?;
                slot[usize::from(!holds)].clone()
            }
            K::IsLabel(x, labels) => {
                let Type::Class(set) = x.ty else {
                    return Some(self.opaque(e, holds));
                };
                let mut allowed: Vec<u32> = labels.iter().map(|l| l.0).collect();
                allowed.sort_unstable();
                allowed.dedup();
                let allowed = if holds {
                    allowed
                } else {
                    self.complement(set, &allowed)
                };
                let key = self.canon(x);
                Some(self.labels_atom(set, key, allowed))
            }
            K::Cmp(op, a, b) => Some(self.comparison(e, *op, a, b, holds)),
            _ => Some(self.opaque(e, holds)),
        }
    }

    /// A label-set atom; every label of the set is `true`.
    fn labels_atom(&mut self, set: ClassSet, key: Key, allowed: Vec<u32>) -> Dnf {
        let size = self.set_size(set);
        self.domains.labels.insert(key, size);
        if allowed.len() == size {
            return vec![Vec::new()];
        }
        self.atom(key, Constraint::Labels(allowed))
    }

    fn set_size(&self, set: ClassSet) -> usize {
        match set {
            ClassSet::Classifier(c) => self.class_sizes.get(c.index()).copied().unwrap_or(0),
            ClassSet::Language => crate::language::labels().len(),
        }
    }

    fn complement(&self, set: ClassSet, labels: &[u32]) -> Vec<u32> {
        (0..self.set_size(set) as u32)
            .filter(|l| !labels.contains(l))
            .collect()
    }

    fn comparison(&mut self, e: &TExpr, op: CmpOp, a: &TExpr, b: &TExpr, holds: bool) -> Dnf {
        let op = if holds { op } else { negate(op) };
        // A class value against a label.
        if let Type::Class(set) = a.ty {
            let (value, label) = match (&a.kind, &b.kind) {
                (_, TExprKind::Label(l)) => (a, l.0),
                (TExprKind::Label(l), _) => (b, l.0),
                _ => return self.opaque(e, holds),
            };
            let allowed = match op {
                CmpOp::Eq => vec![label],
                CmpOp::Ne => self.complement(set, &[label]),
                _ => return self.opaque(e, holds),
            };
            let key = self.canon(value);
            return self.labels_atom(set, key, allowed);
        }
        if !a.ty.is_numeric() || !b.ty.is_numeric() {
            return self.opaque(e, holds);
        }
        let (value, c, op) = match (literal(a), literal(b)) {
            (None, Some(c)) => (a, c, op),
            (Some(c), None) => (b, c, flip(op)),
            (Some(x), Some(y)) => {
                let truth = compare(op, x, y);
                return if truth { vec![Vec::new()] } else { Vec::new() };
            }
            (None, None) => return self.opaque(e, holds),
        };
        let key = self.canon(value);
        if value.ty == Type::Int {
            self.domains.integers.insert(key);
        }
        let ranges = ranges(op, c, value.ty == Type::Int);
        let mut out = Vec::new();
        for r in ranges {
            out.extend(self.atom(key, Constraint::Range(r)));
        }
        out
    }
}

fn literal(e: &TExpr) -> Option<f64> {
    match e.kind {
        TExprKind::Int(i) => Some(i as f64),
        TExprKind::Float(f) => Some(f),
        _ => None,
    }
}

fn negate(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Eq => CmpOp::Ne,
        CmpOp::Ne => CmpOp::Eq,
        CmpOp::Lt => CmpOp::Ge,
        CmpOp::Le => CmpOp::Gt,
        CmpOp::Gt => CmpOp::Le,
        CmpOp::Ge => CmpOp::Lt,
    }
}

/// `c OP x` as `x OP' c`.
fn flip(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Ge => CmpOp::Le,
        other => other,
    }
}

fn compare(op: CmpOp, x: f64, y: f64) -> bool {
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
fn ranges(op: CmpOp, c: f64, int: bool) -> Vec<Range> {
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

impl Checker<'_> {
    /// Reports W004 for every route that can never win (see the module comment).
    pub(super) fn check_shadowed_routes(&mut self) {
        let class_sizes = self.class_labels.iter().map(Vec::len).collect();
        let signal_exprs = std::mem::take(&mut self.signal_exprs);
        let mut analysis = Analysis::new(&signal_exprs, class_sizes);
        let mut pool = Pool::default();
        let mut found = Vec::new();
        for (position, route) in self.parts.routes.iter().enumerate() {
            let Some(route) = route else { continue };
            let dnf = match &route.when {
                Some(w) => analysis.dnf(w, true),
                None => Some(vec![Vec::new()]),
            };
            let Some(dnf) = dnf else { continue };
            if dnf.is_empty() {
                found.push((position, Vec::new()));
                continue;
            }
            let mut covering: Vec<usize> = Vec::new();
            let mut shadowed = true;
            for c in &dnf {
                let mut budget = Budget {
                    pieces: MAX_PIECES,
                    overlaps: MAX_OVERLAPS,
                };
                if !pool.cover_together(c, &analysis.domains, &mut budget, &mut covering) {
                    shadowed = false;
                    break;
                }
            }
            if shadowed {
                covering.sort_unstable();
                found.push((position, covering));
            }
            for c in dnf {
                pool.add(c, position);
            }
        }
        drop(analysis);
        self.signal_exprs = signal_exprs;
        for (position, covering) in found {
            self.report_shadowed(position, &covering);
        }
    }

    fn report_shadowed(&mut self, position: usize, covering: &[usize]) {
        let Some(route) = self.parts.routes.get(position).and_then(Option::as_ref) else {
            return;
        };
        let (name, span) = (route.name.clone(), route.span);
        let when_span = route.when.as_ref().map(|w| w.span);
        let mut d = if covering.is_empty() {
            Diagnostic::warning(
                codes::SHADOWED_ROUTE,
                format!("route `{name}` can never win: its condition never holds"),
                when_span.unwrap_or(span),
            )
            .with_label_message("this condition is always false")
            .with_help("fix the condition, or remove the route")
        } else {
            let names: Vec<String> = covering
                .iter()
                .filter_map(|&p| self.route_at(p).map(|(n, _)| n.to_string()))
                .collect();
            Diagnostic::warning(
                codes::SHADOWED_ROUTE,
                format!("route `{name}` can never win"),
                span,
            )
            .with_label_message(format!(
                "every request it matches is taken first by {}",
                super::list_names(&names)
            ))
            .with_help("remove it, raise its priority above theirs, or narrow their conditions")
        };
        for &p in covering {
            if let Some((n, s)) = self.route_at(p) {
                let n = n.to_string();
                d = d.with_secondary(s, format!("`{n}` is tried before `{name}`"));
            }
        }
        self.report(d);
    }
}

/// The identity of a fuzzy phrase list: its phrases and its threshold.
fn fuzzy_key(phrases: &[String], min: f64) -> String {
    format!("{}\u{0}{}", phrases.join("\u{0}"), min.to_bits())
}
