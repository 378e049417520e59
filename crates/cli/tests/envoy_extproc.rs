//! Real Envoy 1.40 (`--concurrency 1`, the configuration `src manifest --format envoy` writes)
//! → `src serve --extproc` → recording upstreams: what reaches an upstream, what the client
//! gets, and what each failure mode does when the router is gone or hung.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a failed step fails the test with its message"
)]

mod envoy_support;
mod support;

use envoy_support::{
    chat, dripped, envoy_binary, envoy_duration, generated, get, send, send_in_pieces, Envoy,
    Recorder, Src, DRIP, STREAM,
};
use serde_json::json;
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};
use support::{policy_dir, repo};

/// A policy that enforces (a block): fail-closed only. `UPSTREAM` is the recorder's address.
const POLICY: &str = r#"
backend gpu { url = "http://UPSTREAM/v1" }
model small  { backend = gpu  serves = "org/small" }
model strong { backend = gpu  serves = "org/strong" }

signal secret = matches(prompt, "sk-[A-Za-z0-9]{8,}")
signal code   = contains(prompt, ["segfault"])

block credential { when secret  status = 422  message = "remove the key" }

route coding priority 10 {
  when code
  to strong else small
  system_prompt = "be careful"
  headers { "x-team" = "platform" }
}
route default { to small }
"#;

/// A policy that only picks models, on two backends (`FAST`, `BIG`): fail-open may deploy it.
const PICKER: &str = r#"
backend fast { url = "http://FAST/v1" }
backend big  { url = "http://BIG/v1" }
model small  { backend = fast  serves = "org/small" }
model strong { backend = big   serves = "org/strong" }
route coding priority 10 { when contains(prompt, ["segfault"])  to strong }
route default { to small }
"#;

fn policy(text: &str, addresses: &[(&str, SocketAddr)]) -> tempfile::TempDir {
    let mut text = text.to_string();
    for (name, addr) in addresses {
        text = text.replace(name, &addr.to_string());
    }
    policy_dir(&text)
}

fn user(model: &str, text: &str) -> serde_json::Value {
    json!({"model": model, "messages": [{"role": "user", "content": text}]})
}

/// [`POLICY`] behind a fail-closed gateway.
fn gateway() -> (tempfile::TempDir, Src, Recorder, Envoy) {
    let upstream = Recorder::start();
    let dir = policy(POLICY, &[("UPSTREAM", upstream.addr)]);
    let src = Src::start(dir.path(), &["--no-watch"]);
    let envoy = Envoy::start(&generated(dir.path(), &src, false));
    (dir, src, upstream, envoy)
}

/// [`PICKER`] with its two upstreams, `fast` and `big`.
fn picker() -> (tempfile::TempDir, Recorder, Recorder) {
    let fast = Recorder::start();
    let big = Recorder::start();
    let dir = policy(PICKER, &[("FAST", fast.addr), ("BIG", big.addr)]);
    (dir, fast, big)
}

