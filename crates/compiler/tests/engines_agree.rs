//! The interpreter and the JIT agree on every well-typed policy and every row.
//!
//! A type-directed generator builds small typed expression trees (bool, int, float, class and
//! model valued: nested `and`/`or`/`not`, arithmetic including `/`, `min`, `max` and mixed
//! int/float promotion, comparisons, exact, fuzzy and BM25 phrase atoms, `is`/`in`, label
//! equality, `.confidence`, `.cost`), turns them into a checked policy with signals (that use earlier signals), blocks, prioritised
//! routes and `protect` holds, lowers it and compiles it once; then many rows — slots known or
//! unknown, with edge values (NaN, ±0, infinities, `i64::MIN`, -1, out-of-range labels, and
//! garbage in unknown slots) — must give the same `decide` and `hold` on both engines. A fully
//! known row must never answer `Needs`.

use proptest::prelude::*;
use src_compiler::fixture::{
    and, arith, cmp, confidence, cost, ex, guard, header, history, int, is, label, model, neg, not,
    or, pinned, prompt, proposed, request, s, sig, similarity, system, PolicyBuilder, DOMAIN,
    SMALL,
};
use src_compiler::hir::*;
use src_compiler::interp;
use src_compiler::ir::{lower, HoldOutcome, Outcome, Program, Row, Slot, SlotKind, SlotSource};
use src_compiler::jit::JitPolicy;

const LABELS: usize = 4;
const MODELS: usize = 3;
const ROWS_PER_POLICY: usize = 24;

// ---------------------------------------------------------------- generated shapes

#[derive(Debug, Clone)]
enum B {
    Lit(bool),
    Atom(u8),
    Sig(u8),
    And(Box<B>, Box<B>),
    Or(Box<B>, Box<B>),
    Not(Box<B>),
    CmpI(CmpOp, I, I),
    CmpF(CmpOp, F, F),
    CmpMixed(CmpOp, I, F),
    CmpBool(bool, Box<B>, Box<B>),
    Is(C, Vec<u8>),
    EqLabel(bool, C, u8),
    EqClass(bool, C, C),
    EqModel(bool, M, M),
}

#[derive(Debug, Clone)]
enum I {
    Lit(i64),
    Atom(u8),
    Sig(u8),
    Arith(ArithOp, Box<I>, Box<I>),
    Neg(Box<I>),
}

#[derive(Debug, Clone)]
enum F {
    Lit(f64),
    Atom(u8),
    Sig(u8),
    Arith(ArithOp, Box<F>, Box<F>),
    Mixed(ArithOp, Box<I>, Box<F>),
    Neg(Box<F>),
    Conf(C),
    Cost(M),
}

#[derive(Debug, Clone)]
enum C {
    Atom(u8),
    Sig(u8),
}

#[derive(Debug, Clone)]
enum M {
    Pinned,
    Proposed,
    Lit(u8),
}

#[derive(Debug, Clone)]
enum SignalShape {
    Bool(B),
    Int(I),
    Float(F),
    Class(C),
}

#[derive(Debug, Clone)]
struct Shape {
    signals: Vec<SignalShape>,
    blocks: Vec<B>,
    routes: Vec<B>,
    holds: Vec<B>,
}

fn cmp_op() -> impl Strategy<Value = CmpOp> {
    prop_oneof![
        Just(CmpOp::Eq),
        Just(CmpOp::Ne),
        Just(CmpOp::Lt),
        Just(CmpOp::Le),
        Just(CmpOp::Gt),
        Just(CmpOp::Ge)
    ]
}

fn arith_op() -> impl Strategy<Value = ArithOp> {
    prop_oneof![
        Just(ArithOp::Add),
        Just(ArithOp::Sub),
        Just(ArithOp::Mul),
        Just(ArithOp::Div),
        Just(ArithOp::Min),
        Just(ArithOp::Max)
    ]
}

fn int_lit() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(0i64),
        Just(1),
        Just(-1),
        Just(2),
        Just(i64::MIN),
        Just(i64::MAX),
        -100i64..100,
        any::<i64>()
    ]
}

fn float_lit() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0f64),
        Just(-0.0),
        Just(0.5),
        Just(1.0),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        -2.0f64..2.0,
    ]
}

