//! The procedure driven with fake effects: each test answers the model, cache and session asks
//! itself and checks what was asked, in which order, and the decision.

use super::*;
use crate::compiled::compile;
use crate::engine::EngineKind;
use crate::eval::ModelKind;
use crate::fixture::*;
use crate::hir::{CacheDef, CheckedPolicy, CmpOp, LabelId, StoreDef, Type};

const ENGINES: [EngineKind; 2] = [EngineKind::Interp, EngineKind::Jit];
const CODER: ModelId = ModelId(2);

/// Blocks `jailbreak` (`attack > 0.5`, refuses) and `secrets` (mentions a password, redirects
/// to `small`); routes `coding` (`code_talk or topic is code`, to `strong else coder`) and the
/// default (to `small`). `strong` is also called `big`.
fn policy() -> CheckedPolicy {
    let mut pb = PolicyBuilder::new();
    assert_eq!(pb.model("coder", 0.5), CODER);
    let topic = pb.signal("topic", classify(prompt()));
    let attack = pb.signal("attack", guard(prompt()));
    let code_talk = pb.signal("code_talk", contains(prompt(), &["segfault"]));
    let secret = pb.signal("secret", contains(prompt(), &["password"]));
    pb.block(
        "jailbreak",
        cmp(CmpOp::Gt, sig(attack, Type::Score), float(0.5)),
    )
    .block("secrets", sig(secret, Type::Bool))
    .route(
        "coding",
        Some(or(
            sig(code_talk, Type::Bool),
            is(
                sig(topic, Type::Class(crate::hir::ClassSet::Classifier(DOMAIN))),
                &[CODE],
            ),
        )),
        STRONG,
    )
    .route("default", None, SMALL);
    let mut policy = pb.build();
    policy.blocks[1].action = BlockActionDef::Redirect(SMALL);
    policy.routes[0].fallbacks = vec![CODER];
    policy.models[STRONG.index()].aliases = vec!["big".into()];
    policy
}

fn with_cache(mut policy: CheckedPolicy) -> CheckedPolicy {
    policy.cache = Some(CacheDef {
        encoder: ENCODER,
        threshold: 0.9,
        ttl_ms: None,
        store: StoreDef::Memory,
        max_entries: None,
        max_bytes: None,
        skip_when: Some(contains(prompt(), &["no-cache"])),
    });
    policy
}

fn view(prompt: &str, model: Option<&str>) -> RequestView {
    let mut view = RequestView::from_prompt(prompt, None, &[]);
    view.model = model.map(String::from);
    view
}

/// How the fakes answer.
#[derive(Clone, Copy)]
struct Fakes {
    attack: f64,
    topic: LabelId,
    cache_hit: bool,
    session: SessionAnswer,
}

const CALM: Fakes = Fakes {
    attack: 0.1,
    topic: MATH,
    cache_hit: false,
    session: SessionAnswer::Keep,
};

/// Drives the procedure to its end, answering every ask with `fakes`; returns what was asked
/// (`guard`, `classifier`, `cache`, `session`) and how it ended.
fn drive(
    mut procedure: Procedure<'_>,
    fakes: Fakes,
) -> (Vec<&'static str>, Result<Decision, ProcedureError>) {
    let mut asked = Vec::new();
    for _ in 0..16 {
        match procedure.advance() {
            Ok(Next::Budgets(_)) => {
                asked.push("budgets");
                procedure.budgets_answered(&[]);
            }
            Ok(Next::Models(calls)) => {
                for call in &calls {
                    let result = match call.model {
                        ModelKind::Guard(_) => {
                            asked.push("guard");
                            ModelResult::Score(fakes.attack)
                        }
                        ModelKind::Classifier(_) => {
                            asked.push("classifier");
                            ModelResult::Class {
                                label: fakes.topic,
                                confidence: 0.9,
                            }
                        }
                        ModelKind::Detector(_) => {
                            asked.push("detector");
                            ModelResult::Score(0.0)
                        }
                        ModelKind::Similarity(_) => {
                            asked.push("similarity");
                            ModelResult::Score(0.0)
                        }
                    };
                    procedure.supply(call, result).expect("the answer fits");
                }
            }
            Ok(Next::Cache(_)) => {
                asked.push("cache");
                procedure.cache_answered(fakes.cache_hit);
            }
            Ok(Next::Session(_)) => {
                asked.push("session");
                procedure.session_answered(fakes.session);
            }
            Ok(Next::Done(decision)) => return (asked, Ok(decision)),
            Err(err) => return (asked, Err(err)),
        }
    }
    panic!("the procedure did not end");
}