#[test]
fn the_shipped_configs_validate() {
    for file in ["fail-closed.yaml", "fail-open.yaml"] {
        let output = Command::new(envoy_binary())
            .args(["--mode", "validate", "-c"])
            .arg(repo("deploy/envoy").join(file))
            .output()
            .expect("envoy runs");
        assert!(
            output.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn a_routed_request_reaches_the_upstream_rewritten() {
    let (_dir, _src, upstream, envoy) = gateway();
    let forged = [
        ("x-sr-route", "forged"),
        ("x-selected-model", "forged"),
        ("x-gateway-model-name", "forged"),
        ("x-dynamo-session-id", "forged"),
        ("x-request-id", "req-envoy-1"),
    ];
    let answer = chat(envoy.addr, &user("auto", "a segfault in main"), &forged);
    assert_eq!(answer.status, 200, "{}", answer.body_text());
    assert_eq!(answer.header("x-sr-route"), Some("coding"));
    assert_eq!(answer.header("x-sr-model"), Some("strong"));
    assert_eq!(answer.header("x-sr-path"), Some("upstream"));
    assert_eq!(answer.header("x-sr-request-id"), Some("req-envoy-1"));
    assert_eq!(answer.json()["model"], "org/strong");

    let received = upstream.received();
    assert_eq!(received.len(), 1, "{received:?}");
    let sent = &received[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    let body = sent.json();
    assert_eq!(body["model"], "org/strong");
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "be careful"})
    );
    assert_eq!(sent.header("x-selected-model"), Some("org/strong"));
    assert_eq!(sent.header("x-gateway-model-name"), Some("org/strong"));
    assert_eq!(sent.header("x-sr-backend"), Some("gpu"));
    assert_eq!(sent.header("x-team"), Some("platform"));
    assert_eq!(sent.header("x-request-id"), Some("req-envoy-1"));
    assert!(sent
        .header("traceparent")
        .is_some_and(|t| t.starts_with("00-")));
    assert_eq!(
        sent.header("x-sr-route"),
        None,
        "a forged x-sr-* header went upstream"
    );
    assert_eq!(sent.header("x-dynamo-session-id"), None);
    // Envoy streams a full duplex body on: without a length, chunked (the body read whole
    // above is the router's).
    assert_eq!(sent.header("content-length"), None);
    assert_eq!(sent.header("transfer-encoding"), Some("chunked"));
}

#[test]
fn a_body_arriving_slowly_in_pieces_is_decided_once_whole_in_full_duplex() {
    let (_dir, _src, upstream, envoy) = gateway();
    let body = user("auto", "a segfault in main").to_string();
    let (head, rest) = body.split_at(body.len() / 3);
    let (middle, tail) = rest.split_at(rest.len() / 2);
    // Each pause is longer than the filter's 0.2 s `message_timeout`: a body still arriving is
    // not the router being slow.
    let answer = send_in_pieces(
        envoy.addr,
        "POST",
        "/v1/chat/completions",
        &[("content-type", "application/json")],
        &[head.as_bytes(), middle.as_bytes(), tail.as_bytes()],
        Duration::from_millis(300),
    );
    assert_eq!(answer.status, 200, "{}", answer.body_text());
    assert_eq!(answer.header("x-sr-route"), Some("coding"));
    assert_eq!(answer.header("x-sr-model"), Some("strong"));
    let received = upstream.received();
    assert_eq!(received.len(), 1, "{received:?}");
    let sent = received[0].json();
    assert_eq!(sent["model"], "org/strong");
    assert_eq!(sent["messages"][1]["content"], "a segfault in main");
    // The router saw the pieces apart: the request headers, a body message per piece and the
    // response headers.
    let messages = envoy.stat("http.src_gateway.ext_proc.stream_msgs_sent");
    assert!(messages >= 5, "{messages} messages to the router");
}

#[test]
fn a_blocked_prompt_gets_the_json_refusal_and_never_reaches_the_upstream() {
    let (_dir, _src, upstream, envoy) = gateway();
    let answer = chat(envoy.addr, &user("auto", "my key is sk-ABCDEFGH1234"), &[]);
    assert_eq!(answer.status, 422, "{}", answer.body_text());
    assert_eq!(answer.header("content-type"), Some("application/json"));
    assert_eq!(answer.header("x-sr-block"), Some("credential"));
    let error = &answer.json()["error"];
    assert_eq!(error["type"], "policy_violation");
    assert_eq!(error["message"], "remove the key");
    assert!(upstream.received().is_empty());
}

#[test]
fn client_errors_are_4xx_through_envoy() {
    let (_dir, _src, upstream, envoy) = gateway();
    let malformed = send(
        envoy.addr,
        "POST",
        "/v1/chat/completions",
        &[("content-type", "application/json")],
        b"{nope",
    );
    assert_eq!(malformed.status, 400, "{}", malformed.body_text());
    assert_eq!(malformed.json()["error"]["code"], "invalid_json");
    let empty = send(envoy.addr, "POST", "/v1/chat/completions", &[], b"");
    assert_eq!(empty.status, 400, "{}", empty.body_text());
    let unknown = chat(envoy.addr, &user("gpt-unknown", "hi"), &[]);
    assert_eq!(unknown.status, 404, "{}", unknown.body_text());
    assert!(upstream.received().is_empty());
}

#[test]
fn a_stream_passes_through_untouched() {
    let (_dir, _src, upstream, envoy) = gateway();
    let mut body = user("auto", "hello");
    body["stream"] = json!(true);
    let answer = chat(envoy.addr, &body, &[]);
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-type"), Some("text/event-stream"));
    assert_eq!(answer.header("x-sr-model"), Some("small"));
    assert_eq!(answer.body_text(), STREAM.concat());
    assert_eq!(upstream.received()[0].json()["model"], "org/small");

    // `/v1/responses` is decided the same way.
    let responses = send(
        envoy.addr,
        "POST",
        "/v1/responses",
        &[("content-type", "application/json")],
        br#"{"model":"auto","input":"a segfault"}"#,
    );
    assert_eq!(responses.status, 200, "{}", responses.body_text());
    let sent = &upstream.received()[1];
    assert_eq!(sent.path, "/v1/responses");
    assert_eq!(sent.json()["model"], "org/strong");
}

/// A backend's `timeout` is how long it may stay silent: a stream that lasts longer but never
/// pauses that long arrives whole, and so does one whose pauses outlast the decision deadline
/// (the connection manager's idle timeout gives way to the route's).
#[test]
fn a_stream_longer_than_the_backend_timeout_arrives_whole() {
    let upstream = Recorder::start();
    let dir = policy(
        &POLICY.replace("/v1\" }", "/v1\"  timeout = 3s }"),
        &[("UPSTREAM", upstream.addr)],
    );
    let src = Src::start(dir.path(), &["--no-watch"]);
    let config = generated(dir.path(), &src, false);
    let decision = envoy_duration(&config, "stream_idle_timeout");
    assert!(decision < Duration::from_millis(1500), "{decision:?}");
    let envoy = Envoy::start(&config);
    let mut body = user("auto", "hello");
    body["stream"] = json!(true);
    let started = Instant::now();
    // Three pauses of 1.5 s: 4.5 s in all, more than the 3 s timeout; each pause longer than
    // the decision deadline, shorter than the timeout.
    let answer = chat(envoy.addr, &body, &[(DRIP, "3,1500")]);
    let took = started.elapsed();
    assert_eq!(answer.status, 200, "{}", answer.body_text());
    let expected: String = (0..3).map(dripped).collect::<String>() + "data: [DONE]\n\n";
    assert_eq!(answer.body_text(), expected);
    assert!(took >= Duration::from_millis(4500), "{took:?}");
    assert_eq!(upstream.received()[0].json()["model"], "org/small");
}

/// A hung router (SIGSTOP: its sockets accept and answer nothing) costs a request the decision
/// deadline, not Envoy's five-minute stream timeout: fail-closed answers a 504 in the router's
/// JSON error shape; fail-open sends the request on to the default model.
#[test]
fn a_stalled_router_is_answered_within_the_decision_deadline() {
    let (dir, fast, big) = picker();
    let src = Src::start(dir.path(), &["--no-watch"]);
    let closed_config = generated(dir.path(), &src, false);
    let decision = envoy_duration(&closed_config, "stream_idle_timeout");
    let closed = Envoy::start(&closed_config);
    let open = Envoy::start(&generated(dir.path(), &src, true));
    // Both gateways hold a connection to the router before it hangs.
    assert_eq!(chat(closed.addr, &user("auto", "hi"), &[]).status, 200);
    assert_eq!(chat(open.addr, &user("auto", "hi"), &[]).status, 200);
    assert_eq!(fast.received().len(), 2);

    let _frozen = src.freeze();
    // Generous, yet far below the 300 s a stream may otherwise wait.
    let bound = decision * 10;
    assert!(bound < Duration::from_secs(60), "{bound:?}");

    let started = Instant::now();
    let refused = chat(closed.addr, &user("auto", "a segfault"), &[]);
    let took = started.elapsed();
    assert!(
        (500..600).contains(&refused.status),
        "fail-closed answered {}: {}",
        refused.status,
        refused.body_text()
    );
    assert!(
        took < bound,
        "the 5xx took {took:?} (deadline {decision:?})"
    );
    assert_eq!(refused.header("content-type"), Some("application/json"));
    assert_eq!(refused.json()["error"]["code"], "router_unavailable");
    assert_eq!(fast.received().len() + big.received().len(), 2);

    let started = Instant::now();
    let passed = chat(open.addr, &user("auto", "a segfault"), &[]);
    let took = started.elapsed();
    assert_eq!(passed.status, 200, "{}", passed.body_text());
    assert!(
        took < bound,
        "fail-open took {took:?} (deadline {decision:?})"
    );
    let sent = fast.received();
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[2].json()["model"], "org/small");
}

