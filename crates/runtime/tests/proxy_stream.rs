//! Streaming through `src serve`: bytes pass through unchanged and chunk by chunk (never
//! buffered whole), usage evidence is read on the way without touching the bytes (unknown stays
//! `null`), and a client that goes away cancels the upstream request.

use std::time::Duration;

use http_body_util::BodyExt;
use hyper::Method;
use serde_json::{json, Value};
use src_runtime::sim::{SimConfig, SimHandle, SimModel};
use src_testkit::fault::read_request;
use src_testkit::{one_model, Http, Router, TestResult, PATIENCE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

/// What the scripted upstream saw of its streaming request.
#[derive(Debug, PartialEq)]
enum Seen {
    /// Every piece was sent and the stream ended normally.
    Finished,
    /// The router closed the connection after this many pieces.
    ClosedAfter(usize),
}

/// A backend on a raw socket: readiness probes get an empty model list; the first POST gets an
/// SSE head, then `pieces` as separate chunks, each after a `go` from the test (so a router that
/// buffered would never see the next one). After the last piece, `hold_open` keeps the
/// connection open and reports when the router closes it.
async fn scripted_upstream(
    pieces: Vec<&'static str>,
    hold_open: bool,
) -> TestResult<(String, mpsc::UnboundedSender<()>, oneshot::Receiver<Seen>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/v1", listener.local_addr()?);
    let (go_tx, mut go_rx) = mpsc::unbounded_channel::<()>();
    let (seen_tx, seen_rx) = oneshot::channel();
    tokio::spawn(async move {
        let mut seen_tx = Some(seen_tx);
        while let Ok((mut stream, _)) = listener.accept().await {
            let Ok(line) = read_request(&mut stream).await else {
                continue;
            };
            if line.starts_with("GET") {
                let body = "{\"object\":\"list\",\"data\":[]}";
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes()).await;
                continue;
            }
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nx-upstream: scripted\r\nx-ratelimit-remaining-requests: 7\r\n\r\n";
            if stream.write_all(head.as_bytes()).await.is_err() {
                continue;
            }
            let mut sent = 0;
            for (i, piece) in pieces.iter().enumerate() {
                if i > 0 && go_rx.recv().await.is_none() {
                    break;
                }
                let chunk = format!("{:x}\r\n{piece}\r\n", piece.len());
                if stream.write_all(chunk.as_bytes()).await.is_err() {
                    break;
                }
                sent += 1;
            }
            let outcome = if hold_open {
                // Wait for the router to close its side.
                let mut byte = [0u8; 64];
                loop {
                    match tokio::time::timeout(PATIENCE, stream.read(&mut byte)).await {
                        Ok(Ok(0)) | Ok(Err(_)) => break Seen::ClosedAfter(sent),
                        Ok(Ok(_)) => continue,
                        Err(_) => break Seen::Finished,
                    }
                }
            } else {
                let _ = stream.write_all(b"0\r\n\r\n").await;
                Seen::Finished
            };
            if let Some(tx) = seen_tx.take() {
                let _ = tx.send(outcome);
            }
        }
    });
    Ok((url, go_tx, seen_rx))
}

fn scripted_policy(url: &str) -> String {
    format!(
        r#"
backend gpu {{ url = "{url}" }}
model m {{ backend = gpu  serves = "served-m" }}
route default {{ to m }}
"#
    )
}

fn stream_request() -> Value {
    json!({"model": "auto", "stream": true, "stream_options": {"include_usage": true},
           "messages": [{"role": "user", "content": "tell me a story"}]})
}

const PIECES: [&str; 4] = [
    "data: {\"id\":\"x\",\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n",
    // An event split across pieces, and CRLF line ends.
    "data: {\"id\":\"x\",\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\r\n\r\ndata: {\"id\":\"x\",\"ch",
    "oices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2,\"total_tokens\":9,\"prompt_tokens_details\":{\"cached_tokens\":5}}}\n\n",
    "data: [DONE]\n\n",
];

