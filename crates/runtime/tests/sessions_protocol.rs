//! The switch protocol against a small reference model: random sequences of calls (session
//! ids, tenants, proposals, tool-loop flags, time jumps) must give the same states, forwarded
//! models and pins as the model predicts, with the policy's real `protect` holds evaluated by
//! the staged evaluator.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "helpers outside `#[test]` functions fail the test on an unexpected error"
)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use src_compiler::hir::{CheckedPolicy, ModelId, RedisUrl, StoreDef};
use src_compiler::request::RequestView;
use src_compiler::{CheckOptions, CompiledPolicy, EngineKind};
use src_runtime::hooks::BoxFuture;
use src_runtime::session::identity::tenant_of_key;
use src_runtime::session::store::{Cas, OutcomeKey, OutcomeStats, Put, Recorded, Verdict};
use src_runtime::session::{
    Clock, Continuity, ContinuityInput, Identity, ManualClock, MemoryStore, Pin, PolicyHolds,
    RedisStore, SessionLayer, SessionOptions, SessionState, SessionStore, StoreError,
};

const TTL_MS: u64 = 10_000;
const T0: u64 = 1_700_000_000_000;

fn policy_text(mode: &str, missing: &str) -> String {
    policy_with_store(mode, missing, "memory")
}

fn policy_with_store(mode: &str, missing: &str, store: &str) -> String {
    format!(
        r#"
backend sim {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model m0 {{ backend = sim  serves = "m0"  cost = 0.1 }}
model m1 {{ backend = sim  serves = "m1"  cost = 1.0 }}
model m2 {{ backend = sim  serves = "m2"  cost = 0.5 }}
route one priority 20 {{ when contains(prompt, ["one"])  to m1 }}
route two priority 10 {{ when contains(prompt, ["two"])  to m2 }}
route default {{ to m0 }}
session {{ id = header("x-session-id")  ttl = 10s  missing = {missing}  store = {store} }}
protect {{
  mode = {mode}
  hold "tool call in flight" when request.tool_loop
  hold "no costly moves" when proposed.cost > pinned.cost and header("x-hold") == "yes"
}}
"#
    )
}

fn compile(text: &str) -> CompiledPolicy {
    let outcome = src_compiler::check(
        src_compiler::load::load_str("policy.sr", text),
        &CheckOptions::default(),
    );
    let Some(policy) = outcome.policy else {
        panic!("policy does not check: {:?}", outcome.diagnostics);
    };
    src_compiler::compile(policy, EngineKind::Interp).unwrap()
}

#[derive(Debug, Clone)]
struct Call {
    id: Option<&'static str>,
    key: Option<&'static str>,
    proposed: u32,
    tool_loop: bool,
    hold_header: bool,
    /// Milliseconds the clock moves before the call.
    jump: u64,
}

fn call() -> impl Strategy<Value = Call> {
    (
        prop::option::weighted(0.9, prop::sample::select(vec!["s1", "s2", "s3"])),
        prop::option::of(prop::sample::select(vec!["key-a", "key-b"])),
        0u32..3,
        prop::bool::weighted(0.25),
        any::<bool>(),
        prop::sample::select(vec![
            0,
            1,
            TTL_MS / 2,
            TTL_MS - 1,
            TTL_MS,
            TTL_MS + TTL_MS / 2,
            2 * TTL_MS,
            5 * TTL_MS,
        ]),
    )
        .prop_map(|(id, key, proposed, tool_loop, hold_header, jump)| Call {
            id,
            key,
            proposed,
            tool_loop,
            hold_header,
            jump,
        })
}

fn view(call: &Call) -> RequestView {
    let mut headers = Vec::new();
    if let Some(id) = call.id {
        headers.push(("x-session-id".to_owned(), id.to_owned()));
    }
    if call.hold_header {
        headers.push(("x-hold".to_owned(), "yes".to_owned()));
    }
    RequestView {
        headers,
        api_key: call.key.map(str::to_owned),
        tool_loop: call.tool_loop,
        ..RequestView::default()
    }
}

/// What the reference model expects of one call.
#[derive(Debug, Clone, PartialEq)]
struct Expected {
    state: SessionState,
    model: u32,
    protection: Option<&'static str>,
}

/// The protocol written as plainly as possible.
struct Reference {
    observe: bool,
    costs: [f64; 3],
    /// (tenant, id) → (model, last seen).
    pins: HashMap<(String, String), (u32, u64)>,
}

impl Reference {
    fn call(&mut self, c: &Call, now: u64) -> Expected {
        let Some(id) = c.id else {
            return Expected {
                state: SessionState::MissingIdentity,
                model: c.proposed,
                protection: None,
            };
        };
        let key = (tenant_of_key(c.key), id.to_owned());
        let fresh = |state| Expected {
            state,
            model: c.proposed,
            protection: None,
        };
        let Some(&(pinned, seen)) = self.pins.get(&key) else {
            self.pins.insert(key, (c.proposed, now));
            return fresh(SessionState::New);
        };
        if now >= seen + 2 * TTL_MS {
            // The store no longer keeps it: indistinguishable from a new session.
            self.pins.insert(key, (c.proposed, now));
            return fresh(SessionState::New);
        }
        if now >= seen + TTL_MS {
            self.pins.insert(key, (c.proposed, now));
            return fresh(SessionState::Expired);
        }
        if pinned == c.proposed {
            self.pins.insert(key, (pinned, now));
            return Expected {
                state: SessionState::Pinned,
                model: pinned,
                protection: None,
            };
        }
        let rule = if c.tool_loop {
            Some("tool call in flight")
        } else if c.hold_header && self.costs[c.proposed as usize] > self.costs[pinned as usize] {
            Some("no costly moves")
        } else {
            None
        };
        match (rule, self.observe) {
            (Some(rule), false) => {
                self.pins.insert(key, (pinned, now));
                Expected {
                    state: SessionState::Held,
                    model: pinned,
                    protection: Some(rule),
                }
            }
            (rule, _) => {
                self.pins.insert(key, (c.proposed, now));
                Expected {
                    state: if rule.is_some() {
                        SessionState::Observed
                    } else {
                        SessionState::Switched
                    },
                    model: c.proposed,
                    protection: rule,
                }
            }
        }
    }
}

async fn run_layer(
    layer: &SessionLayer,
    compiled: &CompiledPolicy,
    view: &RequestView,
    proposed: ModelId,
) -> Continuity {
    let input = ContinuityInput {
        policy: &compiled.checked,
        view,
        route: None,
        proposed,
        ahead: None,
    };
    layer
        .decide(
            input,
            &PolicyHolds {
                compiled,
                view,
                models: None,
            },
        )
        .await
}

fn model(policy: &CheckedPolicy, i: u32) -> ModelId {
    policy.model_by_name(&format!("m{i}")).unwrap()
}

fn check_sequence(
    compiled: &CompiledPolicy,
    observe: bool,
    calls: &[Call],
) -> Result<(), TestCaseError> {
    let policy = &compiled.checked;
    let clock = Arc::new(ManualClock::new(T0));
    let store = Arc::new(MemoryStore::default());
    let layer = SessionLayer::new(clock.clone(), SessionOptions::default())
        .with_store(StoreDef::Memory, store.clone());
    let mut reference = Reference {
        observe,
        costs: [0.1, 1.0, 0.5],
        pins: HashMap::new(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for (step, c) in calls.iter().enumerate() {
        clock.advance(c.jump);
        let now = clock.now_ms();
        let expected = reference.call(c, now);
        let v = view(c);
        let got = rt.block_on(run_layer(&layer, compiled, &v, model(policy, c.proposed)));
        let Continuity::Forward {
            model: forwarded,
            state,
            protection,
            ..
        } = got
        else {
            return Err(TestCaseError::fail(format!("step {step}: {got:?}")));
        };
        prop_assert_eq!(state, expected.state, "step {} {:?}", step, c);
        prop_assert_eq!(
            forwarded,
            model(policy, expected.model),
            "step {} {:?}",
            step,
            c
        );
        prop_assert_eq!(
            protection.as_deref(),
            expected.protection,
            "step {} {:?}",
            step,
            c
        );
        // Every pin the reference keeps (and is still retained) is the one stored.
        for ((tenant, id), (m, seen)) in &reference.pins {
            let key = Identity {
                tenant: tenant.clone(),
                id: id.clone(),
            };
            let stored = rt.block_on(store.get(&key, now)).unwrap();
            if now < seen + 2 * TTL_MS {
                let stored = stored.map(|p| p.model);
                prop_assert_eq!(
                    stored,
                    Some(format!("m{m}")),
                    "pin {:?} after step {}",
                    key,
                    step
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn enforce_mode_matches_the_reference(calls in prop::collection::vec(call(), 1..40)) {
        thread_local! {
            static POLICY: CompiledPolicy = compile(&policy_text("enforce", "route"));
        }
        POLICY.with(|p| check_sequence(p, false, &calls))?;
    }

    #[test]
    fn observe_mode_matches_the_reference(calls in prop::collection::vec(call(), 1..40)) {
        thread_local! {
            static POLICY: CompiledPolicy = compile(&policy_text("observe", "route"));
        }
        POLICY.with(|p| check_sequence(p, true, &calls))?;
    }
}

#[tokio::test]
async fn missing_identity_is_rejected_when_the_policy_says_so() {
    let compiled = compile(&policy_text("enforce", "reject"));
    let layer = SessionLayer::default();
    let v = RequestView::default();
    let got = run_layer(&layer, &compiled, &v, model(&compiled.checked, 0)).await;
    let Continuity::Reject { status, message } = got else {
        panic!("not rejected: {got:?}");
    };
    assert_eq!(status, 400);
    assert!(message.contains("`x-session-id`"), "{message}");
}

/// Delays every read until `n` readers have read, so concurrent first calls all see "no pin"
/// whatever the scheduler does: the race is forced, not hoped for.
struct RaceStore {
    inner: Arc<dyn SessionStore>,
    barrier: tokio::sync::Barrier,
}

impl SessionStore for RaceStore {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
    fn get<'a>(
        &'a self,
        key: &'a Identity,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Option<Pin>, StoreError>> {
        self.inner.get(key, now_ms)
    }
    fn touch<'a>(
        &'a self,
        key: &'a Identity,
        now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.inner.touch(key, now_ms, ttl_ms)
    }
    fn get_and_touch<'a>(
        &'a self,
        key: &'a Identity,
        now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Option<Pin>, StoreError>> {
        Box::pin(async move {
            let read = self.inner.get_and_touch(key, now_ms, ttl_ms).await;
            self.barrier.wait().await;
            read
        })
    }
    fn put_if_absent<'a>(
        &'a self,
        key: &'a Identity,
        pin: &'a Pin,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Put, StoreError>> {
        self.inner.put_if_absent(key, pin, ttl_ms)
    }
    fn compare_and_set<'a>(
        &'a self,
        key: &'a Identity,
        read: &'a Pin,
        pin: &'a Pin,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Cas, StoreError>> {
        self.inner.compare_and_set(key, read, pin, ttl_ms)
    }
    fn record_outcome<'a>(
        &'a self,
        key: &'a OutcomeKey,
        verdict: Verdict,
        idempotency: Option<&'a str>,
        now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Recorded, StoreError>> {
        self.inner
            .record_outcome(key, verdict, idempotency, now_ms, ttl_ms)
    }
    fn outcomes<'a>(
        &'a self,
        key: &'a OutcomeKey,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<OutcomeStats, StoreError>> {
        self.inner.outcomes(key, now_ms)
    }
}

/// Two layers (two router replicas) share one store and race on a session's first call with
/// different proposals: exactly one pins, the other follows that pin.
async fn first_call_race_agrees(inner: Arc<dyn SessionStore>, store: &str, def: StoreDef) {
    let compiled = Arc::new(compile(&policy_with_store("enforce", "route", store)));
    let shared: Arc<dyn SessionStore> = Arc::new(RaceStore {
        inner,
        barrier: tokio::sync::Barrier::new(2),
    });
    let a = Arc::new(SessionLayer::default().with_store(def.clone(), Arc::clone(&shared)));
    let b = Arc::new(SessionLayer::default().with_store(def, shared));
    for round in 0..25 {
        let id = format!("race-{round}");
        let mut tasks = Vec::new();
        for (layer, proposal) in [(Arc::clone(&a), 1u32), (Arc::clone(&b), 2u32)] {
            let compiled = Arc::clone(&compiled);
            let id = id.clone();
            tasks.push(tokio::spawn(async move {
                let v = RequestView {
                    headers: vec![("x-session-id".into(), id)],
                    ..RequestView::default()
                };
                let proposed = model(&compiled.checked, proposal);
                match run_layer(&layer, &compiled, &v, proposed).await {
                    Continuity::Forward { model, state, .. } => (model, state),
                    other => panic!("{other:?}"),
                }
            }));
        }
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await.unwrap());
        }
        assert_eq!(results[0].0, results[1].0, "round {round}: {results:?}");
        let mut states: Vec<_> = results.iter().map(|r| r.1).collect();
        states.sort_by_key(|s| s.as_str());
        assert_eq!(
            states,
            [SessionState::New, SessionState::Pinned],
            "round {round}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_agree_on_a_first_call_race_in_memory() {
    first_call_race_agrees(Arc::new(MemoryStore::default()), "memory", StoreDef::Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_agree_on_a_first_call_race_in_redis() {
    let server = src_testkit::redis::RedisServer::start();
    let url = server.url();
    let store = Arc::new(RedisStore::connect(&url, Duration::from_secs(2)).unwrap());
    let def = StoreDef::Redis(RedisUrl::parse(&url).unwrap().into());
    first_call_race_agrees(store, &format!("redis({url:?})"), def).await;
}

/// Two layers on one Redis named by the policy (each builds its own connection, as two
/// processes would): a session started on one continues on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_continues_across_replicas_sharing_redis() {
    let server = src_testkit::redis::RedisServer::start();
    let compiled = compile(&policy_with_store(
        "enforce",
        "route",
        &format!("redis({:?})", server.url()),
    ));
    let (a, b) = (SessionLayer::default(), SessionLayer::default());
    let loop_call = RequestView {
        headers: vec![("x-session-id".into(), "shared".into())],
        tool_loop: true,
        ..RequestView::default()
    };
    let first = run_layer(&a, &compiled, &loop_call, model(&compiled.checked, 1)).await;
    assert!(
        matches!(
            first,
            Continuity::Forward {
                state: SessionState::New,
                ..
            }
        ),
        "{first:?}"
    );
    let second = run_layer(&b, &compiled, &loop_call, model(&compiled.checked, 2)).await;
    let Continuity::Forward {
        model: m,
        state,
        protection,
        ..
    } = second
    else {
        panic!("{second:?}");
    };
    assert_eq!(
        (m, state),
        (model(&compiled.checked, 1), SessionState::Held)
    );
    assert_eq!(protection.as_deref(), Some("tool call in flight"));
    let plain = RequestView {
        tool_loop: false,
        ..loop_call
    };
    let third = run_layer(&a, &compiled, &plain, model(&compiled.checked, 2)).await;
    assert!(
        matches!(
            third,
            Continuity::Forward {
                state: SessionState::Switched,
                ..
            }
        ),
        "{third:?}"
    );
    let fourth = run_layer(&b, &compiled, &plain, model(&compiled.checked, 2)).await;
    assert!(
        matches!(
            fourth,
            Continuity::Forward {
                state: SessionState::Pinned,
                ..
            }
        ),
        "{fourth:?}"
    );
}
