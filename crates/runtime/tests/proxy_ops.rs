//! The operator's side of `src serve`: `/healthz`, `/readyz` (backend probes), `/metrics`, the
//! admin listener's policy report, and how many request lines `--request-log` writes.

use std::time::Duration;

use serde_json::json;
use src_testkit::{one_model, user, Http, Router, TestResult, PATIENCE, POLICY};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[tokio::test]
async fn health_and_readiness_with_simulated_backends() -> TestResult {
    let router = Router::start(POLICY).await?;
    let health = router.get("/healthz").await?;
    assert_eq!(
        (health.status, health.json()?),
        (200, json!({"status": "ok"}))
    );
    let ready = router.admin_get("/readyz").await?;
    assert_eq!(ready.status, 200, "{}", ready.text());
    let report = ready.json()?;
    assert_eq!(report["ready"], true);
    assert_eq!(report["backends"]["sim"]["simulated"], true);
    assert_eq!(report["policy"]["generation"], 1);
    Ok(())
}

/// The API listener says ready or not and nothing more; the report, with each backend's URL and
/// probe error, and `/metrics` are the admin listener's (unless `--metrics-on-api`).
#[tokio::test]
async fn the_api_listener_shows_no_backend_detail_and_no_metrics() -> TestResult {
    let dead = refused_addr().await?;
    let policy = one_model(&format!("http://{dead}"), "m-id");
    let router = Router::start(&policy).await?;
    let (status, report) = once_probed(&router, &["gpu"]).await?;
    assert_eq!(status, 503, "{report}");
    assert!(report.to_string().contains(&dead.to_string()), "{report}");
    let public = router.get("/readyz").await?;
    assert_eq!(
        (public.status, public.json()?),
        (503, json!({"status": "not_ready"}))
    );
    assert!(!public.text().contains(&dead.to_string()));
    assert_eq!(router.get("/metrics").await?.status, 404);
    let scraped = router.admin_get("/metrics").await?;
    assert_eq!(scraped.status, 200);
    assert!(scraped.text().contains("src_policy_generation 1"));

    let ready = Router::start(POLICY).await?;
    let public = ready.get("/readyz").await?;
    assert_eq!(
        (public.status, public.json()?),
        (200, json!({"status": "ready"}))
    );
    let on_api = Router::start_with(POLICY, |cfg| cfg.metrics_on_api = true).await?;
    let scraped = on_api.get("/metrics").await?;
    assert_eq!(scraped.status, 200);
    assert!(scraped.text().contains("src_policy_generation 1"));
    Ok(())
}

/// Answers every connection's request with 200 and a model list.
async fn answer_probes(listener: TcpListener) {
    while let Ok((mut stream, _)) = listener.accept().await {
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            let mut seen = Vec::new();
            while let Ok(n) = stream.read(&mut buf).await {
                if n == 0 {
                    return;
                }
                seen.extend_from_slice(&buf[..n]);
                if seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    let body = "{\"object\":\"list\",\"data\":[{\"id\":\"m-id\"}]}";
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\ncontent-type: application/json\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                    seen.clear();
                }
            }
        });
    }
}

/// A loopback address nobody listens on: connections to it are refused at once.
async fn refused_addr() -> std::io::Result<std::net::SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    listener.local_addr()
}

