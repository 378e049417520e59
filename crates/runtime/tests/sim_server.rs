//! The simulator as an OpenAI server: answer shapes, streaming, errors, endpoints and the
//! received-request log, over real HTTP on 127.0.0.1:0.

use bytes::Bytes;
use serde_json::{json, Value};
use src_runtime::headers::{SIM_DECODE_MS, SIM_PREFILL_MS, SIM_QUEUE_MS};
use src_runtime::openai::{ErrorBody, UsageScanner};
use src_runtime::sim::{self, SimConfig, SimModel};
use src_testkit::sim::*;

#[tokio::test]
async fn non_stream_answer_is_an_openai_chat_completion() -> TestResult {
    let (_sim, http) = sim(config()).await?;
    let answer = http.chat(&chat_body(MODEL, "hello there")).await?;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-type"), Some("application/json"));
    let body = answer.json()?;
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], MODEL);
    assert!(body["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("chatcmpl-")));
    let choice = &body["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    let content = choice["message"]["content"].as_str().ok_or("no content")?;
    assert!(content.starts_with(&format!("[{MODEL}] ")), "{content}");
    assert!(matches!(
        choice["finish_reason"].as_str(),
        Some("stop" | "length")
    ));
    let usage = &body["usage"];
    let prompt = usage["prompt_tokens"].as_u64().ok_or("no prompt_tokens")?;
    let completion = usage["completion_tokens"]
        .as_u64()
        .ok_or("no completion_tokens")?;
    assert!(prompt > 0 && completion > 0);
    assert_eq!(usage["total_tokens"].as_u64(), Some(prompt + completion));
    // One output token per word: `[id]` then one filler word each.
    assert_eq!(content.split(' ').count() as u64, completion);
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 0);
    for header in [SIM_QUEUE_MS, SIM_PREFILL_MS, SIM_DECODE_MS] {
        assert!(answer.header_f64(header)? >= 0.0);
    }
    // A longer prompt costs more prompt tokens.
    let longer = http
        .chat(&chat_body(MODEL, &long_prompt("x")))
        .await?
        .json()?;
    assert!(longer["usage"]["prompt_tokens"].as_u64() > Some(prompt));
    Ok(())
}

#[tokio::test]
async fn stream_arrives_incrementally_and_matches_the_whole_answer() -> TestResult {
    let mut cfg = config();
    // 10 ms of real time per token: chunks are far apart compared with a socket read.
    cfg.time_scale = 0.01;
    cfg.models[0].decode_ms_per_token = 1000.0;
    cfg.models[0].min_output_tokens = 6;
    cfg.models[0].max_output_tokens = 6;
    let (_sim, http) = sim(cfg).await?;
    let prompt = "stream me";
    let response = http.open_chat(&[], &stream_body(MODEL, prompt)).await?;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers().get("content-type").map(|v| v.as_bytes()),
        Some(&b"text/event-stream"[..])
    );
    let (frames, error) = frames(response).await;
    assert!(error.is_none());
    assert!(frames.len() > 2, "{} frames", frames.len());
    assert!(!frames[0].windows(6).any(|w| w == b"[DONE]"));
    let raw: Vec<u8> = frames.concat();
    let events = sse_data(&raw);
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e))
        .collect::<Result<_, _>>()?;
    assert!(chunks
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk"));
    assert!(chunks.iter().all(|c| c["model"] == MODEL));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    let usage_chunk = chunks.last().ok_or("no chunks")?;
    assert_eq!(usage_chunk["choices"], json!([]));
    let finish: Vec<&Value> = chunks
        .iter()
        .map(|c| &c["choices"][0]["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finish, [&json!("stop")]);
    // Every chunk but the usage chunk says `usage: null`, as OpenAI's do.
    assert!(chunks[..chunks.len() - 1]
        .iter()
        .all(|c| c["usage"].is_null()));

    let whole = http.chat(&chat_body(MODEL, prompt)).await?.json()?;
    assert_eq!(
        Some(text.as_str()),
        whole["choices"][0]["message"]["content"].as_str()
    );
    assert_eq!(usage_chunk["usage"]["completion_tokens"], 6);
    assert_eq!(
        usage_chunk["usage"]["prompt_tokens"],
        whole["usage"]["prompt_tokens"]
    );

    // The usage reader sees the same usage however the stream is cut in two.
    let expected = usage_chunk["usage"]["prompt_tokens"].as_u64();
    for cut in 0..=raw.len() {
        let mut scanner = UsageScanner::new();
        scanner.feed(&raw[..cut]);
        scanner.feed(&raw[cut..]);
        scanner.finish();
        assert_eq!(scanner.usage().and_then(|u| u.prompt_tokens), expected);
        assert!(scanner.saw_done());
    }
    Ok(())
}

#[tokio::test]
async fn stream_without_include_usage_has_no_usage() -> TestResult {
    let (_sim, http) = sim(config()).await?;
    let body =
        json!({"model": SMALL, "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let response = http.open_chat(&[], &body).await?;
    let (frames, _) = frames(response).await;
    let raw = frames.concat();
    assert!(!String::from_utf8_lossy(&raw).contains("\"usage\""));
    let mut scanner = UsageScanner::new();
    scanner.feed(&raw);
    scanner.finish();
    assert_eq!(scanner.usage(), None);
    assert!(scanner.saw_done());
    Ok(())
}

#[tokio::test]
async fn responses_endpoint_answers_whole_and_streamed() -> TestResult {
    let (_sim, http) = sim(config()).await?;
    let request = json!({"model": SMALL, "instructions": "be brief", "input": "what is 2+2?"});
    let answer = http
        .call("POST", "/v1/responses", &[], request.to_string())
        .await?;
    assert_eq!(answer.status, 200);
    let body = answer.json()?;
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["model"], SMALL);
    let text = body["output"][0]["content"][0]["text"]
        .as_str()
        .ok_or("no text")?;
    assert!(text.starts_with(&format!("[{SMALL}]")));
    let usage = &body["usage"];
    assert!(usage["input_tokens"].as_u64() > Some(0));
    assert_eq!(usage["input_tokens_details"]["cached_tokens"], 0);

    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let response = http
        .send("POST", "/v1/responses", &[], streamed.to_string())
        .await?;
    let (frames, error) = frames(response).await;
    assert!(error.is_none());
    let raw = frames.concat();
    let events: Vec<Value> = sse_data(&raw)
        .iter()
        .map(|e| serde_json::from_str(e))
        .collect::<Result<_, _>>()?;
    assert_eq!(events[0]["type"], "response.created");
    let deltas: String = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert_eq!(deltas, text);
    let last = events.last().ok_or("no events")?;
    assert_eq!(last["type"], "response.completed");
    let mut scanner = UsageScanner::new();
    scanner.feed(&raw);
    scanner.finish();
    assert_eq!(
        scanner.usage().and_then(|u| u.prompt_tokens),
        usage["input_tokens"].as_u64()
    );
    Ok(())
}

#[tokio::test]
async fn unknown_model_is_an_openai_404() -> TestResult {
    let (_sim, http) = sim(config()).await?;
    let answer = http.chat(&chat_body("gpt-nope", "hi")).await?;
    assert_eq!(answer.status, 404);
    let error = ErrorBody::parse(&answer.body).ok_or("not an OpenAI error body")?;
    assert_eq!(error.error.code.as_deref(), Some("model_not_found"));
    assert!(error.error.message.contains("`gpt-nope`"));
    Ok(())
}

#[tokio::test]
async fn bad_requests_get_openai_errors() -> TestResult {
    let mut cfg = config();
    cfg.max_body_bytes = 1024;
    let (_sim, http) = sim(cfg).await?;
    let cases: [(&str, &str, Bytes, u16, &str); 7] = [
        (
            "POST",
            "/v1/chat/completions",
            Bytes::from_static(b"{\"model\":"),
            400,
            "invalid_request_error",
        ),
        (
            "POST",
            "/v1/chat/completions",
            Bytes::from_static(b"[1,2]"),
            400,
            "invalid_request_error",
        ),
        (
            "POST",
            "/v1/chat/completions",
            Bytes::from(json!({"model": MODEL}).to_string()),
            400,
            "invalid_request_error",
        ),
        (
            "POST",
            "/v1/chat/completions",
            Bytes::from(vec![b' '; 2048]),
            413,
            "invalid_request_error",
        ),
        (
            "GET",
            "/v1/chat/completions",
            Bytes::new(),
            405,
            "invalid_request_error",
        ),
        (
            "POST",
            "/v1/models",
            Bytes::new(),
            405,
            "invalid_request_error",
        ),
        (
            "GET",
            "/v2/nothing",
            Bytes::new(),
            404,
            "invalid_request_error",
        ),
    ];
    for (method, path, body, status, kind) in cases {
        let answer = http.call(method, path, &[], body).await?;
        assert_eq!(answer.status, status, "{method} {path}");
        let error = ErrorBody::parse(&answer.body).ok_or("not an OpenAI error body")?;
        assert_eq!(error.error.kind, kind);
        assert!(!error.error.message.is_empty());
    }
    let answer = http
        .chat_with(&[("x-sim-fault", "explode")], &chat_body(MODEL, "hi"))
        .await?;
    assert_eq!(answer.status, 400);
    Ok(())
}

#[tokio::test]
async fn models_health_and_metrics() -> TestResult {
    let (_sim, http) = sim(config()).await?;
    let models = http.get("/v1/models").await?.json()?;
    assert_eq!(models["object"], "list");
    let ids: Vec<&str> = models["data"]
        .as_array()
        .ok_or("no data")?
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert_eq!(ids, [MODEL, SMALL]);
    assert_eq!(http.get("/health").await?.status, 200);

    http.chat(&chat_body(MODEL, &long_prompt("m"))).await?;
    http.chat(&chat_body(MODEL, &long_prompt("m"))).await?;
    let metrics = http.get("/metrics").await?;
    let text = String::from_utf8_lossy(&metrics.body);
    let requests = format!(
        "{}_total{{model=\"{MODEL}\",outcome=\"ok\"}} 2",
        src_runtime::metrics::SIM_REQUESTS
    );
    assert!(text.contains(&requests), "{text}");
    let cached_line = text
        .lines()
        .find(|l| {
            l.starts_with(&format!(
                "{}_total{{",
                src_runtime::metrics::SIM_CACHED_TOKENS
            ))
        })
        .ok_or("no cached tokens metric")?;
    assert!(!cached_line.ends_with(" 0"), "{cached_line}");
    Ok(())
}

#[tokio::test]
async fn received_requests_are_recorded_as_sent() -> TestResult {
    let (sim, http) = sim(config()).await?;
    let body = chat_body(SMALL, "record me");
    http.call(
        "POST",
        "/v1/chat/completions?trace=1",
        &[("authorization", "Bearer k"), ("x-request-id", "req-1")],
        body.to_string(),
    )
    .await?;
    http.chat(&chat_body("unknown-model", "still recorded"))
        .await?;
    let received = sim.received();
    assert_eq!(received.len(), 2);
    let first = &received[0];
    assert_eq!(first.method, "POST");
    assert_eq!(first.path, "/v1/chat/completions?trace=1");
    assert_eq!(first.header("Authorization"), Some("Bearer k"));
    assert_eq!(first.header("x-request-id"), Some("req-1"));
    assert_eq!(first.json(), Some(body));
    assert_eq!(received[1].model().as_deref(), Some("unknown-model"));

    let listed = http.get("/sim/requests").await?.json()?;
    assert_eq!(listed.as_array().map(Vec::len), Some(2));
    assert_eq!(listed[0]["body"]["messages"][0]["content"], "record me");
    // Reading the log is not itself recorded.
    assert_eq!(sim.received().len(), 2);
    assert_eq!(
        http.call("DELETE", "/sim/requests", &[], Bytes::new())
            .await?
            .status,
        200
    );
    assert!(sim.received().is_empty());
    http.get("/health").await?;
    assert_eq!(sim.received().len(), 1);
    sim.clear_received();
    assert!(sim.received().is_empty());
    Ok(())
}

#[tokio::test]
async fn serve_runs_until_its_shutdown_future_completes() -> TestResult {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(sim::serve(listener, config(), async {
        let _ = stopped.await;
    }));
    let stream = tokio::net::TcpStream::connect(addr).await?;
    drop(stream);
    let _ = stop.send(());
    server.await??;
    // The listener is gone with the server.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    Ok(())
}

#[tokio::test]
async fn invalid_configuration_is_refused_before_serving() -> TestResult {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let error = sim::serve(listener, SimConfig::default(), std::future::pending())
        .await
        .err()
        .ok_or("an empty configuration was served")?;
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
    let duplicate = SimConfig {
        models: vec![SimModel::new("a"), SimModel::new("a")],
        ..SimConfig::default()
    };
    let error = sim::SimHandle::spawn(duplicate)
        .await
        .err()
        .ok_or("duplicate served")?;
    assert!(error.to_string().contains("`a`"));
    Ok(())
}
