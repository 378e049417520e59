//! Hostile input against a real `src serve`: each test sends one kind of bad request (malformed
//! or truncated JSON, wrong types, empty or text-less conversations, unreadable content parts, huge strings and arrays,
//! deep nesting, invalid UTF-8, duplicate keys, oversized bodies and heads, slow clients, a
//! flood of idle connections, conflicting framing, hop-by-hop and router-owned headers),
//! asserts the documented answer (docs/operations.md, "Promises under hostile input"), and then
//! that the same server still answers an ordinary request. Protocol-level cases use a raw TCP
//! client, since a well-behaved HTTP client cannot send them.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{json, Value};
use src_testkit::{raw_exchange, user, Answer, Router, TestResult, PATIENCE, POLICY};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The router still serves an ordinary request, routed and answered by its backend.
async fn still_serves(router: &Router) -> TestResult {
    let answer = router.chat(&user("hello again"), &[]).await?;
    assert_eq!(answer.status, 200, "after hostile input: {}", answer.text());
    assert_eq!(answer.header("x-sr-path"), Some("upstream"));
    Ok(())
}

/// Posts raw body bytes to the chat endpoint.
async fn post_bytes(router: &Router, body: impl Into<bytes::Bytes>) -> TestResult<Answer> {
    router
        .client
        .send(
            hyper::Method::POST,
            &router.url("/v1/chat/completions"),
            body,
            &[],
        )
        .await
}

/// Asserts an OpenAI-style client error: `status`, `invalid_request_error`, the `code` and
/// `param` given (`None`: not checked), and the router's error path.
fn assert_refused(
    answer: &Answer,
    status: u16,
    code: Option<&str>,
    param: Option<&str>,
) -> TestResult<Value> {
    assert_eq!(answer.status, status, "{}", answer.text());
    let body = answer.json()?;
    let error = &body["error"];
    assert_eq!(error["type"], "invalid_request_error", "{body}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    if let Some(code) = code {
        assert_eq!(error["code"], code, "{body}");
    }
    if let Some(param) = param {
        assert_eq!(error["param"], param, "{body}");
    }
    assert_eq!(answer.header("content-type"), Some("application/json"));
    assert_eq!(answer.header("x-sr-path"), Some("error"));
    Ok(body)
}

fn upstream_requests(router: &Router) -> usize {
    router.sims().iter().map(|s| s.received().len()).sum()
}

/// The status line of a raw answer (`HTTP/1.1 431 ...`), or the empty string when the server
/// closed without answering.
fn status_line(raw: &str) -> &str {
    raw.lines().next().unwrap_or("")
}

/// Reads until the server closes the connection (bounded by `PATIENCE`); what it wrote.
async fn read_to_close(stream: &mut TcpStream) -> TestResult<String> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(PATIENCE, stream.read(&mut buf)).await {
            Err(_) => return Err("the server kept the connection open".into()),
            Ok(Ok(0)) | Ok(Err(_)) => return Ok(String::from_utf8_lossy(&out).into_owned()),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
        }
    }
}

const HEAD: &str =
    "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n";

#[tokio::test]
async fn malformed_json_is_a_400_invalid_json() -> TestResult {
    let router = Router::start(POLICY).await?;
    for body in [
        "{",
        "not json",
        "{\"model\": \"auto\",}",
        "[1,]",
        "{\"a\" 1}",
    ] {
        let answer = post_bytes(&router, body).await?;
        assert_refused(&answer, 400, Some("invalid_json"), None)?;
    }
    assert_eq!(upstream_requests(&router), 0);
    still_serves(&router).await
}

#[tokio::test]
async fn truncated_json_is_a_400_invalid_json() -> TestResult {
    let router = Router::start(POLICY).await?;
    let whole = user("a request cut short").to_string();
    for cut in [1, whole.len() / 3, whole.len() / 2, whole.len() - 1] {
        let answer = post_bytes(&router, whole[..cut].to_owned()).await?;
        let body = assert_refused(&answer, 400, Some("invalid_json"), None)?;
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("EOF"), "cut at {cut}: {message}");
    }
    still_serves(&router).await
}

