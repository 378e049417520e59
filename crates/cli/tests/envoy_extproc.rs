//! Real Envoy 1.40 (`--concurrency 1`, the shipped `deploy/envoy/` configs) → `src serve
//! --extproc` → a recording upstream: what reaches the upstream, what the client gets, and what
//! each failure mode does when the router is gone.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a failed step fails the test with its message"
)]

mod envoy_support;

use envoy_support::{
    chat, config, envoy_binary, repo, send_in_pieces, Envoy, Recorder, Src, STREAM,
};
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const POLICY: &str = r#"
backend gpu { url = "http://127.0.0.1:9/v1" }
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

fn policy(text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::write(dir.path().join("policy.sr"), text).expect("writes");
    dir
}

fn user(model: &str, text: &str) -> serde_json::Value {
    json!({"model": model, "messages": [{"role": "user", "content": text}]})
}

fn gateway(dir: &Path, file: &str) -> (Src, Recorder, Envoy) {
    let upstream = Recorder::start();
    let src = Src::start(dir, &["--no-watch"]);
    let envoy = Envoy::start(&config(file, src.extproc, upstream.addr));
    (src, upstream, envoy)
}

#[test]
fn the_shipped_configs_validate() {
    for file in ["fail-closed.yaml", "fail-open.yaml"] {
        let output = Command::new(envoy_binary())
            .args(["--mode", "validate", "-c"])
            .arg(repo().join("deploy/envoy").join(file))
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
    let dir = policy(POLICY);
    let (_src, upstream, envoy) = gateway(dir.path(), "fail-closed.yaml");
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
    let dir = policy(POLICY);
    let (_src, upstream, envoy) = gateway(dir.path(), "fail-closed.yaml");
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
    let messages = envoy.stat("http.gateway.ext_proc.stream_msgs_sent");
    assert!(messages >= 5, "{messages} messages to the router");
}

#[test]
fn a_blocked_prompt_gets_the_json_refusal_and_never_reaches_the_upstream() {
    let dir = policy(POLICY);
    let (_src, upstream, envoy) = gateway(dir.path(), "fail-closed.yaml");
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
    let dir = policy(POLICY);
    let (_src, upstream, envoy) = gateway(dir.path(), "fail-closed.yaml");
    let malformed = envoy_support::send(
        envoy.addr,
        "POST",
        "/v1/chat/completions",
        &[("content-type", "application/json")],
        b"{nope",
    );
    assert_eq!(malformed.status, 400, "{}", malformed.body_text());
    assert_eq!(malformed.json()["error"]["code"], "invalid_json");
    let empty = envoy_support::send(envoy.addr, "POST", "/v1/chat/completions", &[], b"");
    assert_eq!(empty.status, 400, "{}", empty.body_text());
    let unknown = chat(envoy.addr, &user("gpt-unknown", "hi"), &[]);
    assert_eq!(unknown.status, 404, "{}", unknown.body_text());
    assert!(upstream.received().is_empty());
}

#[test]
fn a_stream_passes_through_untouched() {
    let dir = policy(POLICY);
    let (_src, upstream, envoy) = gateway(dir.path(), "fail-closed.yaml");
    let mut body = user("auto", "hello");
    body["stream"] = json!(true);
    let answer = chat(envoy.addr, &body, &[]);
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-type"), Some("text/event-stream"));
    assert_eq!(answer.header("x-sr-model"), Some("small"));
    assert_eq!(answer.body_text(), STREAM.concat());
    assert_eq!(upstream.received()[0].json()["model"], "org/small");

    // `/v1/responses` is decided the same way.
    let responses = envoy_support::send(
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

#[test]
fn without_the_router_fail_open_passes_and_fail_closed_refuses() {
    let dir = policy(POLICY);
    let upstream = Recorder::start();
    let mut src = Src::start(dir.path(), &["--no-watch"]);
    let open = Envoy::start(&config("fail-open.yaml", src.extproc, upstream.addr));
    let closed = Envoy::start(&config("fail-closed.yaml", src.extproc, upstream.addr));
    assert_eq!(chat(open.addr, &user("auto", "hi"), &[]).status, 200);
    assert_eq!(chat(closed.addr, &user("auto", "hi"), &[]).status, 200);
    assert_eq!(upstream.received().len(), 2);
    src.stop();

    let passed = chat(open.addr, &user("auto", "my key is sk-ABCDEFGH1234"), &[]);
    assert_eq!(passed.status, 200, "{}", passed.body_text());
    let sent = upstream.received();
    assert_eq!(sent.len(), 3);
    // Undecided: the client's model, no router headers.
    assert_eq!(sent[2].json()["model"], "auto");
    assert_eq!(sent[2].header("x-selected-model"), None);
    assert!(open.stat("http.gateway.ext_proc.failure_mode_allowed") >= 1);

    let refused = chat(closed.addr, &user("auto", "hi"), &[]);
    assert!(
        (500..600).contains(&refused.status),
        "fail-closed answered {}",
        refused.status
    );
    assert_eq!(
        upstream.received().len(),
        3,
        "fail-closed let a request through"
    );
}

#[test]
fn a_hot_reload_under_envoy_traffic_loses_no_request() {
    let dir = policy(POLICY);
    let upstream = Recorder::start();
    let src = Src::start(dir.path(), &[]);
    let envoy = Envoy::start(&config("fail-closed.yaml", src.extproc, upstream.addr));
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
    std::fs::write(
        dir.path().join("policy.sr"),
        POLICY.replace("route default { to small }", "route default { to strong }"),
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
