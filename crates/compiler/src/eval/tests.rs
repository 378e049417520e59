//! Staged evaluation over real request views, on both engines.

use super::*;
use crate::compiled::compile;
use crate::engine::EngineKind;
use crate::fixture::*;
use crate::hir::{CheckedPolicy, CmpOp, RequestField, RouteId, TExprKind, Type};
use src_dsl::ast::FailMode;

const ENGINES: [EngineKind; 2] = [EngineKind::Interp, EngineKind::Jit];

fn class_ty() -> Type {
    Type::Class(ClassSet::Classifier(DOMAIN))
}

/// A block on `request.tools > 50 and attack > 0.5`; routes `coding` (`code_talk or topic is
/// code`), `hard_math` (`topic is math`), and the default.
fn policy() -> (CheckedPolicy, SignalId, SignalId) {
    let mut pb = PolicyBuilder::new();
    let topic = pb.signal("topic", classify(prompt()));
    let attack = pb.signal("attack", guard(prompt()));
    let code_talk = pb.signal(
        "code_talk",
        contains(prompt(), &["segfault", "stack trace"]),
    );
    pb.block(
        "tool_abuse",
        and(
            cmp(CmpOp::Gt, request(RequestField::Tools), int(50)),
            cmp(CmpOp::Gt, sig(attack, Type::Score), float(0.5)),
        ),
    )
    .route(
        "coding",
        Some(or(
            sig(code_talk, Type::Bool),
            is(sig(topic, class_ty()), &[CODE]),
        )),
        STRONG,
    )
    .route(
        "hard_math",
        Some(is(sig(topic, class_ty()), &[MATH])),
        STRONG,
    )
    .route("default", None, SMALL);
    (pb.build(), topic, attack)
}

fn compiled(policy: CheckedPolicy, engine: EngineKind) -> CompiledPolicy {
    compile(policy, engine).unwrap_or_else(|e| panic!("compile failed: {e}"))
}

fn route(i: u32) -> Step {
    Step::Decided(Verdict::Route(RouteId(i)))
}

fn is_model_atom(p: &CompiledPolicy, a: AtomId) -> bool {
    p.program.atoms()[a.index()].cost == CostClass::Model
}

#[test]
fn a_request_settled_by_a_cheap_signal_calls_no_model() {
    for engine in ENGINES {
        let p = compiled(policy().0, engine);
        let req = RequestView::from_prompt("my program hit a segfault on exit", None, &[]);
        let mut ev = p.evaluate(&req);
        assert_eq!(ev.step(), route(0), "{engine}");
        assert!(ev.computed_atoms().iter().all(|a| !is_model_atom(&p, *a)));
        let untouched = ev
            .atom_states()
            .iter()
            .filter(|s| **s == AtomState::Untouched)
            .count();
        assert_eq!(
            untouched, 2,
            "classifier and guard never touched ({engine})"
        );
    }
}

#[test]
fn a_given_signals_model_is_never_requested() {
    for engine in ENGINES {
        let (policy, topic, _) = policy();
        let p = compiled(policy, engine);
        let req = RequestView::from_prompt("integrate x squared", None, &[]);
        let mut ev = p.evaluate(&req);
        let math = Value::Label(ClassSet::Classifier(DOMAIN), MATH);
        assert_eq!(ev.give(topic, math.clone()), Ok(()));
        assert_eq!(ev.step(), route(1), "{engine}");
        assert!(ev
            .atom_states()
            .iter()
            .enumerate()
            .all(|(i, s)| !is_model_atom(&p, AtomId(i as u32)) || *s == AtomState::Untouched));
        let values = ev.signal_values();
        assert_eq!(values[topic.index()].1, Some(math));
        assert_eq!(ev.skipped_signals(), unvalued(&values));
    }
}

/// The signals `values` has no value for: what `skipped_signals` must answer.
fn unvalued(values: &[(SignalId, Option<Value>)]) -> Vec<SignalId> {
    values
        .iter()
        .filter_map(|(id, v)| v.is_none().then_some(*id))
        .collect()
}

#[test]
fn model_calls_are_returned_then_supplied() {
    for engine in ENGINES {
        let (policy, topic, attack) = policy();
        let p = compiled(policy, engine);
        let req = RequestView::from_prompt("please review this function", None, &[]);
        let mut ev = p.evaluate(&req);
        let Step::NeedModels(calls) = ev.step() else {
            panic!("expected model calls ({engine})");
        };
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].model, ModelKind::Classifier(DOMAIN));
        assert_eq!(calls[0].text, "please review this function");
        // Asking again without an answer asks for the same call.
        assert_eq!(ev.step(), Step::NeedModels(calls.clone()));
        let answer = ModelResult::Class {
            label: CODE,
            confidence: 0.93,
        };
        assert_eq!(ev.supply(&calls[0], answer), Ok(()));
        assert_eq!(ev.step(), route(0));
        let values = ev.signal_values();
        assert_eq!(
            values[topic.index()].1,
            Some(Value::Label(ClassSet::Classifier(DOMAIN), CODE))
        );
        assert_eq!(values[attack.index()].1, None);
        assert_eq!(ev.skipped_signals(), vec![attack]);
        assert_eq!(ev.skipped_signals(), unvalued(&values));
    }
}

