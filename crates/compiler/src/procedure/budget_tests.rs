//! The budget step of the procedure on both engines: what is asked of the store, which budget
//! acts, and how a refusal, a downgrade and an observation end.

use super::budget::{BudgetKey, BudgetUse};
use super::*;
use crate::compiled::compile;
use crate::engine::EngineKind;
use crate::hir::{BudgetUnit, CheckedPolicy};

const ENGINES: [EngineKind; 2] = [EngineKind::Interp, EngineKind::Jit];

const POLICY: &str = r#"
backend b { url = "http://127.0.0.1:9/v1" }
model small  { backend = b  serves = "s" }
model strong { backend = b  serves = "l" }
model safe   { backend = b  serves = "safe" }
signal code = contains(prompt, ["rust"])
budget per_key { per = tenant  window = 1m  requests = 2  exceeded = reject }
budget strong_tokens { per = tenant  window = 1h  tokens = 300  exceeded = to small }
budget per_team { per = header("x-team")  window = 1m  requests = 5  exceeded = observe }
block unsafe { when contains(prompt, ["jailbreak"])  to safe }
route coding priority 10 { when code and budget(strong_tokens).used < 0.8  to strong }
route default { to strong }
"#;

fn checked() -> CheckedPolicy {
    let outcome = crate::check(
        crate::load::load_str("budgets.sr", POLICY),
        &crate::CheckOptions::default(),
    );
    let errors: Vec<_> = outcome
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.message.clone())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    outcome.policy.expect("a checked policy")
}

fn view(prompt: &str, team: Option<&str>) -> RequestView {
    let headers: Vec<(String, String)> = team
        .map(|t| vec![("x-team".to_string(), t.to_string())])
        .unwrap_or_default();
    let mut view = RequestView::from_prompt(prompt, None, headers);
    view.model = Some("auto".into());
    view
}

/// Runs the procedure answering the budget ask with `used` (per budget name), sessions kept.
fn run(engine: EngineKind, view: &RequestView, used: &[(&str, f64)]) -> (Vec<BudgetAsk>, Decision) {
    let policy = compile(checked(), engine).expect("compiles");
    let mut procedure = Procedure::new(&policy, view);
    let mut asked = Vec::new();
    let decision = loop {
        match procedure.advance().expect("decides") {
            Next::Budgets(step) => {
                let asks = step.asks;
                let uses: Vec<BudgetUse> = asks
                    .iter()
                    .map(|a| {
                        let name = &policy.checked.budgets[a.budget.index()].name;
                        let u = used
                            .iter()
                            .find(|(n, _)| n == name)
                            .map_or(0.0, |(_, u)| *u);
                        BudgetUse {
                            budget: a.budget,
                            used: u,
                            limit: a.limit,
                            exceeded: budget::exceeded(a, u),
                            retry_after_s: 7,
                        }
                    })
                    .collect();
                asked = asks;
                procedure.budgets_answered(&uses);
            }
            Next::Models(_) => panic!("no model-backed signals here"),
            Next::Cache(_) => procedure.cache_answered(false),
            Next::Session(_) => procedure.session_answered(SessionAnswer::Keep),
            Next::Done(decision) => break decision,
        }
    };
    (asked, decision)
}

fn model(name: &str) -> ModelId {
    checked().model_by_name(name).expect("a model")
}

#[test]
fn every_budget_whose_per_has_a_value_is_asked_in_order() {
    for engine in ENGINES {
        let (asks, _) = run(engine, &view("hello", None), &[]);
        let keys: Vec<(u32, BudgetKey, BudgetUnit)> = asks
            .iter()
            .map(|a| (a.budget.0, a.key.clone(), a.unit))
            .collect();
        assert_eq!(
            keys,
            vec![
                (0, BudgetKey::Tenant, BudgetUnit::Requests),
                (1, BudgetKey::Tenant, BudgetUnit::Tokens)
            ],
            "no x-team header: per_team does not apply"
        );
        assert!(asks[0].refuses && !asks[1].refuses);
        assert_eq!((asks[0].reserve, asks[1].reserve), (1.0, 0.0));
        let (asks, _) = run(engine, &view("hello", Some(" blue ")), &[]);
        assert_eq!(asks[2].key, BudgetKey::Text("blue".into()));
    }
}