#[tokio::test]
async fn wrong_types_are_a_400_naming_the_field() -> TestResult {
    let router = Router::start(POLICY).await?;
    let cases = [
        (
            json!({"model": 7, "messages": [{"role": "user", "content": "hi"}]}),
            "model",
        ),
        (
            json!({"model": "auto", "messages": {"role": "user"}}),
            "messages",
        ),
        (json!({"model": "auto", "messages": ["hi"]}), "messages[0]"),
        (
            json!({"model": "auto", "messages": [{"role": ["user"], "content": "hi"}]}),
            "messages[0].role",
        ),
        (
            json!({"model": "auto", "messages": [{"role": "user", "content": true}]}),
            "messages[0].content",
        ),
        (
            json!({"model": "auto", "messages": [{"role": "user", "content": "hi"}], "stream": 1}),
            "stream",
        ),
    ];
    for (body, param) in cases {
        let answer = router.chat(&body, &[]).await?;
        assert_refused(&answer, 400, None, Some(param))?;
    }
    assert_eq!(upstream_requests(&router), 0);
    still_serves(&router).await
}

#[tokio::test]
async fn an_empty_conversation_is_a_400_and_never_forwarded() -> TestResult {
    let router = Router::start(POLICY).await?;
    let answer = router
        .chat(&json!({"model": "auto", "messages": []}), &[])
        .await?;
    let body = assert_refused(&answer, 400, None, Some("messages"))?;
    assert_eq!(body["error"]["message"], "`messages` must not be empty");
    // Also with an explicit model, which skips the routes.
    let answer = router
        .chat(&json!({"model": "small", "messages": []}), &[])
        .await?;
    assert_refused(&answer, 400, None, Some("messages"))?;
    assert_eq!(upstream_requests(&router), 0);
    still_serves(&router).await
}

#[tokio::test]
async fn missing_messages_is_a_400() -> TestResult {
    let router = Router::start(POLICY).await?;
    let answer = router.chat(&json!({"model": "auto"}), &[]).await?;
    let body = assert_refused(&answer, 400, None, Some("messages"))?;
    assert_eq!(body["error"]["message"], "`messages` is missing");
    still_serves(&router).await
}

#[tokio::test]
async fn a_message_without_any_text_is_a_400() -> TestResult {
    let router = Router::start(POLICY).await?;
    let cases = [
        (json!([{"role": "user"}]), "messages[0].content"),
        (
            json!([{"role": "system", "content": "be brief"}, {"role": "user", "content": null}]),
            "messages[1].content",
        ),
        (json!([{"role": "developer"}]), "messages[0].content"),
    ];
    for (messages, param) in cases {
        let answer = router
            .chat(&json!({"model": "auto", "messages": messages}), &[])
            .await?;
        assert_refused(&answer, 400, None, Some(param))?;
    }
    // An assistant turn that only calls a tool has no text, and that is fine.
    let tool_turn = json!({"model": "auto", "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": null,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}
    ]});
    let answer = router.chat(&tool_turn, &[]).await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(upstream_requests(&router), 1);
    still_serves(&router).await
}

#[tokio::test]
async fn a_part_the_router_cannot_read_is_a_400_and_never_forwarded() -> TestResult {
    let router = Router::start(POLICY).await?;
    let messages = json!([{"role": "user", "content": [
        {"type": "text", "text": "hi"},
        {"type": "prompt_embeds", "data": "AAAA"}
    ]}]);
    let answer = router
        .chat(&json!({"model": "auto", "messages": messages}), &[])
        .await?;
    let body = assert_refused(&answer, 400, None, Some("messages[0].content[1].type"))?;
    assert_eq!(
        body["error"]["message"],
        "`messages[0].content[1].type` is `prompt_embeds`, a type the router cannot read"
    );
    // Media the backend reads is accepted: no text signal reads it, as documented.
    let media = json!({"model": "auto", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}
    ]}]});
    let answer = router.chat(&media, &[]).await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(upstream_requests(&router), 1);
    still_serves(&router).await
}

