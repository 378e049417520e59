//! Request spans exported over OTLP/HTTP (`--otlp`): an in-test collector decodes the protobuf
//! export requests, the built-in simulator records the `traceparent` the router sent upstream,
//! and both must name the same trace, with the upstream's parent being the router's upstream
//! span. A collector that is down or never answers must fail and slow down no request; what it
//! loses is counted in `src_trace_spans_dropped_total`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::json;
use src_runtime::otel::OtlpOptions;
use src_runtime::trace::parse_traceparent;
use src_testkit::upstream::{Reply, Seen, Upstream};
use src_testkit::{user, Router, TestResult, PATIENCE, POLICY};
use tokio::net::TcpListener;

/// Spans an in-test collector received.
struct Received(Upstream);

impl Received {
    fn spans(&self) -> Vec<Span> {
        self.0
            .seen()
            .into_iter()
            .filter_map(export)
            .flat_map(|e| e.resource_spans)
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans)
            .collect()
    }
}

/// The export request of a well-formed OTLP/HTTP protobuf `POST /v1/traces`.
fn export(seen: Seen) -> Option<ExportTraceServiceRequest> {
    let protobuf = seen
        .headers
        .get("content-type")
        .is_some_and(|v| v == "application/x-protobuf");
    if seen.path != "/v1/traces" || !protobuf {
        return None;
    }
    ExportTraceServiceRequest::decode(seen.bytes).ok()
}

