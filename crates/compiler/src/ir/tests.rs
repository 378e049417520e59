//! Lowering, listings, `unknown_slots` and traces.

use super::*;
use crate::fixture::*;
use crate::hir::{CheckedPolicy, ClassSet, CmpOp, RequestField, Type};
use crate::interp;

fn lowered(policy: &CheckedPolicy) -> Program {
    lower(policy).unwrap_or_else(|e| panic!("lowering failed: {e}"))
}

/// The routing policy of `tests/corpus/parse/ok/spec_routing.sr`, plus a cache skip.
fn example() -> CheckedPolicy {
    let class = Type::Class(ClassSet::Classifier(DOMAIN));
    let mut pb = PolicyBuilder::new();
    let topic = pb.signal("topic", classify(prompt()));
    let attack = pb.signal("attack", guard(prompt()));
    let code_talk = pb.signal(
        "code_talk",
        contains(prompt(), &["stack trace", "compile error", "segfault"]),
    );
    pb.block(
        "jailbreak",
        cmp(CmpOp::Gt, sig(attack, Type::Score), float(0.7)),
    )
    .route(
        "hard_math",
        Some(and(
            is(sig(topic, class), &[MATH]),
            cmp(CmpOp::Gt, tokens(history()), int(2000)),
        )),
        STRONG,
    )
    .route(
        "coding",
        Some(or(
            is(sig(topic, class), &[CODE]),
            sig(code_talk, Type::Bool),
        )),
        STRONG,
    )
    .route("default", None, SMALL)
    .hold("tool call in flight", request(RequestField::ToolLoop))
    .skip_cache_when(cmp(CmpOp::Eq, header("x-no-cache"), s("1")));
    pb.build()
}

#[test]
fn listing_of_the_language_example() {
    insta::assert_snapshot!(lowered(&example()).listing());
}

#[test]
fn listing_shows_arithmetic_promotion_and_cost() {
    let mut pb = PolicyBuilder::new();
    let risk = pb.signal(
        "risk",
        arith(
            crate::hir::ArithOp::Add,
            arith(crate::hir::ArithOp::Mul, float(0.8), guard(prompt())),
            request(RequestField::Tools),
        ),
    );
    let pinned_cost = cost(pinned());
    pb.route(
        "risky",
        Some(cmp(CmpOp::Ge, sig(risk, Type::Float), float(1.5))),
        STRONG,
    )
    .route("default", None, SMALL)
    .hold("cheaper", cmp(CmpOp::Lt, pinned_cost, float(0.5)));
    insta::assert_snapshot!(lowered(&pb.build()).listing());
}

#[test]
fn listing_of_text_atoms_language_and_protect() {
    use crate::hir::TExprKind as K;
    let lang_ty = Type::Class(ClassSet::Language);
    let mut pb = PolicyBuilder::new();
    let tier = pb.signal(
        "tier",
        ex(
            K::Coalesce(Box::new(header("X-Tier")), Box::new(s("free"))),
            Type::Text,
        ),
    );
    let lang = pb.signal("lang", ex(K::Language(Box::new(prompt())), lang_ty));
    let en = ex(K::Label(crate::hir::LabelId(14)), lang_ty);
    let count = ex(
        K::Count {
            text: Box::new(sig(tier, Type::Text)),
            regex: "[0-9]+".into(),
        },
        Type::Int,
    );
    pb.route(
        "gold_english",
        Some(and(
            cmp(CmpOp::Eq, sig(tier, Type::Text), s("gold")),
            or(
                cmp(CmpOp::Eq, sig(lang, lang_ty), en),
                cmp(CmpOp::Ge, confidence(sig(lang, lang_ty)), float(0.9)),
            ),
        )),
        STRONG,
    )
    .route("numbered", Some(cmp(CmpOp::Gt, count, int(0))), STRONG)
    .route("default", None, SMALL)
    .hold("same model", cmp(CmpOp::Eq, pinned(), model(STRONG)))
    .hold(
        "flaky",
        and(
            cmp(CmpOp::Ge, ex(K::OutcomeCount, Type::Int), int(3)),
            cmp(CmpOp::Gt, ex(K::OutcomeFailRate, Type::Score), float(0.25)),
        ),
    );
    insta::assert_snapshot!(lowered(&pb.build()).listing());
}