#[test]
fn a_rejecting_budget_refuses_with_429_before_anything_else() {
    for engine in ENGINES {
        let (_, d) = run(engine, &view("rust jailbreak", None), &[("per_key", 2.0)]);
        let refusal = d.refusal.expect("refused");
        assert_eq!(refusal.status, 429);
        assert!(refusal.message.contains("per_key"), "{}", refusal.message);
        assert_eq!((d.block, d.route, d.proposal), (None, None, None));
        assert!(d.candidates.is_empty());
        assert_eq!(d.budgets.acting, Some((BudgetId(0), BudgetAction::Reject)));
        assert_eq!(d.budgets.get(BudgetId(0)).map(|u| u.retry_after_s), Some(7));
    }
}

#[test]
fn a_spent_budget_proposes_its_model_but_never_overrides_a_block() {
    for engine in ENGINES {
        let spent = [("strong_tokens", 300.0)];
        let (_, d) = run(engine, &view("hello", None), &spent);
        assert_eq!(d.proposal, Some(model("small")));
        assert_eq!(d.candidates, vec![model("small")]);
        assert!(
            d.route.is_some(),
            "the route that decided is still reported"
        );
        let (_, d) = run(engine, &view("jailbreak", None), &spent);
        assert_eq!(
            d.proposal,
            Some(model("safe")),
            "the block's redirect stands"
        );
    }
}

#[test]
fn used_share_steers_routes() {
    for engine in ENGINES {
        let (_, d) = run(engine, &view("rust", None), &[("strong_tokens", 100.0)]);
        assert_eq!(d.route.map(|r| r.0), Some(0), "1/3 used: coding");
        let (_, d) = run(engine, &view("rust", None), &[("strong_tokens", 270.0)]);
        assert_eq!(d.route.map(|r| r.0), Some(1), "90% used: default");
        assert_eq!(d.proposal, Some(model("strong")), "not exceeded yet");
    }
}

#[test]
fn an_observing_budget_only_reports() {
    for engine in ENGINES {
        let (_, d) = run(engine, &view("hello", Some("blue")), &[("per_team", 5.0)]);
        assert_eq!(d.refusal, None);
        assert_eq!(d.proposal, Some(model("strong")));
        assert_eq!(d.budgets.acting, Some((BudgetId(2), BudgetAction::Observe)));
    }
}

#[test]
fn a_given_budget_is_not_asked() {
    let policy = compile(checked(), EngineKind::Interp).expect("compiles");
    let v = view("hello", None);
    let mut procedure = Procedure::new(&policy, &v);
    procedure.give_budget(BudgetId(0), 1.0);
    match procedure.advance().expect("asks") {
        Next::Budgets(step) => {
            assert!(step.asks.iter().all(|a| a.budget != BudgetId(0)));
            procedure.budgets_answered(&[]);
        }
        other => panic!("expected the budget ask, got {other:?}"),
    }
    match procedure.advance().expect("decides") {
        Next::Done(d) => assert_eq!(d.refusal.map(|r| r.status), Some(429)),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The budget step says whether the session's pin may be read with it: only a policy that keeps
/// sessions has one to read.
#[test]
fn the_budget_step_carries_the_session_read_only_under_a_session() {
    let with_session = format!("{POLICY}\nsession {{ ttl = 10m }}\n");
    for (text, session) in [(POLICY.to_string(), false), (with_session, true)] {
        let outcome = crate::check(
            crate::load::load_str("budgets.sr", &text),
            &crate::CheckOptions::default(),
        );
        let policy =
            compile(outcome.policy.expect("checks"), EngineKind::Interp).expect("compiles");
        let v = view("hello", None);
        let mut procedure = Procedure::new(&policy, &v);
        match procedure.advance().expect("asks") {
            Next::Budgets(step) => {
                assert_eq!(step.session, session, "{text}");
                assert!(!step.asks.is_empty());
            }
            other => panic!("expected the budget step, got {other:?}"),
        }
        // Asked again before it is answered, the step is the same.
        match procedure.advance().expect("asks") {
            Next::Budgets(step) => assert_eq!(step.session, session),
            other => panic!("expected the budget step again, got {other:?}"),
        }
    }
}
