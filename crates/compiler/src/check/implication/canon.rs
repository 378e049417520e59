//! Conditions in canonical form: every expression gets a structural key (hash-consed, spans and
//! signal names ignored, a signal keyed as its definition), and every condition a DNF over atoms
//! of those keys, with negation pushed down to the atoms, boolean signals expanded into their
//! definitions, comparisons with literals made intervals and label tests made label sets.

use super::algebra::{and, compare, or, ranges, Constraint, Dnf, Domains, Key};
use crate::hir::{ClassSet, CmpOp, TExpr, TExprKind, Type};
use std::collections::HashMap;

/// Interned structures and signal expansions.
pub(super) struct Analysis {
    /// Number of labels of each classifier.
    class_sizes: Vec<usize>,
    nodes: HashMap<(&'static str, String, Vec<Key>), Key>,
    signal_keys: Vec<Key>,
    /// DNF of each boolean signal when true and when false (`None`: too large).
    signal_dnfs: Vec<[Option<Dnf>; 2]>,
    pub(super) domains: Domains,
}

impl Analysis {
    pub(super) fn new(signal_exprs: &[Option<TExpr>], class_sizes: Vec<usize>) -> Self {
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
    pub(super) fn canon(&mut self, e: &TExpr) -> Key {
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
            K::Pii { types, .. } => {
                let mut names: Vec<&str> = types.iter().map(|t| t.name()).collect();
                names.sort_unstable();
                ("pii", names.join("\u{0}"))
            }
            K::Words(_) => ("words", String::new()),
            K::Language(_) => ("language", String::new()),
            K::Tokens(_) => ("tokens", String::new()),
            K::Classify(c, _) => ("classify", c.0.to_string()),
            K::Guard(g, _) => ("guard", g.0.to_string()),
            K::Detect {
                detector, entities, ..
            } => {
                let mut names: Vec<&str> = entities.iter().map(String::as_str).collect();
                names.sort_unstable();
                names.dedup();
                (
                    "detect",
                    format!("{}\u{0}{}", detector.0, names.join("\u{0}")),
                )
            }
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
            K::BudgetUsed(b) => ("budget_used", b.0.to_string()),
            K::BudgetRemaining(b) => ("budget_remaining", b.0.to_string()),
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
    pub(super) fn dnf(&mut self, e: &TExpr, holds: bool) -> Option<Dnf> {
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

/// The identity of a fuzzy phrase list: its phrases and its threshold.
fn fuzzy_key(phrases: &[String], min: f64) -> String {
    format!("{}\u{0}{}", phrases.join("\u{0}"), min.to_bits())
}
