//! Lowering and listings.

use super::*;
use crate::fixture::*;
use crate::hir::{CheckedPolicy, ClassSet, CmpOp, RequestField, Type};

fn lowered(policy: &CheckedPolicy) -> Program {
    lower(policy).unwrap_or_else(|e| panic!("lowering failed: {e}"))
}

#[test]
fn listing_of_the_language_example() {
    insta::assert_snapshot!(lowered(&routing_example()).listing());
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
fn model_rounds_count_each_condition_that_first_needs_a_model() {
    let rounds: Vec<usize> = lowered(&routing_example())
        .model_rounds()
        .into_iter()
        .filter(|(owner, _)| matches!(owner, CondOwner::Block(_) | CondOwner::Route(_)))
        .map(|(_, rounds)| rounds)
        .collect();
    // The guard of `jailbreak`; the classifier of `hard_math`; `coding` reuses its answer.
    assert_eq!(rounds, [1, 2, 2, 2]);
}
