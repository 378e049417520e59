//! Serving shards: HTTP/1.1 connections are served on the per-core shards and HTTP/2 ones on the
//! shared runtime; both answer the same, with shards and without, and a server with shards shuts
//! down cleanly.

use http_body_util::BodyExt;
use hyper::Method;
use serde_json::Value;
use src_testkit::{user, Http, Router, TestResult, POLICY};

/// One chat completion over HTTP/2 with prior knowledge (h2c), as a multiplexing gateway sends.
async fn chat_h2(router: &Router, body: &Value) -> TestResult<(u16, Value)> {
    let response = Http::http2_only()
        .open(
            Method::POST,
            &router.url("/v1/chat/completions"),
            body.to_string(),
            &[],
        )
        .await?;
    assert_eq!(response.version(), hyper::Version::HTTP_2);
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await?.to_bytes();
    Ok((status, serde_json::from_slice(&bytes)?))
}

#[tokio::test]
async fn both_protocols_are_answered_with_shards_and_without() -> TestResult {
    for shards in [0, 1, 3] {
        let router = Router::start_with(POLICY, |cfg| cfg.shards = shards).await?;
        let body = user("hello there");
        for _ in 0..3 {
            let answer = router.chat(&body, &[]).await?;
            assert_eq!(answer.status, 200, "shards {shards}: {}", answer.text());
            assert_eq!(answer.json()?["object"], "chat.completion");
            let (status, h2) = chat_h2(&router, &body).await?;
            assert_eq!(status, 200, "shards {shards}: {h2}");
            assert_eq!(h2["object"], "chat.completion");
        }
        router.server.shutdown().await?;
    }
    Ok(())
}

#[tokio::test]
async fn many_connections_at_once_are_all_answered() -> TestResult {
    let router = Router::start_with(POLICY, |cfg| cfg.shards = 2).await?;
    let body = user("hello there");
    let mut calls = Vec::new();
    for _ in 0..24 {
        // A client each, so that each call opens its own connection.
        let client = src_testkit::Http::new();
        let url = router.url("/v1/chat/completions");
        let body = body.to_string();
        calls.push(tokio::spawn(async move {
            client
                .send(hyper::Method::POST, &url, body, &[])
                .await
                .map(|a| a.status)
                .map_err(|e| e.to_string())
        }));
    }
    for call in calls {
        assert_eq!(call.await??, 200);
    }
    router.server.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn the_backend_sees_one_host_header_naming_it() -> TestResult {
    let router = Router::start_with(POLICY, |cfg| cfg.shards = 2).await?;
    assert_eq!(
        router
            .chat(&user("hello there"), &[("host", "client.example")])
            .await?
            .status,
        200
    );
    let sims = router.sims();
    let received: Vec<_> = sims.iter().flat_map(|s| s.received()).collect();
    let (sim, request) = sims
        .iter()
        .find_map(|s| s.received().into_iter().next().map(|r| (s, r)))
        .ok_or("the simulator received nothing")?;
    assert_eq!(received.len(), 1);
    let hosts: Vec<_> = request
        .headers
        .iter()
        .filter(|(n, _)| n == "host")
        .collect();
    let expected = sim.base_url().trim_start_matches("http://").to_owned();
    assert_eq!(hosts.len(), 1, "{:?}", request.headers);
    assert_eq!(hosts[0].1, expected);
    Ok(())
}