#[tokio::test]
async fn huge_strings_within_the_limit_are_served_and_over_it_are_a_413() -> TestResult {
    let router = Router::start_with(POLICY, |cfg| cfg.max_body_bytes = 1 << 20).await?;
    let within = "a".repeat(900 << 10);
    let answer = router.chat(&user(&within), &[]).await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let received: Vec<_> = router.sims().iter().flat_map(|s| s.received()).collect();
    let sent = received
        .first()
        .and_then(|r| r.json())
        .ok_or("not forwarded")?;
    assert_eq!(
        sent["messages"][0]["content"].as_str().map(str::len),
        Some(within.len())
    );

    let over = "a".repeat(2 << 20);
    let answer = router.chat(&user(&over), &[]).await?;
    assert_refused(&answer, 413, Some("payload_too_large"), None)?;
    assert_eq!(upstream_requests(&router), 1);
    still_serves(&router).await
}

#[tokio::test]
async fn a_hundred_thousand_element_array_is_read_and_served() -> TestResult {
    let router = Router::start(POLICY).await?;
    let messages: Vec<Value> = (0..100_000)
        .map(|_| json!({"role": "user", "content": "a"}))
        .collect();
    let mut body = json!({"model": "auto", "messages": messages});
    body["extra"] = json!(vec![0u8; 100_000]);
    let answer = router.chat(&body, &[]).await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    // A hundred thousand wrong elements are refused at the first one.
    let wrong: Vec<Value> = (0..100_000).map(|i| json!(i)).collect();
    let answer = router
        .chat(&json!({"model": "auto", "messages": wrong}), &[])
        .await?;
    assert_refused(&answer, 400, None, Some("messages[0]"))?;
    still_serves(&router).await
}

#[tokio::test]
async fn deep_nesting_is_refused_at_a_bounded_depth() -> TestResult {
    let router = Router::start(POLICY).await?;
    // serde_json stops at 128 levels: deeper input is refused without exhausting the stack.
    let depth = 100_000;
    let nested = format!(
        "{{\"model\":\"auto\",\"messages\":[{{\"role\":\"user\",\"content\":\"hi\"}}],\"x\":{}{}}}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let answer = post_bytes(&router, nested).await?;
    let body = assert_refused(&answer, 400, Some("invalid_json"), None)?;
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("recursion limit"), "{message}");
    // Nesting within the bound is only data, forwarded as sent.
    let shallow = format!(
        "{{\"model\":\"auto\",\"messages\":[{{\"role\":\"user\",\"content\":\"hi\"}}],\"x\":{}{}}}",
        "[".repeat(100),
        "]".repeat(100)
    );
    let answer = post_bytes(&router, shallow).await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    still_serves(&router).await
}

#[tokio::test]
async fn invalid_utf8_is_a_400_invalid_json() -> TestResult {
    let router = Router::start(POLICY).await?;
    let mut body = br#"{"model":"auto","messages":[{"role":"user","content":"caf"#.to_vec();
    body.extend_from_slice(&[0xff, 0xfe]);
    body.extend_from_slice(br#""}]}"#);
    let answer = post_bytes(&router, body).await?;
    let error = assert_refused(&answer, 400, Some("invalid_json"), None)?;
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("invalid unicode code point"), "{message}");
    assert_eq!(upstream_requests(&router), 0);
    still_serves(&router).await
}

#[tokio::test]
async fn with_duplicate_keys_the_last_one_wins() -> TestResult {
    let router = Router::start(POLICY).await?;
    // The first `messages` would take the default route; the last one routes to `coding`.
    let body = r#"{"model":"auto","messages":[{"role":"user","content":"hello"}],"messages":[{"role":"user","content":"segfault in main"}]}"#;
    let answer = post_bytes(&router, body).await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.header("x-sr-route"), Some("coding"));
    assert_eq!(answer.header("x-sr-model"), Some("strong"));
    still_serves(&router).await
}