#[tokio::test]
async fn sse_passes_through_byte_for_byte_and_piece_by_piece() -> TestResult {
    let (url, go, seen) = scripted_upstream(PIECES.to_vec(), false).await?;
    let router = Router::start(&scripted_policy(&url)).await?;
    let response = router
        .open(
            "/v1/chat/completions",
            &stream_request(),
            &[("x-request-id", "stream-1")],
        )
        .await?;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("text/event-stream")
    );
    // The backend's rate limits reach the client; its private headers do not.
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    assert_eq!(
        header("x-ratelimit-remaining-requests").as_deref(),
        Some("7")
    );
    assert_eq!(header("x-upstream"), None);
    assert_eq!(
        response
            .headers()
            .get("x-sr-model")
            .and_then(|v| v.to_str().ok()),
        Some("m")
    );
    let mut body = response.into_body();
    let mut received: Vec<u8> = Vec::new();
    for (i, _) in PIECES.iter().enumerate() {
        let expected: String = PIECES[..=i].concat();
        // Each piece must arrive before the upstream is allowed to send the next.
        while received.len() < expected.len() {
            let frame = tokio::time::timeout(PATIENCE, body.frame())
                .await
                .map_err(|_| format!("piece {i} never arrived: the router is buffering"))?
                .ok_or("stream ended early")??;
            if let Ok(data) = frame.into_data() {
                received.extend_from_slice(&data);
            }
        }
        assert_eq!(String::from_utf8_lossy(&received), expected);
        let _ = go.send(());
    }
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            received.extend_from_slice(&data);
        }
    }
    assert_eq!(String::from_utf8_lossy(&received), PIECES.concat());
    assert_eq!(tokio::time::timeout(PATIENCE, seen).await??, Seen::Finished);

    let line = router.log_line("stream-1").await?;
    assert_eq!(line["stream"], true);
    assert_eq!(line["prompt_tokens"], 7);
    assert_eq!(line["completion_tokens"], 2);
    assert_eq!(line["cached_tokens"], 5);
    assert!(line["ttft_ms"].as_f64().is_some(), "{line}");
    assert!(line["error"].is_null(), "{line}");
    Ok(())
}

#[tokio::test]
async fn a_stream_without_usage_logs_unknown_not_zero() -> TestResult {
    let pieces = vec![
        "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n",
        "data: [DONE]\n\n",
    ];
    let (url, go, _seen) = scripted_upstream(pieces.clone(), false).await?;
    let router = Router::start(&scripted_policy(&url)).await?;
    let _ = go.send(());
    let answer = router
        .chat(&stream_request(), &[("x-request-id", "no-usage")])
        .await?;
    assert_eq!(answer.text(), pieces.concat());
    let line = router.log_line("no-usage").await?;
    assert!(line["cached_tokens"].is_null(), "{line}");
    assert!(line["prompt_tokens"].is_null(), "{line}");
    Ok(())
}

#[tokio::test]
async fn a_client_that_disconnects_cancels_the_upstream_request() -> TestResult {
    let (url, _go, seen) = scripted_upstream(vec![PIECES[0]], true).await?;
    let router = Router::start(&scripted_policy(&url)).await?;
    let client = Http::new();
    let response = client
        .open(
            Method::POST,
            &router.url("/v1/chat/completions"),
            stream_request().to_string(),
            &[("x-request-id", "gone-1")],
        )
        .await?;
    let mut body = response.into_body();
    let first = tokio::time::timeout(PATIENCE, body.frame())
        .await?
        .ok_or("no first chunk")??;
    assert!(first.is_data());
    // The client goes away in the middle of the answer.
    drop(body);
    drop(client);
    let outcome = tokio::time::timeout(PATIENCE, seen).await??;
    assert_eq!(
        outcome,
        Seen::ClosedAfter(1),
        "the upstream connection stayed open"
    );
    let line = router.log_line("gone-1").await?;
    assert!(
        line["error"]
            .as_str()
            .is_some_and(|e| e.contains("client disconnected")),
        "{line}"
    );
    Ok(())
}

/// A backend that reads the request and never answers; reports when the router hangs up.
async fn silent_upstream() -> TestResult<(String, oneshot::Receiver<bool>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/v1", listener.local_addr()?);
    let (closed_tx, closed_rx) = oneshot::channel();
    tokio::spawn(async move {
        let mut closed_tx = Some(closed_tx);
        while let Ok((mut stream, _)) = listener.accept().await {
            let Ok(line) = read_request(&mut stream).await else {
                continue;
            };
            if line.starts_with("GET") {
                continue;
            }
            let mut byte = [0u8; 64];
            let closed = matches!(
                tokio::time::timeout(PATIENCE, stream.read(&mut byte)).await,
                Ok(Ok(0)) | Ok(Err(_))
            );
            if let Some(tx) = closed_tx.take() {
                let _ = tx.send(closed);
            }
        }
    });
    Ok((url, closed_rx))
}

#[tokio::test]
async fn leaving_before_the_answer_starts_cancels_and_logs_499() -> TestResult {
    let (url, closed) = silent_upstream().await?;
    let router = Router::start(&scripted_policy(&url)).await?;
    let client = Http::new();
    let waited = tokio::time::timeout(
        Duration::from_millis(300),
        client.send(
            Method::POST,
            &router.url("/v1/chat/completions"),
            stream_request().to_string(),
            &[("x-request-id", "early-1")],
        ),
    )
    .await;
    assert!(waited.is_err(), "the silent backend answered");
    drop(client);
    assert!(
        tokio::time::timeout(PATIENCE, closed).await??,
        "the router kept the upstream request open"
    );
    let line = router.log_line("early-1").await?;
    assert_eq!(line["status"], 499, "{line}");
    assert_eq!(line["path"], "error");
    assert_eq!(line["model"], "m");
    Ok(())
}

