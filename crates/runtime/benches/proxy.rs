//! What the router adds to a request: the same small chat completion sent straight to a
//! simulator and through `src serve` in front of it (same process, loopback, keep-alive
//! clients, simulator latency model off). The difference of the medians is the router's cost:
//! body read, parse, request facts, staged evaluation, rewrite, forward, relay, log, metrics.
//! The same conversation as an Anthropic Messages request (translated to chat for the
//! simulator and back) shows what translation adds on top, and the same conversation as a
//! Responses request what that door adds: `responses_through_router` from a client without an
//! API key (nothing is kept for it, under the default `anonymous = isolate`), and
//! `responses_kept_through_router` from one with a key, whose answer the router keeps in its
//! response store for a next turn.
//!
//! Redaction's share: a request carrying five entities (two email addresses, a phone number,
//! an IP address, an IBAN) sent straight to the simulator, through a router whose one route
//! forwards it as it is, and through one whose same route has `redact` on all four types
//! (the body searched, its strings with entities rewritten with placeholders; the answer
//! searched for them). The same request sent again is what a conversation's history is at every
//! turn; `redacted_first_seen` gives every request a phone number the router has not seen
//! before, so the number is validated each time rather than remembered. The conversation
//! benches send a conversation that grows, through the plain route and the redacting one: each
//! turn resends the history (the five entities' message first, the assistant's answers between)
//! and adds one user message carrying one entity new to the router, eight turns a
//! conversation. Requests carry an API key, as a tenant's do: the router remembers what a
//! tenant's texts hold, and a call without a credential is kept apart from that memo.

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

/// Five entities in one user message, the rest as `BODY`.
const FIVE_ENTITIES_BODY: &str = r#"{"model":"MODEL","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"update the contact: jane.doe@example.com, phone +44 20 7946 0958, last seen from 192.168.0.1, pays from DE89 3704 0044 0532 0130 00, and copy bob@example.org"}],"temperature":0.2,"max_tokens":4}"#;

/// The policy of the redaction group: one route, with or without `redact`.
fn redact_policy(sim_url: &str, redact: bool) -> String {
    let redact = if redact {
        r#"redact = ["email", "phone", "ip_address", "iban"]"#
    } else {
        ""
    };
    format!(
        r#"
backend gpu {{ url = "{sim_url}/v1" }}
model small {{ backend = gpu  serves = "bench-model" }}
route default {{ to small  {redact} }}
"#
    )
}

/// The turns of one conversation of the conversation benches.
const TURNS: u32 = 8;

