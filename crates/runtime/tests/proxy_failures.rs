//! What `src serve` does when things go wrong: backends down, failing or slow (fallbacks,
//! `failure.backend`, 502/503/504), requests longer than a model's context, and every kind of
//! bad input (malformed JSON, wrong types, missing fields, wrong methods, oversized bodies).

use rand::{RngExt, SeedableRng};
use serde_json::json;
use src_runtime::sim::{SimConfig, SimFaults, SimHandle, SimModel};
use src_testkit::{raw_exchange, user, Answer, Router, TestResult, POLICY};

/// A port nothing listens on.
async fn closed_port() -> TestResult<(tokio::net::TcpSocket, u16)> {
    // Bound but never listening: connections are refused, and no other test's server can take
    // the port while the socket lives (a dropped listener's port could be reused at once).
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind("127.0.0.1:0".parse()?)?;
    let port = socket.local_addr()?.port();
    Ok((socket, port))
}

/// A standalone simulator serving `id` with `faults`.
async fn faulty_sim(id: &str, faults: SimFaults) -> TestResult<SimHandle> {
    let mut model = SimModel::new(id);
    model.faults = Some(faults);
    let cfg = SimConfig {
        models: vec![model],
        time_scale: 0.0,
        ..SimConfig::default()
    };
    Ok(SimHandle::spawn(cfg).await?)
}

/// Policy: `first` on backend `primary` (at `primary_url`), `else` `spare` on the simulator.
fn chain_policy(primary_url: &str, extra: &str) -> String {
    format!(
        r#"
backend primary {{ url = "{primary_url}"  timeout = 300ms }}
backend sim     {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model first  {{ backend = primary  serves = "primary-model" }}
model spare  {{ backend = sim      serves = "spare-model" }}
model other  {{ backend = sim      serves = "other-model" }}
route main priority 10 {{ when contains(prompt, ["fallback"])  to first else spare }}
route alone priority 5 {{ when contains(prompt, ["alone"])  to first }}
route default {{ to other }}
{extra}
"#
    )
}

/// `answer` is `spare`'s, after `first` failed for `reason`.
fn spare_answered_after(answer: &Answer, reason: &str) -> TestResult {
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.header("x-sr-model"), Some("spare"));
    let fallbacks = format!("first:{reason}");
    assert_eq!(answer.header("x-sr-fallbacks"), Some(fallbacks.as_str()));
    assert!(answer.content()?.starts_with("[spare-model]"));
    Ok(())
}

#[tokio::test]
async fn a_closed_port_falls_back_to_the_next_model() -> TestResult {
    let (_reserved, port) = closed_port().await?;
    let router = Router::start(&chain_policy(&format!("http://127.0.0.1:{port}/v1"), "")).await?;
    let answer = router
        .chat(&user("please fallback"), &[("x-request-id", "fb-1")])
        .await?;
    spare_answered_after(&answer, "connect")?;
    let line = router.log_line("fb-1").await?;
    assert_eq!(line["fallbacks"], json!(["first:connect"]));
    assert_eq!(line["model"], "spare");
    let metrics = router.admin_get("/metrics").await?.text();
    assert!(
        metrics.contains("src_fallbacks_total{from=\"first\",reason=\"connect\"} 1"),
        "{metrics}"
    );
    Ok(())
}

#[tokio::test]
async fn a_500_before_the_first_byte_falls_back() -> TestResult {
    let failing = faulty_sim(
        "primary-model",
        SimFaults {
            error_rate: 1.0,
            ..SimFaults::default()
        },
    )
    .await?;
    let url = format!("{}/v1", failing.base_url());
    let router = Router::start(&chain_policy(&url, "")).await?;
    let answer = router.chat(&user("fallback now"), &[]).await?;
    spare_answered_after(&answer, "status")?;
    // The failing backend did get the request first (besides readiness probes).
    let chats = failing
        .received()
        .iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .count();
    assert_eq!(chats, 1);
    Ok(())
}

#[tokio::test]
async fn a_404_for_the_model_falls_back_while_another_model_remains() -> TestResult {
    // The backend answers, but no longer serves `primary-model` (NVIDIA Dynamo answers so once
    // a model's last worker is gone): 404.
    let elsewhere = faulty_sim("another-model", SimFaults::default()).await?;
    let router = Router::start(&chain_policy(&format!("{}/v1", elsewhere.base_url()), "")).await?;
    let answer = router
        .chat(&user("please fallback"), &[("x-request-id", "fb-404")])
        .await?;
    spare_answered_after(&answer, "status")?;
    let line = router.log_line("fb-404").await?;
    assert_eq!(line["fallbacks"], json!(["first:status"]));

    // No model left to try: the backend's own 404 is the answer.
    let answer = router.chat(&user("alone"), &[]).await?;
    assert_eq!(answer.status, 404, "{}", answer.text());
    assert_eq!(answer.header("x-sr-path"), Some("upstream"));
    assert_eq!(answer.header("x-sr-fallbacks"), None);

    // Other 4xx answers (but a 429, see proxy_faults.rs) are about the request, not the model:
    // they pass through.
    let refusing = faulty_sim(
        "primary-model",
        SimFaults {
            error_rate: 1.0,
            error_status: 422,
            ..SimFaults::default()
        },
    )
    .await?;
    let router = Router::start(&chain_policy(&format!("{}/v1", refusing.base_url()), "")).await?;
    let answer = router.chat(&user("please fallback"), &[]).await?;
    assert_eq!(answer.status, 422, "{}", answer.text());
    assert_eq!(answer.header("x-sr-model"), Some("first"));
    assert_eq!(answer.header("x-sr-fallbacks"), None);
    Ok(())
}

