//! What one external-processing exchange costs without Envoy: a tonic client on loopback speaks
//! to an in-process `src serve --extproc` as Envoy does, one stream per request.
//!
//! - `routed`: the shipped exchange for a chat completion (request headers, the buffered body,
//!   the response's headers), decided and rewritten.
//! - `passing`: the same messages on a path the router does not decide (request headers and
//!   response headers only): the protocol's own cost, no decision.
//! - `full_duplex`: the same request as Envoy sends it `FULL_DUPLEX_STREAMED`: the headers and
//!   the body back to back, answered together once the body is whole; then the response's
//!   headers (two round trips instead of three).
//!
//! The difference between `routed` and `passing` is the decision; `passing` divided by its two
//! round trips is what one message costs on the wire.

use std::net::SocketAddr;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use envoy_types::pb::envoy::config::core::v3::{HeaderMap, HeaderValue};
use envoy_types::pb::envoy::extensions::filters::http::ext_proc::v3::processing_mode::BodySendMode;
use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_client::ExternalProcessorClient;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    processing_request, HttpBody, HttpHeaders, ProcessingRequest, ProtocolConfiguration,
};
use src_runtime::log::RequestLog;
use src_runtime::{Components, ServeConfig};
use tokio::sync::mpsc;
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

const BODY: &str = r#"{"model":"auto","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"my build fails with a compile error in the parser, what should I check first?"}],"temperature":0.2,"max_tokens":4}"#;

const POLICY: &str = r#"
backend gpu { url = "http://127.0.0.1:9/v1" }
model strong { backend = gpu  serves = "bench-model" }
model small  { backend = gpu  serves = "bench-model"  aliases = ["small-alias"] }
signal code_talk = contains(prompt, ["stack trace", "compile error", "segfault"])
signal long_chat = tokens(history) > 2k
block secrets { when matches(prompt, "password\\s*=")  status = 422 }
route coding priority 20 { when code_talk  to strong else small }
route long priority 10 { when long_chat  to strong }
route default { to small }
"#;

fn headers(pairs: &[(&str, &str)], end_of_stream: bool) -> processing_request::Request {
    processing_request::Request::RequestHeaders(HttpHeaders {
        headers: Some(HeaderMap {
            headers: pairs
                .iter()
                .map(|(k, v)| HeaderValue {
                    key: (*k).into(),
                    raw_value: v.as_bytes().to_vec(),
                    ..HeaderValue::default()
                })
                .collect(),
        }),
        end_of_stream,
        ..HttpHeaders::default()
    })
}

fn response_headers() -> processing_request::Request {
    processing_request::Request::ResponseHeaders(HttpHeaders {
        headers: Some(HeaderMap {
            headers: vec![
                HeaderValue {
                    key: ":status".into(),
                    raw_value: b"200".to_vec(),
                    ..HeaderValue::default()
                },
                HeaderValue {
                    key: "content-type".into(),
                    raw_value: b"application/json".to_vec(),
                    ..HeaderValue::default()
                },
            ],
        }),
        ..HttpHeaders::default()
    })
}

fn body() -> processing_request::Request {
    processing_request::Request::RequestBody(HttpBody {
        body: BODY.as_bytes().to_vec(),
        end_of_stream: true,
        ..HttpBody::default()
    })
}

fn message(request: processing_request::Request) -> ProcessingRequest {
    ProcessingRequest {
        request: Some(request),
        ..ProcessingRequest::default()
    }
}

/// The first message of a stream in full duplex mode: Envoy states the mode on it.
fn duplex(request: processing_request::Request) -> ProcessingRequest {
    ProcessingRequest {
        protocol_config: Some(ProtocolConfiguration {
            request_body_mode: BodySendMode::FullDuplexStreamed as i32,
            ..ProtocolConfiguration::default()
        }),
        ..message(request)
    }
}

/// One stream: `rounds` is the messages sent before each wait, in order; every message gets
/// one answer. Returns the answers received.
async fn exchange(
    client: &mut ExternalProcessorClient<Channel>,
    rounds: Vec<Vec<ProcessingRequest>>,
) -> usize {
    let (send, outgoing) = mpsc::channel(8);
    let Ok(answers) = client.process(ReceiverStream::new(outgoing)).await else {
        return 0;
    };
    let mut answers = answers.into_inner();
    let mut got = 0;
    for round in rounds {
        let wanted = round.len();
        for request in round {
            if send.send(request).await.is_err() {
                return got;
            }
        }
        for _ in 0..wanted {
            match answers.message().await {
                Ok(Some(_)) => got += 1,
                _ => return got,
            }
        }
    }
    got
}

fn post() -> Vec<(&'static str, &'static str)> {
    vec![
        (":method", "POST"),
        (":path", "/v1/chat/completions"),
        (":authority", "gateway"),
        ("content-type", "application/json"),
        ("x-request-id", "bench"),
    ]
}

fn bench(c: &mut Criterion) {
    let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    else {
        eprintln!("cannot start a tokio runtime");
        return;
    };
    let setup = rt.block_on(async {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("policy.sr"), POLICY)?;
        let mut cfg = ServeConfig::ephemeral(dir.path());
        cfg.watch = false;
        cfg.probe_interval = Duration::from_secs(3600);
        cfg.extproc = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        let server = src_runtime::spawn(cfg, Components::with_log(RequestLog::Off)).await?;
        let addr = server.extproc_addr.ok_or("no external processor")?;
        let client = ExternalProcessorClient::connect(format!("http://{addr}")).await?;
        Ok::<_, Box<dyn std::error::Error>>((dir, server, client))
    });
    let (_dir, server, client) = match setup {
        Ok(s) => s,
        Err(err) => {
            eprintln!("bench setup failed: {err}");
            return;
        }
    };
    let routed = || {
        vec![
            vec![message(headers(&post(), false))],
            vec![message(body())],
            vec![message(response_headers())],
        ]
    };
    let full_duplex = || {
        vec![
            vec![duplex(headers(&post(), false)), message(body())],
            vec![message(response_headers())],
        ]
    };
    let passing = || {
        vec![
            vec![message(headers(
                &[
                    (":method", "GET"),
                    (":path", "/healthz"),
                    (":authority", "gw"),
                ],
                true,
            ))],
            vec![message(response_headers())],
        ]
    };
    for (name, rounds, want) in [
        ("routed", routed(), 3),
        ("full_duplex", full_duplex(), 3),
        ("passing", passing(), 2),
    ] {
        let mut client = client.clone();
        let got = rt.block_on(exchange(&mut client, rounds));
        if got != want {
            eprintln!("the {name} exchange got {got} answers, not {want}");
            return;
        }
    }
    let mut group = c.benchmark_group("extproc_exchange");
    group.bench_function("routed", |b| {
        let mut client = client.clone();
        b.iter(|| rt.block_on(exchange(&mut client, routed())))
    });
    group.bench_function("full_duplex", |b| {
        let mut client = client.clone();
        b.iter(|| rt.block_on(exchange(&mut client, full_duplex())))
    });
    group.bench_function("passing", |b| {
        let mut client = client.clone();
        b.iter(|| rt.block_on(exchange(&mut client, passing())))
    });
    group.finish();
    rt.block_on(async {
        let _ = server.shutdown().await;
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
