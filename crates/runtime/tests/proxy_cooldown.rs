//! Per-model cooldown (`failure { cooldown_after = N  cooldown = D }`) end to end: after N
//! failures in a row a model is skipped for its routes' `else` models without being sent the
//! request, `/readyz` lists it and the metrics count it; with a Redis store, a cooldown started
//! on one replica is followed by another that never saw the failures. `src_backend_up` reports
//! the readiness probes.

mod fault_support;
mod proxy_support;
mod support {
    pub mod redis;
}

use std::time::Duration;

use fault_support::{Peer, Script};
use proxy_support::{user, Router, TestResult, PATIENCE};
use serde_json::Value;
use support::redis::RedisServer;

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
        let body = router.get(path).await?.text();
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

    let ready = router.get("/readyz").await?;
    assert_eq!(ready.status, 200, "a cooldown ends by itself: still ready");
    let body: Value = ready.json()?;
    let cooling = &body["cooling_models"];
    assert_eq!(cooling[0]["model"], "first", "{body}");
    assert_eq!(cooling[0]["source"], "local");
    assert!(cooling[0]["remaining_ms"].as_u64().is_some_and(|ms| ms > 0));

    let metrics = router.get("/metrics").await?.text();
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
            .command("PTTL sr:v1:cooldown:first")
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
