//! Sessions end to end: a real `src serve` on 127.0.0.1:0 over the built-in simulator, real
//! HTTP, and a real `redis-server` where the policy names one. Time-dependent cases move a
//! manual clock instead of sleeping.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "helpers outside `#[test]` functions fail the test on an unexpected error"
)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::header::HeaderMap;
use hyper::Method;
use serde_json::{json, Value};
use src_runtime::hooks::NoModelSignals;
use src_runtime::log::RequestLog;
use src_runtime::session::{Clock, ManualClock, SessionLayer, SessionOptions, SystemClock};
use src_runtime::{Components, ServerHandle};
use src_testkit::redis::RedisServer;
use src_testkit::{Http, PATIENCE};

/// Bounds waits for asynchronous effects (an outcome recorded off the request path); never a
/// measure of speed.
fn policy(mode: &str, extra_session: &str, extra_holds: &str) -> String {
    format!(
        r#"
backend sim {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model small  {{ backend = sim  serves = "Qwen/Qwen3-0.6B"  cost = 0.1 }}
model strong {{ backend = sim  serves = "Qwen/Qwen3-8B"  cost = 1.0 }}

route coding priority 10 {{ when contains(history, ["segfault", "stack trace"])  to strong }}
route default {{ to small }}

session {{ ttl = 10m  {extra_session} }}
protect {{
  mode = {mode}
  hold "tool call in flight" when request.tool_loop
  {extra_holds}
}}
"#
    )
}

struct Router {
    server: ServerHandle,
    _dir: tempfile::TempDir,
    client: Http,
}

struct Answer {
    status: u16,
    headers: HeaderMap,
    body: Bytes,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    fn session(&self) -> &str {
        self.header("x-sr-session").unwrap_or("<none>")
    }

    fn model(&self) -> &str {
        self.header("x-sr-model").unwrap_or("<none>")
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

impl Router {
    async fn start(policy: &str) -> Router {
        Router::with_clock(policy, Arc::new(SystemClock)).await
    }

    async fn with_clock(policy: &str, clock: Arc<dyn Clock>) -> Router {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("policy.sr"), policy).unwrap();
        let cfg = src_testkit::config(dir.path());
        let sessions = SessionLayer::new(
            clock,
            SessionOptions {
                redis_timeout: Duration::from_millis(300),
                ..SessionOptions::default()
            },
        );
        let components = Components {
            models: Arc::new(NoModelSignals),
            sessions: Arc::new(sessions),
            log: RequestLog::Off,
            links: Default::default(),
        };
        let server = src_runtime::spawn(cfg, components).await.unwrap();
        Router {
            server,
            _dir: dir,
            client: Http::new(),
        }
    }

    async fn send(&self, path: &str, body: &Value, headers: &[(&str, &str)]) -> Answer {
        let url = format!("http://{}{path}", self.server.addr);
        let response = self
            .client
            .open(Method::POST, &url, body.to_string(), headers)
            .await
            .unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = match response.into_body().collect().await {
            Ok(b) => b.to_bytes(),
            // An answer cut off upstream reaches the client as a broken body.
            Err(_) => Bytes::new(),
        };
        Answer {
            status,
            headers,
            body,
        }
    }

    async fn chat(&self, body: &Value, headers: &[(&str, &str)]) -> Answer {
        self.send("/v1/chat/completions", body, headers).await
    }

    async fn outcome(&self, body: &Value, headers: &[(&str, &str)]) -> Answer {
        self.send("/v1/router/outcomes", body, headers).await
    }

    async fn metrics(&self) -> String {
        let url = format!("http://{}/metrics", self.server.admin_addr);
        self.client
            .send(Method::GET, &url, "", &[])
            .await
            .unwrap()
            .text()
    }

    /// The requests the simulator received, oldest first.
    fn upstream(&self) -> Vec<src_runtime::sim::ReceivedRequest> {
        self.server
            .simulators()
            .iter()
            .flat_map(|s| s.received())
            .collect()
    }
}

fn user(text: &str) -> Value {
    json!({"model": "auto", "messages": [{"role": "user", "content": text}]})
}

/// An agent conversation: the task, then `steps` tool calls; `open` leaves the last call's
/// result as the latest message (the request continues a tool loop), otherwise the assistant
/// has answered and the user thanks it.
fn agent(task: &str, results: &[&str], open: bool) -> Value {
    let mut messages = vec![json!({"role": "user", "content": task})];
    for (i, result) in results.iter().enumerate() {
        let id = format!("call_{i}");
        messages.push(json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [{"id": id, "type": "function",
                            "function": {"name": "run", "arguments": "{}"}}]
        }));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": result}));
    }
    if !open {
        messages.push(json!({"role": "assistant", "content": "Done."}));
        messages.push(json!({"role": "user", "content": "thanks"}));
    }
    json!({"model": "auto", "messages": messages})
}