#[test]
fn without_the_router_fail_closed_refuses_with_a_json_error() {
    let (_dir, mut src, upstream, envoy) = gateway();
    assert_eq!(chat(envoy.addr, &user("auto", "hi"), &[]).status, 200);
    src.stop();
    let refused = chat(envoy.addr, &user("auto", "hi"), &[]);
    assert_eq!(refused.status, 503, "{}", refused.body_text());
    assert_eq!(refused.header("content-type"), Some("application/json"));
    let error = &refused.json()["error"];
    assert_eq!(
        error["code"],
        "router_unavailable",
        "{}",
        refused.body_text()
    );
    assert_eq!(error["type"], "server_error");
    assert_eq!(
        upstream.received().len(),
        1,
        "fail-closed let a request through"
    );
}

/// With the router down, fail-open still reaches a model the backends know (the default
/// route's, unless the client named a served id), and a client's router-owned headers reach no
/// backend and steer no route.
#[test]
fn without_the_router_fail_open_sends_the_default_model_and_no_forged_header() {
    let (dir, fast, big) = picker();
    let mut src = Src::start(dir.path(), &["--no-watch"]);
    let open = Envoy::start(&generated(dir.path(), &src, true));
    let forged = [
        ("x-sr-route", "forged"),
        ("x-sr-backend", "big"),
        ("x-selected-model", "org/strong"),
        ("x-gateway-model-name", "org/strong"),
        ("x-dynamo-session-id", "forged"),
    ];
    let decided = chat(open.addr, &user("auto", "a segfault"), &forged);
    assert_eq!(decided.status, 200, "{}", decided.body_text());
    assert_eq!(big.received()[0].json()["model"], "org/strong");
    src.stop();

    let passed = chat(open.addr, &user("auto", "a segfault"), &forged);
    assert_eq!(passed.status, 200, "{}", passed.body_text());
    assert!(open.stat("http.src_gateway.ext_proc.failure_mode_allowed") >= 1);
    let sent = fast.received();
    assert_eq!(sent.len(), 1, "the default backend was not reached");
    let sent = &sent[0];
    assert_eq!(sent.json()["model"], "org/small");
    assert_eq!(sent.json()["messages"][0]["content"], "a segfault");
    assert_eq!(sent.header("x-selected-model"), Some("org/small"));
    assert_eq!(sent.header("x-sr-backend"), Some("fast"));
    assert_eq!(sent.header("x-sr-route"), None);
    assert_eq!(sent.header("x-dynamo-session-id"), None);
    for received in big.received() {
        assert_eq!(received.header("x-sr-route"), None);
        assert_eq!(received.header("x-dynamo-session-id"), None);
    }

    // A served id the client names goes to its backend as written.
    let named = chat(open.addr, &user("org/strong", "hi"), &[]);
    assert_eq!(named.status, 200, "{}", named.body_text());
    let sent = big.received();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[1].json()["model"], "org/strong");
    assert_eq!(fast.received().len(), 1);
}

