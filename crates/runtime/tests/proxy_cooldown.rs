//! Per-model cooldown (`failure { cooldown_after = N  cooldown = D }`) end to end: after N
//! failures in a row a model is skipped for its routes' `else` models without being sent the
//! request, `/readyz` lists it and the metrics count it; with a Redis store, a cooldown started
//! on one replica is followed by another that never saw the failures. A stream that breaks off
//! or stalls after its head is such a failure too; one that ends whole is not. `src_backend_up`
//! reports the readiness probes.

use std::time::Duration;

use serde_json::{json, Value};
use src_testkit::fault::{After, Peer, Script};
use src_testkit::redis::RedisServer;
use src_testkit::{user, Router, TestResult, PATIENCE};

fn policy(peer_url: &str, extra: &str) -> String {
    format!(
        r#"
backend peer {{ url = "{peer_url}" }}
backend sim  {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model first {{ backend = peer  serves = "peer-model" }}
model spare {{ backend = sim   serves = "spare-model" }}
route default {{ to first else spare }}
failure {{ cooldown_after = 2  cooldown = 1h }}
{extra}
"#
    )
}

/// Polls `path` until `found` holds of its body (bounded by `PATIENCE`).
async fn until(router: &Router, path: &str, found: impl Fn(&str) -> bool) -> TestResult<String> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let body = router.admin_get(path).await?.text();
        if found(&body) {
            return Ok(body);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("never found in {path}: {body}").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_model_failing_twice_in_a_row_is_skipped_reported_and_counted() -> TestResult {
    let peer = Peer::start(Script::Answer(503, Vec::new(), "{}".into())).await?;
    let router = Router::start(&policy(&peer.url, "")).await?;
    for _ in 0..2 {
        let answer = router.chat(&user("hello"), &[]).await?;
        assert_eq!(answer.status, 200, "{}", answer.text());
        assert_eq!(answer.header("x-sr-fallbacks"), Some("first:status"));
    }
    assert_eq!(peer.posts(), 2);
    let skipped = router.chat(&user("hello"), &[]).await?;
    assert_eq!(skipped.status, 200);
    assert_eq!(skipped.header("x-sr-model"), Some("spare"));
    assert_eq!(skipped.header("x-sr-fallbacks"), Some("first:cooldown"));
    assert_eq!(peer.posts(), 2, "a cooling model is not sent the request");

    let ready = router.admin_get("/readyz").await?;
    assert_eq!(ready.status, 200, "a cooldown ends by itself: still ready");
    let body: Value = ready.json()?;
    let cooling = &body["cooling_models"];
    assert_eq!(cooling[0]["model"], "first", "{body}");
    assert_eq!(cooling[0]["source"], "local");
    assert!(cooling[0]["remaining_ms"].as_u64().is_some_and(|ms| ms > 0));

    let metrics = router.admin_get("/metrics").await?.text();
    assert!(
        metrics.contains("src_model_cooldowns_total{model=\"first\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("src_model_cooling{model=\"first\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("src_fallbacks_total{from=\"first\",reason=\"cooldown\"} 1"),
        "{metrics}"
    );
    Ok(())
}

#[tokio::test]
async fn backend_up_follows_the_readiness_probes() -> TestResult {
    let peer = Peer::start(Script::Answer(200, Vec::new(), "{}".into())).await?;
    // Bound, never listening: connections are refused.
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind("127.0.0.1:0".parse()?)?;
    let down = format!("http://127.0.0.1:{}/v1", socket.local_addr()?.port());
    let text = format!(
        r#"
backend peer {{ url = "{}" }}
backend gone {{ url = "{down}" }}
backend sim  {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model first {{ backend = peer  serves = "a" }}
model lost  {{ backend = gone  serves = "b" }}
model spare {{ backend = sim   serves = "c" }}
route default {{ to first else lost, spare }}
"#,
        peer.url
    );
    let router = Router::start(&text).await?;
    let metrics = until(&router, "/metrics", |m| {
        m.contains("src_backend_up{backend=\"gone\"} 0")
            && m.contains("src_backend_up{backend=\"peer\"} 1")
    })
    .await?;
    assert!(
        metrics.contains("src_backend_up{backend=\"sim\"} 1"),
        "{metrics}"
    );
    drop(socket);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cooldown_is_shared_through_the_policy_s_redis() -> TestResult {
    let redis = RedisServer::start();
    let peer = Peer::start(Script::Answer(500, Vec::new(), "{}".into())).await?;
    let store = format!("session {{ store = redis(\"{}\") }}", redis.url());
    let text = policy(&peer.url, &store);
    let (a, b) = (Router::start(&text).await?, Router::start(&text).await?);
    for _ in 0..2 {
        assert_eq!(a.chat(&user("hello"), &[]).await?.status, 200);
    }
    assert_eq!(peer.posts(), 2);
    // The write is a task of its own, never waited for by a request.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let ttl: i64 = redis
            .command("PTTL sr:v1:{cooldown}:first")
            .trim()
            .trim_start_matches(':')
            .parse()?;
        if ttl > 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cooldown never reached Redis with an expiry: {ttl}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Replica `b` never saw a failure; it follows once its sync tick has read Redis.
    let ready = until(&b, "/readyz", |body| body.contains("\"source\":\"redis\"")).await?;
    assert!(ready.contains("\"model\":\"first\""), "{ready}");
    let answer = b.chat(&user("hello"), &[]).await?;
    assert_eq!(answer.header("x-sr-fallbacks"), Some("first:cooldown"));
    assert_eq!(
        peer.posts(),
        2,
        "neither replica sends `first` anything now"
    );
    Ok(())
}

const CHUNK: &str = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n";

/// A streaming chat request through `router`, letting `peer` go on to its `After` once the
/// router has relayed `relayed`; returns the status, the model and the body read.
async fn stream(router: &Router, peer: &Peer, relayed: &str) -> TestResult<(u16, String, String)> {
    let request = json!({"model": "auto", "stream": true,
        "messages": [{"role": "user", "content": "tell me"}]});
    let response = router.open("/v1/chat/completions", &request, &[]).await?;
    let status = response.status().as_u16();
    let model = response
        .headers()
        .get("x-sr-model")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let read = peer.read_releasing(response.into_body(), relayed).await?;
    Ok((status, model, String::from_utf8_lossy(&read).into_owned()))
}

/// [`policy`] with the peer's `timeout` at 300 ms, so a stalled stream ends soon.
fn streaming_policy(peer_url: &str) -> String {
    policy(peer_url, "").replace(
        &format!("url = \"{peer_url}\" }}"),
        &format!("url = \"{peer_url}\"  timeout = 300ms }}"),
    )
}

#[tokio::test]
async fn streams_breaking_in_the_middle_cool_the_model_down() -> TestResult {
    for after in [After::Reset, After::Stall] {
        let peer = Peer::start(Script::Stream(vec![CHUNK.to_owned()], after)).await?;
        let text = streaming_policy(&peer.url);
        assert!(text.contains("timeout = 300ms"), "{text}");
        let router = Router::start(&text).await?;
        for call in 0..2 {
            let (status, model, body) = stream(&router, &peer, CHUNK).await?;
            assert_eq!((status, model.as_str()), (200, "first"), "{after:?} {call}");
            assert!(
                body.starts_with(CHUNK) && body.contains("upstream_stream_failed"),
                "{after:?} {call}: {body:?}"
            );
        }
        assert_eq!(peer.posts(), 2);
        // Two broken streams in a row: `first` is skipped unsent, as after two 5xx answers.
        let (status, model, body) = stream(&router, &peer, CHUNK).await?;
        assert_eq!(
            (status, model.as_str()),
            (200, "spare"),
            "{after:?}: {body}"
        );
        assert!(body.ends_with("data: [DONE]\n\n"), "{after:?}: {body:?}");
        assert_eq!(
            peer.posts(),
            2,
            "{after:?}: a cooling model is not sent the request"
        );
        let metrics = router.admin_get("/metrics").await?.text();
        assert!(
            metrics.contains("src_model_cooldowns_total{model=\"first\"} 1"),
            "{after:?}: {metrics}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn streams_that_end_whole_never_cool_the_model_down() -> TestResult {
    // Each stream carries its `[DONE]`; a reset after it ends nothing the client needed.
    let pieces = vec![CHUNK.to_owned(), "data: [DONE]\n\n".to_owned()];
    let relayed = pieces.concat();
    for after in [After::End, After::Reset] {
        let peer = Peer::start(Script::Stream(pieces.clone(), after)).await?;
        let router = Router::start(&streaming_policy(&peer.url)).await?;
        for call in 0..4 {
            let (status, model, body) = stream(&router, &peer, &relayed).await?;
            assert_eq!((status, model.as_str()), (200, "first"), "{after:?} {call}");
            assert_eq!(body, relayed, "{after:?} {call}");
        }
        assert_eq!(peer.posts(), 4, "{after:?}");
        let ready: Value = router.admin_get("/readyz").await?.json()?;
        assert_eq!(ready["cooling_models"], json!([]), "{after:?}: {ready}");
    }
    Ok(())
}