#[tokio::test]
async fn exhausted_chains_answer_by_the_kind_of_failure() -> TestResult {
    // Unreachable, no fallback: 502.
    let (_reserved, port) = closed_port().await?;
    let router = Router::start(&chain_policy(&format!("http://127.0.0.1:{port}/v1"), "")).await?;
    let answer = router.chat(&user("alone"), &[]).await?;
    assert_eq!(answer.status, 502, "{}", answer.text());
    assert_eq!(answer.error()?.1.as_deref(), Some("bad_gateway"));
    assert_eq!(answer.header("x-sr-path"), Some("error"));
    assert_eq!(answer.header("x-sr-route"), Some("alone"));

    // Backend errors, no fallback: 503 (`failure.backend = closed`, the default).
    let failing = faulty_sim(
        "primary-model",
        SimFaults {
            error_rate: 1.0,
            ..SimFaults::default()
        },
    )
    .await?;
    let router = Router::start(&chain_policy(&format!("{}/v1", failing.base_url()), "")).await?;
    let answer = router.chat(&user("alone"), &[]).await?;
    assert_eq!(answer.status, 503, "{}", answer.text());
    assert!(answer.error()?.0.contains("`first`"), "{}", answer.text());

    // A backend that never answers, past its `timeout = 300ms`: 504.
    let stalled = faulty_sim(
        "primary-model",
        SimFaults {
            stall_rate: 1.0,
            stall_ms: None,
            ..SimFaults::default()
        },
    )
    .await?;
    let router = Router::start(&chain_policy(&format!("{}/v1", stalled.base_url()), "")).await?;
    let answer = router.chat(&user("alone"), &[]).await?;
    assert_eq!(answer.status, 504, "{}", answer.text());
    assert_eq!(answer.error()?.1.as_deref(), Some("timeout"));
    Ok(())
}

#[tokio::test]
async fn failure_backend_open_tries_the_default_route() -> TestResult {
    let (_reserved, port) = closed_port().await?;
    let policy = chain_policy(
        &format!("http://127.0.0.1:{port}/v1"),
        "failure { backend = open }",
    );
    let router = Router::start(&policy).await?;
    let answer = router.chat(&user("alone"), &[]).await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.header("x-sr-model"), Some("other"));
    assert_eq!(answer.header("x-sr-route"), Some("alone"));
    assert_eq!(answer.header("x-sr-fallbacks"), Some("first:connect"));
    Ok(())
}

#[tokio::test]
async fn models_with_too_small_a_context_are_skipped() -> TestResult {
    let policy = r#"
backend sim { url = "http://127.0.0.1:9/v1"  simulated = true }
model tiny  { backend = sim  serves = "tiny-model"  context = 8 }
model roomy { backend = sim  serves = "roomy-model" context = 100k }
route default { to tiny else roomy }
"#;
    let router = Router::start(policy).await?;
    let short = router.chat(&user("hi"), &[]).await?;
    assert_eq!(short.header("x-sr-model"), Some("tiny"), "{}", short.text());
    let long = router
        .chat(&user(&"many words here ".repeat(20)), &[])
        .await?;
    assert_eq!(long.status, 200, "{}", long.text());
    assert_eq!(long.header("x-sr-model"), Some("roomy"));
    assert_eq!(long.header("x-sr-fallbacks"), Some("tiny:context"));

    // Longer than every model: the client's problem, not the backends'.
    let policy = policy.replace("context = 100k", "context = 10");
    let router = Router::start(&policy).await?;
    let answer = router.chat(&user(&"x".repeat(400)), &[]).await?;
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert_eq!(
        answer.error()?.1.as_deref(),
        Some("context_length_exceeded")
    );
    Ok(())
}

#[tokio::test]
async fn malformed_json_is_400() -> TestResult {
    let router = Router::start(POLICY).await?;
    for body in [
        "{",
        "",
        "not json",
        "{\"model\": \"auto\",}",
        "\u{fffd}\u{0}",
    ] {
        let answer = router
            .client
            .send(
                hyper::Method::POST,
                &router.url("/v1/chat/completions"),
                body.to_owned(),
                &[],
            )
            .await?;
        assert_eq!(answer.status, 400, "{body:?}: {}", answer.text());
        let (_, code, kind) = answer.error()?;
        assert_eq!(code.as_deref(), Some("invalid_json"), "{body:?}");
        assert_eq!(kind, "invalid_request_error");
        assert_eq!(answer.header("x-sr-path"), Some("error"));
    }
    Ok(())
}

