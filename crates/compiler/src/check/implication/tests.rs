//! Brute-force checks of the implication analysis: every operation of the constraint algebra, the
//! cover search and the canonical form, each answer compared with what enumerating a small
//! finite domain says it must be.
//!
//! The algebra's domain is four keys, one of each kind: a boolean (key 0), an int expression
//! (key 1, values -2 to 7), a float expression (key 2, every half from -1 to 7) and a set of four
//! labels (key 3). Generated bounds are integers from 0 to 5, or infinite (and then closed, as
//! the analysis makes them), so these values tell apart every set the constraints describe: a
//! nonempty interval with such bounds holds one of them, and so does every nonempty piece of the
//! difference of two.

use super::algebra::{
    and, implies, merge, or, ranges, Conjunct, Constraint, Dnf, Domains, Key, Merged, Range,
};
use super::canon::Analysis;
use super::cover::{Budget, Pool};
use super::{MAX_OVERLAPS, MAX_PIECES};
use crate::fixture as fx;
use crate::hir::{CmpOp, LabelId, RequestField, TExpr};
use proptest::prelude::*;
use std::collections::HashMap;

const BOOL: Key = 0;
const INT: Key = 1;
const REAL: Key = 2;
const LABELS: Key = 3;
const UNIVERSE: u32 = 4;

/// The values each key may take.
fn values(key: Key) -> Vec<f64> {
    match key {
        BOOL => vec![0.0, 1.0],
        INT => (-2..=7).map(f64::from).collect(),
        REAL => (-2..=14).map(|h| f64::from(h) / 2.0).collect(),
        _ => (0..UNIVERSE).map(f64::from).collect(),
    }
}

/// Every assignment of a value to each of the four keys.
fn assignments() -> Vec<[f64; 4]> {
    let mut out = Vec::new();
    for b in values(BOOL) {
        for i in values(INT) {
            for r in values(REAL) {
                for l in values(LABELS) {
                    out.push([b, i, r, l]);
                }
            }
        }
    }
    out
}

fn domains() -> Domains {
    let mut d = Domains::default();
    d.labels.insert(LABELS, UNIVERSE as usize);
    d.integers.insert(INT);
    d
}

/// Whether the interval `r` holds `v`: what an interval means.
fn in_range(r: &Range, v: f64) -> bool {
    let lo = r.lo < v || (r.lo == v && !r.lo_open);
    let hi = v < r.hi || (v == r.hi && !r.hi_open);
    lo && hi
}

/// Whether `c` allows the value `v` (a boolean is 0 or 1, a label its index).
fn allows(c: &Constraint, v: f64) -> bool {
    match c {
        Constraint::Bool(b) => (v == 1.0) == *b,
        Constraint::Range(r) => in_range(r, v),
        Constraint::Labels(ls) => ls.iter().any(|&l| f64::from(l) == v),
    }
}

/// Whether the conjunction holds where each key has the value `value(key)`.
fn holds(c: &Conjunct, value: &impl Fn(Key) -> f64) -> bool {
    c.iter().all(|(k, x)| allows(x, value(*k)))
}

fn dnf_holds(d: &Dnf, value: &impl Fn(Key) -> f64) -> bool {
    d.iter().any(|c| holds(c, value))
}

fn at(a: &[f64; 4]) -> impl Fn(Key) -> f64 + '_ {
    move |k| a[k as usize]
}

/// The shape the analysis keeps conjunctions in: keys strictly increasing, label sets sorted,
/// and no constraint allowing none or all of its key's values.
fn well_formed(c: &Conjunct, values: &impl Fn(Key) -> Vec<f64>) -> bool {
    c.windows(2).all(|w| w[0].0 < w[1].0)
        && c.iter().all(|(k, x)| {
            let all = values(*k);
            let n = all.iter().filter(|&&v| allows(x, v)).count();
            let sorted = match x {
                Constraint::Labels(ls) => ls.windows(2).all(|w| w[0] < w[1]),
                _ => true,
            };
            sorted && n > 0 && n < all.len()
        })
}