#[test]
fn identical_atoms_are_shared() {
    let mut pb = PolicyBuilder::new();
    let a = pb.signal("a", contains(prompt(), &["x", "y"]));
    let b = pb.signal("b", contains(prompt(), &["x", "y"]));
    let c = pb.signal("c", contains(prompt(), &["x"]));
    pb.route(
        "r1",
        Some(and(sig(a, Type::Bool), sig(b, Type::Bool))),
        STRONG,
    )
    .route("r2", Some(sig(c, Type::Bool)), STRONG)
    .route("default", None, SMALL);
    let p = lowered(&pb.build());
    let scans = p
        .atoms()
        .iter()
        .filter(|a| matches!(a.atom, Atom::Contains(..)))
        .count();
    assert_eq!(scans, 2);
    // Three signals, one `given` slot each, plus the two atom slots.
    assert_eq!(p.slot_count(), 5);
}

#[test]
fn cost_classes_and_slot_kinds() {
    let mut pb = PolicyBuilder::new();
    let words = ex(crate::hir::TExprKind::Words(Box::new(prompt())), Type::Int);
    pb.route(
        "r",
        Some(and(
            and(
                cmp(CmpOp::Gt, tokens(prompt()), words),
                is(classify(prompt()), &[LAW]),
            ),
            request(RequestField::Stream),
        )),
        STRONG,
    )
    .route("default", None, SMALL);
    let p = lowered(&pb.build());
    let find = |pred: fn(&Atom) -> bool| {
        p.atoms()
            .iter()
            .find(|a| pred(&a.atom))
            .unwrap_or_else(|| panic!("atom missing"))
    };
    assert_eq!(
        find(|a| matches!(a, Atom::Tokens(_))).cost,
        CostClass::Analyze
    );
    assert_eq!(find(|a| matches!(a, Atom::Words(_))).cost, CostClass::Scan);
    assert_eq!(
        find(|a| matches!(a, Atom::Request(_))).cost,
        CostClass::Fact
    );
    let class = find(|a| matches!(a, Atom::Classify(..)));
    assert_eq!(class.cost, CostClass::Model);
    let conf = class
        .confidence
        .unwrap_or_else(|| panic!("no confidence slot"));
    assert_eq!(p.slots()[conf.index()].kind, SlotKind::Float);
    assert_eq!(
        p.slots()[class.slot.index()].kind,
        SlotKind::Label(ClassSet::Classifier(DOMAIN))
    );
}

#[test]
fn a_signal_used_twice_is_computed_once_per_scan() {
    let mut pb = PolicyBuilder::new();
    let hot = pb.signal("hot", cmp(CmpOp::Gt, guard(prompt()), float(0.5)));
    pb.block("b", sig(hot, Type::Bool))
        .route("r", Some(not(sig(hot, Type::Bool))), STRONG)
        .route("default", None, SMALL);
    let p = lowered(&pb.build());
    let block_root = p.conds()[0].root;
    assert!(p.conds()[1].fresh.iter().all(|n| *n > block_root));
    assert_eq!(p.conds()[1].fresh.len(), 1, "only the `not` is new");
}

#[test]
fn a_policy_without_a_default_route_is_rejected() {
    let mut pb = PolicyBuilder::new();
    pb.route("r", Some(b(true)), STRONG);
    assert_eq!(lower(&pb.build()), Err(LowerError::NoDefaultRoute));
}

#[test]
fn a_signal_cycle_is_an_error_not_a_hang() {
    let mut pb = PolicyBuilder::new();
    pb.signal("a", sig(crate::hir::SignalId(1), Type::Bool));
    pb.signal("b", sig(crate::hir::SignalId(0), Type::Bool));
    pb.route("default", None, SMALL);
    assert!(matches!(
        lower(&pb.build()),
        Err(LowerError::SignalCycle(_))
    ));
}

#[test]
fn unknown_slots_skip_settled_and_given_parts_cheapest_first() {
    let mut pb = PolicyBuilder::new();
    let danger = pb.signal("danger", cmp(CmpOp::Gt, guard(prompt()), float(0.5)));
    let cond = or(
        and(sig(danger, Type::Bool), request(RequestField::Stream)),
        contains(prompt(), &["help"]),
    );
    pb.route("r", Some(cond), STRONG)
        .route("default", None, SMALL);
    let p = lowered(&pb.build());
    let slot = |a: &Atom| {
        p.atom_slot(a)
            .unwrap_or_else(|| panic!("no slot for {a:?}"))
    };
    let guard_slot = slot(&Atom::Guard(GUARD, TextExpr::Prompt));
    let stream = slot(&Atom::Request(RequestField::Stream));
    let help = slot(&Atom::Contains(TextExpr::Prompt, vec!["help".into()]));
    let c = p.route_cond(crate::hir::RouteId(0));

    let mut row = p.new_row();
    assert_eq!(p.unknown_slots(c, &row), vec![stream, help, guard_slot]);

    row.set_bool(stream, false);
    assert_eq!(p.unknown_slots(c, &row), vec![help], "the `and` is settled");

    let mut row = p.new_row();
    let given = p
        .slots()
        .iter()
        .position(|s| s.source == SlotSource::Given(danger))
        .map(|i| SlotId(i as u32))
        .unwrap_or_else(|| panic!("no given slot"));
    row.set_bool(given, true);
    assert_eq!(
        p.unknown_slots(c, &row),
        vec![stream, help],
        "the guard is given"
    );
}