/// What the processor does not decide, the router's own listener answers through the gateway:
/// `GET /v1/models` (the logical models) and `POST /v1/messages`. Any other path is a JSON 404.
#[test]
fn models_and_messages_reach_the_router_and_other_paths_are_json_404s() {
    let (_dir, src, upstream, envoy) = gateway();
    let models = get(envoy.addr, "/v1/models");
    assert_eq!(models.status, 200, "{}", models.body_text());
    assert_eq!(models.json(), get(src.http, "/v1/models").json());

    let messages = send(
        envoy.addr,
        "POST",
        "/v1/messages",
        &[
            ("content-type", "application/json"),
            ("anthropic-version", "2023-06-01"),
        ],
        br#"{"model":"auto","max_tokens":16,"messages":[{"role":"user","content":"a segfault in main"}]}"#,
    );
    assert_eq!(messages.status, 200, "{}", messages.body_text());
    assert_eq!(
        messages.json()["type"],
        "message",
        "{}",
        messages.body_text()
    );
    assert_eq!(messages.header("x-sr-route"), Some("coding"));
    let sent = upstream.received();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].path, "/v1/chat/completions");
    assert_eq!(sent[0].json()["model"], "org/strong");

    let other = get(envoy.addr, "/v1/embeddings");
    assert_eq!(other.status, 404);
    assert_eq!(other.header("content-type"), Some("application/json"));
    assert_eq!(
        other.json()["error"]["code"],
        "not_found",
        "{}",
        other.body_text()
    );
}

