//! Unit tests of the checker's parts that the corpus cannot isolate: the graph and distance
//! helpers, machine-applicable fixes, catalog overrides, the checked tree's shape, and a
//! property test that the route implication analysis never warns wrongly.

use super::names::nearest;
use super::signals::strongly_connected;
use super::*;
use crate::hir::{ClassSet, CmpOp, ExpectDef, RequestField, TExprKind, Type, Value};
use crate::load::{from_texts, load_str};
use proptest::prelude::*;
use src_dsl::codes;

const PRELUDE: &str = "backend b { url = \"http://127.0.0.1:8000/v1\" }\n\
    model small  { backend = b  serves = \"s\" }\n\
    model strong { backend = b  serves = \"l\" }\n";

fn run(text: &str) -> CheckOutcome {
    check(load_str("t.sr", text), &CheckOptions::default())
}

fn codes_of(outcome: &CheckOutcome) -> Vec<&'static str> {
    outcome.diagnostics.iter().map(|d| d.code.0).collect()
}

/// Applies a diagnostic's fix to the text it points into.
fn apply_fix(text: &str, d: &Diagnostic) -> String {
    let fix = d.fix.as_ref().expect("a fix");
    let mut out = text.to_string();
    out.replace_range(fix.span.range(), &fix.replacement);
    out
}

#[test]
fn components_come_out_dependencies_first() {
    // 0 uses 1, 1 uses 2 and 3, 3 uses 1 (a cycle of 1 and 3), 4 alone.
    let graph = vec![vec![1], vec![2, 3], vec![], vec![1], vec![]];
    let comps = strongly_connected(&graph);
    assert_eq!(comps, vec![vec![2], vec![1, 3], vec![0], vec![4]]);
}

#[test]
fn a_long_chain_of_signals_does_not_exhaust_the_stack() {
    let mut text = String::from(PRELUDE);
    text.push_str("signal s0 = tokens(prompt) > 1\n");
    for i in 1..5000 {
        text.push_str(&format!("signal s{i} = s{} and request.stream\n", i - 1));
    }
    text.push_str("route r priority 1 { when s4999  to strong }\nroute default { to small }\n");
    let outcome = run(&text);
    let policy = outcome.policy.expect("checks");
    assert_eq!(policy.signals.len(), 5000);
    assert_eq!(policy.signals[0].name, "s0");
}

#[test]
fn near_misses_are_suggested_and_far_ones_are_not() {
    let names = ["math", "code", "law"];
    assert_eq!(nearest("maht", names), Some("math"));
    assert_eq!(nearest("Code", names), Some("code"));
    assert_eq!(nearest("cooking", names), None);
    assert_eq!(
        nearest("math", names),
        None,
        "an exact match is no suggestion"
    );
}

#[test]
fn unknown_name_fix_replaces_the_name() {
    let text = format!(
        "{PRELUDE}signal code_talk = contains(prompt, [\"x\"])\n\
         route c priority 1 {{ when code_tlak  to strong }}\nroute default {{ to small }}\n"
    );
    let outcome = run(&text);
    let d = outcome
        .diagnostics
        .iter()
        .find(|d| d.code == codes::UNKNOWN_NAME)
        .expect("E011");
    let fixed = apply_fix(&text, d);
    assert!(fixed.contains("when code_talk  to strong"));
    assert!(!run(&fixed).has_errors());
}

