//! Semantics tables, each case run on both engines, the interpreter and the JIT: the expected values come
//! from the language rules (Kleene logic, wrapping integers, IEEE floats), not from either
//! engine.

use crate::fixture::*;
use crate::hir::{ArithOp, CmpOp, RequestField, RouteId, Type};
use crate::interp;
use crate::ir::{lower, Atom, HoldOutcome, Outcome, Program, Row, Slot, TextExpr, Verdict};
use crate::jit::{JitPolicy, PART};

/// Bool inputs `p`, `q`; int inputs `x`, `y`; float inputs `f`, `g`.
fn p() -> crate::hir::TExpr {
    request(RequestField::Stream)
}
fn q() -> crate::hir::TExpr {
    request(RequestField::ToolLoop)
}
fn x() -> crate::hir::TExpr {
    request(RequestField::Tools)
}
fn y() -> crate::hir::TExpr {
    request(RequestField::Turns)
}
fn f() -> crate::hir::TExpr {
    guard(prompt())
}
fn g() -> crate::hir::TExpr {
    similarity(prompt(), &["example"])
}

#[derive(Clone, Copy)]
enum In {
    P(Option<bool>),
    Q(Option<bool>),
    X(Option<i64>),
    Y(Option<i64>),
    F(Option<f64>),
    G(Option<f64>),
}

fn atom_of(i: In) -> (Atom, Option<Slot>) {
    let b = |v: Option<bool>| v.map(|v| Slot::known(u64::from(v)));
    let n = |v: Option<i64>| v.map(|v| Slot::known(v as u64));
    let fl = |v: Option<f64>| v.map(|v| Slot::known(v.to_bits()));
    match i {
        In::P(v) => (Atom::Request(RequestField::Stream), b(v)),
        In::Q(v) => (Atom::Request(RequestField::ToolLoop), b(v)),
        In::X(v) => (Atom::Request(RequestField::Tools), n(v)),
        In::Y(v) => (Atom::Request(RequestField::Turns), n(v)),
        In::F(v) => (Atom::Guard(GUARD, TextExpr::Prompt), fl(v)),
        In::G(v) => (
            Atom::Similarity(
                ENCODER,
                TextExpr::Prompt,
                vec!["example".to_string()].into(),
            ),
            fl(v),
        ),
    }
}

fn program_for(when: crate::hir::TExpr) -> Program {
    let mut pb = PolicyBuilder::new();
    pb.route("r", Some(when), STRONG)
        .route("default", None, SMALL);
    match lower(&pb.build()) {
        Ok(p) => p,
        Err(e) => panic!("lowering failed: {e}"),
    }
}

/// The condition's value on both engines (which must agree): `None` when unknown.
fn eval(when: crate::hir::TExpr, inputs: &[In]) -> Option<bool> {
    let program = program_for(when);
    let mut row = program.new_row();
    for &i in inputs {
        let (atom, value) = atom_of(i);
        if let (Some(slot), Some(v)) = (program.atom_slot(&atom), value) {
            row.set(slot, v);
        }
    }
    let jit = match JitPolicy::compile(&program) {
        Ok(j) => j,
        Err(e) => panic!("jit failed: {e}"),
    };
    let a = interp::decide(&program, &row);
    let b = jit.decide(&row);
    assert_eq!(a, b, "engines disagree");
    match a {
        Outcome::Decided(Verdict::Route(RouteId(0))) => Some(true),
        Outcome::Decided(Verdict::Route(RouteId(1))) => Some(false),
        Outcome::Needs(_) => None,
        other => panic!("unexpected outcome {other:?}"),
    }
}

const T: Option<bool> = Some(true);
const F: Option<bool> = Some(false);
const U: Option<bool> = None;

#[test]
fn kleene_and_or_not() {
    // (p, q, p and q, p or q), written out from the three-valued truth tables.
    let table = [
        (T, T, T, T),
        (T, F, F, T),
        (T, U, U, T),
        (F, T, F, T),
        (F, F, F, F),
        (F, U, F, U),
        (U, T, U, T),
        (U, F, F, U),
        (U, U, U, U),
    ];
    for (a, b, and_v, or_v) in table {
        let ins = [In::P(a), In::Q(b)];
        assert_eq!(eval(and(p(), q()), &ins), and_v, "{a:?} and {b:?}");
        assert_eq!(eval(or(p(), q()), &ins), or_v, "{a:?} or {b:?}");
    }
    assert_eq!(eval(not(p()), &[In::P(T)]), F);
    assert_eq!(eval(not(p()), &[In::P(F)]), T);
    assert_eq!(eval(not(p()), &[In::P(U)]), U);
}

#[test]
fn unknown_operands_make_arithmetic_and_comparisons_unknown() {
    let sum_pos = cmp(CmpOp::Gt, arith(ArithOp::Add, x(), y()), int(0));
    assert_eq!(eval(sum_pos.clone(), &[In::X(Some(1))]), U);
    assert_eq!(eval(sum_pos, &[In::X(Some(1)), In::Y(Some(1))]), T);
    // ... but `and` with a known false side is decided without them.
    let guarded = and(p(), cmp(CmpOp::Gt, f(), float(0.5)));
    assert_eq!(eval(guarded, &[In::P(F)]), F);
}