/// Closed bounds that are integers or infinite: the intervals of an int expression.
fn integral(r: &Range) -> bool {
    let whole = |x: f64| x.is_infinite() || x.fract() == 0.0;
    !r.lo_open && !r.hi_open && whole(r.lo) && whole(r.hi)
}

/// `x OP y`, for the brute force.
fn meets(op: CmpOp, x: f64, y: f64) -> bool {
    match op {
        CmpOp::Eq => x == y,
        CmpOp::Ne => x != y,
        CmpOp::Lt => x < y,
        CmpOp::Le => x <= y,
        CmpOp::Gt => x > y,
        CmpOp::Ge => x >= y,
    }
}

fn cmp_op() -> impl Strategy<Value = CmpOp> {
    prop::sample::select(vec![
        CmpOp::Eq,
        CmpOp::Ne,
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Gt,
        CmpOp::Ge,
    ])
}

fn bound() -> impl Strategy<Value = Option<i32>> {
    prop::option::of(0..=5i32)
}

/// Any interval with bounds from 0 to 5 or infinite, empty ones and everything included.
fn any_range() -> impl Strategy<Value = Range> {
    (bound(), any::<bool>(), bound(), any::<bool>()).prop_map(|(lo, lo_open, hi, hi_open)| {
        let (lo, lo_open) = lo.map_or((f64::NEG_INFINITY, false), |l| (f64::from(l), lo_open));
        let (hi, hi_open) = hi.map_or((f64::INFINITY, false), |h| (f64::from(h), hi_open));
        Range::new(lo, lo_open, hi, hi_open)
    })
}

/// A constraint on `key` of the kind the key has, allowing some but not all of its values.
fn constraint(key: Key) -> BoxedStrategy<Constraint> {
    let any = match key {
        BOOL => any::<bool>().prop_map(Constraint::Bool).boxed(),
        INT => (bound(), bound())
            .prop_map(|(lo, hi)| {
                Constraint::Range(Range::new(
                    lo.map_or(f64::NEG_INFINITY, f64::from),
                    false,
                    hi.map_or(f64::INFINITY, f64::from),
                    false,
                ))
            })
            .boxed(),
        REAL => any_range().prop_map(Constraint::Range).boxed(),
        _ => prop::sample::subsequence((0..UNIVERSE).collect::<Vec<_>>(), 1..UNIVERSE as usize)
            .prop_map(Constraint::Labels)
            .boxed(),
    };
    any.prop_filter("some but not all values", move |c| {
        let n = values(key).iter().filter(|&&v| allows(c, v)).count();
        n > 0 && n < values(key).len()
    })
    .boxed()
}

/// A key with two constraints on it.
fn two_on_one_key() -> impl Strategy<Value = (Key, Constraint, Constraint)> {
    (0..4u32).prop_flat_map(|k| (Just(k), constraint(k), constraint(k)))
}

fn conjunct() -> impl Strategy<Value = Conjunct> {
    (
        prop::option::of(constraint(BOOL)),
        prop::option::of(constraint(INT)),
        prop::option::of(constraint(REAL)),
        prop::option::of(constraint(LABELS)),
    )
        .prop_map(|(b, i, r, l)| {
            [b, i, r, l]
                .into_iter()
                .zip(0u32..)
                .filter_map(|(c, k)| c.map(|c| (k, c)))
                .collect()
        })
}

