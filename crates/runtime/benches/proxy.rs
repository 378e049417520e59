//! What the router adds to a request: the same small chat completion sent straight to a
//! simulator and through `src serve` in front of it (same process, loopback, keep-alive
//! clients, simulator latency model off). The difference of the medians is the router's cost:
//! body read, parse, request facts, staged evaluation, rewrite, forward, relay, log, metrics.
//! The same conversation as an Anthropic Messages request (translated to chat for the
//! simulator and back) shows what translation adds on top.

use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use src_runtime::log::RequestLog;
use src_runtime::sim::{SimConfig, SimHandle, SimModel};
use src_runtime::{Components, ServeConfig};

const BODY: &str = r#"{"model":"MODEL","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"my build fails with a compile error in the parser, what should I check first?"}],"temperature":0.2,"max_tokens":4}"#;

const MESSAGES_BODY: &str = r#"{"model":"auto","system":"You are helpful.","messages":[{"role":"user","content":"my build fails with a compile error in the parser, what should I check first?"}],"temperature":0.2,"max_tokens":4}"#;

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
        let mut model = SimModel::new("bench-model");
        model.min_output_tokens = 4;
        model.max_output_tokens = 4;
        let sim = SimHandle::spawn(SimConfig {
            models: vec![model],
            time_scale: 0.0,
            ..SimConfig::default()
        })
        .await?;
        let dir = tempfile::tempdir()?;
        let policy = format!(
            r#"
backend gpu {{ url = "{}/v1" }}
model strong {{ backend = gpu  serves = "bench-model" }}
model small  {{ backend = gpu  serves = "bench-model"  aliases = ["small-alias"] }}
signal code_talk = contains(prompt, ["stack trace", "compile error", "segfault"])
signal long_chat = tokens(history) > 2k
block secrets {{ when matches(prompt, "password\\s*=")  status = 422 }}
route coding priority 20 {{ when code_talk  to strong else small }}
route long priority 10 {{ when long_chat  to strong }}
route default {{ to small }}
"#,
            sim.base_url()
        );
        std::fs::write(dir.path().join("policy.sr"), policy)?;
        let mut cfg = ServeConfig::ephemeral(dir.path());
        cfg.watch = false;
        cfg.probe_interval = Duration::from_secs(3600);
        let server = src_runtime::spawn(cfg, Components::with_log(RequestLog::Off)).await?;
        Ok::<_, Box<dyn std::error::Error>>((sim, dir, server))
    });
    let (sim, _dir, server) = match setup {
        Ok(s) => s,
        Err(err) => {
            eprintln!("bench setup failed: {err}");
            return;
        }
    };
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let send = |url: String, body: String| {
        let client = client.clone();
        async move {
            let request = Request::post(url)
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(body)));
            let Ok(request) = request else { return 0 };
            match client.request(request).await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let _ = response.into_body().collect().await;
                    status
                }
                Err(_) => 0,
            }
        }
    };
    let direct_url = format!("{}/v1/chat/completions", sim.base_url());
    let router_url = format!("http://{}/v1/chat/completions", server.addr);
    let messages_url = format!("http://{}/v1/messages", server.addr);
    let direct_body = BODY.replace("MODEL", "bench-model");
    let routed_body = BODY.replace("MODEL", "auto");
    let messages_body = MESSAGES_BODY.to_owned();
    for (url, body) in [
        (&direct_url, &direct_body),
        (&router_url, &routed_body),
        (&messages_url, &messages_body),
    ] {
        let status = rt.block_on(send(url.clone(), body.clone()));
        if status != 200 {
            eprintln!("bench request to {url} answered {status}");
            return;
        }
    }
    let mut group = c.benchmark_group("chat_completion");
    group.bench_function("direct_to_backend", |b| {
        b.iter(|| rt.block_on(send(direct_url.clone(), direct_body.clone())))
    });
    group.bench_function("through_router", |b| {
        b.iter(|| rt.block_on(send(router_url.clone(), routed_body.clone())))
    });
    group.bench_function("messages_through_router", |b| {
        b.iter(|| rt.block_on(send(messages_url.clone(), messages_body.clone())))
    });
    group.finish();
    rt.block_on(async {
        let _ = server.shutdown().await;
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