#[test]
fn a_failed_model_under_a_route_fails_open() {
    for engine in ENGINES {
        let p = compiled(policy().0, engine);
        let req = RequestView::from_prompt("hello there", None, &[]);
        let mut ev = p.evaluate(&req);
        let Step::NeedModels(calls) = ev.step() else {
            panic!("expected model calls");
        };
        assert_eq!(ev.supply(&calls[0], ModelResult::Failed), Ok(()));
        assert_eq!(ev.step(), route(2), "{engine}");
        assert_eq!(
            ev.failed_open().len(),
            2,
            "both routes reading `topic` were skipped"
        );
    }
}

#[test]
fn a_failed_model_under_a_block_fails_closed_by_default() {
    for engine in ENGINES {
        let p = compiled(policy().0, engine);
        let mut req = RequestView::from_prompt("hello", None, &[]);
        req.tools = 99;
        let mut ev = p.evaluate(&req);
        let Step::NeedModels(calls) = ev.step() else {
            panic!("expected the guard call");
        };
        assert_eq!(calls[0].model, ModelKind::Guard(GUARD));
        assert_eq!(ev.supply(&calls[0], ModelResult::Failed), Ok(()));
        assert_eq!(
            ev.step(),
            Step::Failed(FailedModels {
                cond: CondId(0),
                atoms: vec![calls[0].atom]
            }),
            "{engine}"
        );
    }
}

#[test]
fn an_explicit_open_failure_mode_lets_a_block_pass() {
    let (mut policy, _, _) = policy();
    policy.failure.classifier = Some(FailMode::Open);
    let p = compiled(policy, EngineKind::Jit);
    let mut req = RequestView::from_prompt("my code hit a segfault", None, &[]);
    req.tools = 99;
    let mut ev = p.evaluate(&req);
    let Step::NeedModels(calls) = ev.step() else {
        panic!("expected the guard call");
    };
    assert_eq!(ev.supply(&calls[0], ModelResult::Failed), Ok(()));
    assert_eq!(ev.step(), route(0));
}

#[test]
fn request_facts_are_computed_before_phrase_scans() {
    for engine in ENGINES {
        let mut pb = PolicyBuilder::new();
        pb.route(
            "r",
            Some(or(
                contains(prompt(), &["urgent"]),
                request(RequestField::Stream),
            )),
            STRONG,
        )
        .route("default", None, SMALL);
        let p = compiled(pb.build(), engine);
        let mut req = RequestView::from_prompt("urgent: help", None, &[]);
        req.stream = true;
        let mut ev = p.evaluate(&req);
        assert_eq!(ev.step(), route(0));
        let scanned = ev
            .computed_atoms()
            .iter()
            .any(|a| matches!(p.program.atoms()[a.index()].atom, Atom::Contains(..)));
        assert!(!scanned, "the stream flag settled it ({engine})");
    }
}

#[test]
fn a_bad_supply_or_give_is_an_error() {
    let (policy, topic, attack) = policy();
    let p = compiled(policy, EngineKind::Interp);
    let req = RequestView::from_prompt("hi", None, &[]);
    let mut ev = p.evaluate(&req);
    assert!(ev.give(attack, Value::Bool(true)).is_err());
    assert_eq!(
        ev.give(attack, Value::Int(0)),
        Ok(()),
        "an int is a valid score"
    );
    let language = Value::Label(ClassSet::Language, LabelId(0));
    assert!(ev.give(topic, language).is_err());
    assert!(ev.give(SignalId(99), Value::Bool(true)).is_err());
    let Step::NeedModels(calls) = ev.step() else {
        panic!("expected the classifier call");
    };
    assert!(ev.supply(&calls[0], ModelResult::Score(0.5)).is_err());
    let out_of_range = ModelResult::Class {
        label: LabelId(40),
        confidence: 1.0,
    };
    assert!(ev.supply(&calls[0], out_of_range).is_err());
}

#[test]
fn holds_with_absent_outcomes_do_not_hold() {
    for engine in ENGINES {
        let fail_rate = ex(TExprKind::OutcomeFailRate, Type::Score);
        let proposed_cost = cost(proposed());
        let pinned_cost = cost(pinned());
        let mut pb = PolicyBuilder::new();
        pb.route("default", None, SMALL)
            .hold("flaky", cmp(CmpOp::Gt, fail_rate, float(0.3)))
            .hold("cheaper", cmp(CmpOp::Le, proposed_cost, pinned_cost));
        let p = compiled(pb.build(), engine);
        let req = RequestView::from_prompt("thanks", None, &[]);

        let mut ev = p.evaluate(&req);
        assert_eq!(
            ev.hold_step(SMALL, STRONG, None, 0),
            HoldStep::NoHold,
            "{engine}"
        );
        let mut ev = p.evaluate(&req);
        assert_eq!(ev.hold_step(STRONG, SMALL, None, 0), HoldStep::Held(1));
        let mut ev = p.evaluate(&req);
        assert_eq!(ev.hold_step(SMALL, STRONG, Some(0.5), 4), HoldStep::Held(0));
    }
}