fn dnf() -> impl Strategy<Value = Dnf> {
    prop::collection::vec(conjunct(), 0..4)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn intervals_are_sets_of_numbers(r in any_range(), s in any_range()) {
        let grid = values(REAL);
        let nonempty = grid.iter().any(|&v| in_range(&r, v));
        prop_assert_eq!(r.is_empty(), !nonempty);
        prop_assert_eq!(r.is_everything(), grid.iter().all(|&v| in_range(&r, v)));
        let both = r.intersect(&s);
        for &v in &grid {
            prop_assert_eq!(in_range(&both, v), in_range(&r, v) && in_range(&s, v), "at {}", v);
        }
        if nonempty {
            let subset = grid.iter().all(|&v| !in_range(&r, v) || in_range(&s, v));
            prop_assert_eq!(r.within(&s), subset);
        }
    }

    #[test]
    fn within_is_subset_and_complement_is_the_rest((key, c, d) in two_on_one_key()) {
        let all = values(key);
        let subset = all.iter().all(|&v| !allows(&c, v) || allows(&d, v));
        prop_assert_eq!(c.within(&d), subset);
        let Some(rest) = c.complement(key, &domains()) else {
            return Err(TestCaseError::fail("every key's domain is known"));
        };
        // `c` and its complement's pieces partition the key's values.
        for &v in &all {
            let n = usize::from(allows(&c, v)) + rest.iter().filter(|p| allows(p, v)).count();
            prop_assert_eq!(n, 1, "{} is in {} of {:?} and {:?}", v, n, c, rest);
        }
        if key == INT {
            for piece in &rest {
                prop_assert!(matches!(piece, Constraint::Range(r) if integral(r)), "{:?}", piece);
            }
        }
    }

    #[test]
    fn merge_is_intersection(a in conjunct(), b in conjunct()) {
        let all = assignments();
        match merge(&a, &b) {
            Merged::Sat(m) => {
                prop_assert!(well_formed(&m, &values), "{:?}", m);
                for x in &all {
                    prop_assert_eq!(holds(&m, &at(x)), holds(&a, &at(x)) && holds(&b, &at(x)));
                }
                prop_assert!(implies(&m, &a) && implies(&m, &b));
            }
            Merged::Unsat => {
                prop_assert!(!all.iter().any(|x| holds(&a, &at(x)) && holds(&b, &at(x))));
            }
            Merged::Unknown => prop_assert!(false, "each key has one kind of constraint"),
        }
    }

    #[test]
    fn implies_is_inclusion(a in conjunct(), b in conjunct()) {
        let all = assignments();
        let included = all.iter().all(|x| !holds(&b, &at(x)) || holds(&a, &at(x)));
        prop_assert_eq!(implies(&b, &a), included);
    }

    #[test]
    fn and_and_or_are_conjunction_and_disjunction(x in dnf(), y in dnf()) {
        let all = assignments();
        let Some(both) = and(&x, &y) else {
            return Err(TestCaseError::fail("small DNFs are within the cap"));
        };
        prop_assert!(both.iter().all(|c| well_formed(c, &values)), "{:?}", both);
        let Some(either) = or(x.clone(), y.clone()) else {
            return Err(TestCaseError::fail("small DNFs are within the cap"));
        };
        for v in &all {
            let (p, q) = (dnf_holds(&x, &at(v)), dnf_holds(&y, &at(v)));
            prop_assert_eq!(dnf_holds(&both, &at(v)), p && q);
            prop_assert_eq!(dnf_holds(&either, &at(v)), p || q);
        }
    }

    #[test]
    fn ranges_are_the_values_a_comparison_allows(op in cmp_op(), half in 0..=10i32, int in any::<bool>()) {
        let c = f64::from(half) / 2.0;
        let rs = ranges(op, c, int);
        let grid: Vec<f64> = if int {
            (-2..=7).map(f64::from).collect()
        } else {
            (-4..=28).map(|q| f64::from(q) / 4.0).collect()
        };
        for v in grid {
            let inside = rs.iter().any(|r| in_range(r, v));
            prop_assert_eq!(inside, meets(op, v, c), "{} {:?} {}: {:?}", v, op, c, rs);
        }
        if int {
            prop_assert!(rs.iter().all(integral), "{:?}", rs);
        }
    }

    #[test]
    fn a_cover_takes_every_request_it_claims(earlier in prop::collection::vec(conjunct(), 0..6), c in conjunct()) {
        let all = assignments();
        let mut pool = Pool::default();
        for (route, a) in earlier.iter().enumerate() {
            pool.add(a.clone(), route);
        }
        let mut budget = Budget { pieces: MAX_PIECES, overlaps: MAX_OVERLAPS };
        let mut routes = Vec::new();
        let covered = pool.cover_together(&c, &domains(), &mut budget, &mut routes);
        if covered {
            for x in all.iter().filter(|x| holds(&c, &at(x))) {
                prop_assert!(
                    routes.iter().any(|&r| holds(&earlier[r], &at(x))),
                    "{:?} is taken by none of {:?}", x, routes
                );
            }
        }
        // One earlier conjunction that takes all of `c` is always found.
        let by_one = earlier
            .iter()
            .any(|a| all.iter().all(|x| !holds(&c, &at(x)) || holds(a, &at(x))));
        prop_assert!(covered || !by_one);
    }
}

