//! `src serve --extproc` spoken to as Envoy speaks to it: a real gRPC client on the `ext_proc` v3
//! stream, message by message (request headers, buffered body, response headers), against a
//! real server on the built-in simulator. What Envoy then does with the answers is tested with
//! the real Envoy in the CLI's `envoy_extproc` tests.

use std::net::SocketAddr;

use envoy_types::pb::envoy::service::ext_proc::v3::{
    processing_request, processing_response, HttpBody, HttpTrailers,
};
use serde_json::{json, Value};
use src_testkit::extproc::{
    body, chunk, duplex, headers, headers_of, post, response_headers, response_headers_with, set,
    Stream,
};
use src_testkit::{user, Router, TestResult, POLICY};

async fn router() -> TestResult<(Router, SocketAddr)> {
    let router = Router::start_with(POLICY, |cfg| {
        cfg.extproc = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    })
    .await?;
    let addr = router.server.extproc_addr.ok_or("no external processor")?;
    Ok((router, addr))
}

#[tokio::test]
async fn a_routed_request_is_rewritten_and_its_answer_gets_the_decision_headers() -> TestResult {
    let (router, addr) = router().await?;
    let mut stream = Stream::open(addr).await?;
    let mut asked = post("/v1/chat/completions");
    asked.extend([
        ("x-sr-route", "forged"),
        ("x-selected-model", "forged"),
        ("x-gateway-model-name", "forged"),
        ("x-request-id", "client-1"),
    ]);
    let first = stream.ask(headers(&asked, false)).await?;
    let mut removed = first.removed()?;
    removed.sort();
    assert_eq!(
        removed,
        ["x-gateway-model-name", "x-selected-model", "x-sr-route"]
    );

    let sent = stream.ask(body(&user("a segfault in main"))).await?;
    let upstream = sent.body()?;
    assert_eq!(upstream["model"], "Qwen/Qwen3-8B");
    assert_eq!(
        upstream["messages"][0],
        json!({"role": "system", "content": "You are a careful engineer."})
    );
    assert_eq!(upstream["reasoning_effort"], "high");
    let set = sent.set_headers()?;
    assert_eq!(set["x-selected-model"], "Qwen/Qwen3-8B");
    assert_eq!(set["x-gateway-model-name"], "Qwen/Qwen3-8B");
    assert_eq!(set["x-sr-backend"], "sim");
    assert_eq!(set["x-compliance"], "on");
    assert_eq!(set["x-request-id"], "client-1");
    assert!(set["traceparent"].starts_with("00-"), "{set:?}");
    let length: usize = set["content-length"].parse()?;
    assert_eq!(length, upstream.to_string().len());
    assert!(sent.common()?.clear_route_cache);

    let backend = [
        ("content-type", "application/json"),
        ("date", "Thu, 04 Dec 2025 19:00:00 GMT"),
        ("server", "uvicorn"),
        ("x-sim-prefill-ms", "1.5"),
        ("x-ratelimit-remaining-tokens", "900"),
    ];
    let answered = stream.ask(response_headers_with("200", &backend)).await?;
    let decision = answered.set_headers()?;
    assert_eq!(decision["x-sr-route"], "coding");
    assert_eq!(decision["x-sr-model"], "strong");
    assert_eq!(decision["x-sr-path"], "upstream");
    assert_eq!(decision["x-sr-request-id"], "client-1");
    // The backend's internals leave the answer as they do the proxy's; what a client reads stays.
    let mut removed = answered.removed()?;
    removed.sort_unstable();
    assert_eq!(removed, ["server", "x-sim-prefill-ms"]);

    let line = router.log_line("client-1").await?;
    assert_eq!(
        (
            &line["status"],
            &line["path"],
            &line["model"],
            &line["backend"]
        ),
        (
            &json!(200),
            &json!("upstream"),
            &json!("strong"),
            &json!("sim")
        )
    );
    let metrics = router.admin_get("/metrics").await?.text();
    assert!(
        metrics.contains(
            "src_requests_total{route=\"coding\",model=\"strong\",status=\"200\",path=\"upstream\",door=\"extproc\"} 1"
        ),
        "{metrics}"
    );
    Ok(())
}