/// Every cluster's circuit breakers are the configuration's, far above Envoy's 1,024.
#[test]
fn circuit_breakers_are_raised_on_every_cluster() {
    let (_dir, _src, _upstream, envoy) = gateway();
    let clusters = get(envoy.admin, "/clusters").body_text();
    for cluster in ["src_extproc", "src_http", "backend_gpu"] {
        for threshold in [
            "max_connections",
            "max_pending_requests",
            "max_requests",
            "max_retries",
        ] {
            let line = format!("{cluster}::default_priority::{threshold}::100000");
            assert!(clusters.contains(&line), "no `{line}` in:\n{clusters}");
        }
    }
}

#[test]
fn a_hot_reload_under_envoy_traffic_loses_no_request() {
    let upstream = Recorder::start();
    let dir = policy(POLICY, &[("UPSTREAM", upstream.addr)]);
    let src = Src::start(dir.path(), &[]);
    let envoy = Envoy::start(&generated(dir.path(), &src, false));
    let addr = envoy.addr;
    let traffic = std::thread::spawn(move || {
        let mut statuses = Vec::new();
        let mut models = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        // Until the new policy answers, and a few more after it does.
        let mut after = 0;
        while after < 20 && Instant::now() < deadline {
            let answer = chat(addr, &user("auto", "hello"), &[]);
            statuses.push(answer.status);
            let model = answer.header("x-sr-model").unwrap_or("-").to_string();
            if model == "strong" {
                after += 1;
            }
            models.push(model);
        }
        (statuses, models)
    });
    std::thread::sleep(Duration::from_millis(300));
    let text = std::fs::read_to_string(dir.path().join("policy.sr")).expect("reads");
    std::fs::write(
        dir.path().join("policy.sr"),
        text.replace("route default { to small }", "route default { to strong }"),
    )
    .expect("rewrites the policy");
    let (statuses, models) = traffic.join().expect("the traffic thread");
    assert!(
        statuses.iter().all(|s| *s == 200),
        "requests failed across the reload: {statuses:?}"
    );
    assert!(models.first().is_some_and(|m| m == "small"), "{models:?}");
    assert!(models.last().is_some_and(|m| m == "strong"), "{models:?}");
    assert_eq!(upstream.received().len(), statuses.len());
    drop(src);
}

/// A policy with a token budget: the generated filter sends the answer's body to the router.
const METERED: &str = r#"
backend gpu { url = "http://UPSTREAM/v1" }
model small { backend = gpu  serves = "org/small" }
budget spend { per = tenant  window = 1h  tokens = 1000000 }
route default { to small }
"#;

/// The usage of `spend` an answer's `x-sr-budget` reports (before its own request).
fn spent(answer: &envoy_support::Answer) -> u64 {
    answer
        .header("x-sr-budget")
        .and_then(|b| b.split("used=").nth(1))
        .and_then(|u| u.split(';').next())
        .and_then(|u| u.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_streamed_answer_is_charged_its_usage_and_the_client_never_sees_the_chunk() {
    let upstream = Recorder::start();
    let dir = policy(METERED, &[("UPSTREAM", upstream.addr)]);
    let src = Src::start(dir.path(), &["--no-watch"]);
    let config = generated(dir.path(), &src, false);
    assert!(config.contains("response_body_mode: STREAMED"), "{config}");
    let envoy = Envoy::start(&config);
    let auth = [("authorization", "Bearer sk-metered")];
    let mut body = user("auto", "hello");
    body["stream"] = json!(true);
    let answer = chat(envoy.addr, &body, &auth);
    assert_eq!(answer.status, 200, "{}", answer.body_text());
    assert_eq!(
        upstream.received()[0].json()["stream_options"],
        json!({"include_usage": true}),
        "the backend is asked for its usage"
    );
    assert_eq!(
        answer.body_text(),
        STREAM.concat(),
        "the client gets the stream without the usage chunk it did not ask for"
    );
    // The charge lands off the answer's path. Each later (JSON) answer reports 4 tokens: what
    // was used is 42 and some fours, never the estimate of a five-byte prompt (2).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let next = chat(envoy.addr, &user("auto", "hi"), &auth);
        assert_eq!(next.status, 200, "{}", next.body_text());
        let used = spent(&next);
        if used > 0 {
            assert!(used >= 42 && (used - 42).is_multiple_of(4), "used {used}");
            break;
        }
        assert!(Instant::now() < deadline, "nothing was charged");
        std::thread::sleep(Duration::from_millis(50));
    }
}