#[tokio::test]
async fn oversized_bodies_are_a_413_declared_or_chunked() -> TestResult {
    let router = Router::start_with(POLICY, |cfg| cfg.max_body_bytes = 1024).await?;
    let mut body = user("hello");
    body["padding"] = json!("x".repeat(4096));
    let answer = router.chat(&body, &[]).await?;
    assert_refused(&answer, 413, Some("payload_too_large"), None)?;

    let chunk = "x".repeat(700);
    let request = format!(
        "{HEAD}transfer-encoding: chunked\r\n\r\n{len:x}\r\n{chunk}\r\n{len:x}\r\n{chunk}\r\n0\r\n\r\n",
        len = chunk.len()
    );
    let raw = raw_exchange(router.server.addr, request.as_bytes()).await?;
    assert_eq!(status_line(&raw), "HTTP/1.1 413 Payload Too Large", "{raw}");
    assert!(raw.contains("\"payload_too_large\""), "{raw}");
    assert_eq!(upstream_requests(&router), 0);
    still_serves(&router).await
}

#[tokio::test]
async fn an_oversized_head_is_a_431() -> TestResult {
    let router = Router::start_with(POLICY, |cfg| cfg.limits.max_header_bytes = 16 << 10).await?;
    let request = format!(
        "{HEAD}x-padding: {}\r\ncontent-length: 2\r\n\r\n{{}}",
        "p".repeat(32 << 10)
    );
    let raw = raw_exchange(router.server.addr, request.as_bytes()).await?;
    assert_eq!(
        status_line(&raw),
        "HTTP/1.1 431 Request Header Fields Too Large",
        "{raw}"
    );
    // Many small headers that add up count too.
    let many: String = (0..2000).map(|i| format!("x-h{i}: {i}\r\n")).collect();
    let request = format!("{HEAD}{many}content-length: 2\r\n\r\n{{}}");
    let raw = raw_exchange(router.server.addr, request.as_bytes()).await?;
    assert_eq!(
        status_line(&raw),
        "HTTP/1.1 431 Request Header Fields Too Large",
        "{raw}"
    );
    assert_eq!(upstream_requests(&router), 0);
    still_serves(&router).await
}

#[tokio::test]
async fn a_slow_head_is_cut_off_by_the_header_read_timeout() -> TestResult {
    let router = Router::start_with(POLICY, |cfg| {
        cfg.limits.header_read_timeout = Duration::from_millis(300);
    })
    .await?;
    // Half a head, then nothing: closed without an answer.
    let mut slow = TcpStream::connect(router.server.addr).await?;
    slow.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
        .await?;
    assert_eq!(read_to_close(&mut slow).await?, "");
    // Connected and silent: closed too (before any protocol is chosen).
    let mut silent = TcpStream::connect(router.server.addr).await?;
    assert_eq!(read_to_close(&mut silent).await?, "");
    // Stalled inside the HTTP/2 preface: closed too.
    let mut preface = TcpStream::connect(router.server.addr).await?;
    preface.write_all(b"PRI * HTTP/2.0\r\n").await?;
    assert_eq!(read_to_close(&mut preface).await?, "");
    still_serves(&router).await
}

#[tokio::test]
async fn a_slow_body_is_a_408() -> TestResult {
    let router = Router::start_with(POLICY, |cfg| {
        cfg.limits.body_read_timeout = Duration::from_millis(300);
    })
    .await?;
    let mut slow = TcpStream::connect(router.server.addr).await?;
    slow.write_all(format!("{HEAD}content-length: 100\r\n\r\n{{\"model\":").as_bytes())
        .await?;
    let raw = read_answer(&mut slow).await?;
    assert_eq!(status_line(&raw), "HTTP/1.1 408 Request Timeout", "{raw}");
    assert!(raw.contains("\"request_timeout\""), "{raw}");
    assert!(raw.contains("\"invalid_request_error\""), "{raw}");
    assert_eq!(upstream_requests(&router), 0);
    still_serves(&router).await
}

