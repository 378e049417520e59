//! Upstream faults, each from a backend that fails on purpose (`src_testkit::fault`): a reset before
//! the answer and a silence past the backend's `timeout` move on to the `else` models; a 429
//! moves on while another model remains and passes through (with `retry-after`) from the last;
//! each candidate is tried once. After the first byte nothing can move on: a stream that resets
//! or stalls ends with one OpenAI-style error event and no `[DONE]`, a JSON answer cut short
//! reaches the client as a broken body, never as a complete one, and a malformed event passes
//! through untouched.

use http_body_util::BodyExt;
use serde_json::{json, Value};
use src_testkit::fault::{After, Peer, Script};
use src_testkit::{user, Router, TestResult, PATIENCE};

/// `first` on the faulty peer (backend `timeout = 300ms`), `else spare` on the simulator for
/// prompts with "fallback"; `first` alone otherwise.
fn policy(peer_url: &str, extra: &str) -> String {
    format!(
        r#"
backend peer {{ url = "{peer_url}"  timeout = 300ms }}
backend sim  {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model first {{ backend = peer  serves = "peer-model" }}
model spare {{ backend = sim   serves = "spare-model" }}
route main priority 10 {{ when contains(prompt, ["fallback"])  to first else spare }}
route default {{ to first }}
{extra}
"#
    )
}

fn streaming(text: &str) -> Value {
    json!({"model": "auto", "stream": true,
           "messages": [{"role": "user", "content": text}]})
}

/// The `data:` payloads of an event stream, in order.
fn data_events(body: &str) -> Vec<String> {
    body.split("\n\n")
        .flat_map(|event| event.lines())
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|d| d.trim().to_owned())
        .collect()
}

const CHUNK: &str = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n";

#[tokio::test]
async fn a_reset_before_the_answer_falls_back() -> TestResult {
    let peer = Peer::start(Script::ResetBeforeHead).await?;
    let router = Router::start(&policy(&peer.url, "")).await?;
    let answer = router.chat(&user("fallback please"), &[]).await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.header("x-sr-model"), Some("spare"));
    assert_eq!(answer.header("x-sr-fallbacks"), Some("first:exchange"));
    assert_eq!(peer.posts(), 1, "the failed model is tried once");
    // Without an `else`, the reset is a 502 naming the backend.
    let alone = router.chat(&user("no way out"), &[]).await?;
    assert_eq!(alone.status, 502, "{}", alone.text());
    let (message, _, kind) = alone.error()?;
    assert!(message.contains("`first`"), "{message}");
    assert_eq!(kind, "server_error");
    Ok(())
}

#[tokio::test]
async fn a_silence_before_the_answer_past_the_timeout_falls_back() -> TestResult {
    let mut peer = Peer::start(Script::Silent).await?;
    let router = Router::start(&policy(&peer.url, "")).await?;
    let answer = router.chat(&user("fallback please"), &[]).await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.header("x-sr-fallbacks"), Some("first:timeout"));
    let alone = router.chat(&user("no way out"), &[]).await?;
    assert_eq!(alone.status, 504, "{}", alone.text());
    // The router gave up on the silent backend: its connection was closed.
    tokio::time::timeout(PATIENCE, peer.hung_up.recv())
        .await?
        .ok_or("the peer is gone")?;
    Ok(())
}

#[tokio::test]
async fn a_429_moves_on_while_a_model_remains_and_passes_through_from_the_last() -> TestResult {
    let body = r#"{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limit_exceeded"}}"#;
    let peer = Peer::start(Script::Answer(
        429,
        vec!["retry-after: 7".into()],
        body.into(),
    ))
    .await?;
    let router = Router::start(&policy(&peer.url, "")).await?;
    let answer = router.chat(&user("fallback please"), &[]).await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.header("x-sr-model"), Some("spare"));
    assert_eq!(answer.header("x-sr-fallbacks"), Some("first:status"));
    let alone = router.chat(&user("no way out"), &[]).await?;
    assert_eq!(alone.status, 429, "{}", alone.text());
    assert_eq!(alone.header("retry-after"), Some("7"));
    assert_eq!(alone.text(), body);
    assert_eq!(
        peer.posts(),
        2,
        "one attempt per request, no retry of the same model"
    );
    Ok(())
}

#[tokio::test]
async fn a_5xx_moves_on_and_every_model_is_tried_once() -> TestResult {
    let peer = Peer::start(Script::Answer(503, Vec::new(), "{}".into())).await?;
    // `failure.backend = open` adds the default route's model, here the same failing one: it
    // is not tried a second time.
    let router = Router::start(&policy(&peer.url, "failure { backend = open }")).await?;
    let alone = router.chat(&user("no way out"), &[]).await?;
    assert_eq!(alone.status, 503, "{}", alone.text());
    assert_eq!(peer.posts(), 1);
    let answer = router.chat(&user("fallback please"), &[]).await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.header("x-sr-fallbacks"), Some("first:status"));
    assert_eq!(peer.posts(), 2);
    Ok(())
}

/// Streams a request through the router and returns its status, body and log line, the body
/// read to its end (an error reading it fails the test: a failed stream must still end
/// cleanly). Once the client has read `relayed`, the peer is let go on.
async fn stream_through(
    router: &Router,
    peer: &Peer,
    relayed: &str,
    id: &str,
) -> TestResult<(u16, String, Value)> {
    let response = router
        .open(
            "/v1/chat/completions",
            &streaming("tell me"),
            &[("x-request-id", id)],
        )
        .await?;
    let status = response.status().as_u16();
    let read = peer.read_releasing(response.into_body(), relayed).await?;
    let line = router.log_line(id).await?;
    Ok((status, String::from_utf8_lossy(&read).into_owned(), line))
}