#[test]
fn unknown_slots_do_not_depend_on_earlier_calls() {
    // The interpreter reuses per-thread working memory across calls and programs.
    let mut pb = PolicyBuilder::new();
    let attack = pb.signal("attack", guard(prompt()));
    let when = and(
        cmp(CmpOp::Gt, sig(attack, Type::Score), float(0.5)),
        or(request(RequestField::Stream), contains(prompt(), &["help"])),
    );
    pb.route("r", Some(when), STRONG)
        .route("default", None, SMALL);
    let p = lowered(&pb.build());
    let c = p.route_cond(crate::hir::RouteId(0));
    let row = p.new_row();
    let on_a_new_thread = {
        let (p, row) = (p.clone(), row.clone());
        std::thread::spawn(move || p.unknown_slots(c, &row))
            .join()
            .unwrap_or_else(|_| panic!("the thread panicked"))
    };
    assert_eq!(on_a_new_thread.len(), 3);

    let other = lowered(&example());
    let mut other_row = other.new_row();
    for def in other.atoms() {
        other_row.set_bool(def.slot, true);
    }
    for (i, _) in other.conds().iter().enumerate() {
        let _ = other.unknown_slots(CondId(i as u32), &other.new_row());
        let _ = interp::eval_cond(&other, CondId(i as u32), &other_row);
    }
    let _ = interp::decide(&other, &other_row);
    assert_eq!(p.unknown_slots(c, &row), on_a_new_thread);
    assert_eq!(p.unknown_slots(c, &row), on_a_new_thread, "called again");
}

#[test]
fn trace_names_the_parts_that_failed() {
    let mut pb = PolicyBuilder::new();
    let lhs = at(request(RequestField::Stream), 10, 20);
    let rhs = at(cmp(CmpOp::Gt, request(RequestField::Tools), int(2)), 25, 40);
    pb.route("r", Some(at(and(lhs, rhs), 10, 40)), STRONG)
        .route("default", None, SMALL);
    let p = lowered(&pb.build());
    let mut row = p.new_row();
    let slot = |a: &Atom| p.atom_slot(a).unwrap_or_else(|| panic!("no slot"));
    row.set_bool(slot(&Atom::Request(RequestField::Stream)), true);
    row.set_int(slot(&Atom::Request(RequestField::Tools)), 1);
    let (out, trace) = interp::decide_traced(&p, &row);
    assert_eq!(
        out,
        Outcome::Decided(Verdict::Route(crate::hir::RouteId(1)))
    );
    assert_eq!(trace.conds.len(), 2);
    let first = &trace.conds[0];
    assert_eq!(first.state, Some(false));
    assert_eq!(first.span, sp(10, 40));
    assert_eq!(
        first.parts,
        vec![interp::Part {
            span: sp(25, 40),
            state: Some(false)
        }]
    );
    assert_eq!(trace.conds[1].state, Some(true));
    assert!(trace.conds[1].parts.is_empty());
}

#[test]
fn cache_skip_is_its_own_condition() {
    let p = lowered(&example());
    let skip = p
        .cache_skip()
        .unwrap_or_else(|| panic!("no skip condition"));
    let atom = Atom::TextCmp(
        CmpOp::Eq,
        TextExpr::Header("x-no-cache".into()),
        TextExpr::Lit("1".into()),
    );
    let slot = p.atom_slot(&atom).unwrap_or_else(|| panic!("no slot"));
    let mut row = p.new_row();
    assert_eq!(interp::eval_cond(&p, skip, &row), None);
    row.set_bool(slot, true);
    assert_eq!(interp::eval_cond(&p, skip, &row), Some(true));
}

#[test]
fn model_rounds_count_each_condition_that_first_needs_a_model() {
    let rounds: Vec<usize> = lowered(&example())
        .model_rounds()
        .into_iter()
        .filter(|(owner, _)| matches!(owner, CondOwner::Block(_) | CondOwner::Route(_)))
        .map(|(_, rounds)| rounds)
        .collect();
    // The guard of `jailbreak`; the classifier of `hard_math`; `coding` reuses its answer.
    assert_eq!(rounds, [1, 2, 2, 2]);
}
