//! The interpreter's own questions: which slots a condition still needs, traces, and the cache
//! skip condition.

use super::*;
use crate::fixture::*;
use crate::hir::{CheckedPolicy, CmpOp, RequestField, Type};
use crate::ir::{lower, Atom, SlotSource, TextExpr};

fn lowered(policy: &CheckedPolicy) -> Program {
    lower(policy).unwrap_or_else(|e| panic!("lowering failed: {e}"))
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

    let other = lowered(&routing_example());
    let mut other_row = other.new_row();
    for def in other.atoms() {
        other_row.set_bool(def.slot, true);
    }
    for (i, _) in other.conds().iter().enumerate() {
        let _ = other.unknown_slots(CondId(i as u32), &other.new_row());
        let _ = eval_cond(&other, CondId(i as u32), &other_row);
    }
    let _ = decide(&other, &other_row);
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
    let (out, trace) = decide_traced(&p, &row);
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
        vec![Part {
            span: sp(25, 40),
            state: Some(false)
        }]
    );
    assert_eq!(trace.conds[1].state, Some(true));
    assert!(trace.conds[1].parts.is_empty());
}

#[test]
fn cache_skip_is_its_own_condition() {
    let p = lowered(&routing_example());
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
    assert_eq!(eval_cond(&p, skip, &row), None);
    row.set_bool(slot, true);
    assert_eq!(eval_cond(&p, skip, &row), Some(true));
}
