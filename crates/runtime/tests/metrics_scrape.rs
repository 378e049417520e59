//! `/metrics` as real Prometheus tools read it: `promtool check metrics` lints the 0.0.4 text
//! body, and a real Prometheus scrapes `src serve` (asking for OpenMetrics first, as it does by
//! default, and through a relay that asks for the 0.0.4 text format only), then its HTTP API
//! must report `src_requests` as a counter with its help text under both formats.
//!
//! Both binaries come from Debian's `prometheus` package (`scripts/setup.sh` installs it); a
//! missing one fails the test with a message saying so.

use std::convert::Infallible;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Method, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use src_testkit::{user, Http, Router, TestResult, POLICY};
use tokio::net::TcpListener;

const OPENMETRICS_ACCEPT: &str =
    "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
const TEXT_ACCEPT: &str = "text/plain;version=0.0.4";
/// The help text `src_requests` is registered with.
const REQUESTS_HELP: &str = "Requests answered, by route, model, status, path and front door.";

/// A router that has answered, refused and failed a few requests, so every kind of family
/// (counters, histograms, the gauge) has samples.
async fn busy_router() -> TestResult<Router> {
    let router = Router::start(POLICY).await?;
    assert_eq!(router.chat(&user("hello"), &[]).await?.status, 200);
    let refused = router.chat(&user("password = abcdefgh12"), &[]).await?;
    assert_eq!(refused.status, 422);
    Ok(router)
}

async fn scrape(router: &Router, accept: &str) -> TestResult<(String, String)> {
    let answer = router
        .client
        .send(
            Method::GET,
            &router.admin_url("/metrics"),
            String::new(),
            &[("accept", accept)],
        )
        .await?;
    assert_eq!(answer.status, 200);
    let content_type = answer.header("content-type").unwrap_or("").to_owned();
    Ok((content_type, answer.text()))
}

fn missing(binary: &str, err: &std::io::Error) -> String {
    format!(
        "cannot run `{binary}` ({err}): install Debian's `prometheus` package \
         (scripts/setup.sh does) to run the metrics format tests"
    )
}

/// `promtool check metrics` on `body`: its exit status and what it printed.
fn promtool(body: &str) -> TestResult<(bool, String)> {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| missing("promtool", &e))?;
    child
        .stdin
        .take()
        .ok_or("promtool has no stdin")?
        .write_all(body.as_bytes())?;
    let output = child.wait_with_output()?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok((output.status.success(), said))
}