fn class() -> BoxedStrategy<C> {
    prop_oneof![any::<u8>().prop_map(C::Atom), any::<u8>().prop_map(C::Sig)].boxed()
}

fn any_model() -> BoxedStrategy<M> {
    prop_oneof![
        Just(M::Pinned),
        Just(M::Proposed),
        any::<u8>().prop_map(M::Lit)
    ]
    .boxed()
}

/// Strategies for bool, int and float trees up to `depth` levels, built level by level so
/// each level reuses the previous one.
fn trees(depth: usize) -> (BoxedStrategy<B>, BoxedStrategy<I>, BoxedStrategy<F>) {
    let mut b = prop_oneof![
        any::<bool>().prop_map(B::Lit),
        any::<u8>().prop_map(B::Atom),
        any::<u8>().prop_map(B::Sig),
    ]
    .boxed();
    let mut i = prop_oneof![
        int_lit().prop_map(I::Lit),
        any::<u8>().prop_map(I::Atom),
        any::<u8>().prop_map(I::Sig),
    ]
    .boxed();
    let mut f = prop_oneof![
        float_lit().prop_map(F::Lit),
        any::<u8>().prop_map(F::Atom),
        any::<u8>().prop_map(F::Sig),
        class().prop_map(F::Conf),
        any_model().prop_map(F::Cost),
    ]
    .boxed();
    for _ in 0..depth {
        let (b0, i0, f0) = (b.clone(), i.clone(), f.clone());
        let nb = prop_oneof![
            2 => b0.clone(),
            2 => (b0.clone(), b0.clone()).prop_map(|(x, y)| B::And(Box::new(x), Box::new(y))),
            2 => (b0.clone(), b0.clone()).prop_map(|(x, y)| B::Or(Box::new(x), Box::new(y))),
            1 => b0.clone().prop_map(|x| B::Not(Box::new(x))),
            2 => (cmp_op(), i0.clone(), i0.clone()).prop_map(|(o, x, y)| B::CmpI(o, x, y)),
            2 => (cmp_op(), f0.clone(), f0.clone()).prop_map(|(o, x, y)| B::CmpF(o, x, y)),
            1 => (cmp_op(), i0.clone(), f0.clone()).prop_map(|(o, x, y)| B::CmpMixed(o, x, y)),
            1 => (any::<bool>(), b0.clone(), b0.clone())
                .prop_map(|(e, x, y)| B::CmpBool(e, Box::new(x), Box::new(y))),
            1 => (class(), prop::collection::vec(any::<u8>(), 0..3))
                .prop_map(|(c, l)| B::Is(c, l)),
            1 => (any::<bool>(), class(), any::<u8>()).prop_map(|(e, c, l)| B::EqLabel(e, c, l)),
            1 => (any::<bool>(), class(), class()).prop_map(|(e, x, y)| B::EqClass(e, x, y)),
            1 => (any::<bool>(), any_model(), any_model()).prop_map(|(e, x, y)| B::EqModel(e, x, y)),
        ]
        .boxed();
        let ni = prop_oneof![
            2 => i0.clone(),
            3 => (arith_op(), i0.clone(), i0.clone())
                .prop_map(|(o, x, y)| I::Arith(o, Box::new(x), Box::new(y))),
            1 => i0.clone().prop_map(|x| I::Neg(Box::new(x))),
        ]
        .boxed();
        let nf = prop_oneof![
            2 => f0.clone(),
            2 => (arith_op(), f0.clone(), f0.clone())
                .prop_map(|(o, x, y)| F::Arith(o, Box::new(x), Box::new(y))),
            2 => (arith_op(), i0.clone(), f0.clone())
                .prop_map(|(o, x, y)| F::Mixed(o, Box::new(x), Box::new(y))),
            1 => f0.clone().prop_map(|x| F::Neg(Box::new(x))),
        ]
        .boxed();
        b = nb;
        i = ni;
        f = nf;
    }
    (b, i, f)
}

fn shape() -> impl Strategy<Value = Shape> {
    let (b, i, f) = trees(3);
    let signal = prop_oneof![
        b.clone().prop_map(SignalShape::Bool),
        i.prop_map(SignalShape::Int),
        f.prop_map(SignalShape::Float),
        class().prop_map(SignalShape::Class),
    ];
    (
        prop::collection::vec(signal, 0..6),
        prop::collection::vec(b.clone(), 0..3),
        prop::collection::vec(b.clone(), 0..6),
        prop::collection::vec(b, 0..3),
    )
        .prop_map(|(signals, blocks, routes, holds)| Shape {
            signals,
            blocks,
            routes,
            holds,
        })
}

