//! `src serve --extproc` spoken to as Envoy speaks to it: a real gRPC client on the `ext_proc` v3
//! stream, message by message (request headers, buffered body, response headers), against a
//! real server on the built-in simulator. What Envoy then does with the answers is tested with
//! the real Envoy in the CLI's `envoy_extproc` tests.

mod proxy_support;

use std::collections::HashMap;
use std::net::SocketAddr;

use envoy_types::pb::envoy::config::core::v3::{HeaderMap, HeaderValue};
use envoy_types::pb::envoy::extensions::filters::http::ext_proc::v3::processing_mode::BodySendMode;
use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_client::ExternalProcessorClient;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    body_mutation, processing_request, processing_response, CommonResponse, HeaderMutation,
    HttpBody, HttpHeaders, HttpTrailers, ImmediateResponse, ProcessingRequest, ProcessingResponse,
    ProtocolConfiguration, StreamedBodyResponse,
};
use proxy_support::{user, Router, TestResult, POLICY};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

/// One processing stream, as Envoy opens one per HTTP request.
struct Stream {
    send: mpsc::Sender<ProcessingRequest>,
    answers: Streaming<ProcessingResponse>,
}

impl Stream {
    async fn open(addr: SocketAddr) -> TestResult<Stream> {
        let mut client = ExternalProcessorClient::connect(format!("http://{addr}")).await?;
        let (send, outgoing) = mpsc::channel(4);
        let answers = client
            .process(ReceiverStream::new(outgoing))
            .await?
            .into_inner();
        Ok(Stream { send, answers })
    }

    async fn ask(&mut self, request: processing_request::Request) -> TestResult<Reply> {
        self.tell(ProcessingRequest {
            request: Some(request),
            ..ProcessingRequest::default()
        })
        .await?;
        self.answer().await
    }

    /// Sends without waiting for an answer, as Envoy does in full duplex.
    async fn tell(&mut self, message: ProcessingRequest) -> TestResult {
        self.send.send(message).await?;
        Ok(())
    }

    async fn answer(&mut self) -> TestResult<Reply> {
        let answer = self.answers.message().await?.ok_or("the stream ended")?;
        answer
            .response
            .map(Reply)
            .ok_or_else(|| "an empty answer".into())
    }
}

/// A message as Envoy sends it with the body `FULL_DUPLEX_STREAMED`; `first` carries the
/// mode, as the stream's first message does.
fn duplex(request: processing_request::Request, first: bool) -> ProcessingRequest {
    ProcessingRequest {
        request: Some(request),
        protocol_config: first.then(|| ProtocolConfiguration {
            request_body_mode: BodySendMode::FullDuplexStreamed as i32,
            ..ProtocolConfiguration::default()
        }),
        ..ProcessingRequest::default()
    }
}

fn chunk(bytes: &[u8], end_of_stream: bool) -> processing_request::Request {
    processing_request::Request::RequestBody(HttpBody {
        body: bytes.to_vec(),
        end_of_stream,
        ..HttpBody::default()
    })
}

struct Reply(processing_response::Response);

impl Reply {
    fn common(&self) -> TestResult<&CommonResponse> {
        let common = match &self.0 {
            processing_response::Response::RequestHeaders(h)
            | processing_response::Response::ResponseHeaders(h) => h.response.as_ref(),
            processing_response::Response::RequestBody(b) => b.response.as_ref(),
            other => return Err(format!("not a continue: {other:?}").into()),
        };
        common.ok_or_else(|| "no common response".into())
    }

    fn immediate(&self) -> TestResult<&ImmediateResponse> {
        match &self.0 {
            processing_response::Response::ImmediateResponse(i) => Ok(i),
            other => Err(format!("not an immediate response: {other:?}").into()),
        }
    }

    fn streamed(&self) -> TestResult<&StreamedBodyResponse> {
        match self
            .common()?
            .body_mutation
            .as_ref()
            .and_then(|b| b.mutation.as_ref())
        {
            Some(body_mutation::Mutation::StreamedResponse(streamed)) => Ok(streamed),
            other => Err(format!("no streamed body: {other:?}").into()),
        }
    }

    fn set_headers(&self) -> TestResult<HashMap<String, String>> {
        Ok(set(self.common()?.header_mutation.as_ref()))
    }