#[test]
fn int_arithmetic_wraps() {
    let max = Some(i64::MAX);
    let e = cmp(CmpOp::Eq, arith(ArithOp::Add, x(), int(1)), int(i64::MIN));
    assert_eq!(eval(e, &[In::X(max)]), T);
    let e = cmp(CmpOp::Eq, arith(ArithOp::Mul, x(), int(2)), int(-2));
    assert_eq!(eval(e, &[In::X(max)]), T);
    let e = cmp(CmpOp::Eq, arith(ArithOp::Sub, x(), int(1)), int(i64::MAX));
    assert_eq!(eval(e, &[In::X(Some(i64::MIN))]), T);
}

#[test]
fn division_by_zero_is_zero_and_min_by_minus_one_wraps() {
    let div = |a, b| arith(ArithOp::Div, a, b);
    let e = cmp(CmpOp::Eq, div(x(), y()), int(0));
    assert_eq!(eval(e.clone(), &[In::X(Some(7)), In::Y(Some(0))]), T);
    assert_eq!(eval(e, &[In::X(Some(i64::MIN)), In::Y(Some(0))]), T);
    let e = cmp(CmpOp::Eq, div(x(), y()), int(i64::MIN));
    assert_eq!(eval(e, &[In::X(Some(i64::MIN)), In::Y(Some(-1))]), T);
    let e = cmp(CmpOp::Eq, div(x(), y()), int(-3));
    assert_eq!(eval(e, &[In::X(Some(7)), In::Y(Some(-2))]), T, "truncates");
    let e = cmp(CmpOp::Eq, div(f(), g()), float(0.0));
    assert_eq!(eval(e.clone(), &[In::F(Some(1.0)), In::G(Some(0.0))]), T);
    assert_eq!(eval(e, &[In::F(Some(1.0)), In::G(Some(-0.0))]), T);
}

#[test]
fn nan_compares_false_except_not_equal() {
    let nan = Some(f64::NAN);
    for (op, expected) in [
        (CmpOp::Eq, F),
        (CmpOp::Ne, T),
        (CmpOp::Lt, F),
        (CmpOp::Le, F),
        (CmpOp::Gt, F),
        (CmpOp::Ge, F),
    ] {
        assert_eq!(
            eval(cmp(op, f(), g()), &[In::F(nan), In::G(Some(1.0))]),
            expected,
            "{op:?}"
        );
    }
}

#[test]
fn min_and_max_follow_their_definition_with_nan() {
    let min = |a, b| arith(ArithOp::Min, a, b);
    let max = |a, b| arith(ArithOp::Max, a, b);
    let nan = Some(f64::NAN);
    // min(NaN, 1) = 1 because `NaN < 1` is false; min(1, NaN) = NaN.
    let e = cmp(CmpOp::Eq, min(f(), g()), float(1.0));
    assert_eq!(eval(e.clone(), &[In::F(nan), In::G(Some(1.0))]), T);
    assert_eq!(eval(e, &[In::F(Some(1.0)), In::G(nan)]), F);
    let e = cmp(CmpOp::Eq, max(f(), g()), float(1.0));
    assert_eq!(eval(e, &[In::F(nan), In::G(Some(1.0))]), T);
    let e = cmp(CmpOp::Eq, min(x(), y()), int(-5));
    assert_eq!(eval(e, &[In::X(Some(3)), In::Y(Some(-5))]), T);
    let e = cmp(CmpOp::Eq, max(x(), y()), int(3));
    assert_eq!(eval(e, &[In::X(Some(3)), In::Y(Some(-5))]), T);
}

#[test]
fn int_promotes_to_float() {
    let e = cmp(CmpOp::Lt, x(), f());
    assert_eq!(eval(e.clone(), &[In::X(Some(3)), In::F(Some(3.5))]), T);
    assert_eq!(eval(e, &[In::X(Some(4)), In::F(Some(3.5))]), F);
    let e = cmp(CmpOp::Eq, arith(ArithOp::Add, x(), f()), float(3.5));
    assert_eq!(eval(e, &[In::X(Some(3)), In::F(Some(0.5))]), T);
}

