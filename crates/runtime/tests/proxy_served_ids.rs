//! A true drop-in for a Dynamo or vLLM frontend: clients keep sending the served ids they sent
//! the backend, and `src serve` takes an id bound to one logical model as that model, refuses
//! one bound to several, and lists them in `GET /v1/models`. The other way round, `/readyz`
//! holds a route servable only while its model's served id is in its backend's own
//! `GET /models` list.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{json, Value};
use src_testkit::{Router, TestResult, PATIENCE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn quickstart() -> TestResult<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/quickstart/policy.sr");
    Ok(std::fs::read_to_string(path)?)
}

fn named(model: &str, text: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": text}]})
}

#[tokio::test]
async fn the_quickstart_answers_a_served_id_as_its_model() -> TestResult {
    let router = Router::start(&quickstart()?).await?;
    // `strong` serves `Qwen/Qwen3-8B`; a plain prompt would route to `small`.
    let answer = router
        .chat(
            &named("Qwen/Qwen3-8B", "hello"),
            &[("x-request-id", "sid-1")],
        )
        .await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.header("x-sr-model"), Some("strong"));
    // Reported like any model the client names: no route decided.
    assert_eq!(answer.header("x-sr-route"), Some("-"));
    let line = router.log_line("sid-1").await?;
    assert_eq!(line["model"], "strong");
    assert_eq!(line["served"], "Qwen/Qwen3-8B");
    Ok(())
}

#[tokio::test]
async fn blocks_still_apply_to_a_served_id() -> TestResult {
    let text = r#"
backend sim { url = "http://127.0.0.1:9/v1"  simulated = true }
model small  { backend = sim  serves = "Qwen/Qwen3-0.6B" }
model strong { backend = sim  serves = "Qwen/Qwen3-8B" }
block secrets { when contains(prompt, ["password"])  status = 422 }
route default { to small else strong }
"#;
    let router = Router::start(text).await?;
    let answer = router
        .chat(&named("Qwen/Qwen3-8B", "my password is hunter2"), &[])
        .await?;
    assert_eq!(answer.status, 422, "{}", answer.text());
    assert_eq!(answer.header("x-sr-block"), Some("secrets"));
    Ok(())
}

#[tokio::test]
async fn a_served_id_bound_to_several_models_is_refused_naming_them() -> TestResult {
    let text = r#"
backend a { url = "http://127.0.0.1:9/v1"  simulated = true }
backend b { url = "http://127.0.0.1:9/v1"  simulated = true }
model small     { backend = a  serves = "Qwen/Qwen3-0.6B" }
model strong    { backend = a  serves = "Qwen/Qwen3-8B" }
model strong_eu { backend = b  serves = "Qwen/Qwen3-8B" }
route default { to small else strong, strong_eu }
"#;
    let router = Router::start(text).await?;
    let answer = router.chat(&named("Qwen/Qwen3-8B", "hello"), &[]).await?;
    assert_eq!(answer.status, 400, "{}", answer.text());
    let (message, code, kind) = answer.error()?;
    assert_eq!(
        (code.as_deref(), kind.as_str()),
        (Some("model_ambiguous"), "invalid_request_error")
    );
    assert!(message.contains("`strong`, `strong_eu`"), "{message}");
    assert_eq!(answer.json()?["error"]["param"], "model");
    // The one bound to a single model still works; the shared one is not listed.
    let small = router.chat(&named("Qwen/Qwen3-0.6B", "hello"), &[]).await?;
    assert_eq!(small.header("x-sr-model"), Some("small"));
    let list = router.get("/v1/models").await?.json()?;
    let served: Vec<(&str, &str)> = list["data"]
        .as_array()
        .ok_or("no data")?
        .iter()
        .filter(|m| m["owned_by"] == "src-served")
        .filter_map(|m| Some((m["id"].as_str()?, m["served_id_of"].as_str()?)))
        .collect();
    assert_eq!(served, [("Qwen/Qwen3-0.6B", "small")]);
    Ok(())
}

/// A backend answering every request with the model list `listed` holds at the time.
async fn listing(listed: Arc<Mutex<Vec<&'static str>>>) -> TestResult<std::net::SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let listed = Arc::clone(&listed);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let mut seen = Vec::new();
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    if !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                        continue;
                    }
                    seen.clear();
                    let ids = listed
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .clone();
                    let data: Vec<Value> = ids.iter().map(|id| json!({"id": id})).collect();
                    let body = json!({"object": "list", "data": data}).to_string();
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\ncontent-type: application/json\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok(addr)
}

/// Polls `/readyz` until `done` holds of its report.
async fn readiness(router: &Router, done: impl Fn(&Value) -> bool) -> TestResult<(u16, Value)> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let ready = router.admin_get("/readyz").await?;
        let report = ready.json()?;
        if done(&report) {
            return Ok((ready.status, report));
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("readiness never settled: {report}").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_route_whose_served_id_the_backend_does_not_list_is_unservable() -> TestResult {
    // The backend answers its probes (it is up) but lists only `small-id`: the worker serving
    // `big-id` is gone, as a Dynamo frontend says once a model's last worker left.
    let listed = Arc::new(Mutex::new(vec!["small-id"]));
    let addr = listing(Arc::clone(&listed)).await?;
    let text = format!(
        r#"
backend gpu {{ url = "http://{addr}/v1" }}
model small {{ backend = gpu  serves = "small-id" }}
model big   {{ backend = gpu  serves = "big-id" }}
route hard priority 10 {{ when tokens(prompt) > 100  to big }}
route default {{ to small else big }}
"#
    );
    let router = Router::start(&text).await?;
    let (status, report) = readiness(&router, |r| {
        r["backends"]["gpu"]["detail"] == "answered 200"
    })
    .await?;
    assert_eq!(status, 503, "{report}");
    assert_eq!(
        report["backends"]["gpu"]["ready"], true,
        "the backend is up: {report}"
    );
    assert_eq!(
        report["backends"]["gpu"]["missing_models"],
        json!(["big-id"])
    );
    assert_eq!(report["routes"]["hard"]["servable"], false, "{report}");
    assert_eq!(report["routes"]["default"]["servable"], true, "{report}");
    assert_eq!(report["unservable_routes"], json!(["hard"]));

    // The worker comes back: the next probe lists it, and the router is ready.
    listed
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push("big-id");
    let (status, report) = readiness(&router, |r| r["ready"] == true).await?;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["backends"]["gpu"]["missing_models"], json!([]));

    // Gone from the list again: unready again, without a request being sent.
    listed
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    let (status, report) = readiness(&router, |r| r["ready"] == false).await?;
    assert_eq!(status, 503, "{report}");
    assert_eq!(
        report["backends"]["gpu"]["missing_models"],
        json!(["big-id", "small-id"])
    );
    Ok(())
}