#[test]
fn regex_errors_name_the_problem_at_the_string() {
    let text = format!(
        "{PRELUDE}signal s = matches(prompt, \"(ab\")\n\
         route c priority 1 {{ when s  to strong }}\nroute default {{ to small }}\n"
    );
    let outcome = run(&text);
    let d = outcome
        .diagnostics
        .iter()
        .find(|d| d.code == codes::INVALID_REGEX)
        .expect("E024");
    assert_eq!(&text[d.primary_span().range()], "\"(ab\"");
    let label = &d.labels[0].message;
    assert!(label.contains("unclosed"), "{label}");
    assert!(!label.contains('\n'));
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("src-check-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn catalog_ids_are_checked_and_an_override_wins() {
    let dir = temp_dir("catalog");
    std::fs::write(
        dir.join("declared.json"),
        r#"{"data": [{"id": "Qwen/Qwen3-8B"}]}"#,
    )
    .unwrap();
    std::fs::write(dir.join("override.json"), r#"{"data": [{"id": "other"}]}"#).unwrap();
    let text = "backend d { url = \"http://x\"  catalog = \"declared.json\" }\n\
                model m { backend = d  serves = \"Qwen/Qwen3-8b\" }\n\
                route default { to m }\n";
    let source = || from_texts(dir.clone(), vec![(dir.join("p.sr"), text.to_string())]);
    let outcome = check(source(), &CheckOptions::default());
    let d = outcome
        .diagnostics
        .iter()
        .find(|d| d.code == codes::CATALOG_MISSING_MODEL)
        .expect("E040");
    assert_eq!(d.help.as_deref(), Some("did you mean `Qwen/Qwen3-8B`?"));
    let fixed = apply_fix(text, d);
    assert!(fixed.contains("serves = \"Qwen/Qwen3-8B\""));

    let options = CheckOptions {
        catalog_overrides: [("d".to_string(), dir.join("override.json"))].into(),
        ..CheckOptions::default()
    };
    let outcome = check(source(), &options);
    let d = outcome
        .diagnostics
        .iter()
        .find(|d| d.code == codes::CATALOG_MISSING_MODEL)
        .expect("E040 against the override");
    assert!(d.notes.iter().any(|n| n.contains("`other`")));

    let options = CheckOptions {
        catalog_overrides: [("d".to_string(), dir.join("missing.json"))].into(),
        ..CheckOptions::default()
    };
    let outcome = check(source(), &options);
    assert!(codes_of(&outcome).contains(&"E041"));

    // A live answer takes precedence over the declared file and the override.
    let live = |answer: Result<&str, &str>| CheckOptions {
        catalog_overrides: [("d".to_string(), dir.join("missing.json"))].into(),
        live_catalogs: [(
            "d".to_string(),
            LiveCatalog {
                url: "http://127.0.0.1:9/v1/models".into(),
                answer: answer.map(str::to_string).map_err(str::to_string),
            },
        )]
        .into(),
    };
    let outcome = check(
        source(),
        &live(Ok(
            r#"{"data": [{"id": "Qwen/Qwen3-8B"}, {"id": "live-only"}]}"#,
        )),
    );
    let d = outcome
        .diagnostics
        .iter()
        .find(|d| d.code == codes::CATALOG_MISSING_MODEL)
        .expect("E040 against the live catalog");
    assert!(d.notes.iter().any(|n| n.contains("`live-only`")));
    assert!(d
        .labels
        .iter()
        .any(|l| l.message.contains("http://127.0.0.1:9/v1/models")));
    let outcome = check(source(), &live(Err("connection refused")));
    let d = outcome
        .diagnostics
        .iter()
        .find(|d| d.code == codes::CATALOG_UNREADABLE)
        .expect("E041 for an unreachable backend");
    assert!(d.message.contains("cannot be fetched: connection refused"));
    assert!(d.message.contains("http://127.0.0.1:9/v1/models"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn literals_take_the_type_of_their_comparison() {
    let text = format!(
        "{PRELUDE}guard g {{ path = \"models/g\" }}\n\
         signal a = g(prompt)\n\
         signal by_int = tokens(prompt) > 2k\n\
         signal by_score = a > 0.5\n\
         signal reversed = 1 < words(prompt)\n\
         route r priority 1 {{ when by_int and by_score and reversed  to strong }}\n\
         route default {{ to small }}\n"
    );
    let policy = run(&text).policy.expect("checks");
    let def = |name: &str| {
        let id = policy.signal_by_name(name).unwrap();
        policy.signals[id.index()].expr.clone()
    };
    let TExprKind::Cmp(CmpOp::Gt, _, lit) = def("by_int").kind else {
        panic!("a comparison")
    };
    assert_eq!((lit.kind, lit.ty), (TExprKind::Int(2000), Type::Int));
    let TExprKind::Cmp(CmpOp::Gt, _, lit) = def("by_score").kind else {
        panic!("a comparison")
    };
    assert_eq!((lit.kind, lit.ty), (TExprKind::Float(0.5), Type::Score));
    let TExprKind::Cmp(CmpOp::Lt, lit, _) = def("reversed").kind else {
        panic!("a comparison")
    };
    assert_eq!(lit.ty, Type::Int);
}

#[test]
fn tests_refer_to_routes_in_checked_order_and_givens_are_typed() {
    let text = format!(
        "{PRELUDE}classifier domain {{ path = \"models/d\"  labels = [math, other] }}\n\
         signal topic = domain(prompt)\n\
         route default {{ to small }}\n\
         route low priority 1 {{ when request.stream  to strong }}\n\
         route high priority 9 {{ when topic is math  to strong }}\n\
         test t {{ prompt = \"x\"  given topic = other  expect low model strong }}\n"
    );
    let policy = run(&text).policy.expect("checks");
    let names: Vec<&str> = policy.routes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["high", "low", "default"]);
    let t = &policy.tests[0];
    assert_eq!(t.expect, ExpectDef::Route(crate::hir::RouteId(1)));
    assert_eq!(t.expect_model, policy.model_by_name("strong"));
    let topic = policy.signal_by_name("topic").unwrap();
    let set = ClassSet::Classifier(crate::hir::ClassifierId(0));
    assert_eq!(
        t.givens,
        vec![(topic, Value::Label(set, crate::hir::LabelId(1)))]
    );
}

#[test]
fn defaults_are_written_out() {
    let text = format!(
        "{PRELUDE}route default {{ to small }}\nsession {{ }}\nprotect {{ hold \"x\" when request.tool_loop }}\n\
         block b {{ when request.tools > 9 }}\n"
    );
    let policy = run(&text).policy.expect("checks");
    let session = policy.session.as_ref().unwrap();
    assert_eq!(session.ttl_ms, 600_000);
    assert_eq!(session.id.ty, Type::OptText);
    let protect = policy.protect.as_ref().unwrap();
    assert_eq!(protect.mode, src_dsl::ast::ProtectMode::Enforce);
    assert_eq!(policy.router.names, ["auto"]);
    assert_eq!(
        policy.blocks[0].action,
        crate::hir::BlockActionDef::Refuse {
            status: 403,
            message: None
        }
    );
    let TExprKind::Cmp(_, field, _) = &policy.blocks[0].when.kind else {
        panic!("a comparison")
    };
    assert_eq!(field.kind, TExprKind::Request(RequestField::Tools));
}

#[test]
fn diagnostics_are_sorted_and_a_policy_comes_only_without_errors() {
    let text = format!(
        "{PRELUDE}route b priority 1 {{ when nope  to strong }}\nroute a priority 2 {{ when nada  to strong }}\n"
    );
    let outcome = run(&text);
    assert!(outcome.policy.is_none());
    let offsets: Vec<u32> = outcome
        .diagnostics
        .iter()
        .map(|d| d.primary_span().start)
        .collect();
    let mut sorted = offsets.clone();
    sorted.sort_unstable();
    assert_eq!(offsets, sorted);
    assert!(codes_of(&outcome).contains(&"E031"));
}

// The implication analysis is sound: whenever it says a route can never win, no assignment of
// the leaves makes that route's condition true while all earlier ones are false.

const LABELS: [&str; 4] = ["math", "code", "law", "other"];

fn atom() -> impl Strategy<Value = String> {
    let op = prop::sample::select(vec!["<", "<=", ">", ">=", "==", "!="]);
    prop_oneof![
        (
            prop::sample::select(vec!["request.tools", "request.turns"]),
            op,
            0..5i32
        )
            .prop_map(|(f, op, k)| format!("{f} {op} {k}")),
        Just("request.stream".to_string()),
        Just("flag".to_string()),
        prop::sample::select(LABELS.to_vec()).prop_map(|l| format!("topic is {l}")),
        prop::sample::subsequence(LABELS.to_vec(), 1..3)
            .prop_map(|ls| format!("topic in [{}]", ls.join(", "))),
        (prop::sample::select(LABELS.to_vec()), any::<bool>())
            .prop_map(|(l, eq)| format!("topic {} {l}", if eq { "==" } else { "!=" })),
    ]
}

fn condition() -> impl Strategy<Value = String> {
    atom().prop_recursive(3, 12, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} and {b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} or {b})")),
            inner.prop_map(|a| format!("not ({a})")),
        ]
    })
}