#[test]
fn labels_and_confidence() {
    let topic = classify(prompt());
    let mut pb = PolicyBuilder::new();
    let t = pb.signal("topic", topic);
    let ty = Type::Class(crate::hir::ClassSet::Classifier(DOMAIN));
    pb.route("math", Some(is(sig(t, ty), &[MATH, LAW])), STRONG)
        .route(
            "sure_code",
            Some(and(
                cmp(CmpOp::Eq, sig(t, ty), label(CODE)),
                cmp(CmpOp::Ge, confidence(sig(t, ty)), float(0.8)),
            )),
            STRONG,
        )
        .route("default", None, SMALL);
    let program = lower(&pb.build()).unwrap_or_else(|e| panic!("{e}"));
    let jit = JitPolicy::compile(&program).unwrap_or_else(|e| panic!("{e}"));
    let atom = &program.atoms()[0];
    let conf = atom
        .confidence
        .unwrap_or_else(|| panic!("no confidence slot"));
    let decide = |label: u32, c: f64| {
        let mut row = program.new_row();
        row.set_label(atom.slot, crate::hir::LabelId(label));
        row.set_float(conf, c);
        let out = interp::decide(&program, &row);
        assert_eq!(out, jit.decide(&row));
        out
    };
    let route = |i| Outcome::Decided(Verdict::Route(RouteId(i)));
    assert_eq!(decide(LAW.0, 0.1), route(0));
    assert_eq!(decide(CODE.0, 0.9), route(1));
    assert_eq!(decide(CODE.0, 0.5), route(2));
    assert_eq!(decide(3, 0.99), route(2));
}

#[test]
fn hold_scans_in_order() {
    let mut pb = PolicyBuilder::new();
    pb.route("default", None, SMALL)
        .hold("first", p())
        .hold("second", q());
    let program = lower(&pb.build()).unwrap_or_else(|e| panic!("{e}"));
    let jit = JitPolicy::compile(&program).unwrap_or_else(|e| panic!("{e}"));
    let run = |a: Option<bool>, b: Option<bool>| {
        let mut row = program.new_row();
        for i in [In::P(a), In::Q(b)] {
            let (atom, v) = atom_of(i);
            if let (Some(s), Some(v)) = (program.atom_slot(&atom), v) {
                row.set(s, v);
            }
        }
        let out = interp::hold(&program, &row);
        assert_eq!(out, jit.hold(&row));
        out
    };
    assert_eq!(run(T, U), HoldOutcome::Held(0));
    assert_eq!(run(F, T), HoldOutcome::Held(1));
    assert_eq!(run(F, F), HoldOutcome::NoHold);
    let first = program.hold_conds().start as u32;
    assert_eq!(run(U, T), HoldOutcome::Needs(crate::ir::CondId(first)));
}

#[test]
fn short_rows_read_as_unknown() {
    let program = program_for(and(p(), q()));
    let jit = JitPolicy::compile(&program).unwrap_or_else(|e| panic!("{e}"));
    let row = Row::unknown(0);
    assert_eq!(jit.decide(&row), interp::decide(&program, &row));
    assert!(matches!(jit.decide(&row), Outcome::Needs(_)));
}

#[test]
fn jit_policy_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<JitPolicy>();
}

#[test]
fn long_scans_split_into_parts_agree_with_the_interpreter() {
    // More conditions than one compiled part holds, for both scans, with the decisive
    // condition in every part in turn.
    let n = 3 * PART as i64 + 5;
    let mut pb = PolicyBuilder::new();
    let safe = pb.signal("safe", cmp(CmpOp::Lt, f(), float(0.5)));
    pb.block("b", and(p(), cmp(CmpOp::Gt, x(), int(n))));
    for i in 0..n {
        let when = or(
            and(cmp(CmpOp::Eq, x(), int(i)), sig(safe, Type::Bool)),
            and(q(), cmp(CmpOp::Eq, y(), int(i))),
        );
        pb.route("r", Some(when), STRONG)
            .hold("h", cmp(CmpOp::Eq, y(), int(n - i)));
    }
    pb.route("default", None, SMALL);
    let program = lower(&pb.build()).unwrap_or_else(|e| panic!("{e}"));
    let jit = JitPolicy::compile(&program).unwrap_or_else(|e| panic!("{e}"));
    let mut seed = 7u64;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        seed >> 33
    };
    let mut decided = std::collections::HashSet::new();
    for _ in 0..2000 {
        let pick = |r: u64| match r % 4 {
            0 => None,
            _ => Some(r.is_multiple_of(2)),
        };
        let ins = [
            In::P(pick(next())),
            In::Q(pick(next())),
            In::X((next() % 5 != 0).then(|| (next() % (n as u64 + 3)) as i64)),
            In::Y((next() % 5 != 0).then(|| (next() % (n as u64 + 3)) as i64)),
            In::F((next() % 5 != 0).then(|| (next() % 10) as f64 / 10.0)),
        ];
        let mut row = program.new_row();
        for i in ins {
            let (atom, v) = atom_of(i);
            if let (Some(s), Some(v)) = (program.atom_slot(&atom), v) {
                row.set(s, v);
            }
        }
        let out = interp::decide(&program, &row);
        assert_eq!(out, jit.decide(&row));
        assert_eq!(interp::hold(&program, &row), jit.hold(&row));
        decided.insert(out);
    }
    // The rows reached decisions in several parts, not just the first.
    let late = decided
        .iter()
        .filter(
            |o| matches!(o, Outcome::Decided(Verdict::Route(RouteId(r))) if *r as usize > 2 * PART),
        )
        .count();
    assert!(late > 0, "{decided:?}");
}