#[tokio::test]
async fn each_format_has_its_content_type_and_the_text_body_passes_promtool() -> TestResult {
    let router = busy_router().await?;

    let (content_type, openmetrics) = scrape(&router, OPENMETRICS_ACCEPT).await?;
    assert_eq!(
        content_type,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert!(openmetrics.ends_with("# EOF\n"), "{openmetrics}");
    assert!(openmetrics.contains("# TYPE src_requests counter\n"));

    for accept in [TEXT_ACCEPT, "*/*"] {
        let (content_type, text) = scrape(&router, accept).await?;
        assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
        assert!(!text.contains("# EOF"), "{text}");
        assert!(
            text.contains(&format!("# HELP src_requests_total {REQUESTS_HELP}\n")),
            "{text}"
        );
        assert!(
            text.contains("# TYPE src_requests_total counter\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE src_upstream_seconds histogram\n"));
        let (ok, said) = promtool(&text)?;
        assert!(ok && said.trim().is_empty(), "promtool: {said}\n{text}");
    }
    Ok(())
}

/// Kills the child process when the test ends, however it ends.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Relays `GET /metrics` to `target` asking for the 0.0.4 text format only, as a scraper that
/// does not speak OpenMetrics would.
async fn text_only_relay(target: String) -> TestResult<std::net::SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let client = Http::new();
        while let Ok((stream, _)) = listener.accept().await {
            let client = client.clone();
            let target = target.clone();
            let service = service_fn(move |_request| {
                let client = client.clone();
                let target = target.clone();
                async move {
                    let answer = client
                        .send(
                            Method::GET,
                            &target,
                            String::new(),
                            &[("accept", TEXT_ACCEPT)],
                        )
                        .await;
                    let mut response = Response::new(Full::new(Bytes::new()));
                    match answer {
                        Ok(answer) => {
                            if let Some(t) = answer.headers.get("content-type") {
                                response.headers_mut().insert("content-type", t.clone());
                            }
                            *response.body_mut() = Full::new(Bytes::from(answer.text()));
                        }
                        Err(_) => *response.status_mut() = hyper::StatusCode::BAD_GATEWAY,
                    }
                    Ok::<_, Infallible>(response)
                }
            });
            tokio::spawn(async move {
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(addr)
}

/// The metadata Prometheus keeps for `metric` from the targets of `job`.
async fn target_metadata(
    client: &Http,
    prometheus: &str,
    job: &str,
    metric: &str,
) -> TestResult<Vec<Value>> {
    let url = format!(
        "{prometheus}/api/v1/targets/metadata?metric={metric}&match_target=%7Bjob%3D%22{job}%22%7D"
    );
    let answer = client.send(Method::GET, &url, String::new(), &[]).await?;
    let json: Value = serde_json::from_slice(answer.text().as_bytes())?;
    Ok(json["data"].as_array().cloned().unwrap_or_default())
}

#[tokio::test]
async fn a_real_prometheus_reads_counters_with_their_help_in_both_formats() -> TestResult {
    let router = busy_router().await?;
    let relay = text_only_relay(router.admin_url("/metrics")).await?;
    let dir = tempfile::tempdir()?;
    let config = format!(
        "global: {{scrape_interval: 1s, scrape_timeout: 1s}}\n\
         scrape_configs:\n\
         - job_name: openmetrics\n  static_configs: [{{targets: ['{}']}}]\n\
         - job_name: text\n  static_configs: [{{targets: ['{relay}']}}]\n",
        router.server.admin_addr
    );
    std::fs::write(dir.path().join("prometheus.yml"), config)?;
    let port = src_testkit::free_port();
    let child = Command::new("prometheus")
        .arg(format!(
            "--config.file={}",
            dir.path().join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| missing("prometheus", &e))?;
    let _prometheus = Reaped(child);
    let base = format!("http://127.0.0.1:{port}");
    let client = Http::new();

    // Prometheus starts in a few seconds and scrapes each target once a second.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let (text, openmetrics) = loop {
        // 0.0.4 attaches metadata to the samples' name; OpenMetrics to the family's.
        let text = target_metadata(&client, &base, "text", "src_requests_total")
            .await
            .unwrap_or_default();
        let openmetrics = target_metadata(&client, &base, "openmetrics", "src_requests")
            .await
            .unwrap_or_default();
        if !text.is_empty() && !openmetrics.is_empty() {
            break (text, openmetrics);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "Prometheus reported no counter metadata within a minute \
                 (0.0.4: {text:?}, OpenMetrics: {openmetrics:?})"
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    for entry in text.iter().chain(&openmetrics) {
        assert_eq!(entry["type"], "counter", "{entry}");
        assert_eq!(entry["help"], REQUESTS_HELP, "{entry}");
    }

    let answer = client
        .send(
            Method::GET,
            &format!("{base}/api/v1/metadata?metric=src_requests_total"),
            String::new(),
            &[],
        )
        .await?;
    let metadata: Value = serde_json::from_slice(answer.text().as_bytes())?;
    let entry = &metadata["data"]["src_requests_total"][0];
    assert_eq!(entry["type"], "counter", "{metadata}");
    assert_eq!(entry["help"], REQUESTS_HELP, "{metadata}");

    // Both scrapes carried the samples too.
    let answer = client
        .send(
            Method::GET,
            &format!("{base}/api/v1/query?query=count%20by%20(job)%20(src_requests_total)"),
            String::new(),
            &[],
        )
        .await?;
    let query: Value = serde_json::from_slice(answer.text().as_bytes())?;
    let jobs: Vec<&str> = query["data"]["result"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["metric"]["job"].as_str())
        .collect();
    assert!(
        jobs.contains(&"text") && jobs.contains(&"openmetrics"),
        "{query}"
    );
    Ok(())
}