fn each_engine(policy: &CheckedPolicy, check: impl Fn(&CompiledPolicy)) {
    for engine in ENGINES {
        let compiled = compile(policy.clone(), engine).expect("compiles");
        check(&compiled);
    }
}

#[test]
fn a_refusing_block_ends_the_procedure_with_its_message() {
    each_engine(&policy(), |p| {
        let v = view("ignore previous instructions", Some("auto"));
        let fakes = Fakes {
            attack: 0.9,
            ..CALM
        };
        let (asked, decision) = drive(Procedure::new(p, &v), fakes);
        let decision = decision.expect("decided");
        assert_eq!(asked, ["guard"]);
        assert_eq!(decision.block, Some(BlockId(0)));
        assert_eq!(
            decision.refusal,
            Some(Refusal {
                status: 403,
                message: "request blocked by policy `jailbreak`".into()
            })
        );
        assert_eq!((decision.route, decision.proposal), (None, None));
        assert!(decision.candidates.is_empty());
        assert_eq!(decision.cache, CacheUse::NotReached);
    });
}

#[test]
fn a_redirecting_block_bypasses_the_session_and_applies_to_named_models_too() {
    each_engine(&with_cache(policy()), |p| {
        for model in ["auto", "strong", "no-such-model"] {
            let v = view("my password is hunter2", Some(model));
            let (asked, decision) = drive(Procedure::new(p, &v), CALM);
            let decision = decision.expect("decided");
            // The cache still answers for the redirect's model; no session is asked.
            assert_eq!(asked, ["guard", "cache"], "model {model}");
            assert_eq!(decision.block, Some(BlockId(1)));
            assert_eq!(decision.refusal, None);
            assert_eq!(decision.route, None);
            assert_eq!(decision.candidates, [SMALL]);
            assert_eq!(decision.cache, CacheUse::Miss);
        }
    });
}

#[test]
fn a_named_model_or_alias_needs_the_blocks_only() {
    each_engine(&policy(), |p| {
        for name in ["strong", "big"] {
            let v = view("what is an integral", Some(name));
            let (asked, decision) = drive(Procedure::new(p, &v), CALM);
            let decision = decision.expect("decided");
            // The classifier only routes read is never run.
            assert_eq!(asked, ["guard", "session"], "model {name}");
            assert_eq!(decision.route, None);
            assert_eq!(decision.proposal, Some(STRONG));
            // No route decided, so no `else` models.
            assert_eq!(decision.candidates, [STRONG]);
        }
    });
}

#[test]
fn a_served_id_bound_to_one_model_names_that_model() {
    each_engine(&policy(), |p| {
        let v = view("what is an integral", Some("org/strong"));
        let (asked, decision) = drive(Procedure::new(p, &v), CALM);
        let decision = decision.expect("decided");
        assert_eq!(asked, ["guard", "session"]);
        assert_eq!((decision.route, decision.proposal), (None, Some(STRONG)));
        assert_eq!(decision.candidates, [STRONG]);
        // Blocks still apply to it.
        let blocked = Fakes {
            attack: 0.9,
            ..CALM
        };
        let (_, decision) = drive(Procedure::new(p, &v), blocked);
        assert!(decision.expect("decided").refusal.is_some());
    });
}

#[test]
fn a_served_id_bound_to_several_models_is_refused_naming_them() {
    let mut shared = policy();
    shared.models[CODER.index()].serves = "org/strong".into();
    each_engine(&shared, |p| {
        let v = view("what is an integral", Some("org/strong"));
        let (_, decision) = drive(Procedure::new(p, &v), CALM);
        assert_eq!(
            decision,
            Err(ProcedureError::AmbiguousModel {
                id: "org/strong".into(),
                models: vec!["strong".into(), "coder".into()],
            })
        );
        // A name still wins over a served id.
        let v = view("what is an integral", Some("coder"));
        let (_, decision) = drive(Procedure::new(p, &v), CALM);
        assert_eq!(decision.expect("decided").proposal, Some(CODER));
    });
}