const SID: &str = "x-model-affinity";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_task_stays_pinned_through_its_tool_loop() {
    let router = Router::start(&policy("enforce", "", "")).await;
    let h = [(SID, "task-1"), ("authorization", "Bearer sk-one")];

    let first = router
        .chat(&agent("rename `x` to `count`", &[], true), &h)
        .await;
    assert_eq!(
        (first.status, first.session(), first.model()),
        (200, "new", "small")
    );

    // The tool's output mentions a segfault, so the route now proposes `strong`; the call
    // continues a tool loop, so the pin holds.
    let results = ["tests failed: segfault, stack trace follows"];
    let second = router
        .chat(&agent("rename `x` to `count`", &results, true), &h)
        .await;
    assert_eq!(
        (second.status, second.session(), second.model()),
        (200, "held", "small")
    );
    assert_eq!(
        second.header("x-sr-protection"),
        Some("tool call in flight")
    );
    let results = [
        "tests failed: segfault, stack trace follows",
        "retried: same",
    ];
    let third = router
        .chat(&agent("rename `x` to `count`", &results, true), &h)
        .await;
    assert_eq!((third.session(), third.model()), ("held", "small"));

    // The loop is over: the switch the route keeps proposing goes ahead, then sticks.
    let fourth = router
        .chat(&agent("rename `x` to `count`", &results, false), &h)
        .await;
    assert_eq!((fourth.session(), fourth.model()), ("switched", "strong"));
    assert_eq!(fourth.header("x-sr-protection"), None);
    let fifth = router
        .chat(&agent("rename `x` to `count`", &results, false), &h)
        .await;
    assert_eq!((fifth.session(), fifth.model()), ("pinned", "strong"));

    // Upstream saw each call on the model the session layer chose, with the identity.
    let upstream = router.upstream();
    let served: Vec<_> = upstream.iter().filter_map(|r| r.model()).collect();
    assert_eq!(
        served,
        [
            "Qwen/Qwen3-0.6B",
            "Qwen/Qwen3-0.6B",
            "Qwen/Qwen3-0.6B",
            "Qwen/Qwen3-8B",
            "Qwen/Qwen3-8B"
        ]
    );
    assert!(upstream
        .iter()
        .all(|r| r.header("x-dynamo-session-id") == Some("task-1")));

    let metrics = router.metrics().await;
    for line in [
        "src_session_calls_total{state=\"held\"} 2",
        "src_session_holds_total{rule=\"tool call in flight\"} 2",
        "src_session_switches_total{from=\"small\",to=\"strong\"} 1",
        "src_session_pins_total{store=\"memory\"} 1",
    ] {
        assert!(metrics.contains(line), "missing `{line}` in:\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_id_routes_afresh() {
    let router = Router::start(&policy("enforce", "", "")).await;
    let a = router
        .chat(&user("a segfault in main"), &[(SID, "one")])
        .await;
    assert_eq!((a.session(), a.model()), ("new", "strong"));
    let b = router.chat(&user("write a haiku"), &[(SID, "two")]).await;
    assert_eq!((b.session(), b.model()), ("new", "small"));
    let c = router
        .chat(&user("a segfault in main"), &[(SID, "one")])
        .await;
    assert_eq!((c.session(), c.model()), ("pinned", "strong"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_expires_and_routes_afresh() {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let router = Router::with_clock(&policy("enforce", "", ""), clock.clone()).await;
    let h = [(SID, "idle")];
    let first = router.chat(&agent("fix it: segfault", &[], true), &h).await;
    assert_eq!((first.session(), first.model()), ("new", "strong"));
    clock.advance(9 * 60 * 1000);
    // Still inside its ten minutes (and sliding): a tool-loop call stays held.
    let held = router.chat(&agent("say hi", &["ok"], true), &h).await;
    assert_eq!((held.session(), held.model()), ("held", "strong"));
    clock.advance(10 * 60 * 1000);
    // Idle for the whole ttl: the pin is stale, even inside a tool loop.
    let expired = router.chat(&agent("say hi", &["ok"], true), &h).await;
    assert_eq!((expired.session(), expired.model()), ("expired", "small"));
    let after = router.chat(&agent("say hi", &["ok"], true), &h).await;
    assert_eq!((after.session(), after.model()), ("pinned", "small"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_and_enforce_differ_only_in_what_is_applied() {
    let enforce = Router::start(&policy("enforce", "", "")).await;
    let observe = Router::start(&policy("observe", "", "")).await;
    let h = [(SID, "same")];
    let mut seen = Vec::new();
    for router in [&enforce, &observe] {
        let first = router.chat(&agent("rename it", &[], true), &h).await;
        let loop_call = router
            .chat(&agent("rename it", &["segfault in the tests"], true), &h)
            .await;
        seen.push((
            first.session().to_owned(),
            first.model().to_owned(),
            loop_call.session().to_owned(),
            loop_call.model().to_owned(),
            loop_call.header("x-sr-protection").map(str::to_owned),
        ));
    }
    let protection = Some("tool call in flight".to_owned());
    assert_eq!(
        seen[0],
        (
            "new".into(),
            "small".into(),
            "held".into(),
            "small".into(),
            protection.clone()
        )
    );
    assert_eq!(
        seen[1],
        (
            "new".into(),
            "small".into(),
            "observed".into(),
            "strong".into(),
            protection
        )
    );
    let metrics = observe.metrics().await;
    assert!(
        metrics.contains("src_session_observed_total{rule=\"tool call in flight\"} 1"),
        "{metrics}"
    );
    // Observe applied the switch: the pin is now on `strong`.
    let next = observe.chat(&user("segfault again"), &h).await;
    assert_eq!((next.session(), next.model()), ("pinned", "strong"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_identity_routes_alone_or_is_rejected() {
    let route = Router::start(&policy("enforce", "missing = route", "")).await;
    let a = route.chat(&user("a segfault"), &[]).await;
    assert_eq!(
        (a.status, a.session(), a.model()),
        (200, "missing-identity", "strong")
    );
    assert_eq!(route.upstream()[0].header("x-dynamo-session-id"), None);
    // A blank header is no identity either.
    let blank = route.chat(&user("hello"), &[(SID, "  ")]).await;
    assert_eq!(
        (blank.session(), blank.model()),
        ("missing-identity", "small")
    );

    let reject = Router::start(&policy("enforce", "missing = reject", "")).await;
    let b = reject.chat(&user("a segfault"), &[]).await;
    assert_eq!(b.status, 400);
    let error = b.json();
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("`x-model-affinity`"), "{error}");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert!(reject.upstream().is_empty());
    let ok = reject
        .chat(&user("a segfault"), &[("x-session-id", "s")])
        .await;
    assert_eq!((ok.status, ok.session()), (200, "new"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_never_share_pins_or_outcomes() {
    let holds = r#"hold "pinned is doing fine" when outcomes(pinned).count >= 1 and outcomes(pinned).fail_rate < 0.5"#;
    let router = Router::start(&policy("enforce", "", holds)).await;
    let alice = [(SID, "shared-id"), ("authorization", "Bearer sk-alice")];
    let bob = [(SID, "shared-id"), ("authorization", "Bearer sk-bob")];
    let a = router.chat(&user("segfault"), &alice).await;
    assert_eq!((a.session(), a.model()), ("new", "strong"));
    // Bob's call with the same id is Bob's own first call.
    let b = router.chat(&user("hello"), &bob).await;
    assert_eq!((b.session(), b.model()), ("new", "small"));
    // Bob reports a pass for `strong` under the shared id: it lands in Bob's session only.
    let report = json!({"session": "shared-id", "model": "strong", "verdict": "pass",
                        "idempotency_key": "k1"});
    let r = router.outcome(&report, &bob).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["outcomes"]["count"], 1);
    // So Alice's pin has no outcomes and her switch is not held by Bob's pass.
    let a2 = router.chat(&user("hello"), &alice).await;
    assert_eq!((a2.session(), a2.model()), ("switched", "small"));
    // Naming another tenant in a report is refused.
    let claim = json!({"session": "shared-id", "tenant": "anonymous", "verdict": "fail",
                       "idempotency_key": "k2"});
    let refused = router.outcome(&claim, &bob).await;
    assert_eq!(refused.status, 403);
    // The tenant is a hash of the key, never the key.
    let metrics = router.metrics().await;
    assert!(!metrics.contains("sk-alice") && !metrics.contains("sk-bob"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_outcomes_feed_protect_and_are_idempotent() {
    let holds = r#"hold "pinned is doing fine" when outcomes(pinned).count >= 2 and outcomes(pinned).fail_rate <= 0.25"#;
    let router = Router::start(&policy("enforce", "", holds)).await;
    let h = [(SID, "graded")];
    let first = router.chat(&user("segfault"), &h).await;
    assert_eq!(first.model(), "strong");
    let pass = |key: &str| json!({"session": "graded", "verdict": "pass", "idempotency_key": key});
    let r1 = router.outcome(&pass("step-1"), &h).await;
    assert_eq!(r1.json()["recorded"], true);
    // A retry of the same report is acknowledged, not counted.
    let retry = router.outcome(&pass("step-1"), &h).await;
    assert_eq!(
        (
            retry.json()["recorded"].clone(),
            retry.json()["duplicate"].clone()
        ),
        (json!(false), json!(true))
    );
    assert_eq!(retry.json()["outcomes"]["count"], 1);
    // One pass is not enough evidence: the switch goes ahead.
    let moved = router.chat(&user("hello"), &h).await;
    assert_eq!((moved.session(), moved.model()), ("switched", "small"));
    // Two passes on `small`: now it keeps its pin.
    router.outcome(&pass("step-2"), &h).await;
    router.outcome(&pass("step-3"), &h).await;
    let kept = router.chat(&user("segfault"), &h).await;
    assert_eq!((kept.session(), kept.model()), ("held", "small"));
    assert_eq!(kept.header("x-sr-protection"), Some("pinned is doing fine"));
    // Failures push the fail rate over the bar: the pin no longer holds.
    for key in ["f1", "f2"] {
        let fail = json!({"session": "graded", "model": "small", "verdict": "fail",
                          "idempotency_key": key});
        assert_eq!(router.outcome(&fail, &h).await.status, 200);
    }
    let released = router.chat(&user("segfault"), &h).await;
    assert_eq!(
        (released.session(), released.model()),
        ("switched", "strong")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_outcome_reports_are_refused() {
    let router = Router::start(&policy("enforce", "", "")).await;
    let h = [(SID, "s")];
    let cases = [
        json!({"session": "s", "verdict": "maybe", "idempotency_key": "k"}),
        json!({"session": "s", "idempotency_key": "k"}),
        json!({"session": "s", "verdict": "pass"}),
        json!({"session": "", "verdict": "pass", "idempotency_key": "k"}),
        json!({"session": "s", "verdict": "pass", "idempotency_key": ""}),
        json!({"session": "s", "verdict": "pass", "idempotency_key": "k", "verdcit": 1}),
        json!({"session": "s", "model": "strnog", "verdict": "pass", "idempotency_key": "k"}),
        json!(["not", "an", "object"]),
    ];
    for case in cases {
        let answer = router.outcome(&case, &h).await;
        assert_eq!(
            answer.status,
            400,
            "{case}: {}",
            String::from_utf8_lossy(&answer.body)
        );
        assert!(answer.json()["error"]["message"].is_string(), "{case}");
    }
    let typo =
        json!({"session": "s", "model": "strnog", "verdict": "pass", "idempotency_key": "k"});
    let answer = router.outcome(&typo, &h).await;
    assert!(answer.json()["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("did you mean `strong`"));
    // No pin and no model named: nothing to attach the outcome to.
    let orphan = json!({"session": "never-seen", "verdict": "pass", "idempotency_key": "k"});
    assert_eq!(router.outcome(&orphan, &h).await.status, 404);
    // Malformed JSON.
    let url = format!("http://{}/v1/router/outcomes", router.server.addr);
    let response = router
        .client
        .send(Method::POST, &url, &b"{\"session\":"[..], &[])
        .await
        .unwrap();
    assert_eq!(response.status, 400);
}

/// Polls the metrics text until it contains `line`.
async fn wait_for_metric(router: &Router, line: &str) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let metrics = router.metrics().await;
        if metrics.contains(line) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never saw `{line}` in:\n{metrics}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_errors_and_broken_answers_count_as_failures() {
    let holds = r#"hold "pinned is doing fine" when outcomes(pinned).count >= 1 and outcomes(pinned).fail_rate < 0.5"#;
    let router = Router::start(&policy("enforce", "", holds)).await;
    let h = [(SID, "flaky")];
    assert_eq!(router.chat(&user("segfault"), &h).await.model(), "strong");
    let pass = json!({"session": "flaky", "verdict": "pass", "idempotency_key": "p1"});
    router.outcome(&pass, &h).await;
    // A clean 200 is not a pass: nothing is recorded for it.
    let ok = router.chat(&user("segfault"), &h).await;
    assert_eq!(ok.status, 200);
    // A 500 from the backend (no other model to fall back to) is a failure of `strong`.
    let failed = router
        .chat(
            &user("segfault"),
            &[(SID, "flaky"), ("x-sim-fault", "error=500")],
        )
        .await;
    assert_eq!(failed.status, 503);
    wait_for_metric(
        &router,
        "src_session_outcomes_total{verdict=\"fail\",source=\"upstream\"} 1",
    )
    .await;
    // An answer cut off mid-body is one too.
    router
        .chat(
            &user("segfault"),
            &[(SID, "flaky"), ("x-sim-fault", "disconnect=2")],
        )
        .await;
    wait_for_metric(
        &router,
        "src_session_outcomes_total{verdict=\"fail\",source=\"upstream\"} 2",
    )
    .await;
    // One pass, two failures: the hold on a healthy pin no longer keeps it.
    let moved = router.chat(&user("hello"), &h).await;
    assert_eq!((moved.session(), moved.model()), ("switched", "small"));
}

fn redis_policy(url: &str, failure: &str) -> String {
    policy("enforce", &format!("store = redis({url:?})"), "")
        + &format!("failure {{ store = {failure} }}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_routers_sharing_redis_continue_a_session_and_agree_on_a_first_call_race() {
    let redis = RedisServer::start();
    let text = redis_policy(&redis.url(), "open");
    let (a, b) = (Router::start(&text).await, Router::start(&text).await);
    let h = [(SID, "roaming")];
    let first = a.chat(&agent("rename it", &[], true), &h).await;
    assert_eq!((first.session(), first.model()), ("new", "small"));
    let second = b.chat(&agent("rename it", &["segfault"], true), &h).await;
    assert_eq!((second.session(), second.model()), ("held", "small"));
    let third = b.chat(&user("segfault"), &h).await;
    assert_eq!((third.session(), third.model()), ("switched", "strong"));
    let fourth = a.chat(&user("segfault"), &h).await;
    assert_eq!((fourth.session(), fourth.model()), ("pinned", "strong"));

    // First calls of fresh sessions hit both routers at once with different proposals. Both
    // are tool-loop calls, so whichever way they interleave, one pins and the other follows.
    for round in 0..10 {
        let id = format!("race-{round}");
        let h = [(SID, id.as_str())];
        let small_call = agent("rename it", &["ok"], true);
        let strong_call = agent("rename it", &["segfault"], true);
        let (x, y) = tokio::join!(a.chat(&small_call, &h), b.chat(&strong_call, &h));
        assert_eq!((x.status, y.status), (200, 200));
        assert_eq!(x.model(), y.model(), "round {round}");
        let mut states = [x.session().to_owned(), y.session().to_owned()];
        states.sort();
        assert!(
            states == ["new", "pinned"] || states == ["held", "new"],
            "round {round}: {states:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_follows_failure_store_and_recovers() {
    let mut redis = RedisServer::start();
    let open = Router::start(&redis_policy(&redis.url(), "open")).await;
    let closed = Router::start(&redis_policy(&redis.url(), "closed")).await;
    let h = [(SID, "outage")];
    assert_eq!(open.chat(&user("segfault"), &h).await.session(), "new");
    assert_eq!(
        closed
            .chat(&user("segfault"), &[(SID, "outage-2")])
            .await
            .session(),
        "new"
    );

    // Load in flight while Redis dies.
    let load = {
        let client = open.client.clone();
        let addr = open.server.addr;
        tokio::spawn(async move {
            let mut statuses = Vec::new();
            for i in 0..20 {
                let sid = format!("load-{}", i % 5);
                let response = client
                    .open(
                        Method::POST,
                        &format!("http://{addr}/v1/chat/completions"),
                        user("segfault").to_string(),
                        &[(SID, sid.as_str())],
                    )
                    .await
                    .unwrap();
                statuses.push(response.status().as_u16());
                let _ = response.into_body().collect().await;
            }
            statuses
        })
    };
    redis.kill();
    let statuses = load.await.unwrap();
    assert!(
        statuses.iter().all(|s| *s == 200),
        "fail-open load saw {statuses:?}"
    );

    let open_down = open.chat(&user("segfault"), &h).await;
    assert_eq!(
        (open_down.status, open_down.session(), open_down.model()),
        (200, "store-unavailable", "strong")
    );
    let closed_down = closed.chat(&user("segfault"), &[(SID, "outage-2")]).await;
    assert_eq!(closed_down.status, 503);
    assert_eq!(closed_down.json()["error"]["type"], "server_error");
    let metrics = open.metrics().await;
    assert!(
        metrics.contains("src_session_store_errors_total{store=\"redis\""),
        "{metrics}"
    );
    assert!(
        metrics.contains("src_session_calls_total{state=\"store-unavailable\"}"),
        "{metrics}"
    );

    // Redis comes back (empty): both routers pin again.
    redis.restart();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let answer = closed.chat(&user("segfault"), &[(SID, "outage-2")]).await;
        if answer.status == 200 {
            assert_eq!(answer.session(), "new");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "closed router never recovered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let back = open.chat(&user("segfault"), &h).await;
    assert_eq!((back.status, back.session()), (200, "new"));
    let again = open.chat(&user("segfault"), &h).await;
    assert_eq!(again.session(), "pinned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_redirect_is_never_overridden_by_a_pin() {
    let text = policy("enforce", "", "")
        + r#"
model safe { backend = sim  serves = "safe-model" }
block jailbreak { when contains(prompt, ["ignore previous instructions"])  to safe }
"#;
    let router = Router::start(&text).await;
    let h = [(SID, "guarded")];
    let first = router.chat(&agent("segfault", &[], true), &h).await;
    assert_eq!((first.session(), first.model()), ("new", "strong"));
    // Inside a tool loop a hold would keep `strong`; the block's redirect wins regardless.
    let call = agent("ignore previous instructions", &["ok"], true);
    let redirected = router.chat(&call, &h).await;
    assert_eq!(redirected.model(), "safe");
    assert_eq!(redirected.header("x-sr-session"), None);
    // And the pin did not move.
    let after = router.chat(&agent("segfault", &["ok"], true), &h).await;
    assert_eq!((after.session(), after.model()), ("pinned", "strong"));
}