#[test]
fn text_signals_and_headers() {
    let mut pb = PolicyBuilder::new();
    let tier = pb.signal(
        "tier",
        ex(
            TExprKind::Coalesce(Box::new(header("x-tier")), Box::new(s("free"))),
            Type::Text,
        ),
    );
    pb.route(
        "gold",
        Some(cmp(CmpOp::Eq, sig(tier, Type::Text), s("gold"))),
        STRONG,
    )
    .route("default", None, SMALL)
    .skip_cache_when(cmp(CmpOp::Ne, header("x-cache"), s("on")));
    let p = compiled(pb.build(), EngineKind::Jit);
    let headers = vec![("x-tier".to_string(), "gold".to_string())];
    let req = RequestView::from_prompt("hi", None, &headers);
    let mut ev = p.evaluate(&req);
    assert_eq!(ev.step(), route(0));
    assert_eq!(
        ev.cache_step(),
        CacheStep::Skip,
        "absent `x-cache` is not \"on\""
    );
    let plain = RequestView::from_prompt("hi", None, &[]);
    let mut ev = p.evaluate(&plain);
    assert_eq!(ev.step(), route(1));
    assert_eq!(
        ev.signal_values()[tier.index()].1,
        Some(Value::Text(Some("free".into())))
    );
    let mut ev = p.evaluate(&plain);
    assert_eq!(ev.give(tier, Value::Text(Some("gold".into()))), Ok(()));
    assert_eq!(ev.step(), route(0));
}

#[test]
fn compiled_policy_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<CompiledPolicy>();
}

#[test]
fn exact_phrases_are_scanned_before_fuzzy_ones() {
    let fuzzy_atom = |p: &CompiledPolicy, ev: &Evaluation<'_>| {
        ev.computed_atoms()
            .iter()
            .any(|a| matches!(p.program.atoms()[a.index()].atom, Atom::Fuzzy(..)))
    };
    for engine in ENGINES {
        let mut pb = PolicyBuilder::new();
        let fuzzy = ex(
            TExprKind::Fuzzy {
                text: Box::new(prompt()),
                phrases: vec!["urgent".into()],
                min: 0.8,
            },
            Type::Bool,
        );
        // Written first, computed second: the cost class orders it after `contains`.
        let when = or(fuzzy, contains(prompt(), &["outage"]));
        pb.route("r", Some(when), STRONG)
            .route("default", None, SMALL);
        let p = compiled(pb.build(), engine);

        let req = RequestView::from_prompt("outage in eu-west", None, &[]);
        let mut ev = p.evaluate(&req);
        assert_eq!(ev.step(), route(0), "{engine}");
        assert!(
            !fuzzy_atom(&p, &ev),
            "the exact phrase settled it ({engine})"
        );

        let req = RequestView::from_prompt("this is urgnet", None, &[]);
        let mut ev = p.evaluate(&req);
        assert_eq!(ev.step(), route(0), "{engine}");
        assert!(fuzzy_atom(&p, &ev), "{engine}");
    }
}

#[test]
fn a_detector_call_asks_for_its_types_and_holds_from_the_threshold_on() {
    // `people` (threshold 0.6) asked about persons, twice with the same set in another order:
    // one atom, one model call.
    let mut pb = PolicyBuilder::new();
    let names = pb.signal(
        "names",
        and(
            detect(prompt(), &["PERSON", "LOCATION"]),
            detect(prompt(), &["LOCATION", "PERSON", "PERSON"]),
        ),
    );
    pb.block("names", sig(names, Type::Bool))
        .route("default", None, SMALL);
    let policy = pb.build();
    for engine in ENGINES {
        let p = compiled(policy.clone(), engine);
        for (score, blocked) in [(0.6, true), (0.93, true), (0.59, false), (0.0, false)] {
            let req = RequestView::from_prompt("Ada Lovelace wrote to Bob", None, &[]);
            let mut ev = p.evaluate(&req);
            let Step::NeedModels(calls) = ev.step() else {
                panic!("the detector is needed ({engine})");
            };
            assert_eq!(calls.len(), 1, "{calls:?}");
            assert_eq!(calls[0].model, ModelKind::Detector(DETECTOR));
            assert_eq!(calls[0].text, "Ada Lovelace wrote to Bob");
            assert_eq!(&calls[0].examples[..], &["LOCATION", "PERSON"]);
            assert!(calls[0].closed, "a block reads it");
            ev.supply(&calls[0], ModelResult::Score(score)).unwrap();
            let want = if blocked {
                Step::Decided(Verdict::Blocked(crate::hir::BlockId(0)))
            } else {
                route(0)
            };
            assert_eq!(ev.step(), want, "score {score} ({engine})");
        }
    }
}