// The canonical form: conditions over four leaves (an int, a score, a boolean and a class of the
// four labels of the fixture's classifier), turned into DNF, against evaluating them.

/// A condition, built into an expression by [`build`].
#[derive(Debug, Clone)]
enum Shape {
    /// `request.tools OP c` (`c` in halves; the literal first when the flag is set).
    Tools(CmpOp, i32, bool),
    /// `guard(prompt) OP c`, likewise.
    Score(CmpOp, i32, bool),
    Stream,
    /// `topic in [...]`.
    In(Vec<u32>),
    /// `topic == l` or `topic != l`, the label first when the second flag is set.
    Eq(u32, bool, bool),
    /// Two literals compared.
    Literals(CmpOp, i32, i32),
    Const(bool),
    Not(Box<Shape>),
    And(Box<Shape>, Box<Shape>),
    Or(Box<Shape>, Box<Shape>),
}

fn shape() -> impl Strategy<Value = Shape> {
    let half = 0..=10i32;
    let leaf = prop_oneof![
        (cmp_op(), half.clone(), any::<bool>()).prop_map(|(o, c, f)| Shape::Tools(o, c, f)),
        (cmp_op(), half.clone(), any::<bool>()).prop_map(|(o, c, f)| Shape::Score(o, c, f)),
        Just(Shape::Stream),
        prop::sample::subsequence((0..UNIVERSE).collect::<Vec<_>>(), 1..=UNIVERSE as usize)
            .prop_map(Shape::In),
        (0..UNIVERSE, any::<bool>(), any::<bool>()).prop_map(|(l, eq, f)| Shape::Eq(l, eq, f)),
        (cmp_op(), half.clone(), half).prop_map(|(o, x, y)| Shape::Literals(o, x, y)),
        any::<bool>().prop_map(Shape::Const),
    ];
    leaf.prop_recursive(3, 12, 2, |inner| {
        prop_oneof![
            inner.clone().prop_map(|a| Shape::Not(Box::new(a))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Shape::And(Box::new(a), Box::new(b))),
            (inner.clone(), inner).prop_map(|(a, b)| Shape::Or(Box::new(a), Box::new(b))),
        ]
    })
}

/// `c / 2` as an int literal when whole, else a float one.
fn number(half: i32) -> TExpr {
    if half % 2 == 0 {
        fx::int(i64::from(half / 2))
    } else {
        fx::float(f64::from(half) / 2.0)
    }
}

fn compared(op: CmpOp, value: TExpr, c: TExpr, literal_first: bool) -> TExpr {
    if literal_first {
        let flipped = match op {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            other => other,
        };
        fx::cmp(flipped, c, value)
    } else {
        fx::cmp(op, value, c)
    }
}

/// The expression of `s`, every node with a span starting at `offset` (spans must not matter).
fn build(s: &Shape, offset: usize) -> TExpr {
    let e = match s {
        Shape::Tools(op, c, f) => compared(*op, fx::request(RequestField::Tools), number(*c), *f),
        Shape::Score(op, c, f) => compared(*op, fx::guard(fx::prompt()), number(*c), *f),
        Shape::Stream => fx::request(RequestField::Stream),
        Shape::In(ls) => fx::is(
            fx::classify(fx::prompt()),
            &ls.iter().map(|&l| LabelId(l)).collect::<Vec<_>>(),
        ),
        Shape::Eq(l, eq, f) => {
            let op = if *eq { CmpOp::Eq } else { CmpOp::Ne };
            let (topic, l) = (fx::classify(fx::prompt()), fx::label(LabelId(*l)));
            if *f {
                fx::cmp(op, l, topic)
            } else {
                fx::cmp(op, topic, l)
            }
        }
        Shape::Literals(op, x, y) => fx::cmp(*op, number(*x), number(*y)),
        Shape::Const(v) => fx::b(*v),
        Shape::Not(a) => fx::not(build(a, offset + 1)),
        Shape::And(x, y) => fx::and(build(x, offset + 1), build(y, offset + 2)),
        Shape::Or(x, y) => fx::or(build(x, offset + 1), build(y, offset + 2)),
    };
    fx::at(e, offset, offset + 1)
}