fn assert_ends_with_one_error_event(body: &str, why: &str) -> TestResult {
    let events = data_events(body);
    assert!(
        body.starts_with(CHUNK),
        "the pieces before the failure are relayed: {body:?}"
    );
    assert!(
        !events.iter().any(|e| e == "[DONE]"),
        "no [DONE] after a failure: {body:?}"
    );
    let last: Value = serde_json::from_str(events.last().ok_or("no event")?)?;
    let error = &last["error"];
    assert_eq!(error["type"], "server_error", "{body:?}");
    assert_eq!(error["code"], "upstream_stream_failed");
    let message = error["message"].as_str().ok_or("no message")?;
    assert!(message.contains(why), "{message}");
    assert_eq!(
        events.iter().filter(|e| e.contains("\"error\"")).count(),
        1,
        "{body:?}"
    );
    assert!(
        body.ends_with("\n\n"),
        "the error is a whole event: {body:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_reset_in_the_middle_of_a_stream_ends_it_with_an_error_event() -> TestResult {
    // The reset comes in the middle of an event: the half-written one is closed first.
    let pieces = vec![CHUNK.to_owned(), "data: {\"id\":\"c\",\"ch".to_owned()];
    let relayed = pieces.concat();
    let peer = Peer::start(Script::Stream(pieces, After::Reset)).await?;
    let router = Router::start(&policy(&peer.url, "")).await?;
    let (status, body, line) = stream_through(&router, &peer, &relayed, "mid-reset").await?;
    assert_eq!(status, 200);
    assert_ends_with_one_error_event(&body, "broke off")?;
    assert!(
        body.contains("data: {\"id\":\"c\",\"ch\n\ndata: {\"error\""),
        "{body:?}"
    );
    assert!(
        line["error"]
            .as_str()
            .is_some_and(|e| e.contains("broke off")),
        "{line}"
    );
    Ok(())
}

#[tokio::test]
async fn a_stall_in_the_middle_of_a_stream_ends_it_with_an_error_event() -> TestResult {
    let mut peer = Peer::start(Script::Stream(vec![CHUNK.to_owned()], After::Stall)).await?;
    let router = Router::start(&policy(&peer.url, "")).await?;
    let (status, body, line) = stream_through(&router, &peer, CHUNK, "mid-stall").await?;
    assert_eq!(status, 200);
    assert_ends_with_one_error_event(&body, "sent nothing for 300 ms")?;
    assert!(
        line["error"].as_str().is_some_and(|e| e.contains("300 ms")),
        "{line}"
    );
    // The stalled upstream request is cancelled.
    tokio::time::timeout(PATIENCE, peer.hung_up.recv())
        .await?
        .ok_or("the peer is gone")?;
    Ok(())
}

#[tokio::test]
async fn a_stream_that_ended_with_done_is_not_given_an_error() -> TestResult {
    let pieces = vec![CHUNK.to_owned(), "data: [DONE]\n\n".to_owned()];
    let relayed = pieces.concat();
    let peer = Peer::start(Script::Stream(pieces, After::Reset)).await?;
    let router = Router::start(&policy(&peer.url, "")).await?;
    let (status, body, _) = stream_through(&router, &peer, &relayed, "done-reset").await?;
    assert_eq!(status, 200);
    assert_eq!(body, format!("{CHUNK}data: [DONE]\n\n"));
    Ok(())
}

#[tokio::test]
async fn a_malformed_event_passes_through_untouched() -> TestResult {
    let usage = "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n";
    let pieces = vec![
        CHUNK.to_owned(),
        "data: {not json\n\n".to_owned(),
        "dat\n\n".to_owned(),
        usage.to_owned(),
        "data: [DONE]\n\n".to_owned(),
    ];
    let whole: String = pieces.concat();
    let peer = Peer::start(Script::Stream(pieces, After::End)).await?;
    let router = Router::start(&policy(&peer.url, "")).await?;
    let (status, body, line) = stream_through(&router, &peer, &whole, "malformed").await?;
    assert_eq!(status, 200);
    assert_eq!(body, whole, "the router never rewrites a stream");
    assert_eq!(line["prompt_tokens"], 3, "usage is still read: {line}");
    assert_eq!(line["error"], Value::Null, "{line}");
    Ok(())
}

#[tokio::test]
async fn a_json_answer_cut_short_is_a_broken_body_not_a_complete_one() -> TestResult {
    let body = json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0,
        "message": {"role": "assistant", "content": "a long answer ".repeat(50)}}]})
    .to_string();
    let peer = Peer::start(Script::CutJson(body)).await?;
    let router = Router::start(&policy(&peer.url, "")).await?;
    let response = router
        .open(
            "/v1/chat/completions",
            &user("tell me"),
            &[("x-request-id", "cut-json")],
        )
        .await?;
    assert_eq!(response.status(), 200);
    let read = tokio::time::timeout(PATIENCE, response.into_body().collect()).await?;
    assert!(read.is_err(), "a cut answer must not read as complete");
    let line = router.log_line("cut-json").await?;
    assert!(
        line["error"]
            .as_str()
            .is_some_and(|e| e.contains("broke off")),
        "{line}"
    );
    Ok(())
}