/// The leaves of one request.
#[derive(Debug, Clone, Copy)]
struct Leaves {
    tools: i64,
    turns: i64,
    stream: bool,
    topic: u32,
}

fn eval(e: &crate::hir::TExpr, p: &crate::hir::CheckedPolicy, v: Leaves) -> Option<f64> {
    let b = |x: bool| Some(if x { 1.0 } else { 0.0 });
    Some(match &e.kind {
        TExprKind::Bool(x) => return b(*x),
        TExprKind::Int(i) => *i as f64,
        TExprKind::Float(f) => *f,
        TExprKind::Label(l) => l.0 as f64,
        TExprKind::Classify(..) => v.topic as f64,
        TExprKind::Request(RequestField::Tools) => v.tools as f64,
        TExprKind::Request(RequestField::Turns) => v.turns as f64,
        TExprKind::Request(RequestField::Stream) => return b(v.stream),
        TExprKind::Signal(s) => return eval(&p.signals[s.index()].expr, p, v),
        TExprKind::Not(x) => return b(eval(x, p, v)? == 0.0),
        TExprKind::And(x, y) => return b(eval(x, p, v)? != 0.0 && eval(y, p, v)? != 0.0),
        TExprKind::Or(x, y) => return b(eval(x, p, v)? != 0.0 || eval(y, p, v)? != 0.0),
        TExprKind::IsLabel(x, ls) => {
            let l = eval(x, p, v)? as u32;
            return b(ls.iter().any(|x| x.0 == l));
        }
        TExprKind::Cmp(op, x, y) => {
            let (x, y) = (eval(x, p, v)?, eval(y, p, v)?);
            return b(match op {
                CmpOp::Eq => x == y,
                CmpOp::Ne => x != y,
                CmpOp::Lt => x < y,
                CmpOp::Le => x <= y,
                CmpOp::Gt => x > y,
                CmpOp::Ge => x >= y,
            });
        }
        _ => return None,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn never_winning_routes_never_win(conds in prop::collection::vec(condition(), 2..6), flag in condition()) {
        let mut text = format!(
            "{PRELUDE}classifier domain {{ path = \"models/d\"  labels = [{}] }}\n\
             signal topic = domain(prompt)\nsignal flag = {}\n",
            LABELS.join(", "),
            // `flag` may not use itself.
            flag.replace("flag", "request.stream")
        );
        for (i, c) in conds.iter().enumerate() {
            text.push_str(&format!("route r{i} priority {} {{ when {c}  to strong }}\n", 100 - i));
        }
        text.push_str("route default { to small }\n");
        let outcome = run(&text);
        prop_assert!(!outcome.has_errors(), "{:#?}", outcome.diagnostics);
        let policy = outcome.policy.unwrap();
        let shadowed: Vec<&str> = outcome
            .diagnostics
            .iter()
            .filter(|d| d.code == codes::SHADOWED_ROUTE)
            .map(|d| d.message.split('`').nth(1).unwrap_or_default())
            .collect();
        for name in shadowed {
            let at = policy.routes.iter().position(|r| r.name == name).unwrap();
            for tools in 0..7 {
                for turns in 0..7 {
                    for stream in [false, true] {
                        for topic in 0..4 {
                            let v = Leaves { tools, turns, stream, topic };
                            let holds = |i: usize| {
                                policy.routes[i]
                                    .when
                                    .as_ref()
                                    .map_or(Some(1.0), |w| eval(w, &policy, v))
                                    .unwrap()
                                    != 0.0
                            };
                            let wins = holds(at) && (0..at).all(|i| !holds(i));
                            prop_assert!(!wins, "route `{name}` wins for {v:?}:\n{text}");
                        }
                    }
                }
            }
        }
    }
}

/// The routes W004 says can never win, by name.
fn shadowed(outcome: &CheckOutcome) -> Vec<String> {
    outcome
        .diagnostics
        .iter()
        .filter(|d| d.code == codes::SHADOWED_ROUTE)
        .map(|d| d.message.split('`').nth(1).unwrap_or_default().to_string())
        .collect()
}

#[test]
fn several_earlier_routes_together_can_shadow_a_route() {
    let text = format!(
        "{PRELUDE}signal long = tokens(prompt) > 5\n\
         route big priority 30 {{ when long  to strong }}\n\
         route small_streams priority 20 {{ when tokens(prompt) <= 5 and request.stream  to small }}\n\
         route streams priority 10 {{ when request.stream  to strong }}\n\
         route default {{ to small }}\n"
    );
    let outcome = run(&text);
    assert_eq!(
        shadowed(&outcome),
        ["streams"],
        "{:#?}",
        outcome.diagnostics
    );
    let d = outcome
        .diagnostics
        .iter()
        .find(|d| d.code == codes::SHADOWED_ROUTE)
        .expect("W004");
    // Both covering routes are named.
    assert!(
        d.labels.iter().any(|l| l.message.contains("`big`")),
        "{d:#?}"
    );
    assert!(
        d.labels
            .iter()
            .any(|l| l.message.contains("`small_streams`")),
        "{d:#?}"
    );

    // With a gap (5 tokens exactly) nothing is shadowed.
    let gap = text.replace("tokens(prompt) <= 5", "tokens(prompt) < 5");
    assert!(shadowed(&run(&gap)).is_empty());
}

#[test]
fn routes_over_every_label_leave_the_default_nothing() {
    let routes = |labels: &[&str]| {
        let mut text = format!(
            "{PRELUDE}classifier domain {{ path = \"models/d\"  labels = [math, code, law, other] }}\n\
             signal topic = domain(prompt)\n"
        );
        for (i, l) in labels.iter().enumerate() {
            text.push_str(&format!(
                "route r_{l} priority {} {{ when topic is {l}  to strong }}\n",
                10 - i
            ));
        }
        text.push_str("route default { to small }\n");
        text
    };
    let all = run(&routes(&["math", "code", "law", "other"]));
    assert_eq!(shadowed(&all), ["default"], "{:#?}", all.diagnostics);
    let some = run(&routes(&["math", "code", "law"]));
    assert!(shadowed(&some).is_empty(), "{:#?}", some.diagnostics);
}