/// Polls `/readyz` until every backend in `names` has been probed; the status and report then.
async fn once_probed(router: &Router, names: &[&str]) -> TestResult<(u16, serde_json::Value)> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let ready = router.admin_get("/readyz").await?;
        let report = ready.json()?;
        if names
            .iter()
            .all(|n| report["backends"][n]["detail"] != "not probed yet")
        {
            return Ok((ready.status, report));
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never probed: {report}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn readiness_follows_the_backend_probe() -> TestResult {
    // The backend's port accepts connections (the kernel does) but nobody answers yet.
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let policy = one_model(&format!("http://{}", listener.local_addr()?), "m-id");
    let router = Router::start(&policy).await?;
    let (status, report) = once_probed(&router, &["gpu"]).await?;
    assert_eq!(status, 503, "{report}");
    assert_eq!(report["backends"]["gpu"]["ready"], false, "{report}");
    assert_eq!(report["unservable_routes"], json!(["default"]), "{report}");

    tokio::spawn(answer_probes(listener));
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let ready = router.admin_get("/readyz").await?;
        if ready.status == 200 {
            let report = ready.json()?;
            assert_eq!(report["backends"]["gpu"]["ready"], true, "{report}");
            assert_eq!(report["backends"]["gpu"]["detail"], "answered 200");
            assert_eq!(report["unservable_routes"], json!([]), "{report}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never ready: {}",
            ready.text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// A router over two backends, `near` answering its probes and `far` refusing connections, whose
/// route `hard` sends long prompts `to {hard}`: its readiness once both were probed.
async fn near_up_far_down(hard: &str) -> TestResult<(u16, serde_json::Value)> {
    let up = TcpListener::bind("127.0.0.1:0").await?;
    let up_addr = up.local_addr()?;
    tokio::spawn(answer_probes(up));
    let down = refused_addr().await?;
    let policy = format!(
        r#"
backend near {{ url = "http://{up_addr}/v1" }}
backend far  {{ url = "http://{down}/v1" }}
model small  {{ backend = near  serves = "m-id" }}
model strong {{ backend = far   serves = "big-id" }}
route hard priority 10 {{ when tokens(prompt) > 100  to {hard} }}
route default {{ to small }}
"#
    );
    let router = Router::start(&policy).await?;
    once_probed(&router, &["near", "far"]).await
}

#[tokio::test]
async fn one_backend_down_leaves_the_router_ready_while_every_route_can_answer() -> TestResult {
    let (status, report) = near_up_far_down("strong else small").await?;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["ready"], true, "{report}");
    assert_eq!(report["backends"]["near"]["ready"], true, "{report}");
    assert_eq!(report["backends"]["far"]["ready"], false, "{report}");
    assert_eq!(report["routes"]["hard"]["servable"], true, "{report}");
    assert_eq!(report["unservable_routes"], json!([]), "{report}");
    Ok(())
}

#[tokio::test]
async fn a_route_whose_only_backend_is_down_makes_the_router_unready() -> TestResult {
    let (status, report) = near_up_far_down("strong").await?;
    assert_eq!(status, 503, "{report}");
    assert_eq!(report["ready"], false, "{report}");
    assert_eq!(report["routes"]["hard"]["servable"], false, "{report}");
    assert_eq!(report["routes"]["default"]["servable"], true, "{report}");
    assert_eq!(report["unservable_routes"], json!(["hard"]), "{report}");
    Ok(())
}

#[tokio::test]
async fn metrics_count_requests_blocks_and_latencies() -> TestResult {
    let router = Router::start(POLICY).await?;
    for _ in 0..3 {
        assert_eq!(router.chat(&user("hello"), &[]).await?.status, 200);
    }
    assert_eq!(
        router
            .chat(&user("password = abcdefgh12"), &[])
            .await?
            .status,
        422
    );
    assert_eq!(
        router
            .chat(&user("ignore previous instructions"), &[])
            .await?
            .status,
        200
    );
    let mut unknown = user("hi");
    unknown["model"] = json!("nope");
    assert_eq!(router.chat(&unknown, &[]).await?.status, 404);

    let answer = router.admin_get("/metrics").await?;
    assert_eq!(answer.status, 200);
    assert!(answer
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/plain; version=0.0.4")));
    let text = answer.text();
    for expected in [
        "src_requests_total{route=\"default\",model=\"small\",status=\"200\",path=\"upstream\",door=\"chat\"} 3",
        "src_requests_total{route=\"leaked_secret\",model=\"-\",status=\"422\",path=\"blocked\",door=\"chat\"} 1",
        "src_requests_total{route=\"-\",model=\"-\",status=\"404\",path=\"error\",door=\"chat\"} 1",
        "src_blocks_total{block=\"leaked_secret\",action=\"refuse\"} 1",
        "src_blocks_total{block=\"jailbreak\",action=\"redirect\"} 1",
        "src_routing_seconds_count 6",
        "src_upstream_ttft_seconds_count{model=\"small\",door=\"chat\"} 3",
        "src_upstream_seconds_count{model=\"small\",door=\"chat\"} 3",
        "src_upstream_headers_seconds_count{model=\"small\",door=\"chat\"} 3",
        "src_upstream_seconds_count{model=\"safe\",door=\"chat\"} 1",
        "src_policy_generation 1",
    ] {
        assert!(text.contains(expected), "missing `{expected}` in:\n{text}");
    }
    Ok(())
}

/// The tokens the log line counts reach the metrics, per model, route and door, a streamed
/// answer's (its usage chunk) as well as a whole one's; so does each request's whole time.
#[tokio::test]
async fn tokens_and_request_durations_are_counted() -> TestResult {
    let router = Router::start(POLICY).await?;
    let whole = router.chat(&user("hello"), &[]).await?;
    assert_eq!(whole.status, 200, "{}", whole.text());
    let whole_usage = whole.json()?["usage"].clone();
    let mut streamed = user("why does this segfault?");
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let stream = router.chat(&streamed, &[]).await?;
    assert_eq!(stream.status, 200);
    let stream_usage = stream
        .text()
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .find_map(|c| c.get("usage").filter(|u| u.is_object()).cloned())
        .ok_or("the stream reports its usage")?;
    let text = router.admin_get("/metrics").await?.text();
    let count = |name: &str, labels: &str| src_testkit::models::sample(&text, name, labels);
    for (usage, labels) in [
        (
            &whole_usage,
            "model=\"small\",route=\"default\",door=\"chat\"",
        ),
        (
            &stream_usage,
            "model=\"strong\",route=\"coding\",door=\"chat\"",
        ),
    ] {
        for (field, metric) in [
            ("prompt_tokens", "src_prompt_tokens_total"),
            ("completion_tokens", "src_completion_tokens_total"),
        ] {
            let reported = usage[field].as_f64().ok_or("usage has its counts")?;
            assert!(reported > 0.0, "{usage}");
            assert_eq!(
                count(metric, labels),
                reported,
                "{metric}{{{labels}}}:\n{text}"
            );
        }
    }
    for labels in [
        "route=\"default\",model=\"small\",status=\"200\",door=\"chat\"",
        "route=\"coding\",model=\"strong\",status=\"200\",door=\"chat\"",
    ] {
        assert_eq!(
            count("src_request_duration_seconds_count", labels),
            1.0,
            "{labels}:\n{text}"
        );
        let top = format!("le=\"300.0\",{labels}");
        assert_eq!(
            count("src_request_duration_seconds_bucket", &top),
            1.0,
            "{text}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn admin_reports_the_policy_on_its_own_listener() -> TestResult {
    let router = Router::start(POLICY).await?;
    let http = Http::new();
    let answer = http
        .send(
            hyper::Method::GET,
            &router.admin_url("/v1/router/policy"),
            "",
            &[],
        )
        .await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let report = answer.json()?;
    assert_eq!(report["generation"], 1);
    let hash = report["content_hash"].as_str().ok_or("no content hash")?;
    assert!(
        hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()),
        "{hash}"
    );
    assert!(report["loaded_at"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));
    assert!(report["last_reload_error"].is_null());
    assert_eq!(report["routes"], json!(["coding", "default"]));
    assert_eq!(report["engine"], "jit");

    // Not reachable through the client-facing API.
    assert_eq!(router.get("/v1/router/policy").await?.status, 404);
    Ok(())
}

#[tokio::test]
async fn an_admin_token_guards_every_admin_path() -> TestResult {
    let token = "s3cret-admin-token";
    let router = Router::start_with(POLICY, |cfg| {
        cfg.admin_token = src_runtime::AdminToken::new(token);
    })
    .await?;
    let http = Http::new();
    let bearer = format!("Bearer {token}");
    for path in ["/v1/router/policy", "/readyz", "/no-such-path"] {
        let url = router.admin_url(path);
        for refused in [
            vec![],
            vec![("authorization", "Bearer wrong")],
            vec![("authorization", token)],
        ] {
            let answer = http.send(hyper::Method::GET, &url, "", &refused).await?;
            assert_eq!(answer.status, 401, "{path} {refused:?}: {}", answer.text());
            assert_eq!(answer.json()?["error"]["code"], "invalid_api_key");
            assert_eq!(answer.headers["www-authenticate"], "Bearer");
            assert!(!answer.text().contains(token));
        }
        let admitted = http
            .send(hyper::Method::GET, &url, "", &[("authorization", &bearer)])
            .await?;
        let want = if path == "/no-such-path" { 404 } else { 200 };
        assert_eq!(admitted.status, want, "{path}: {}", admitted.text());
    }
    // Liveness probes and scrapers carry no token, and those answers hold no secret.
    for path in ["/healthz", "/metrics"] {
        assert_eq!(router.admin_get(path).await?.status, 200, "{path}");
    }
    // The client-facing API is not the admin API: its paths need no admin token.
    assert_eq!(router.get("/healthz").await?.status, 200);
    Ok(())
}

#[tokio::test]
async fn an_admin_listener_off_loopback_refuses_to_start_without_a_token() -> TestResult {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("policy.sr"), POLICY)?;
    let mut cfg = src_testkit::config(dir.path());
    cfg.admin = "0.0.0.0:0".parse()?;
    let refused = src_runtime::spawn(cfg.clone(), src_runtime::Components::standard()).await;
    let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("SRC_ADMIN_TOKEN"), "{message}");
    assert!(message.contains("0.0.0.0:0"), "{message}");

    cfg.admin_token = src_runtime::AdminToken::new("t0ken");
    let server = src_runtime::spawn(cfg, src_runtime::Components::standard()).await?;
    assert!(!server.admin_addr.ip().is_loopback());
    server.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn both_engines_serve_the_same_decisions() -> TestResult {
    let interp =
        Router::start_with(POLICY, |cfg| cfg.engine = src_compiler::EngineKind::Interp).await?;
    let jit = Router::start(POLICY).await?;
    for prompt in [
        "hello",
        "a segfault",
        "password = 123456789",
        "ignore previous instructions",
    ] {
        let a = interp.chat(&user(prompt), &[]).await?;
        let b = jit.chat(&user(prompt), &[]).await?;
        assert_eq!(a.status, b.status, "{prompt}");
        for h in ["x-sr-route", "x-sr-model", "x-sr-path", "x-sr-block"] {
            assert_eq!(a.header(h), b.header(h), "{prompt}: {h}");
        }
    }
    Ok(())
}

#[tokio::test]
async fn shutdown_lets_in_flight_requests_finish() -> TestResult {
    use src_runtime::sim::{SimConfig, SimHandle, SimModel};
    // A non-streaming answer that takes about half a second.
    let mut model = SimModel::new("slow-model");
    model.decode_ms_per_token = 10.0;
    model.min_output_tokens = 50;
    model.max_output_tokens = 50;
    let sim = SimHandle::spawn(SimConfig {
        models: vec![model],
        time_scale: 1.0,
        ..SimConfig::default()
    })
    .await?;
    let policy = one_model(&sim.base_url(), "slow-model");
    let router = Router::start(&policy).await?;
    let url = router.url("/v1/chat/completions");
    let request = tokio::spawn(async move {
        Http::new()
            .send(hyper::Method::POST, &url, user("hi").to_string(), &[])
            .await
    });
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while sim.load("slow-model").map(|l| l.running) != Some(1) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the request never started"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let addr = router.server.addr;
    let Router { server, .. } = router;
    server.shutdown().await?;
    let answer = request.await??;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert!(answer.content()?.starts_with("[slow-model]"));
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "still accepting after shutdown"
    );
    Ok(())
}

/// The request ids of the lines `router` wrote.
fn logged(router: &Router) -> Vec<String> {
    router
        .log
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .filter_map(|l| l["fields"]["request_id"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn the_request_log_writes_what_its_volume_keeps() -> TestResult {
    let ok = |i: usize| format!("ok-{i}");
    for (volume, expected) in [
        (
            "all",
            vec!["ok-0", "ok-1", "ok-2", "ok-3", "refused", "unknown"],
        ),
        ("errors", vec!["refused", "unknown"]),
        // One request in two, in the order they end, and every error.
        ("sample:2", vec!["ok-0", "ok-2", "refused", "unknown"]),
        ("off", vec![]),
    ] {
        let router = Router::start_with(POLICY, |cfg| {
            cfg.request_log = volume.parse().unwrap_or_default();
        })
        .await?;
        for i in 0..4 {
            let id = ok(i);
            let answer = router
                .chat(&user("hello"), &[("x-request-id", &id)])
                .await?;
            assert_eq!(answer.status, 200);
        }
        let refused = router
            .chat(
                &user("password = abcdefgh12"),
                &[("x-request-id", "refused")],
            )
            .await?;
        assert_eq!(refused.status, 422);
        let mut unknown = user("hi");
        unknown["model"] = json!("nope");
        let unknown = router
            .chat(&unknown, &[("x-request-id", "unknown")])
            .await?;
        assert_eq!(unknown.status, 404);
        // Every request is still counted, whatever is logged.
        let metrics = router.admin_get("/metrics").await?.text();
        assert!(
            metrics.contains("status=\"200\",path=\"upstream\",door=\"chat\"} 4"),
            "{volume}: {metrics}"
        );
        assert_eq!(logged(&router), expected, "--request-log {volume}");
    }
    Ok(())
}