    fn removed(&self) -> TestResult<Vec<String>> {
        Ok(self
            .common()?
            .header_mutation
            .as_ref()
            .map(|m| m.remove_headers.clone())
            .unwrap_or_default())
    }

    fn body(&self) -> TestResult<Value> {
        match self
            .common()?
            .body_mutation
            .as_ref()
            .and_then(|b| b.mutation.as_ref())
        {
            Some(body_mutation::Mutation::Body(bytes)) => Ok(serde_json::from_slice(bytes)?),
            other => Err(format!("no body mutation: {other:?}").into()),
        }
    }
}

fn set(mutation: Option<&HeaderMutation>) -> HashMap<String, String> {
    mutation
        .into_iter()
        .flat_map(|m| &m.set_headers)
        .filter_map(|o| o.header.as_ref())
        .map(|h| {
            (
                h.key.clone(),
                String::from_utf8_lossy(&h.raw_value).into_owned(),
            )
        })
        .collect()
}

/// Headers as Envoy 1.40 sends them: bytes in `raw_value`, `value` empty.
fn headers(pairs: &[(&str, &str)], end_of_stream: bool) -> processing_request::Request {
    headers_of(pairs, end_of_stream, true)
}

fn headers_of(
    pairs: &[(&str, &str)],
    end_of_stream: bool,
    raw: bool,
) -> processing_request::Request {
    processing_request::Request::RequestHeaders(HttpHeaders {
        headers: Some(HeaderMap {
            headers: pairs
                .iter()
                .map(|(k, v)| HeaderValue {
                    key: (*k).into(),
                    value: if raw { String::new() } else { (*v).into() },
                    raw_value: if raw {
                        v.as_bytes().to_vec()
                    } else {
                        Vec::new()
                    },
                })
                .collect(),
        }),
        end_of_stream,
        ..HttpHeaders::default()
    })
}

fn post(path: &str) -> Vec<(&str, &str)> {
    vec![
        (":method", "POST"),
        (":path", path),
        (":authority", "gateway"),
        ("content-type", "application/json"),
    ]
}

fn body(value: &Value) -> processing_request::Request {
    processing_request::Request::RequestBody(HttpBody {
        body: value.to_string().into_bytes(),
        end_of_stream: true,
        ..HttpBody::default()
    })
}

fn response_headers(status: &str) -> processing_request::Request {
    processing_request::Request::ResponseHeaders(HttpHeaders {
        headers: Some(HeaderMap {
            headers: vec![HeaderValue {
                key: ":status".into(),
                raw_value: status.as_bytes().to_vec(),
                ..HeaderValue::default()
            }],
        }),
        ..HttpHeaders::default()
    })
}

async fn router() -> TestResult<(Router, SocketAddr)> {
    let router = Router::start_with(POLICY, |cfg| {
        cfg.extproc = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    })
    .await?;
    let addr = router.server.extproc_addr.ok_or("no external processor")?;
    Ok((router, addr))
}

#[tokio::test]
async fn a_routed_request_is_rewritten_and_its_answer_gets_the_decision_headers() -> TestResult {
    let (router, addr) = router().await?;
    let mut stream = Stream::open(addr).await?;
    let mut asked = post("/v1/chat/completions");
    asked.extend([
        ("x-sr-route", "forged"),
        ("x-selected-model", "forged"),
        ("x-gateway-model-name", "forged"),
        ("x-request-id", "client-1"),
    ]);
    let first = stream.ask(headers(&asked, false)).await?;
    let mut removed = first.removed()?;
    removed.sort();
    assert_eq!(
        removed,
        ["x-gateway-model-name", "x-selected-model", "x-sr-route"]
    );

    let sent = stream.ask(body(&user("a segfault in main"))).await?;
    let upstream = sent.body()?;
    assert_eq!(upstream["model"], "Qwen/Qwen3-8B");
    assert_eq!(
        upstream["messages"][0],
        json!({"role": "system", "content": "You are a careful engineer."})
    );
    assert_eq!(upstream["reasoning_effort"], "high");
    let set = sent.set_headers()?;
    assert_eq!(set["x-selected-model"], "Qwen/Qwen3-8B");
    assert_eq!(set["x-gateway-model-name"], "Qwen/Qwen3-8B");
    assert_eq!(set["x-sr-backend"], "sim");
    assert_eq!(set["x-compliance"], "on");
    assert_eq!(set["x-request-id"], "client-1");
    assert!(set["traceparent"].starts_with("00-"), "{set:?}");
    let length: usize = set["content-length"].parse()?;
    assert_eq!(length, upstream.to_string().len());
    assert!(sent.common()?.clear_route_cache);

    let answered = stream.ask(response_headers("200")).await?;
    let decision = answered.set_headers()?;
    assert_eq!(decision["x-sr-route"], "coding");
    assert_eq!(decision["x-sr-model"], "strong");
    assert_eq!(decision["x-sr-path"], "upstream");
    assert_eq!(decision["x-sr-request-id"], "client-1");

    let line = router.log_line("client-1").await?;
    assert_eq!(
        (
            &line["status"],
            &line["path"],
            &line["model"],
            &line["backend"]
        ),
        (
            &json!(200),
            &json!("upstream"),
            &json!("strong"),
            &json!("sim")
        )
    );
    let metrics = router.get("/metrics").await?.text();
    assert!(
        metrics.contains(
            "src_requests_total{route=\"coding\",model=\"strong\",status=\"200\",path=\"upstream\",door=\"extproc\"} 1"
        ),
        "{metrics}"
    );
    Ok(())
}