// ---------------------------------------------------------------- typed expressions

fn bx(e: TExpr) -> Box<TExpr> {
    Box::new(e)
}

fn text(which: u8) -> TExpr {
    match which % 3 {
        0 => prompt(),
        1 => history(),
        _ => system(),
    }
}

fn phrases(which: u8) -> Vec<String> {
    let all = ["alpha", "beta", "gamma", "stack trace"];
    all.iter()
        .take(1 + which as usize % all.len())
        .map(|s| s.to_string())
        .collect()
}

/// A `fuzzy` threshold in (0, 1].
fn fuzzy_min(n: u8) -> f64 {
    [0.5, 0.8, 1.0][n as usize % 3]
}

fn domain() -> Type {
    Type::Class(ClassSet::Classifier(DOMAIN))
}

/// Signals visible at some point, by type.
#[derive(Default)]
struct Scope {
    bools: Vec<SignalId>,
    ints: Vec<SignalId>,
    floats: Vec<SignalId>,
    classes: Vec<SignalId>,
}

fn pick(list: &[SignalId], n: u8) -> Option<SignalId> {
    (!list.is_empty()).then(|| list[n as usize % list.len()])
}

fn eq_op(eq: bool) -> CmpOp {
    if eq {
        CmpOp::Eq
    } else {
        CmpOp::Ne
    }
}

impl B {
    fn build(&self, s: &Scope) -> TExpr {
        match self {
            B::Lit(v) => src_compiler::fixture::b(*v),
            B::Atom(n) => bool_atom(*n),
            B::Sig(n) => match pick(&s.bools, *n) {
                Some(id) => sig(id, Type::Bool),
                None => bool_atom(*n),
            },
            B::And(a, b) => and(a.build(s), b.build(s)),
            B::Or(a, b) => or(a.build(s), b.build(s)),
            B::Not(a) => not(a.build(s)),
            B::CmpI(o, a, b) => cmp(*o, a.build(s), b.build(s)),
            B::CmpF(o, a, b) => cmp(*o, a.build(s), b.build(s)),
            B::CmpMixed(o, a, b) => cmp(*o, a.build(s), b.build(s)),
            B::CmpBool(eq, a, b) => cmp(eq_op(*eq), a.build(s), b.build(s)),
            B::Is(c, labels) => {
                let labels: Vec<LabelId> = labels
                    .iter()
                    .map(|l| LabelId(*l as u32 % LABELS as u32))
                    .collect();
                is(c.build(s), &labels)
            }
            B::EqLabel(eq, c, l) => cmp(
                eq_op(*eq),
                c.build(s),
                label(LabelId(*l as u32 % LABELS as u32)),
            ),
            B::EqClass(eq, a, b) => cmp(eq_op(*eq), a.build(s), b.build(s)),
            B::EqModel(eq, a, b) => cmp(eq_op(*eq), a.build(), b.build()),
        }
    }
}

fn bool_atom(n: u8) -> TExpr {
    let t = text(n / 11);
    match n % 11 {
        10 => {
            let entities: &[&str] = match n % 3 {
                0 => &["PERSON"],
                1 => &["LOCATION"],
                _ => &["LOCATION", "PERSON"],
            };
            src_compiler::fixture::detect(t, entities)
        }
        1 => request(RequestField::ToolLoop),
        2 => ex(
            TExprKind::Contains {
                text: bx(t),
                phrases: phrases(n / 3),
            },
            Type::Bool,
        ),
        3 => ex(
            TExprKind::Sequence {
                text: bx(t),
                phrases: phrases(n / 5),
            },
            Type::Bool,
        ),
        4 => ex(
            TExprKind::Matches {
                text: bx(t),
                regex: "a+b".into(),
            },
            Type::Bool,
        ),
        5 => cmp(CmpOp::Eq, header("x-tier"), s("gold")),
        6 => {
            let key = ex(TExprKind::ApiKey, Type::OptText);
            let key = ex(TExprKind::Coalesce(bx(key), bx(s("none"))), Type::Text);
            cmp(CmpOp::Ne, key, s("sk-test"))
        }
        7 => request(RequestField::ProviderState),
        8 => ex(
            TExprKind::Fuzzy {
                text: bx(t),
                phrases: phrases(n / 3),
                min: fuzzy_min(n),
            },
            Type::Bool,
        ),
        9 => {
            let field = ex(TExprKind::Body("metadata.tier".into()), Type::OptText);
            cmp(CmpOp::Eq, field, s("gold"))
        }
        _ => request(RequestField::Stream),
    }
}