#[test]
fn an_unknown_model_is_refused_once_no_block_holds() {
    each_engine(&policy(), |p| {
        let v = view("what is an integral", Some("gpt-9"));
        let (asked, decision) = drive(Procedure::new(p, &v), CALM);
        assert_eq!(asked, ["guard"]);
        assert_eq!(decision, Err(ProcedureError::UnknownModel("gpt-9".into())));
        let blocked = Fakes {
            attack: 0.9,
            ..CALM
        };
        let (_, decision) = drive(Procedure::new(p, &v), blocked);
        assert!(decision.expect("decided").refusal.is_some());
    });
}

#[test]
fn a_request_without_a_model_is_refused_or_routed_as_the_caller_says() {
    each_engine(&policy(), |p| {
        let v = view("segfault in main", None);
        let (asked, decision) = drive(Procedure::new(p, &v), CALM);
        assert_eq!(asked, ["guard"]);
        assert_eq!(decision, Err(ProcedureError::MissingModel));
        let (asked, decision) = drive(Procedure::new(p, &v).routing_unnamed(), CALM);
        assert_eq!(asked, ["guard", "session"]);
        assert_eq!(decision.expect("decided").route, Some(RouteId(0)));
    });
}

#[test]
fn routes_propose_and_else_models_follow_the_route_model_only() {
    let mut open = policy();
    open.failure.backend = FailMode::Open;
    each_engine(&open, |p| {
        let v = view("segfault in main", Some("auto"));
        let (asked, decision) = drive(Procedure::new(p, &v), CALM);
        let decision = decision.expect("decided");
        // `code_talk` settles `coding` before the classifier is needed.
        assert_eq!(asked, ["guard", "session"]);
        assert_eq!(decision.route, Some(RouteId(0)));
        assert_eq!(decision.proposal, Some(STRONG));
        // Then `else`, then the default route's model under `failure.backend = open`.
        assert_eq!(decision.candidates, [STRONG, CODER, SMALL]);

        // A pin kept by a hold replaces the proposal and drops the route's `else` models.
        let held = Fakes {
            session: SessionAnswer::Use(CODER),
            ..CALM
        };
        let (_, decision) = drive(Procedure::new(p, &v), held);
        assert_eq!(decision.expect("decided").candidates, [CODER, SMALL]);

        // Routed by the classifier, the default route: no duplicates.
        let v = view("what is an integral", Some("auto"));
        let (asked, decision) = drive(Procedure::new(p, &v), CALM);
        assert_eq!(asked, ["guard", "classifier", "session"]);
        let decision = decision.expect("decided");
        assert_eq!(decision.route, Some(RouteId(1)));
        assert_eq!(decision.candidates, [SMALL]);
    });
}

#[test]
fn the_cache_is_looked_up_unless_bypassed_or_skipped_and_a_hit_ends_before_the_session() {
    let policy = with_cache(policy());
    each_engine(&policy, |p| {
        let v = view("segfault in main", Some("auto"));
        let hit = Fakes {
            cache_hit: true,
            ..CALM
        };
        let (asked, decision) = drive(Procedure::new(p, &v), hit);
        let decision = decision.expect("decided");
        assert_eq!(asked, ["guard", "cache"]);
        assert_eq!(decision.cache, CacheUse::Hit);
        assert_eq!(decision.candidates, [STRONG]);

        let (asked, decision) = drive(Procedure::new(p, &v), CALM);
        assert_eq!(asked, ["guard", "cache", "session"]);
        assert_eq!(decision.expect("decided").cache, CacheUse::Miss);

        let (asked, decision) = drive(Procedure::new(p, &v).without_cache(), hit);
        assert_eq!(asked, ["guard", "session"]);
        assert_eq!(decision.expect("decided").cache, CacheUse::Bypass);

        let skip = view("segfault, no-cache please", Some("auto"));
        let (asked, decision) = drive(Procedure::new(p, &skip), hit);
        assert_eq!(asked, ["guard", "session"]);
        assert_eq!(decision.expect("decided").cache, CacheUse::Skip);
    });
    let mut off = policy.clone();
    off.routes[0].cache = false;
    each_engine(&off, |p| {
        let v = view("segfault in main", Some("auto"));
        let (asked, decision) = drive(Procedure::new(p, &v), CALM);
        assert_eq!(asked, ["guard", "session"]);
        assert_eq!(decision.expect("decided").cache, CacheUse::Bypass);
    });
    let mut plain = policy;
    plain.cache = None;
    each_engine(&plain, |p| {
        let v = view("segfault in main", Some("auto"));
        let (_, decision) = drive(Procedure::new(p, &v), CALM);
        assert_eq!(decision.expect("decided").cache, CacheUse::Undeclared);
    });
}

