//! No client secret leaves the router except towards the backend it is meant for: a real
//! `src serve` with `--record`, an OTLP collector and its request log is sent known secrets in
//! `authorization`, `x-api-key`, `api-key` and `proxy-authorization` on routed, refused,
//! erroneous and cached-path requests, and every output is searched for them byte for byte: the
//! request log lines, every file of the record directory, every OTLP export body and the
//! metrics page.

use std::sync::PoisonError;
use std::time::Duration;

use bytes::Bytes;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use serde_json::json;
use src_runtime::otel::OtlpOptions;
use src_testkit::upstream::{Reply, Upstream};
use src_testkit::{user, Router, TestResult, PATIENCE, POLICY};

const BEARER_SECRET: &str = "sk-live-4c1d2e9f8a7b";
const X_API_KEY_SECRET: &str = "xak-93be51d0";
const API_KEY_SECRET: &str = "azk-77f0c2aa";
const PROXY_SECRET: &str = "cHJveHktc2VjcmV0LTkx";

/// Every export body the collector received, as sent.
struct Exports(Upstream);

impl Exports {
    fn all(&self) -> Vec<Bytes> {
        self.0.seen().into_iter().map(|s| s.bytes).collect()
    }

    fn span_count(&self) -> usize {
        self.all()
            .iter()
            .filter_map(|b| ExportTraceServiceRequest::decode(b.clone()).ok())
            .flat_map(|e| e.resource_spans)
            .flat_map(|r| r.scope_spans)
            .map(|s| s.spans.len())
            .sum()
    }
}

/// An OTLP/HTTP collector that keeps every body it is sent and answers `200`.
async fn collector() -> TestResult<(String, Exports)> {
    let upstream = Upstream::start(|_| Reply::empty(200)).await?;
    Ok((upstream.origin.clone(), Exports(upstream)))
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn no_secret_is_logged_recorded_exported_or_counted() -> TestResult {
    let (url, exports) = collector().await?;
    let record = tempfile::tempdir()?;
    let record_dir = record.path().to_path_buf();
    let router = Router::start_with(POLICY, |cfg| {
        cfg.otlp = Some(OtlpOptions {
            batch_delay: Duration::from_millis(100),
            ..OtlpOptions::new(&url)
        });
        cfg.record = Some(record_dir);
    })
    .await?;
    let bearer = format!("Bearer {BEARER_SECRET}");
    let proxy = format!("Basic {PROXY_SECRET}");
    let secrets: [(&str, &str); 4] = [
        ("authorization", &bearer),
        ("x-api-key", X_API_KEY_SECRET),
        ("api-key", API_KEY_SECRET),
        ("proxy-authorization", &proxy),
    ];
    let cases = [
        (user("hello"), 200),
        (user("segfault in the parser"), 200),
        (user("my password = hunter2"), 422),
        (
            json!({"model": "nope", "messages": [{"role": "user", "content": "hi"}]}),
            404,
        ),
        (json!({"model": "auto", "messages": []}), 400),
    ];
    let mut ids = Vec::new();
    for (i, (body, status)) in cases.iter().enumerate() {
        let id = format!("secret-case-{i}");
        let mut headers = secrets.to_vec();
        headers.push(("x-request-id", &id));
        let answer = router.chat(body, &headers).await?;
        assert_eq!(answer.status, *status, "{body}: {}", answer.text());
        ids.push(id);
    }
    // Every request reached every output before it is searched.
    for id in &ids {
        router.log_line(id).await?;
    }
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while exports.span_count() < cases.len() {
        router.server.flush_spans().await;
        if tokio::time::Instant::now() > deadline {
            return Err(format!("{} spans exported", exports.span_count()).into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let metrics = router.admin_get("/metrics").await?.body;
    let log: Vec<u8> =
        serde_json::to_vec(&*router.log.lock().unwrap_or_else(PoisonError::into_inner))?;
    router.server.shutdown().await?;
    let mut recorded = Vec::new();
    for entry in std::fs::read_dir(record.path())? {
        recorded.extend(std::fs::read(entry?.path())?);
    }

    // The outputs hold the requests (so the search below searched something)...
    assert!(
        contains(&recorded, "segfault in the parser"),
        "nothing recorded"
    );
    assert!(contains(&log, "secret-case-4"), "nothing logged");
    assert!(contains(&metrics, "src_requests_total"), "no metrics");
    // ...and none of the secrets.
    let outputs: Vec<(&str, Vec<u8>)> = vec![
        ("request log", log),
        ("record directory", recorded),
        ("metrics", metrics.to_vec()),
        ("OTLP exports", exports.all().concat()),
    ];
    for (what, bytes) in &outputs {
        for secret in [
            BEARER_SECRET,
            X_API_KEY_SECRET,
            API_KEY_SECRET,
            PROXY_SECRET,
        ] {
            assert!(!contains(bytes, secret), "`{secret}` is in the {what}");
        }
    }
    Ok(())
}