impl I {
    fn build(&self, s: &Scope) -> TExpr {
        match self {
            I::Lit(v) => int(*v),
            I::Atom(n) => int_atom(*n),
            I::Sig(n) => match pick(&s.ints, *n) {
                Some(id) => sig(id, Type::Int),
                None => int_atom(*n),
            },
            I::Arith(o, a, b) => arith(*o, a.build(s), b.build(s)),
            I::Neg(a) => neg(a.build(s)),
        }
    }
}

fn int_atom(n: u8) -> TExpr {
    let t = bx(text(n / 8));
    let k = match n % 9 {
        0 => return request(RequestField::Tools),
        1 => return request(RequestField::Turns),
        2 => return request(RequestField::Messages),
        3 => TExprKind::Words(t),
        4 => TExprKind::Tokens(t),
        5 => TExprKind::Hits {
            text: t,
            phrases: phrases(n / 3),
        },
        6 => TExprKind::Count {
            text: t,
            regex: "[0-9]+".into(),
        },
        7 => TExprKind::FuzzyHits {
            text: t,
            phrases: phrases(n / 3),
            min: fuzzy_min(n),
        },
        _ => TExprKind::OutcomeCount,
    };
    ex(k, Type::Int)
}

impl F {
    fn build(&self, s: &Scope) -> TExpr {
        match self {
            F::Lit(v) => src_compiler::fixture::float(*v),
            F::Atom(n) => float_atom(*n),
            F::Sig(n) => match pick(&s.floats, *n) {
                Some(id) => sig(id, Type::Float),
                None => float_atom(*n),
            },
            F::Arith(o, a, b) => arith(*o, a.build(s), b.build(s)),
            F::Mixed(o, a, b) => arith(*o, a.build(s), b.build(s)),
            F::Neg(a) => neg(a.build(s)),
            F::Conf(c) => confidence(c.build(s)),
            F::Cost(m) => cost(m.build()),
        }
    }
}

fn float_atom(n: u8) -> TExpr {
    let t = text(n / 8);
    let k = match n % 7 {
        0 => return guard(t),
        1 => {
            let examples = phrases(n / 5);
            let examples: Vec<&str> = examples.iter().map(String::as_str).collect();
            return similarity(t, &examples);
        }
        2 => TExprKind::Density {
            text: bx(t),
            phrases: phrases(n / 3),
        },
        3 => TExprKind::OutcomeFailRate,
        5 => TExprKind::BudgetUsed(src_compiler::hir::BudgetId(u32::from(n % 2))),
        4 => {
            let bm25 = TExprKind::Bm25 {
                text: bx(t),
                phrases: phrases(n / 3),
            };
            return ex(bm25, Type::Float);
        }
        _ => return guard(prompt()),
    };
    ex(k, Type::Score)
}

impl C {
    fn build(&self, s: &Scope) -> TExpr {
        match self {
            C::Atom(n) => src_compiler::fixture::classify(text(*n)),
            C::Sig(n) => match pick(&s.classes, *n) {
                Some(id) => sig(id, domain()),
                None => C::Atom(*n).build(s),
            },
        }
    }
}

impl M {
    fn build(&self) -> TExpr {
        match self {
            M::Pinned => pinned(),
            M::Proposed => proposed(),
            M::Lit(n) => model(ModelId(*n as u32 % MODELS as u32)),
        }
    }
}

// ---------------------------------------------------------------- policies and rows