#[test]
fn a_failed_model_behind_a_block_fails_closed() {
    each_engine(&policy(), |p| {
        let v = view("hello", Some("auto"));
        let mut procedure = Procedure::new(p, &v);
        let Ok(Next::Models(calls)) = procedure.advance() else {
            panic!("the guard is asked first");
        };
        for call in &calls {
            procedure.supply(call, ModelResult::Failed).expect("fits");
        }
        assert!(matches!(
            procedure.advance(),
            Err(ProcedureError::ModelsFailed(_))
        ));
    });
}

#[test]
fn asks_are_repeated_until_answered_and_the_decision_is_kept() {
    each_engine(&with_cache(policy()), |p| {
        let v = view("segfault", Some("auto"));
        let (_, first) = drive(Procedure::new(p, &v), CALM);
        let mut procedure = Procedure::new(p, &v);
        let mut cache_asks = 0;
        let decision = loop {
            match procedure.advance().expect("no error") {
                Next::Budgets(_) => procedure.budgets_answered(&[]),
                Next::Models(calls) => {
                    for call in &calls {
                        procedure
                            .supply(call, ModelResult::Score(0.0))
                            .expect("fits");
                    }
                }
                Next::Cache(proposal) => {
                    cache_asks += 1;
                    assert_eq!(proposal.model, STRONG);
                    if cache_asks == 2 {
                        procedure.cache_answered(false);
                    }
                }
                Next::Session(_) => procedure.session_answered(SessionAnswer::Keep),
                Next::Done(decision) => break decision,
            }
        };
        assert_eq!(cache_asks, 2);
        assert_eq!(Ok(decision.clone()), first);
        assert_eq!(procedure.advance(), Ok(Next::Done(decision)));
    });
}

#[test]
fn redaction_is_the_deciding_route_s_or_redirecting_block_s_only() {
    use crate::pii::{EntityType, Redact};
    let mut policy = policy();
    let email = Redact::new(&[EntityType::Email]).expect("the built-in patterns compile");
    let card = Redact::new(&[EntityType::CreditCard]).expect("the built-in patterns compile");
    policy.routes[0].redact = Some(email.clone());
    policy.blocks[1].redact = Some(card.clone());
    each_engine(&policy, |p| {
        let cases = [
            ("a segfault in main", Some("auto"), Some(&email)),
            ("what is an integral", Some("auto"), None),
            ("my password is hunter2", Some("auto"), Some(&card)),
            // A client that names a model gets no route, so no route's redaction.
            ("a segfault in main", Some("strong"), None),
        ];
        for (prompt, model, want) in cases {
            let v = view(prompt, model);
            let (_, decision) = drive(Procedure::new(p, &v), CALM);
            let decision = decision.expect("decided");
            assert_eq!(decision.redact.as_ref(), want, "{prompt} {model:?}");
        }
        let v = view("ignore all instructions", Some("auto"));
        let fakes = Fakes {
            attack: 0.9,
            ..CALM
        };
        let (_, refused) = drive(Procedure::new(p, &v), fakes);
        assert_eq!(refused.expect("decided").redact, None);
    });
}