/// The leaves' values.
#[derive(Debug, Clone, Copy)]
struct Leaves {
    tools: f64,
    score: f64,
    stream: bool,
    topic: u32,
}

/// What `s` means for `v`.
fn meaning(s: &Shape, v: Leaves) -> bool {
    let half = |c: i32| f64::from(c) / 2.0;
    match s {
        Shape::Tools(op, c, _) => meets(*op, v.tools, half(*c)),
        Shape::Score(op, c, _) => meets(*op, v.score, half(*c)),
        Shape::Stream => v.stream,
        Shape::In(ls) => ls.contains(&v.topic),
        Shape::Eq(l, eq, _) => (v.topic == *l) == *eq,
        Shape::Literals(op, x, y) => meets(*op, half(*x), half(*y)),
        Shape::Const(b) => *b,
        Shape::Not(a) => !meaning(a, v),
        Shape::And(x, y) => meaning(x, v) && meaning(y, v),
        Shape::Or(x, y) => meaning(x, v) || meaning(y, v),
    }
}

fn every_leaves() -> Vec<Leaves> {
    let mut out = Vec::new();
    for tools in -2..=7 {
        for score in -4..=28 {
            for stream in [false, true] {
                for topic in 0..UNIVERSE {
                    out.push(Leaves {
                        tools: f64::from(tools),
                        score: f64::from(score) / 4.0,
                        stream,
                        topic,
                    });
                }
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn the_dnf_of_a_condition_means_the_condition(s in shape()) {
        let mut analysis = Analysis::new(&[], vec![UNIVERSE as usize]);
        let keys: HashMap<Key, usize> = [
            analysis.canon(&fx::request(RequestField::Tools)),
            analysis.canon(&fx::guard(fx::prompt())),
            analysis.canon(&fx::request(RequestField::Stream)),
            analysis.canon(&fx::classify(fx::prompt())),
        ]
        .into_iter()
        .zip(0..)
        .collect();
        prop_assert_eq!(keys.len(), 4, "distinct leaves have distinct keys");
        let leaf_values = |k: Key| -> Vec<f64> {
            match keys.get(&k) {
                Some(0) => (-2..=7).map(f64::from).collect(),
                Some(1) => (-4..=28).map(|q| f64::from(q) / 4.0).collect(),
                Some(2) => vec![0.0, 1.0],
                _ => (0..UNIVERSE).map(f64::from).collect(),
            }
        };
        let e = build(&s, 0);
        for truth in [true, false] {
            let Some(d) = analysis.dnf(&e, truth) else { continue };
            for c in &d {
                prop_assert!(c.iter().all(|(k, _)| keys.contains_key(k)), "{:?}", c);
                prop_assert!(well_formed(c, &leaf_values), "{:?}", c);
            }
            for v in every_leaves() {
                let value = |k: Key| match keys.get(&k) {
                    Some(0) => v.tools,
                    Some(1) => v.score,
                    Some(2) => f64::from(u8::from(v.stream)),
                    _ => f64::from(v.topic),
                };
                prop_assert_eq!(
                    dnf_holds(&d, &value),
                    meaning(&s, v) == truth,
                    "{:?} at {:?}: {:?}", s, v, d
                );
            }
            // The canonical form ignores where the expression was written.
            prop_assert_eq!(analysis.dnf(&build(&s, 100), truth), Some(d));
        }
    }
}