/// Turn `turn` (from 0) of conversation `n` of the conversation benches, as JSON: the system
/// prompt, the five entities' message, and one user message per later turn, each with one
/// entity no earlier turn of any conversation carried (an email address, a phone number or an
/// IP address in turn), the assistant's short answer between two user messages.
fn conversation_body(n: u32, turn: u32) -> String {
    let first = FIVE_ENTITIES_BODY
        .split(r#""content":""#)
        .nth(2)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default();
    let mut messages = vec![
        serde_json::json!({"role": "system", "content": "You are helpful."}),
        serde_json::json!({"role": "user", "content": first}),
    ];
    for t in 1..=turn {
        messages.push(serde_json::json!({"role": "assistant", "content": "Noted, I have updated the contact."}));
        let id = n * TURNS + t;
        let entity = match t % 3 {
            0 => format!("the new address is user{id}@example.com"),
            1 => format!("the new number is +44 20 7946 {:04}", id % 10_000),
            _ => format!(
                "the new address is 10.{}.{}.{}",
                (id >> 16) & 255,
                (id >> 8) & 255,
                id & 255
            ),
        };
        messages.push(serde_json::json!({"role": "user", "content": format!("also, {entity}, please keep it")}));
    }
    serde_json::json!({"model": "auto", "messages": messages, "temperature": 0.2, "max_tokens": 4})
        .to_string()
}

/// The API key the bench's requests carry: one tenant's.
const API_KEY: &str = "Bearer sk-bench-tenant";

/// The same conversation as a Responses request: `instructions`, then an input item list.
const RESPONSES_BODY: &str = r#"{"model":"auto","instructions":"You are helpful.","input":[{"role":"user","content":[{"type":"input_text","text":"my build fails with a compile error in the parser, what should I check first?"}]}],"temperature":0.2,"max_output_tokens":4}"#;

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
        let mut redacting = Vec::new();
        for redact in [false, true] {
            let dir = tempfile::tempdir()?;
            std::fs::write(
                dir.path().join("policy.sr"),
                redact_policy(&sim.base_url(), redact),
            )?;
            let mut cfg = ServeConfig::ephemeral(dir.path());
            cfg.watch = false;
            cfg.probe_interval = Duration::from_secs(3600);
            let server = src_runtime::spawn(cfg, Components::with_log(RequestLog::Off)).await?;
            redacting.push((dir, server));
        }
        Ok::<_, Box<dyn std::error::Error>>((sim, dir, server, redacting))
    });
    let (sim, _dir, server, redacting) = match setup {
        Ok(s) => s,
        Err(err) => {
            eprintln!("bench setup failed: {err}");
            return;
        }
    };
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let send_as = |url: String, body: String, key: Option<&'static str>| {
        let client = client.clone();
        async move {
            let mut request = Request::post(url).header("content-type", "application/json");
            if let Some(key) = key {
                request = request.header("authorization", key);
            }
            let request = request.body(Full::new(Bytes::from(body)));
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
    // Every request carries one tenant's key, but the keyless Responses bench's.
    let send = |url: String, body: String| send_as(url, body, Some(API_KEY));
    const KEY: Option<&str> = Some(API_KEY);
    let direct_url = format!("{}/v1/chat/completions", sim.base_url());
    let router_url = format!("http://{}/v1/chat/completions", server.addr);
    let messages_url = format!("http://{}/v1/messages", server.addr);
    let direct_body = BODY.replace("MODEL", "bench-model");
    let routed_body = BODY.replace("MODEL", "auto");
    let messages_body = MESSAGES_BODY.to_owned();
    let responses_url = format!("http://{}/v1/responses", server.addr);
    let responses_body = RESPONSES_BODY.to_owned();
    for (url, body) in [
        (&direct_url, &direct_body),
        (&router_url, &routed_body),
        (&messages_url, &messages_body),
        (&responses_url, &responses_body),
    ] {
        let status = rt.block_on(send(url.clone(), body.clone()));
        if status != 200 {
            eprintln!("bench request to {url} answered {status}");
            return;
        }
    }
    let status = rt.block_on(send_as(responses_url.clone(), responses_body.clone(), KEY));
    if status != 200 {
        eprintln!("bench request to {responses_url} with a key answered {status}");
        return;
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
    group.bench_function("responses_through_router", |b| {
        b.iter(|| rt.block_on(send_as(responses_url.clone(), responses_body.clone(), None)))
    });
    group.bench_function("responses_kept_through_router", |b| {
        b.iter(|| rt.block_on(send_as(responses_url.clone(), responses_body.clone(), KEY)))
    });
    group.finish();

    let five_direct = FIVE_ENTITIES_BODY.replace("MODEL", "bench-model");
    let five_routed = FIVE_ENTITIES_BODY.replace("MODEL", "auto");
    let [plain_url, redacted_url] =
        [0, 1].map(|i| format!("http://{}/v1/chat/completions", redacting[i].1.addr));
    // The plain route sends the values, the redacting one placeholders only.
    for (url, sends_values) in [(&plain_url, true), (&redacted_url, false)] {
        let status = rt.block_on(send(url.clone(), five_routed.clone()));
        let received = sim.received().pop().map(|r| r.body).unwrap_or_default();
        let received = String::from_utf8_lossy(&received);
        let values = ["jane.doe@example.com", "+44 20 7946 0958", "192.168.0.1"];
        let placeholders = [
            "<EMAIL_1>",
            "<EMAIL_2>",
            "<PHONE_1>",
            "<IP_ADDRESS_1>",
            "<IBAN_1>",
        ];
        let as_expected = if sends_values {
            values.iter().all(|v| received.contains(v))
        } else {
            !values.iter().any(|v| received.contains(v))
                && placeholders.iter().all(|p| received.contains(p))
        };
        if status != 200 || !as_expected {
            eprintln!("bench request to {url} answered {status}, the backend read {received}");
            return;
        }
    }
    // A number of the first-seen run is redacted as the first one was.
    let sample = five_routed.replace("+44 20 7946 0958", "+44 20 7946 9999");
    let status = rt.block_on(send(redacted_url.clone(), sample));
    let received = sim.received().pop().map(|r| r.body).unwrap_or_default();
    let received = String::from_utf8_lossy(&received);
    if status != 200 || received.contains("7946 9999") || !received.contains("<PHONE_1>") {
        eprintln!("a first-seen number was not redacted: the backend read {received}");
        return;
    }
    // A conversation's later turn: every value of every turn replaced, each new one numbered
    // after the first message's.
    let status = rt.block_on(send(redacted_url.clone(), conversation_body(100_000, 3)));
    let received = sim.received().pop().map(|r| r.body).unwrap_or_default();
    let received = String::from_utf8_lossy(&received);
    let placeholders = ["<PHONE_2>", "<IP_ADDRESS_2>", "<EMAIL_3>", "<IBAN_1>"];
    if status != 200
        || received.contains("@example.com")
        || !placeholders.iter().all(|p| received.contains(p))
    {
        eprintln!("a conversation's turn was not redacted: the backend read {received}");
        return;
    }
    let mut group = c.benchmark_group("redact_five_entities");
    group.bench_function("direct_to_backend", |b| {
        b.iter(|| rt.block_on(send(direct_url.clone(), five_direct.clone())))
    });
    group.bench_function("through_router", |b| {
        b.iter(|| rt.block_on(send(plain_url.clone(), five_routed.clone())))
    });
    group.bench_function("redacted_through_router", |b| {
        b.iter(|| rt.block_on(send(redacted_url.clone(), five_routed.clone())))
    });
    // London numbers 020 7946 0000 to 9999 in turn: more than a profiled run sends, so each is
    // new to the router (the validity memo holds 4,096).
    let mut fresh = 0u32;
    group.bench_function("redacted_first_seen", |b| {
        b.iter(|| {
            fresh = (fresh + 1) % 10_000;
            let number = format!("+44 20 7946 {fresh:04}");
            let body = five_routed.replace("+44 20 7946 0958", &number);
            rt.block_on(send(redacted_url.clone(), body))
        })
    });
    // Both routes get the same turns in the same order, from the first conversation on.
    for (name, url) in [
        ("through_router_conversation", &plain_url),
        ("redacted_conversation", &redacted_url),
    ] {
        let mut sent = 0u32;
        group.bench_function(name, |b| {
            b.iter(|| {
                let body = conversation_body(sent / TURNS, sent % TURNS);
                sent += 1;
                rt.block_on(send(url.clone(), body))
            })
        });
    }
    group.finish();
    rt.block_on(async {
        let _ = server.shutdown().await;
        for (_dir, server) in redacting {
            let _ = server.shutdown().await;
        }
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