/// An OTLP/HTTP collector on `127.0.0.1:0` that keeps every span it is sent (and answers
/// anything else with a 400).
async fn collector() -> TestResult<(String, Received)> {
    let upstream = Upstream::start(|seen| match export(seen.clone()) {
        Some(_) => Reply::empty(200),
        None => Reply::empty(400),
    })
    .await?;
    Ok((upstream.origin.clone(), Received(upstream)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attribute(span: &Span, key: &str) -> Option<any_value::Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone())
        .and_then(|v| v.value)
}

fn string_attribute(span: &Span, key: &str) -> Option<String> {
    match attribute(span, key) {
        Some(any_value::Value::StringValue(s)) => Some(s),
        _ => None,
    }
}

/// Waits until the collector holds spans of `trace_id` named `name`.
async fn spans_of(received: &Received, trace_id: &str, router: &Router) -> TestResult<Vec<Span>> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        router.server.flush_spans().await;
        let spans: Vec<Span> = received
            .spans()
            .into_iter()
            .filter(|s| hex(&s.trace_id) == trace_id)
            .collect();
        if spans.iter().any(|s| s.name == "src.request") {
            return Ok(spans);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "the collector got no request span of trace {trace_id}; it has {:?}",
                received.spans().iter().map(|s| &s.name).collect::<Vec<_>>()
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn options(url: &str) -> OtlpOptions {
    OtlpOptions {
        batch_delay: Duration::from_millis(100),
        ..OtlpOptions::new(url)
    }
}

const CLIENT_TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// The `traceparent` the router sent upstream with the first request a simulator received.
fn sent_traceparent(router: &Router) -> TestResult<String> {
    let upstream = router
        .sims()
        .iter()
        .flat_map(|s| s.received())
        .next()
        .ok_or("nothing reached the upstream")?;
    let sent = upstream
        .header("traceparent")
        .ok_or("no traceparent upstream")?;
    Ok(sent.to_owned())
}

#[tokio::test]
async fn one_request_s_spans_share_the_trace_the_upstream_saw() -> TestResult {
    let (url, received) = collector().await?;
    let router = Router::start_with(POLICY, |cfg| cfg.otlp = Some(options(&url))).await?;
    let mut body = user("segfault in my parser");
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let answer = router
        .chat(
            &body,
            &[
                ("x-request-id", "req-otel-1"),
                ("traceparent", CLIENT_TRACE),
            ],
        )
        .await?;
    assert_eq!(answer.status, 200, "{}", answer.text());

    let sent = sent_traceparent(&router)?;
    let sent = parse_traceparent(&sent).ok_or("invalid traceparent upstream")?;
    assert_eq!(sent.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");

    let spans = spans_of(&received, sent.trace_id, &router).await?;
    let named = |name: &str| spans.iter().find(|s| s.name == name);
    for name in ["src.request", "src.parse", "src.decide", "src.upstream"] {
        assert!(named(name).is_some(), "no `{name}` span in {spans:?}");
    }
    for span in &spans {
        assert_eq!(
            string_attribute(span, "src.request_id").as_deref(),
            Some("req-otel-1"),
            "{span:?}"
        );
    }
    let root = named("src.request").ok_or("no root")?;
    assert_eq!(
        hex(&root.parent_span_id),
        "00f067aa0ba902b7",
        "the client's span"
    );
    let upstream_span = named("src.upstream").ok_or("no upstream span")?;
    assert_eq!(
        hex(&upstream_span.span_id),
        sent.parent_id,
        "the upstream's parent"
    );
    assert_eq!(upstream_span.parent_span_id, root.span_id);
    assert_eq!(
        string_attribute(upstream_span, "src.model").as_deref(),
        Some("strong")
    );
    assert!(
        matches!(
            attribute(upstream_span, "src.upstream.ttft_ms"),
            Some(any_value::Value::DoubleValue(ms)) if ms >= 0.0
        ),
        "{upstream_span:?}"
    );
    assert_eq!(
        string_attribute(root, "src.route").as_deref(),
        Some("coding")
    );

    let line = router.log_line("req-otel-1").await?;
    assert_eq!(line["trace_id"], sent.trace_id);
    Ok(())
}

#[tokio::test]
async fn a_request_without_trace_context_starts_the_trace_its_log_line_names() -> TestResult {
    let (url, received) = collector().await?;
    let router = Router::start_with(POLICY, |cfg| cfg.otlp = Some(options(&url))).await?;
    let answer = router
        .chat(&user("hello"), &[("x-request-id", "req-otel-2")])
        .await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let line = router.log_line("req-otel-2").await?;
    let trace_id = line["trace_id"].as_str().ok_or("no trace id logged")?;
    let sent = sent_traceparent(&router)?;
    assert_eq!(parse_traceparent(&sent).map(|t| t.trace_id), Some(trace_id));
    let spans = spans_of(&received, trace_id, &router).await?;
    let root = spans
        .iter()
        .find(|s| s.name == "src.request")
        .ok_or("no root")?;
    assert!(root.parent_span_id.is_empty(), "{root:?}");
    Ok(())
}

#[tokio::test]
async fn without_otlp_the_log_line_still_names_the_upstream_s_trace() -> TestResult {
    let router = Router::start(POLICY).await?;
    let answer = router
        .chat(
            &user("hello"),
            &[("traceparent", CLIENT_TRACE), ("x-request-id", "r3")],
        )
        .await?;
    assert_eq!(answer.status, 200);
    let line = router.log_line("r3").await?;
    assert_eq!(line["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    Ok(())
}

/// The value of `src_trace_spans_dropped_total{reason="REASON"}`, 0 when absent.
async fn dropped(router: &Router, reason: &str) -> TestResult<f64> {
    let text = router.admin_get("/metrics").await?.text();
    let prefix = format!("src_trace_spans_dropped_total{{reason=\"{reason}\"}} ");
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0))
}

/// Waits until `reason`'s drop count is positive.
async fn drops_counted(router: &Router, reason: &str) -> TestResult<f64> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let n = dropped(router, reason).await?;
        if n > 0.0 {
            return Ok(n);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("no `{reason}` span drop counted").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_collector_that_is_down_fails_no_request_and_its_losses_are_counted() -> TestResult {
    // A port nobody listens on.
    let port = src_testkit::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let router = Router::start_with(POLICY, |cfg| {
        cfg.otlp = Some(OtlpOptions {
            timeout: Duration::from_millis(500),
            ..options(&url)
        })
    })
    .await?;
    for _ in 0..3 {
        assert_eq!(router.chat(&user("hello"), &[]).await?.status, 200);
    }
    router.server.flush_spans().await;
    assert!(drops_counted(&router, "export_failed").await? >= 1.0);
    Ok(())
}

#[tokio::test]
async fn a_collector_that_never_answers_makes_no_request_wait() -> TestResult {
    // Accepts connections and reads, but never answers.
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let held = Arc::new(Mutex::new(Vec::new()));
    let holder = Arc::clone(&held);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            holder
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(stream);
        }
    });
    let router = Router::start_with(POLICY, |cfg| {
        cfg.otlp = Some(OtlpOptions {
            queue: 4,
            batch_delay: Duration::from_millis(10),
            timeout: Duration::from_secs(60),
            ..OtlpOptions::new(&url)
        })
    })
    .await?;
    // Each request ends several spans: the queue of 4 is full after the first, and the one
    // export in flight never returns while the requests run.
    for i in 0..10 {
        let answer = tokio::time::timeout(PATIENCE, router.chat(&user("hello"), &[])).await;
        let answer = answer.map_err(|_| format!("request {i} waited on the collector"))??;
        assert_eq!(answer.status, 200);
    }
    assert!(drops_counted(&router, "queue_full").await? >= 1.0);
    // Shutting down waits for the stuck export only within its bound.
    let Router { server, .. } = router;
    tokio::time::timeout(PATIENCE, server.shutdown())
        .await
        .map_err(|_| "shutdown waited on the collector")??;
    Ok(())
}

#[tokio::test]
async fn a_url_that_is_not_a_collector_url_stops_the_server_from_starting() -> TestResult {
    let started = Router::start_with(POLICY, |cfg| cfg.otlp = Some(OtlpOptions::new("nope"))).await;
    let error = started.err().ok_or("the server started")?;
    assert!(
        error.to_string().contains("cannot export traces"),
        "{error}"
    );
    Ok(())
}