/// The fixture's catalog (models `small` 0.1 and `strong` 1.0, the `domain` classifier with
/// four labels, a guard, an encoder, a detector) plus a model whose cost is NaN.
fn policy(shape: &Shape) -> CheckedPolicy {
    let mut pb = PolicyBuilder::new();
    pb.model("nan", f64::NAN);
    let mut scope = Scope::default();
    for (i, signal) in shape.signals.iter().enumerate() {
        let expr = match signal {
            SignalShape::Bool(b) => b.build(&scope),
            SignalShape::Int(x) => x.build(&scope),
            SignalShape::Float(f) => f.build(&scope),
            SignalShape::Class(c) => c.build(&scope),
        };
        let id = pb.signal(&format!("s{i}"), expr);
        match signal {
            SignalShape::Bool(_) => scope.bools.push(id),
            SignalShape::Int(_) => scope.ints.push(id),
            SignalShape::Float(_) => scope.floats.push(id),
            SignalShape::Class(_) => scope.classes.push(id),
        }
    }
    for (i, b) in shape.blocks.iter().enumerate() {
        pb.block(&format!("b{i}"), b.build(&scope));
    }
    for (i, b) in shape.routes.iter().enumerate() {
        pb.route(&format!("r{i}"), Some(b.build(&scope)), SMALL);
    }
    pb.route("default", None, SMALL);
    for (i, b) in shape.holds.iter().enumerate() {
        pb.hold(&format!("h{i}"), b.build(&scope));
    }
    pb.build()
}

/// splitmix64: rows are derived from one generated seed per row.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn value(kind: SlotKind, rng: &mut Rng) -> u64 {
    match kind {
        SlotKind::Bool => rng.below(2),
        SlotKind::Int => {
            let specials = [0i64, 1, -1, 2, 3, i64::MIN, i64::MAX, 1000];
            match rng.below(3) {
                0 => specials[rng.below(specials.len() as u64) as usize] as u64,
                1 => (rng.below(21) as i64 - 10) as u64,
                _ => rng.next(),
            }
        }
        SlotKind::Float => {
            let specials = [
                0.0f64,
                -0.0,
                0.5,
                1.0,
                0.7,
                f64::NAN,
                f64::INFINITY,
                f64::NEG_INFINITY,
                1e-300,
            ];
            match rng.below(2) {
                0 => specials[rng.below(specials.len() as u64) as usize].to_bits(),
                _ => ((rng.below(4001) as f64 - 2000.0) / 1000.0).to_bits(),
            }
        }
        // One past the end, and a huge value, to check out-of-range ids.
        SlotKind::Label(_) => match rng.below(8) {
            0 => u64::MAX,
            _ => rng.below(LABELS as u64 + 1),
        },
        SlotKind::Model => rng.below(MODELS as u64 + 1),
    }
}

fn row(program: &Program, seed: u64) -> Row {
    let mut rng = Rng(seed);
    let mut row = program.new_row();
    let known_pct = rng.below(101);
    for (i, slot) in program.slots().iter().enumerate() {
        let given = matches!(
            slot.source,
            SlotSource::Given(_) | SlotSource::GivenConfidence(_)
        );
        let known = if given {
            rng.below(5) == 0
        } else {
            rng.below(100) < known_pct
        };
        let v = value(slot.kind, &mut rng);
        // Unknown slots carry garbage: no engine may read it.
        let garbage = rng.next();
        row.set(
            src_compiler::ir::SlotId(i as u32),
            if known {
                Slot::known(v)
            } else {
                Slot {
                    value: garbage,
                    known: 0,
                }
            },
        );
    }
    row
}

/// The row with every atom slot known (given slots as they were).
fn fully_known(program: &Program, row: &Row, seed: u64) -> Row {
    let mut rng = Rng(seed ^ 0x5555);
    let mut full = row.clone();
    for (i, slot) in program.slots().iter().enumerate() {
        let id = src_compiler::ir::SlotId(i as u32);
        if matches!(slot.source, SlotSource::Atom(_) | SlotSource::Confidence(_))
            && !full.is_known(id)
        {
            full.set(id, Slot::known(value(slot.kind, &mut rng)));
        }
    }
    full
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    #[test]
    fn interpreter_and_jit_agree(
        shape in shape(),
        seeds in prop::collection::vec(any::<u64>(), ROWS_PER_POLICY),
    ) {
        let policy = policy(&shape);
        let program = lower(&policy).map_err(|e| TestCaseError::fail(format!("lower: {e}")))?;
        let jit = JitPolicy::compile(&program)
            .map_err(|e| TestCaseError::fail(format!("jit: {e}")))?;
        for seed in seeds {
            let row = row(&program, seed);
            prop_assert_eq!(interp::decide(&program, &row), jit.decide(&row));
            prop_assert_eq!(interp::hold(&program, &row), jit.hold(&row));

            let full = fully_known(&program, &row, seed);
            let decided = interp::decide(&program, &full);
            prop_assert!(!matches!(decided, Outcome::Needs(_)), "{:?}", decided);
            prop_assert_eq!(decided, jit.decide(&full));
            let held = interp::hold(&program, &full);
            prop_assert!(!matches!(held, HoldOutcome::Needs(_)), "{:?}", held);
            prop_assert_eq!(held, jit.hold(&full));
        }
    }
}

