//! What the external processor reports of a request it cannot see to the end, spoken to as
//! Envoy 1.40 speaks to it (the test kit's `ext_proc` client): its upstream time is the time to
//! the answer's headers (`src_upstream_headers_seconds`, `door="extproc"`), never an answer's
//! whole time; the status is the one Envoy reports in the response headers (its own 502, 503
//! or 504 when the upstream reset or could not be reached, as Envoy 1.40 sends them); and a
//! stream Envoy drops is the client going away (499) only when the router had answered the
//! decision, Envoy giving up on the router (504) while it was still deciding. The proxy doors
//! label the same metrics with their own names (`chat`, ...).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use src_runtime::session::{SessionLayer, SessionOptions};
use src_testkit::extproc::{body, headers, post, response_headers, Stream};
use src_testkit::{user, Router, TestResult, POLICY};
use tokio::net::TcpListener;

async fn router(policy: &str) -> TestResult<(Router, SocketAddr)> {
    let router = Router::start_with(policy, |cfg| {
        cfg.extproc = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    })
    .await?;
    let addr = router.server.extproc_addr.ok_or("no external processor")?;
    Ok((router, addr))
}

/// The request headers of a chat request with `id` as its `x-request-id`.
fn asked(id: &str) -> Vec<(&str, &str)> {
    let mut asked = post("/v1/chat/completions");
    asked.push(("x-request-id", id));
    asked
}

/// The samples of `metrics` that start with `prefix`.
fn samples<'a>(metrics: &'a str, prefix: &str) -> Vec<&'a str> {
    metrics.lines().filter(|l| l.starts_with(prefix)).collect()
}

#[tokio::test]
async fn the_processor_records_time_to_headers_and_the_proxy_its_whole_answers() -> TestResult {
    let (router, addr) = router(POLICY).await?;
    let mut stream = Stream::open(addr).await?;
    stream.ask(headers(&asked("door-1"), false)).await?;
    stream.ask(body(&user("a segfault in main"))).await?;
    stream.ask(response_headers("200")).await?;
    let proxied = router.chat(&user("a segfault in main"), &[]).await?;
    assert_eq!(proxied.status, 200);

    let metrics = router.admin_get("/metrics").await?.text();
    for expected in [
        "src_upstream_headers_seconds_count{model=\"strong\",door=\"extproc\"} 1",
        "src_upstream_headers_seconds_count{model=\"strong\",door=\"chat\"} 1",
        "src_upstream_seconds_count{model=\"strong\",door=\"chat\"} 1",
        "src_upstream_ttft_seconds_count{model=\"strong\",door=\"chat\"} 1",
        "src_requests_total{route=\"coding\",model=\"strong\",status=\"200\",path=\"upstream\",door=\"extproc\"} 1",
        "src_requests_total{route=\"coding\",model=\"strong\",status=\"200\",path=\"upstream\",door=\"chat\"} 1",
    ] {
        assert!(metrics.contains(expected), "missing `{expected}` in:\n{metrics}");
    }
    // The processor never sees where an answer ends, nor its first byte.
    for family in [
        "src_upstream_seconds_count{",
        "src_upstream_ttft_seconds_count{",
    ] {
        let extproc: Vec<&str> = samples(&metrics, family)
            .into_iter()
            .filter(|l| l.contains("door=\"extproc\""))
            .collect();
        assert!(extproc.is_empty(), "{extproc:?}");
    }
    let line = router.log_line("door-1").await?;
    assert_eq!(line["ttft_ms"], json!(null));
    Ok(())
}

#[tokio::test]
async fn the_5xx_envoy_answers_for_an_upstream_reset_is_logged_as_that_status() -> TestResult {
    let (router, addr) = router(POLICY).await?;
    // Envoy 1.40 sends its own answer's headers (503 "upstream connect error or disconnect/reset
    // before headers", 502 for a malformed answer) to the processor like an upstream's.
    for (id, status) in [("reset-1", "503"), ("garbage-1", "502")] {
        let mut stream = Stream::open(addr).await?;
        stream.ask(headers(&asked(id), false)).await?;
        stream.ask(body(&user("hello"))).await?;
        stream.ask(response_headers(status)).await?;
        let line = router.log_line(id).await?;
        assert_eq!(line["status"].to_string(), status, "{line}");
        assert_eq!(line["path"], "upstream");
        assert_eq!(line["model"], "small");
    }
    let metrics = router.admin_get("/metrics").await?.text();
    assert!(
        metrics.contains(
            "src_requests_total{route=\"default\",model=\"small\",status=\"503\",path=\"upstream\",door=\"extproc\"} 1"
        ),
        "{metrics}"
    );
    Ok(())
}

#[tokio::test]
async fn a_stream_dropped_after_the_decision_is_the_client_going_away() -> TestResult {
    let (router, addr) = router(POLICY).await?;
    let mut stream = Stream::open(addr).await?;
    stream.ask(headers(&asked("left-1"), false)).await?;
    let sent = stream.ask(body(&user("hello"))).await?;
    assert_eq!(sent.set_headers()?["x-selected-model"], "Qwen/Qwen3-0.6B");
    // Envoy resets the stream when its client goes away before the answer's headers.
    drop(stream);
    let line = router.log_line("left-1").await?;
    assert_eq!(line["status"], 499, "{line}");
    assert_eq!(line["path"], "error");
    assert!(
        line["error"]
            .as_str()
            .is_some_and(|e| e.contains("client went away")),
        "{line}"
    );
    Ok(())
}

/// A TCP server that accepts connections and never answers: a Redis call to it lasts its
/// whole timeout.
async fn silent() -> TestResult<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    Ok(addr)
}

#[tokio::test]
async fn a_stream_dropped_while_the_router_decides_is_the_gateway_giving_up() -> TestResult {
    // The session store never answers, so the decision lasts the store's timeout: longer than
    // the gateway waits here.
    let redis = silent().await?;
    let policy = format!("{POLICY}\nsession {{ store = redis(\"redis://{redis}/\") }}\n");
    let router = Router::start_full(
        &policy,
        |cfg| cfg.extproc = Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        |parts| {
            let sessions = SessionLayer::new(
                Arc::new(src_runtime::store::SystemClock),
                SessionOptions {
                    redis_timeout: Duration::from_secs(5),
                    ..SessionOptions::default()
                },
            )
            .with_links(Arc::clone(&parts.links));
            parts.sessions = Arc::new(sessions);
        },
    )
    .await?;
    let addr = router.server.extproc_addr.ok_or("no external processor")?;
    let mut stream = Stream::open(addr).await?;
    let mut asked = asked("gave-up-1");
    asked.push(("x-session-id", "s-1"));
    stream.ask(headers(&asked, false)).await?;
    stream
        .tell(
            envoy_types::pb::envoy::service::ext_proc::v3::ProcessingRequest {
                request: Some(body(&user("hello"))),
                ..Default::default()
            },
        )
        .await?;
    // Envoy's `message_timeout` passes: it stops waiting and resets the stream.
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(stream);
    let line = router.log_line("gave-up-1").await?;
    assert_eq!(line["status"], 504, "{line}");
    assert_eq!(line["path"], "error");
    assert!(
        line["error"]
            .as_str()
            .is_some_and(|e| e.contains("stopped waiting for the router")),
        "{line}"
    );
    let metrics = router.admin_get("/metrics").await?.text();
    assert!(
        metrics.contains("status=\"504\",path=\"error\",door=\"extproc\"} 1"),
        "{metrics}"
    );
    Ok(())
}