#[tokio::test]
async fn a_block_answers_immediately_with_the_proxys_json() -> TestResult {
    let (_router, addr) = router().await?;
    let mut stream = Stream::open(addr).await?;
    stream
        .ask(headers(&post("/v1/chat/completions"), false))
        .await?;
    let reply = stream.ask(body(&user("my password = hunter2"))).await?;
    let local = reply.immediate()?;
    assert_eq!(local.status.as_ref().map(|s| s.code), Some(422));
    let answer: Value = serde_json::from_slice(&local.body)?;
    assert_eq!(answer["error"]["type"], "policy_violation");
    assert_eq!(answer["error"]["code"], "leaked_secret");
    let set = set(local.headers.as_ref());
    assert_eq!(set["x-sr-block"], "leaked_secret");
    assert_eq!(set["content-type"], "application/json");
    Ok(())
}

#[tokio::test]
async fn client_errors_are_the_proxys_4xx() -> TestResult {
    let (_router, addr) = router().await?;
    let cases: [(&[u8], u16); 3] = [
        (b"{nope", 400),
        (
            br#"{"model":"gpt-unknown","messages":[{"role":"user","content":"hi"}]}"#,
            404,
        ),
        (br#"{"model":"auto","messages":"not a list"}"#, 400),
    ];
    for (bytes, status) in cases {
        let mut stream = Stream::open(addr).await?;
        stream
            .ask(headers(&post("/v1/chat/completions"), false))
            .await?;
        let reply = stream
            .ask(processing_request::Request::RequestBody(HttpBody {
                body: bytes.to_vec(),
                end_of_stream: true,
                ..HttpBody::default()
            }))
            .await?;
        let local = reply.immediate()?;
        assert_eq!(
            local.status.as_ref().map(|s| s.code),
            Some(i32::from(status)),
            "{}",
            String::from_utf8_lossy(bytes)
        );
        let answer: Value = serde_json::from_slice(&local.body)?;
        assert!(answer["error"]["message"].is_string(), "{answer}");
    }
    // Headers that end the request: no body will come, which is an empty body (400).
    let mut stream = Stream::open(addr).await?;
    let reply = stream
        .ask(headers(&post("/v1/chat/completions"), true))
        .await?;
    assert_eq!(
        reply.immediate()?.status.as_ref().map(|s| s.code),
        Some(400)
    );
    Ok(())
}

#[tokio::test]
async fn responses_and_plain_values_are_decided_too_and_other_paths_pass() -> TestResult {
    let (_router, addr) = router().await?;
    // Older data planes put the value in `value`.
    let mut stream = Stream::open(addr).await?;
    stream
        .ask(headers_of(&post("/v1/responses"), false, false))
        .await?;
    let sent = stream
        .ask(body(
            &json!({"model": "auto", "input": "a segfault", "stream": true}),
        ))
        .await?;
    assert_eq!(sent.body()?["model"], "Qwen/Qwen3-8B");
    assert_eq!(sent.set_headers()?["x-selected-model"], "Qwen/Qwen3-8B");

    let mut stream = Stream::open(addr).await?;
    let reply = stream
        .ask(headers(
            &[(":method", "GET"), (":path", "/v1/models")],
            true,
        ))
        .await?;
    assert!(reply.set_headers()?.is_empty());
    let answered = stream.ask(response_headers("200")).await?;
    assert!(
        answered.set_headers()?.is_empty(),
        "a passing request got decision headers"
    );
    Ok(())
}

#[tokio::test]
async fn a_reload_is_seen_by_the_next_stream() -> TestResult {
    let (router, addr) = router().await?;
    let changed = POLICY.replace("route default { to small }", "route default { to safe }");
    std::fs::write(router.policy_path(), changed)?;
    router.server.reload().await;
    let deadline = tokio::time::Instant::now() + proxy_support::PATIENCE;
    while router.server.generation() < 2 {
        if tokio::time::Instant::now() > deadline {
            return Err("the policy was not reloaded".into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let mut stream = Stream::open(addr).await?;
    stream
        .ask(headers(&post("/v1/chat/completions"), false))
        .await?;
    let sent = stream.ask(body(&user("hello"))).await?;
    assert_eq!(sent.body()?["model"], "safe-model");
    Ok(())
}

#[tokio::test]
async fn in_full_duplex_the_request_is_answered_once_its_body_is_whole() -> TestResult {
    let (_router, addr) = router().await?;
    let mut stream = Stream::open(addr).await?;
    let mut asked = post("/v1/chat/completions");
    asked.extend([("x-sr-route", "forged"), ("x-request-id", "duplex-1")]);
    let text = user("a segfault in main").to_string().into_bytes();
    let (start, end) = text.split_at(text.len() / 2);
    stream.tell(duplex(headers(&asked, false), true)).await?;
    stream.tell(duplex(chunk(start, false), false)).await?;
    stream.tell(duplex(chunk(end, true), false)).await?;

    // The headers' answer is the first one and already carries the decision: it was made
    // from the whole body.
    let first = stream.answer().await?;
    let set = first.set_headers()?;
    assert_eq!(set["x-selected-model"], "Qwen/Qwen3-8B");
    assert_eq!(set["x-sr-backend"], "sim");
    assert_eq!(first.removed()?, ["x-sr-route"]);
    assert!(first.common()?.clear_route_cache);
    let body = stream.answer().await?;
    let streamed = body.streamed()?;
    assert!(streamed.end_of_stream);
    let upstream: Value = serde_json::from_slice(&streamed.body)?;
    assert_eq!(upstream["model"], "Qwen/Qwen3-8B");
    let length: usize = set["content-length"].parse()?;
    assert_eq!(length, streamed.body.len());

    let answered = stream.ask(response_headers("200")).await?;
    assert_eq!(answered.set_headers()?["x-sr-route"], "coding");

    // A body that ends with trailers is answered at the trailers, the trailers last.
    let mut stream = Stream::open(addr).await?;
    stream
        .tell(duplex(headers(&post("/v1/chat/completions"), false), true))
        .await?;
    stream.tell(duplex(chunk(&text, false), false)).await?;
    stream
        .tell(duplex(
            processing_request::Request::RequestTrailers(HttpTrailers::default()),
            false,
        ))
        .await?;
    let first = stream.answer().await?;
    assert_eq!(first.set_headers()?["x-selected-model"], "Qwen/Qwen3-8B");
    assert!(!stream.answer().await?.streamed()?.end_of_stream);
    let trailers = stream.answer().await?;
    assert!(
        matches!(
            trailers.0,
            processing_response::Response::RequestTrailers(_)
        ),
        "{:?}",
        trailers.0
    );
    Ok(())
}

#[tokio::test]
async fn in_full_duplex_a_refusal_and_a_passing_body_answer_at_once() -> TestResult {
    let (_router, addr) = router().await?;
    let mut stream = Stream::open(addr).await?;
    stream
        .tell(duplex(headers(&post("/v1/chat/completions"), false), true))
        .await?;
    let secret = user("my password = hunter2").to_string().into_bytes();
    stream.tell(duplex(chunk(&secret, true), false)).await?;
    let local = stream.answer().await?;
    assert_eq!(
        local.immediate()?.status.as_ref().map(|s| s.code),
        Some(422)
    );

    // A path the router does not decide: its headers are answered at once and its body goes
    // back as it came, chunk by chunk.
    let mut stream = Stream::open(addr).await?;
    stream
        .tell(duplex(
            headers(&[(":method", "POST"), (":path", "/v1/embeddings")], false),
            true,
        ))
        .await?;
    let reply = stream.answer().await?;
    assert!(reply.set_headers()?.is_empty());
    stream
        .tell(duplex(chunk(b"{\"input\":", false), false))
        .await?;
    let echoed = stream.answer().await?;
    assert_eq!(echoed.streamed()?.body, b"{\"input\":");
    assert!(!echoed.streamed()?.end_of_stream);
    stream.tell(duplex(chunk(b"\"x\"}", true), false)).await?;
    let last = stream.answer().await?;
    assert_eq!(last.streamed()?.body, b"\"x\"}");
    assert!(last.streamed()?.end_of_stream);
    Ok(())
}

#[tokio::test]
async fn a_model_cooling_down_is_skipped_as_the_proxy_skips_it() -> TestResult {
    let policy = format!("{POLICY}\nfailure {{ cooldown_after = 1  cooldown = 1h }}\n");
    let router = Router::start_with(&policy, |cfg| {
        cfg.extproc = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    })
    .await?;
    let addr = router.server.extproc_addr.ok_or("no external processor")?;
    // The gateway's answer for `strong` is a 5xx: one failure is enough to cool it down.
    let mut first = Stream::open(addr).await?;
    first
        .ask(headers(&post("/v1/chat/completions"), false))
        .await?;
    let sent = first.ask(body(&user("a segfault in main"))).await?;
    assert_eq!(sent.set_headers()?["x-selected-model"], "Qwen/Qwen3-8B");
    first.ask(response_headers("503")).await?;

    let mut second = Stream::open(addr).await?;
    second
        .ask(headers(&post("/v1/chat/completions"), false))
        .await?;
    let sent = second.ask(body(&user("a segfault in main"))).await?;
    assert_eq!(sent.body()?["model"], "Qwen/Qwen3-0.6B");
    assert_eq!(sent.set_headers()?["x-selected-model"], "Qwen/Qwen3-0.6B");
    let answered = second.ask(response_headers("200")).await?;
    let decision = answered.set_headers()?;
    assert_eq!(decision["x-sr-model"], "small");
    assert_eq!(decision["x-sr-fallbacks"], "strong:cooldown");
    let metrics = router.get("/metrics").await?.text();
    assert!(
        metrics.contains("src_model_cooldowns_total{model=\"strong\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("src_fallbacks_total{from=\"strong\",reason=\"cooldown\"} 1"),
        "{metrics}"
    );
    Ok(())
}

#[tokio::test]
async fn a_backend_that_does_not_speak_the_api_is_skipped_as_the_proxy_skips_it() -> TestResult {
    // `big` is on an Anthropic backend: a chat request has no form it could take there.
    let policy = r#"
backend sim    { url = "http://127.0.0.1:9/v1"  simulated = true }
backend claude { url = "http://127.0.0.1:9/v1"  api = anthropic }
model small { backend = sim     serves = "Qwen/Qwen3-0.6B" }
model big   { backend = claude  serves = "claude-sonnet-4-5" }
route default { to big else small }
"#;
    let router = Router::start_with(policy, |cfg| {
        cfg.extproc = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    })
    .await?;
    let addr = router.server.extproc_addr.ok_or("no external processor")?;
    let mut stream = Stream::open(addr).await?;
    stream
        .ask(headers(&post("/v1/chat/completions"), false))
        .await?;
    let sent = stream.ask(body(&user("hello"))).await?;
    assert_eq!(sent.body()?["model"], "Qwen/Qwen3-0.6B");
    assert_eq!(sent.set_headers()?["x-selected-model"], "Qwen/Qwen3-0.6B");
    let answered = stream.ask(response_headers("200")).await?;
    let decision = answered.set_headers()?;
    assert_eq!(decision["x-sr-model"], "small");
    assert_eq!(decision["x-sr-fallbacks"], "big:api");

    // The proxy door answers from the same model.
    let proxied = router.chat(&user("hello"), &[]).await?;
    assert_eq!(proxied.header("x-sr-model"), Some("small"));
    assert_eq!(proxied.header("x-sr-fallbacks"), Some("big:api"));
    Ok(())
}