#[tokio::test]
async fn a_block_answers_immediately_with_the_proxys_json() -> TestResult {
    let (_router, addr) = router().await?;
    let mut stream = Stream::open(addr).await?;
    stream
        .ask(headers(&post("/v1/chat/completions"), false))
        .await?;
    let reply = stream.ask(body(&user("my password = hunter2"))).await?;
    let local = reply.immediate()?;
    assert_eq!(local.status.as_ref().map(|s| s.code), Some(422));
    let answer: Value = serde_json::from_slice(&local.body)?;
    assert_eq!(answer["error"]["type"], "policy_violation");
    assert_eq!(answer["error"]["code"], "leaked_secret");
    let set = set(local.headers.as_ref());
    assert_eq!(set["x-sr-block"], "leaked_secret");
    assert_eq!(set["content-type"], "application/json");
    Ok(())
}

#[tokio::test]
async fn client_errors_are_the_proxys_4xx() -> TestResult {
    let (_router, addr) = router().await?;
    let cases: [(&[u8], u16); 3] = [
        (b"{nope", 400),
        (
            br#"{"model":"gpt-unknown","messages":[{"role":"user","content":"hi"}]}"#,
            404,
        ),
        (br#"{"model":"auto","messages":"not a list"}"#, 400),
    ];
    for (bytes, status) in cases {
        let mut stream = Stream::open(addr).await?;
        stream
            .ask(headers(&post("/v1/chat/completions"), false))
            .await?;
        let reply = stream
            .ask(processing_request::Request::RequestBody(HttpBody {
                body: bytes.to_vec(),
                end_of_stream: true,
                ..HttpBody::default()
            }))
            .await?;
        let local = reply.immediate()?;
        assert_eq!(
            local.status.as_ref().map(|s| s.code),
            Some(i32::from(status)),
            "{}",
            String::from_utf8_lossy(bytes)
        );
        let answer: Value = serde_json::from_slice(&local.body)?;
        assert!(answer["error"]["message"].is_string(), "{answer}");
    }
    // Headers that end the request: no body will come, which is an empty body (400).
    let mut stream = Stream::open(addr).await?;
    let reply = stream
        .ask(headers(&post("/v1/chat/completions"), true))
        .await?;
    assert_eq!(
        reply.immediate()?.status.as_ref().map(|s| s.code),
        Some(400)
    );
    Ok(())
}

#[tokio::test]
async fn responses_and_plain_values_are_decided_too_and_other_paths_pass() -> TestResult {
    let (_router, addr) = router().await?;
    // Older data planes put the value in `value`.
    let mut stream = Stream::open(addr).await?;
    stream
        .ask(headers_of(&post("/v1/responses"), false, false))
        .await?;
    let sent = stream
        .ask(body(
            &json!({"model": "auto", "input": "a segfault", "stream": true}),
        ))
        .await?;
    assert_eq!(sent.body()?["model"], "Qwen/Qwen3-8B");
    assert_eq!(sent.set_headers()?["x-selected-model"], "Qwen/Qwen3-8B");

    let mut stream = Stream::open(addr).await?;
    let reply = stream
        .ask(headers(
            &[(":method", "GET"), (":path", "/v1/models")],
            true,
        ))
        .await?;
    assert!(reply.set_headers()?.is_empty());
    let answered = stream.ask(response_headers("200")).await?;
    assert!(
        answered.set_headers()?.is_empty(),
        "a passing request got decision headers"
    );
    Ok(())
}

#[tokio::test]
async fn a_reload_is_seen_by_the_next_stream() -> TestResult {
    let (router, addr) = router().await?;
    let changed = POLICY.replace("route default { to small }", "route default { to safe }");
    std::fs::write(router.policy_path(), changed)?;
    router.server.reload().await;
    let deadline = tokio::time::Instant::now() + src_testkit::PATIENCE;
    while router.server.generation() < 2 {
        if tokio::time::Instant::now() > deadline {
            return Err("the policy was not reloaded".into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let mut stream = Stream::open(addr).await?;
    stream
        .ask(headers(&post("/v1/chat/completions"), false))
        .await?;
    let sent = stream.ask(body(&user("hello"))).await?;
    assert_eq!(sent.body()?["model"], "safe-model");
    Ok(())
}

#[tokio::test]
async fn in_full_duplex_the_request_is_answered_once_its_body_is_whole() -> TestResult {
    let (_router, addr) = router().await?;
    let mut stream = Stream::open(addr).await?;
    let mut asked = post("/v1/chat/completions");
    asked.extend([("x-sr-route", "forged"), ("x-request-id", "duplex-1")]);
    let text = user("a segfault in main").to_string().into_bytes();
    let (start, end) = text.split_at(text.len() / 2);
    stream.tell(duplex(headers(&asked, false), true)).await?;
    stream.tell(duplex(chunk(start, false), false)).await?;
    stream.tell(duplex(chunk(end, true), false)).await?;

    // The headers' answer is the first one and already carries the decision: it was made
    // from the whole body.
    let first = stream.answer().await?;
    let set = first.set_headers()?;
    assert_eq!(set["x-selected-model"], "Qwen/Qwen3-8B");
    assert_eq!(set["x-sr-backend"], "sim");
    assert_eq!(first.removed()?, ["x-sr-route"]);
    assert!(first.common()?.clear_route_cache);
    let body = stream.answer().await?;
    let streamed = body.streamed()?;
    assert!(streamed.end_of_stream);
    let upstream: Value = serde_json::from_slice(&streamed.body)?;
    assert_eq!(upstream["model"], "Qwen/Qwen3-8B");
    let length: usize = set["content-length"].parse()?;
    assert_eq!(length, streamed.body.len());

    let answered = stream.ask(response_headers("200")).await?;
    assert_eq!(answered.set_headers()?["x-sr-route"], "coding");

    // A body that ends with trailers is answered at the trailers, the trailers last.
    let mut stream = Stream::open(addr).await?;
    stream
        .tell(duplex(headers(&post("/v1/chat/completions"), false), true))
        .await?;
    stream.tell(duplex(chunk(&text, false), false)).await?;
    stream
        .tell(duplex(
            processing_request::Request::RequestTrailers(HttpTrailers::default()),
            false,
        ))
        .await?;
    let first = stream.answer().await?;
    assert_eq!(first.set_headers()?["x-selected-model"], "Qwen/Qwen3-8B");
    assert!(!stream.answer().await?.streamed()?.end_of_stream);
    let trailers = stream.answer().await?;
    assert!(
        matches!(
            trailers.0,
            processing_response::Response::RequestTrailers(_)
        ),
        "{:?}",
        trailers.0
    );
    Ok(())
}

#[tokio::test]
async fn in_full_duplex_a_refusal_and_a_passing_body_answer_at_once() -> TestResult {
    let (_router, addr) = router().await?;
    let mut stream = Stream::open(addr).await?;
    stream
        .tell(duplex(headers(&post("/v1/chat/completions"), false), true))
        .await?;
    let secret = user("my password = hunter2").to_string().into_bytes();
    stream.tell(duplex(chunk(&secret, true), false)).await?;
    let local = stream.answer().await?;
    assert_eq!(
        local.immediate()?.status.as_ref().map(|s| s.code),
        Some(422)
    );

    // A path the router does not decide: its headers are answered at once and its body goes
    // back as it came, chunk by chunk.
    let mut stream = Stream::open(addr).await?;
    stream
        .tell(duplex(
            headers(&[(":method", "POST"), (":path", "/v1/embeddings")], false),
            true,
        ))
        .await?;
    let reply = stream.answer().await?;
    assert!(reply.set_headers()?.is_empty());
    stream
        .tell(duplex(chunk(b"{\"input\":", false), false))
        .await?;
    let echoed = stream.answer().await?;
    assert_eq!(echoed.streamed()?.body, b"{\"input\":");
    assert!(!echoed.streamed()?.end_of_stream);
    stream.tell(duplex(chunk(b"\"x\"}", true), false)).await?;
    let last = stream.answer().await?;
    assert_eq!(last.streamed()?.body, b"\"x\"}");
    assert!(last.streamed()?.end_of_stream);
    Ok(())
}

#[tokio::test]
async fn a_model_cooling_down_is_skipped_as_the_proxy_skips_it() -> TestResult {
    let policy = format!("{POLICY}\nfailure {{ cooldown_after = 1  cooldown = 1h }}\n");
    let router = Router::start_with(&policy, |cfg| {
        cfg.extproc = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    })
    .await?;
    let addr = router.server.extproc_addr.ok_or("no external processor")?;
    // The gateway's answer for `strong` is a 5xx: one failure is enough to cool it down.
    let mut first = Stream::open(addr).await?;
    first
        .ask(headers(&post("/v1/chat/completions"), false))
        .await?;
    let sent = first.ask(body(&user("a segfault in main"))).await?;
    assert_eq!(sent.set_headers()?["x-selected-model"], "Qwen/Qwen3-8B");
    first.ask(response_headers("503")).await?;

    let mut second = Stream::open(addr).await?;
    second
        .ask(headers(&post("/v1/chat/completions"), false))
        .await?;
    let sent = second.ask(body(&user("a segfault in main"))).await?;
    assert_eq!(sent.body()?["model"], "Qwen/Qwen3-0.6B");
    assert_eq!(sent.set_headers()?["x-selected-model"], "Qwen/Qwen3-0.6B");
    let answered = second.ask(response_headers("200")).await?;
    let decision = answered.set_headers()?;
    assert_eq!(decision["x-sr-model"], "small");
    assert_eq!(decision["x-sr-fallbacks"], "strong:cooldown");
    let metrics = router.admin_get("/metrics").await?.text();
    assert!(
        metrics.contains("src_model_cooldowns_total{model=\"strong\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("src_fallbacks_total{from=\"strong\",reason=\"cooldown\"} 1"),
        "{metrics}"
    );
    Ok(())
}

#[tokio::test]
async fn a_backend_that_does_not_speak_the_api_is_skipped_as_the_proxy_skips_it() -> TestResult {
    // `big` is on an Anthropic backend: a chat request has no form it could take there.
    let policy = r#"
backend sim    { url = "http://127.0.0.1:9/v1"  simulated = true }
backend claude { url = "http://127.0.0.1:9/v1"  api = anthropic }
model small { backend = sim     serves = "Qwen/Qwen3-0.6B" }
model big   { backend = claude  serves = "claude-sonnet-4-5" }
route default { to big else small }
"#;
    let router = Router::start_with(policy, |cfg| {
        cfg.extproc = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    })
    .await?;
    let addr = router.server.extproc_addr.ok_or("no external processor")?;
    let mut stream = Stream::open(addr).await?;
    stream
        .ask(headers(&post("/v1/chat/completions"), false))
        .await?;
    let sent = stream.ask(body(&user("hello"))).await?;
    assert_eq!(sent.body()?["model"], "Qwen/Qwen3-0.6B");
    assert_eq!(sent.set_headers()?["x-selected-model"], "Qwen/Qwen3-0.6B");
    let answered = stream.ask(response_headers("200")).await?;
    let decision = answered.set_headers()?;
    assert_eq!(decision["x-sr-model"], "small");
    assert_eq!(decision["x-sr-fallbacks"], "big:api");

    // The proxy door answers from the same model.
    let proxied = router.chat(&user("hello"), &[]).await?;
    assert_eq!(proxied.header("x-sr-model"), Some("small"));
    assert_eq!(proxied.header("x-sr-fallbacks"), Some("big:api"));
    Ok(())
}