#[tokio::test]
async fn wrong_types_and_missing_fields_are_400_naming_the_field() -> TestResult {
    let router = Router::start(POLICY).await?;
    let cases = [
        (json!({"model": "auto"}), "messages"),
        (json!({"model": "auto", "messages": "hi"}), "messages"),
        (
            json!({"model": "auto", "messages": [{"content": "hi"}]}),
            "messages[0].role",
        ),
        (
            json!({"model": "auto", "messages": [{"role": "user", "content": 5}]}),
            "messages[0].content",
        ),
        (
            json!({"model": "auto", "messages": [], "stream": "yes"}),
            "stream",
        ),
        (
            json!({"model": "auto", "messages": [], "tools": {}}),
            "tools",
        ),
        (json!([1, 2]), ""),
    ];
    for (body, param) in cases {
        let answer = router.chat(&body, &[]).await?;
        assert_eq!(answer.status, 400, "{body}: {}", answer.text());
        let v = answer.json()?;
        if param.is_empty() {
            assert!(v["error"]["param"].is_null(), "{v}");
        } else {
            assert_eq!(v["error"]["param"], param, "{body}: {v}");
        }
    }
    let answer = router
        .chat(
            &json!({"messages": [{"role": "user", "content": "hi"}]}),
            &[],
        )
        .await?;
    assert_eq!(answer.status, 400, "missing model: {}", answer.text());
    assert_eq!(answer.json()?["error"]["param"], "model");
    Ok(())
}

#[tokio::test]
async fn wrong_methods_are_405_and_unknown_paths_404() -> TestResult {
    let router = Router::start(POLICY).await?;
    let answer = router.get("/v1/chat/completions").await?;
    assert_eq!(answer.status, 405, "{}", answer.text());
    assert_eq!(answer.header("allow"), Some("POST"));
    assert_eq!(answer.error()?.1.as_deref(), Some("method_not_allowed"));
    assert!(answer.header("x-sr-request-id").is_some());

    let answer = router
        .client
        .send(hyper::Method::DELETE, &router.url("/v1/models"), "", &[])
        .await?;
    assert_eq!(answer.status, 405);
    assert_eq!(answer.header("allow"), Some("GET, HEAD"));

    let answer = router.get("/v2/nothing").await?;
    assert_eq!(answer.status, 404);
    assert_eq!(answer.error()?.1.as_deref(), Some("not_found"));
    Ok(())
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() -> TestResult {
    let router = Router::start_with(POLICY, |cfg| cfg.max_body_bytes = 1024).await?;
    // Declared too large.
    let mut body = user("hello");
    body["padding"] = json!("x".repeat(4096));
    let answer = router.chat(&body, &[]).await?;
    assert_eq!(answer.status, 413, "{}", answer.text());
    assert_eq!(answer.error()?.1.as_deref(), Some("payload_too_large"));

    // Chunked, no length: refused while reading.
    let chunk = "x".repeat(700);
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         transfer-encoding: chunked\r\n\r\n{len:x}\r\n{chunk}\r\n{len:x}\r\n{chunk}\r\n0\r\n\r\n",
        len = chunk.len()
    );
    let raw = raw_exchange(router.server.addr, request.as_bytes()).await?;
    assert!(raw.starts_with("HTTP/1.1 413"), "{raw}");

    // Just under the limit is fine.
    let answer = router.chat(&user("hello"), &[]).await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    Ok(())
}

#[tokio::test]
async fn random_bodies_never_break_the_server() -> TestResult {
    let router = Router::start(POLICY).await?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let pieces = [
        "{",
        "}",
        "[",
        "]",
        "\"messages\"",
        "\"model\"",
        ":",
        ",",
        "\"auto\"",
        "null",
        "1e999",
        "\"role\"",
        "\"content\"",
        "\"user\"",
        "\"tool\"",
        "\"tool_calls\"",
        "true",
        "\"\\u0000\"",
        "-0",
        "\"stream\"",
        "\"tools\"",
        "{\"type\":\"text\",\"text\":1}",
    ];
    for _ in 0..200 {
        let n = rng.random_range(0..24);
        let body: String = (0..n)
            .map(|_| pieces[rng.random_range(0..pieces.len())])
            .collect();
        let answer = router
            .client
            .send(
                hyper::Method::POST,
                &router.url("/v1/chat/completions"),
                body.clone(),
                &[],
            )
            .await?;
        assert!(
            [200, 400, 404, 422].contains(&answer.status),
            "{body}: {} {}",
            answer.status,
            answer.text()
        );
        // Every answer is a JSON object; errors have the OpenAI shape.
        let v = answer.json()?;
        if answer.status != 200 {
            assert!(v["error"]["message"].is_string(), "{body}: {v}");
        }
    }
    let health = router.get("/healthz").await?;
    assert_eq!(health.status, 200);
    Ok(())
}