fn slow_sim_config() -> SimConfig {
    let mut model = SimModel::new("slow-model");
    model.decode_ms_per_token = 20.0;
    model.min_output_tokens = 4000;
    model.max_output_tokens = 4000;
    model.tokens_per_chunk = 1;
    SimConfig {
        models: vec![model],
        time_scale: 1.0,
        ..SimConfig::default()
    }
}

#[tokio::test]
async fn a_disconnect_frees_the_simulators_slot() -> TestResult {
    // 4000 tokens at 20 ms: the answer would take 80 s; the slot must free long before.
    let sim = SimHandle::spawn(slow_sim_config()).await?;
    let policy = one_model(&sim.base_url(), "slow-model");
    let router = Router::start(&policy).await?;
    let client = Http::new();
    let response = client
        .open(
            Method::POST,
            &router.url("/v1/chat/completions"),
            stream_request().to_string(),
            &[],
        )
        .await?;
    let mut body = response.into_body();
    tokio::time::timeout(PATIENCE, body.frame())
        .await?
        .ok_or("no first chunk")??;
    assert_eq!(sim.load("slow-model").map(|l| l.running), Some(1));
    drop(body);
    drop(client);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while sim.load("slow-model").map(|l| l.running) != Some(0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the simulator is still generating for a client that left"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// The SSE events of a body, as JSON, without what differs between two simulators by design:
/// the `created` time and the `id` (never the same twice).
fn events(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|d| {
            let mut v: Value = serde_json::from_str(d).unwrap_or(Value::String(d.to_owned()));
            if let Some(o) = v.as_object_mut() {
                o.remove("created");
                o.remove("id");
            }
            v
        })
        .collect()
}

#[tokio::test]
async fn the_stream_is_what_the_simulator_sends_directly() -> TestResult {
    let cfg = SimConfig {
        models: vec![SimModel::new("m-id")],
        time_scale: 0.0,
        ..SimConfig::default()
    };
    let behind = SimHandle::spawn(cfg.clone()).await?;
    let direct = SimHandle::spawn(cfg).await?;
    let policy = one_model(&behind.base_url(), "m-id");
    let router = Router::start(&policy).await?;
    let mut request = stream_request();
    let through = router.chat(&request, &[]).await?;
    request["model"] = json!("m-id");
    let http = Http::new();
    let straight = http
        .send(
            Method::POST,
            &format!("{}/v1/chat/completions", direct.base_url()),
            request.to_string(),
            &[],
        )
        .await?;
    assert_eq!(through.status, 200, "{}", through.text());
    let (a, b) = (events(&through.text()), events(&straight.text()));
    assert!(a.len() > 3, "{a:?}");
    assert_eq!(a, b);
    Ok(())
}

#[tokio::test]
async fn non_streaming_usage_reports_cached_tokens_only_when_the_backend_does() -> TestResult {
    let mut silent = SimModel::new("silent-model");
    silent.report_cached_tokens = false;
    let cfg = SimConfig {
        models: vec![SimModel::new("talky-model"), silent],
        time_scale: 0.0,
        ..SimConfig::default()
    };
    let sim = SimHandle::spawn(cfg).await?;
    let policy = format!(
        r#"
backend gpu {{ url = "{}/v1" }}
model talky  {{ backend = gpu  serves = "talky-model" }}
model silent {{ backend = gpu  serves = "silent-model" }}
route default {{ to talky }}
"#,
        sim.base_url()
    );
    let router = Router::start(&policy).await?;
    let long = "the same long prompt that fills several cache blocks ".repeat(20);
    for (model, id) in [
        ("talky", "t1"),
        ("talky", "t2"),
        ("silent", "s1"),
        ("silent", "s2"),
    ] {
        let body = json!({"model": model, "messages": [{"role": "user", "content": long}]});
        let answer = router.chat(&body, &[("x-request-id", id)]).await?;
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    let t2 = router.log_line("t2").await?;
    assert!(t2["cached_tokens"].as_u64().is_some_and(|n| n > 0), "{t2}");
    let s2 = router.log_line("s2").await?;
    assert!(s2["prompt_tokens"].as_u64().is_some_and(|n| n > 0), "{s2}");
    assert!(s2["cached_tokens"].is_null(), "{s2}");
    Ok(())
}
