//! No client secret leaves the router except towards the backend it is meant for: a real
//! `src serve` with `--record`, an OTLP collector and its request log is sent known secrets in
//! `authorization`, `x-api-key`, `api-key` and `proxy-authorization` on routed, refused,
//! erroneous and cached-path requests, and every output is searched for them byte for byte: the
//! request log lines, every file of the record directory, every OTLP export body and the
//! metrics page. A second server whose policy reads credentials (a tenant from the API key, text
//! signals over `x-api-key` and `authorization`, outcome reports with the admin token) is
//! searched the same way through every console view: the live stream, sessions, counts, the
//! policy picture, health, explain, the policy report, the detailed readiness and the metrics.

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

const ADMIN_SECRET: &str = "adm-5e1f0b7c";

/// Request headers, as the test client takes them.
type Headers<'a> = &'a [(&'a str, &'a str)];
const TENANT_SECRET: &str = "tk-0a9b8c7d";

/// A policy that reads credentials every way it can: a tenant from the credential, a text signal
/// over `x-api-key` and `authorization` that a route compares, and outcome reports that carry
/// the admin token.
const READS_CREDENTIALS: &str = r#"
backend sim { url = "http://127.0.0.1:9/v1"  simulated = true }
model small  { backend = sim  serves = "Qwen/Qwen3-0.6B" }
model strong { backend = sim  serves = "Qwen/Qwen3-8B" }
signal presented = header("x-api-key")
signal auth      = header("authorization")
route vip priority 20 { when presented == "vip-key" or auth == "Bearer vip"  to strong }
route coding priority 10 { when contains(prompt, ["segfault"])  to strong }
route default { to small }
session { ttl = 10m  tenant = api_key  outcomes = admin }
"#;

/// Reads the live stream until `want` lines have arrived, or patience runs out.
async fn live_lines(body: &mut hyper::body::Incoming, want: usize) -> TestResult<Vec<u8>> {
    use http_body_util::BodyExt;
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while seen.windows(6).filter(|w| w == b"data: ").count() < want {
        let frame = tokio::time::timeout_at(deadline, body.frame())
            .await
            .map_err(|_| format!("{} live lines", String::from_utf8_lossy(&seen)))?;
        match frame {
            Some(frame) => {
                if let Ok(data) = frame?.into_data() {
                    seen.extend_from_slice(&data);
                }
            }
            None => break,
        }
    }
    Ok(seen)
}

#[tokio::test]
async fn the_console_records_and_logs_never_show_a_credential_the_policy_reads() -> TestResult {
    use src_runtime::session::{SessionLayer, SessionOptions, SystemClock};
    use std::sync::Arc;
    let record = tempfile::tempdir()?;
    let record_dir = record.path().to_path_buf();
    let router = Router::start_full(
        READS_CREDENTIALS,
        |cfg| {
            cfg.record = Some(record_dir);
            cfg.admin_token = src_runtime::AdminToken::new(ADMIN_SECRET);
        },
        |parts| {
            parts.sessions = Arc::new(SessionLayer::new(
                Arc::new(SystemClock),
                SessionOptions::default(),
            ));
        },
    )
    .await?;
    let admin_bearer = format!("Bearer {ADMIN_SECRET}");
    let admin = [("authorization", admin_bearer.as_str())];
    let live = router
        .client
        .open(
            hyper::Method::GET,
            &router.admin_url("/v1/console/live"),
            "",
            &admin,
        )
        .await?;
    assert_eq!(live.status(), 200);
    let mut live = live.into_body();

    let bearer = format!("Bearer {TENANT_SECRET}");
    let calls: [(Headers, &str, &str); 4] = [
        (&[("authorization", &bearer)], "task-1", "hello"),
        // An agent that reports outcomes may send its token with every call.
        (
            &[
                ("authorization", &bearer),
                ("x-sr-outcome-token", ADMIN_SECRET),
            ],
            "task-1",
            "a segfault",
        ),
        (&[("x-api-key", X_API_KEY_SECRET)], "task-2", "hello"),
        (&[("api-key", API_KEY_SECRET)], "task-3", "a segfault"),
    ];
    for (i, (credentials, session, text)) in calls.iter().enumerate() {
        let id = format!("credential-case-{i}");
        let mut headers = credentials.to_vec();
        headers.push(("x-session-id", session));
        headers.push(("x-request-id", &id));
        let answer = router.chat(&user(text), &headers).await?;
        assert_eq!(answer.status, 200, "{}", answer.text());
        router.log_line(&id).await?;
    }
    // An outcome report, with the admin token in its header of its own.
    let report = json!({"session": "task-1", "verdict": "fail", "idempotency_key": "r1"});
    let reported = router
        .post(
            "/v1/router/outcomes",
            &report,
            &[
                ("authorization", &bearer),
                ("x-session-id", "task-1"),
                ("x-sr-outcome-token", ADMIN_SECRET),
            ],
        )
        .await?;
    assert_eq!(reported.status, 200, "{}", reported.text());

    let streamed = live_lines(&mut live, calls.len()).await?;
    let mut views = vec![("live stream".to_string(), streamed)];
    for path in [
        "/v1/console/sessions",
        "/v1/console/counts",
        "/v1/console/policy",
        "/v1/console/health",
        "/v1/router/policy",
        "/readyz",
        "/metrics",
    ] {
        let answer = router
            .client
            .send(
                hyper::Method::GET,
                &router.admin_url(path),
                String::new(),
                &admin,
            )
            .await?;
        assert_eq!(answer.status, 200, "{path}: {}", answer.text());
        views.push((path.to_string(), answer.body.to_vec()));
    }
    let explained = router
        .admin_post(
            "/v1/console/explain",
            &json!({"request": {"model": "auto", "messages": [{"role": "user", "content": "a segfault"}]}}),
            &[admin[0], ("content-type", "application/json")],
        )
        .await?;
    assert_eq!(explained.status, 200, "{}", explained.text());
    views.push(("explain".to_string(), explained.body.to_vec()));
    let log: Vec<u8> =
        serde_json::to_vec(&*router.log.lock().unwrap_or_else(PoisonError::into_inner))?;
    views.push(("request log".to_string(), log));
    router.server.shutdown().await?;
    let mut recorded = Vec::new();
    for entry in std::fs::read_dir(record.path())? {
        recorded.extend(std::fs::read(entry?.path())?);
    }
    views.push(("record directory".to_string(), recorded));

    // Each view holds what it is for (so the search below searched something)...
    let sessions = &views[1].1;
    assert!(contains(sessions, "task-1"), "no sessions listed");
    assert!(contains(&views[0].1, "\"route\""), "no live lines");
    let recorded = &views.last().ok_or("views")?.1;
    // The text signals over credentials were read, and are recorded redacted.
    assert!(
        contains(recorded, "presented"),
        "the text signal is not recorded"
    );
    assert!(contains(recorded, "<redacted>"), "no redacted signal");
    // ...and no credential, the admin token included.
    for (what, bytes) in &views {
        for secret in [
            TENANT_SECRET,
            X_API_KEY_SECRET,
            API_KEY_SECRET,
            ADMIN_SECRET,
        ] {
            assert!(!contains(bytes, secret), "`{secret}` is in the {what}");
        }
    }
    Ok(())
}