#[tokio::test]
async fn a_slow_body_is_a_408_on_every_door_in_its_own_error_shape() -> TestResult {
    let router = Router::start_with(POLICY, |cfg| {
        cfg.limits.body_read_timeout = Duration::from_millis(300);
    })
    .await?;
    for (path, kind) in [
        ("/v1/chat/completions", "\"request_timeout\""),
        ("/v1/responses", "\"request_timeout\""),
        ("/v1/messages", "\"type\":\"error\""),
    ] {
        let mut slow = TcpStream::connect(router.server.addr).await?;
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
             content-length: 100\r\n\r\n{{\"model\":"
        );
        slow.write_all(head.as_bytes()).await?;
        let raw = read_answer(&mut slow).await?;
        assert_eq!(
            status_line(&raw),
            "HTTP/1.1 408 Request Timeout",
            "{path}: {raw}"
        );
        assert!(raw.contains(kind), "{path}: {raw}");
    }
    assert_eq!(upstream_requests(&router), 0);
    still_serves(&router).await
}

/// Reads one answer (its head and a `content-length` body) from `stream`.
async fn read_answer(stream: &mut TcpStream) -> TestResult<String> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(PATIENCE, stream.read(&mut buf)).await??;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&out).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .to_ascii_lowercase()
                .lines()
                .find_map(|l| {
                    l.strip_prefix("content-length:")
                        .map(|v| v.trim().to_owned())
                })
                .and_then(|v| v.parse::<usize>().ok());
            if length.is_some_and(|n| out.len() >= end + 4 + n) {
                break;
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[tokio::test]
async fn open_connections_are_bounded() -> TestResult {
    let router = Router::start_with(POLICY, |cfg| {
        cfg.limits.max_connections = 2;
        cfg.limits.header_read_timeout = Duration::from_secs(60);
    })
    .await?;
    let addr: SocketAddr = router.server.addr;
    let idle_a = TcpStream::connect(addr).await?;
    let _idle_b = TcpStream::connect(addr).await?;
    // A third client is not served while two connections are held...
    let third = tokio::spawn(async move {
        raw_exchange(
            addr,
            format!(
                "{HEAD}content-length: {}\r\n\r\n{}",
                user("third").to_string().len(),
                user("third")
            )
            .as_bytes(),
        )
        .await
        .map_err(|e| e.to_string())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!third.is_finished(), "served past the connection bound");
    // ...and is, once one of them closes.
    drop(idle_a);
    let raw = tokio::time::timeout(PATIENCE, third).await???;
    assert_eq!(status_line(&raw), "HTTP/1.1 200 OK", "{raw}");
    Ok(())
}

#[tokio::test]
async fn conflicting_framing_is_refused_or_closes_the_connection() -> TestResult {
    let router = Router::start(POLICY).await?;
    let body = user("framed").to_string();
    // Two different lengths: 400 from hyper, nothing forwarded.
    let request = format!(
        "{HEAD}content-length: {}\r\ncontent-length: 3\r\n\r\n{body}",
        body.len()
    );
    let raw = raw_exchange(router.server.addr, request.as_bytes()).await?;
    assert_eq!(status_line(&raw), "HTTP/1.1 400 Bad Request", "{raw}");
    // A transfer coding other than chunked last: 400.
    let request = format!("{HEAD}transfer-encoding: gzip\r\n\r\n{body}");
    let raw = raw_exchange(router.server.addr, request.as_bytes()).await?;
    assert_eq!(status_line(&raw), "HTTP/1.1 400 Bad Request", "{raw}");
    assert_eq!(upstream_requests(&router), 0);
    // Both `content-length` and chunked: chunked frames the body (RFC 9112 §6.3), and the
    // connection is closed after the answer, so no smuggled request can follow on it.
    let request = format!(
        "{HEAD}content-length: 5\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n\
         GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n",
        body.len()
    );
    let mut stream = TcpStream::connect(router.server.addr).await?;
    stream.write_all(request.as_bytes()).await?;
    let raw = read_to_close(&mut stream).await?;
    assert_eq!(status_line(&raw), "HTTP/1.1 200 OK", "{raw}");
    assert_eq!(raw.matches("HTTP/1.1 ").count(), 1, "{raw}");
    assert!(
        raw.to_ascii_lowercase().contains("connection: close"),
        "{raw}"
    );
    let received: Vec<_> = router.sims().iter().flat_map(|s| s.received()).collect();
    assert_eq!(received.len(), 1);
    let sent = received[0].json().ok_or("upstream body is not JSON")?;
    assert_eq!(sent["messages"][0]["content"], "framed");
    still_serves(&router).await
}

#[tokio::test]
async fn hop_by_hop_headers_are_never_forwarded() -> TestResult {
    let router = Router::start(POLICY).await?;
    let body = user("hello").to_string();
    let request = format!(
        "{HEAD}connection: keep-alive, x-private-hop\r\nkeep-alive: timeout=5\r\nte: trailers\r\n\
         trailer: x-checksum\r\nupgrade: websocket\r\nproxy-authorization: Basic c2VjcmV0\r\n\
         proxy-connection: keep-alive\r\nproxy-tenant: acme\r\nx-private-hop: 1\r\n\
         x-end-to-end: kept\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let raw = raw_exchange(router.server.addr, request.as_bytes()).await?;
    assert_eq!(status_line(&raw), "HTTP/1.1 200 OK", "{raw}");
    let received: Vec<_> = router.sims().iter().flat_map(|s| s.received()).collect();
    let upstream = received.first().ok_or("not forwarded")?;
    assert_eq!(upstream.header("x-end-to-end"), Some("kept"));
    for name in [
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "proxy-connection",
        "proxy-tenant",
        "x-private-hop",
    ] {
        assert_eq!(upstream.header(name), None, "`{name}` was forwarded");
    }
    // `connection` upstream is the router's own connection's, never the client's list.
    assert!(
        upstream
            .header("connection")
            .is_none_or(|v| !v.contains("x-private-hop")),
        "{:?}",
        upstream.headers
    );
    still_serves(&router).await
}

#[tokio::test]
async fn router_owned_headers_from_clients_are_stripped_and_never_trusted() -> TestResult {
    let router = Router::start(POLICY).await?;
    let answer = router
        .chat(
            &user("hello"),
            &[
                ("x-sr-route", "coding"),
                ("x-sr-model", "strong"),
                ("x-sr-backend", "elsewhere"),
                ("x-sr-anything", "forged"),
                ("x-selected-model", "Qwen/Qwen3-8B"),
                ("x-gateway-model-name", "Qwen/Qwen3-8B"),
                ("x-dynamo-session-id", "someone-elses-session"),
                ("cookie", "session=abc"),
                ("x-custom", "kept"),
            ],
        )
        .await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    // The decision is the router's: the forged route and model changed nothing.
    assert_eq!(answer.header("x-sr-route"), Some("default"));
    assert_eq!(answer.header("x-sr-model"), Some("small"));
    let received: Vec<_> = router.sims().iter().flat_map(|s| s.received()).collect();
    let upstream = received.first().ok_or("not forwarded")?;
    assert_eq!(upstream.header("x-selected-model"), Some("Qwen/Qwen3-0.6B"));
    assert_eq!(upstream.header("x-custom"), Some("kept"));
    for name in [
        "x-sr-route",
        "x-sr-model",
        "x-sr-backend",
        "x-sr-anything",
        "x-gateway-model-name",
        "x-dynamo-session-id",
        "cookie",
    ] {
        assert_eq!(upstream.header(name), None, "`{name}` was forwarded");
    }
    let selected = upstream
        .headers
        .iter()
        .filter(|(n, _)| n == "x-selected-model")
        .count();
    assert_eq!(selected, 1, "{:?}", upstream.headers);
    still_serves(&router).await
}