// ---------------------------------------------------------------- phrase atoms on real text

/// Routes that hang on phrase atoms over the prompt, with phrases holding whitespace runs (one
/// doubled, one a tab): each route tells which conditions held.
const PHRASE_POLICY: &str = r#"
backend b { url = "http://127.0.0.1:9/v1" }
model small  { backend = b  serves = "s" }
model strong { backend = b  serves = "l" }
signal trace = contains(prompt, ["stack trace", "core  dumped"])
signal many  = hits(prompt, ["stack trace", "null\tpointer", "ok"])
signal dense = density(prompt, ["stack trace", "ok"])
signal steps = sequence(prompt, ["first step", "next step"])
signal score = bm25(prompt, ["stack trace", "null pointer"])
route ordered  priority 50 { when steps and trace  to strong }
route several  priority 40 { when many >= 2  to strong }
route thick    priority 30 { when dense > 0.2  to small }
route scored   priority 20 { when score > 1.5  to strong }
route traced   priority 10 { when trace  to strong }
route default { to small }
"#;

fn phrase_policies() -> Result<Vec<src_compiler::CompiledPolicy>, TestCaseError> {
    let outcome = src_compiler::check(
        src_compiler::load::load_str("phrases.sr", PHRASE_POLICY),
        &src_compiler::CheckOptions::default(),
    );
    let policy = outcome
        .policy
        .ok_or_else(|| TestCaseError::fail(format!("{:?}", outcome.diagnostics)))?;
    [
        src_compiler::EngineKind::Interp,
        src_compiler::EngineKind::Jit,
    ]
    .into_iter()
    .map(|engine| {
        src_compiler::compile(policy.clone(), engine)
            .map_err(|e| TestCaseError::fail(format!("compile: {e}")))
    })
    .collect()
}

/// What a policy made of a prompt: its step and every signal's value.
type Decided = (src_compiler::eval::Step, Vec<(SignalId, Option<Value>)>);

/// The step and the signal values for `prompt`, on each compiled policy.
fn decided(policies: &[src_compiler::CompiledPolicy], prompt: &str) -> Vec<Decided> {
    let req = src_compiler::request::RequestView::from_prompt(prompt, None, &[]);
    policies
        .iter()
        .map(|p| {
            let mut ev = p.evaluate(&req);
            (ev.step(), ev.signal_values())
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn phrase_atoms_agree_across_engines_and_whitespace(
        words in prop::collection::vec(prop::sample::select(vec![
            "stack", "Trace", "core", "dumped", "null", "pointer", "first", "next", "step", "ok",
        ]), 0..16),
        runs in prop::collection::vec(prop::sample::select(vec![
            " ", "  ", "\n", "\r\n", "\t", " \n\n ", "\u{a0}", "\u{3000}",
        ]), 16),
    ) {
        let policies = phrase_policies()?;
        let single = words.join(" ");
        let mut varied = String::new();
        for (i, w) in words.iter().enumerate() {
            if i > 0 {
                varied.push_str(runs[i]);
            }
            varied.push_str(w);
        }
        let by_engine = decided(&policies, &varied);
        prop_assert_eq!(&by_engine[0], &by_engine[1], "interpreter and JIT on {:?}", varied);
        prop_assert!(
            matches!(by_engine[0].0, src_compiler::eval::Step::Decided(_)),
            "{:?}",
            by_engine[0].0
        );
        let spaced = decided(&policies, &single);
        prop_assert_eq!(&by_engine[0], &spaced[0], "{:?} against {:?}", varied, single);
    }
}
