//! Token budgets behind Envoy: `src serve --extproc` spoken to as Envoy speaks to it (a real
//! gRPC client on the `ext_proc` v3 stream) against a real server. Where Envoy shows the
//! processor the answer's body (`response_body_mode: STREAMED`), a streamed chat answer is asked
//! for its usage, charged what it reports and relayed without that extra chunk; where it does
//! not, the request is charged the router's estimate once the exchange ends, and the client's
//! body is sent as it asked. The charges are read back from the admin listing.

use std::net::SocketAddr;
use std::time::Duration;

use envoy_types::pb::envoy::extensions::filters::http::ext_proc::v3::processing_mode::BodySendMode;
use serde_json::{json, Value};
use src_testkit::extproc::{
    body, configured, headers, post, response_chunk, response_headers_with, Stream,
};
use src_testkit::{Router, TestResult, PATIENCE};

const POLICY: &str = r#"
backend sim { url = "http://127.0.0.1:9/v1"  simulated = true }
model small  { backend = sim  serves = "Qwen/Qwen3-0.6B"  cost = 0.1 }
model strong { backend = sim  serves = "Qwen/Qwen3-8B"  cost = 1.0 }
budget strong_tokens { per = tenant  window = 1h  tokens = 100000  exceeded = to small }
route default { to strong }
"#;

async fn router() -> TestResult<(Router, SocketAddr)> {
    let router = Router::start_with(POLICY, |cfg| {
        cfg.extproc = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    })
    .await?;
    let addr = router.server.extproc_addr.ok_or("no external processor")?;
    Ok((router, addr))
}

fn streamed(text: &str) -> Value {
    json!({"model": "auto", "stream": true,
           "messages": [{"role": "user", "content": text}]})
}

/// The tenant's use of `strong_tokens`, once it is above zero (a charge lands off the answer's
/// path), or zero after waiting.
async fn used(router: &Router, api_key: &str) -> TestResult<f64> {
    let tenant = src_runtime::session::identity::tenant_of_key(Some(api_key));
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let listing = router
            .admin_get(&format!("/v1/console/budgets?tenant={tenant}"))
            .await?
            .json()?;
        let used = listing["budgets"][0]["used"].as_f64().unwrap_or(0.0);
        if used > 0.0 || tokio::time::Instant::now() > deadline {
            return Ok(used);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Opens a stream whose first message states Envoy's body modes, and sends the request.
async fn sent(
    addr: SocketAddr,
    api_key: &str,
    request: &Value,
    response_body: BodySendMode,
) -> TestResult<(Stream, Value)> {
    let mut stream = Stream::open(addr).await?;
    let auth = format!("Bearer {api_key}");
    let mut asked = post("/v1/chat/completions");
    asked.push(("authorization", auth.as_str()));
    stream
        .tell(configured(
            headers(&asked, false),
            BodySendMode::Buffered,
            response_body,
        ))
        .await?;
    stream.answer().await?;
    let upstream = stream.ask(body(request)).await?.body()?;
    Ok((stream, upstream))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_is_charged_its_usage_without_the_chunk_asked_for() -> TestResult {
    let (router, addr) = router().await?;
    let (mut stream, upstream) = sent(
        addr,
        "sk-stream",
        &streamed("hello"),
        BodySendMode::Streamed,
    )
    .await?;
    assert_eq!(
        upstream["stream_options"],
        json!({"include_usage": true}),
        "the backend is asked for usage: {upstream}"
    );
    stream
        .ask(response_headers_with(
            "200",
            &[("content-type", "text/event-stream")],
        ))
        .await?;
    let first = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n";
    let kept = stream.ask(response_chunk(first, false)).await?.replaced()?;
    assert_eq!(kept, None, "a chunk without the usage goes on as it came");
    let last = b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":31,\
                 \"total_tokens\":42}}\n\ndata: [DONE]\n\n";
    let kept = stream.ask(response_chunk(last, true)).await?.replaced()?;
    assert_eq!(
        kept.as_deref(),
        Some(&b"data: [DONE]\n\n"[..]),
        "the usage chunk the client did not ask for is taken out"
    );
    assert_eq!(used(&router, "sk-stream").await?, 42.0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_asked_for_usage_keeps_its_chunk_and_is_charged_it() -> TestResult {
    let (router, addr) = router().await?;
    let mut request = streamed("hello");
    request["stream_options"] = json!({"include_usage": true});
    let (mut stream, _) = sent(addr, "sk-asked", &request, BodySendMode::Streamed).await?;
    stream
        .ask(response_headers_with(
            "200",
            &[("content-type", "text/event-stream")],
        ))
        .await?;
    let last =
        b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n\
                 data: [DONE]\n\n";
    let kept = stream.ask(response_chunk(last, true)).await?.replaced()?;
    assert_eq!(kept, None, "the client's own usage chunk goes on unchanged");
    assert_eq!(used(&router, "sk-asked").await?, 7.0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_answer_is_charged_its_usage() -> TestResult {
    let (router, addr) = router().await?;
    let request = json!({"model": "auto", "messages": [{"role": "user", "content": "hello"}]});
    let (mut stream, upstream) = sent(addr, "sk-json", &request, BodySendMode::Streamed).await?;
    assert!(upstream.get("stream_options").is_none(), "{upstream}");
    stream
        .ask(response_headers_with(
            "200",
            &[("content-type", "application/json")],
        ))
        .await?;
    let answer =
        json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
                        "usage": {"prompt_tokens": 20, "completion_tokens": 3}})
        .to_string();
    let (head, tail) = answer.as_bytes().split_at(answer.len() / 2);
    assert_eq!(
        stream.ask(response_chunk(head, false)).await?.replaced()?,
        None
    );
    assert_eq!(
        stream.ask(response_chunk(tail, true)).await?.replaced()?,
        None
    );
    assert_eq!(used(&router, "sk-json").await?, 23.0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_answer_s_body_the_estimate_is_charged_and_usage_is_not_asked() -> TestResult {
    let (router, addr) = router().await?;
    let (mut stream, upstream) = sent(
        addr,
        "sk-blind",
        &streamed("hello there"),
        BodySendMode::None,
    )
    .await?;
    assert!(
        upstream.get("stream_options").is_none(),
        "the chunk could not be taken out, so it is not asked for: {upstream}"
    );
    stream
        .ask(response_headers_with(
            "200",
            &[("content-type", "text/event-stream")],
        ))
        .await?;
    drop(stream);
    let used = used(&router, "sk-blind").await?;
    assert!(used > 0.0, "the estimate is charged");
    assert!(used < 42.0, "an estimate of a two-word prompt: {used}");
    Ok(())
}
