//! What a detector adds to redaction: the same chat request (a system prompt and a user message
//! naming two people and two places, with an email address and a phone number) sent straight to
//! a simulator, and through two routers in front of it whose one route redacts — one with the
//! built-in types only (`redact = ["email", "phone"]`), one with the detector's types too
//! (`redact = ["email", "phone", people.PERSON, people.LOCATION]`, `models/pii_ner`). Both
//! routers run the ONNX model runtime; only the second runs the model.
//!
//! Two cases: `resent`, the same request again and again (as a conversation's history comes back
//! every turn), where the model memo answers the detector; `first_seen`, every request with a
//! text the router has not read before (a ticket number in the user message), where the model
//! runs on every request. The three targets alternate request by request within a round, so a
//! change in the machine's load falls on all of them; the figures are the medians of the rounds'
//! medians, and the ratio is the detector route's added latency (through the router less
//! straight to the simulator) over the built-in route's.
//!
//! `cargo bench -p src-runtime --bench redact_detector [-- --quick]`; needs `scripts/models.sh`.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use src_runtime::log::RequestLog;
use src_runtime::models::{ModelOptions, OnnxModels};
use src_runtime::sim::{SimConfig, SimHandle, SimModel};
use src_runtime::{Components, ServeConfig};

const SYSTEM: &str = "You are a helpful assistant for the accounts team.";
const USER: &str = "My name is Sarah Johnson and I live in Berlin. Please send the invoice to \
                    Marco Rossi in Milan, copying sarah.j@example.com or +44 20 7946 0958.";

fn body(model: &str, ticket: Option<usize>) -> String {
    let user = match ticket {
        Some(n) => format!("{USER} Ticket {n}."),
        None => USER.to_owned(),
    };
    serde_json::json!({
        "model": model,
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
        "max_tokens": 4
    })
    .to_string()
}

fn policy(sim_url: &str, detector: bool) -> String {
    let model = support::repo().join("models/pii_ner");
    let (declared, types) = if detector {
        (
            format!(
                "detector people {{ path = \"{}\"  entities = [PERSON, LOCATION] }}",
                model.display()
            ),
            r#"["email", "phone", people.PERSON, people.LOCATION]"#,
        )
    } else {
        (String::new(), r#"["email", "phone"]"#)
    };
    format!(
        r#"
backend gpu {{ url = "{sim_url}/v1" }}
model small {{ backend = gpu  serves = "bench-model" }}
{declared}
route default {{ to small  redact = {types} }}
"#
    )
}

type Http = Client<HttpConnector, Full<Bytes>>;

async fn send(client: &Http, url: &str, body: String) -> u16 {
    let Ok(request) = Request::post(url)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
    else {
        return 0;
    };
    match client.request(request).await {
        Ok(response) => {
            let status = response.status().as_u16();
            let _ = response.into_body().collect().await;
            status
        }
        Err(_) => 0,
    }
}

fn main() {
    support::load_onnx_runtime();
    let quick = std::env::args().any(|a| a == "--quick");
    let (rounds, reps) = if quick { (3, 10) } else { (7, 40) };
    let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    else {
        eprintln!("cannot start a tokio runtime");
        std::process::exit(2);
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
        let mut routers = Vec::new();
        for detector in [false, true] {
            let dir = tempfile::tempdir()?;
            std::fs::write(
                dir.path().join("policy.sr"),
                policy(&sim.base_url(), detector),
            )?;
            let mut cfg = ServeConfig::ephemeral(dir.path());
            cfg.watch = false;
            cfg.probe_interval = Duration::from_secs(3600);
            let mut parts = Components::with_log(RequestLog::Off);
            parts.models = Arc::new(OnnxModels::new(ModelOptions::default()));
            let server = src_runtime::spawn(cfg, parts).await?;
            routers.push((dir, server));
        }
        Ok::<_, Box<dyn std::error::Error>>((sim, routers))
    });
    let (sim, routers) = match setup {
        Ok(s) => s,
        Err(err) => {
            eprintln!("bench setup failed: {err}");
            std::process::exit(2);
        }
    };
    let client: Http = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let direct = format!("{}/v1/chat/completions", sim.base_url());
    let [builtin, detected] =
        [0, 1].map(|i| format!("http://{}/v1/chat/completions", routers[i].1.addr));

    // The built-in route sends the names, the detector's placeholders only.
    for (url, names_sent) in [(&builtin, true), (&detected, false)] {
        let status = rt.block_on(send(&client, url, body("auto", None)));
        let received = sim.received().pop().map(|r| r.body).unwrap_or_default();
        let received = String::from_utf8_lossy(&received);
        let as_expected = !received.contains("sarah.j@example.com")
            && received.contains("Rossi") == names_sent
            && received.contains("<PERSON_2>") != names_sent;
        if status != 200 || !as_expected {
            eprintln!("{url} answered {status}, the backend read {received}");
            std::process::exit(1);
        }
    }

    println!(
        "redaction with a detector against the built-in types only, median of {rounds} rounds \
         of {reps} requests each"
    );
    println!("| case | direct ms | built-in types ms | with the detector ms | added: detector / built-in |");
    println!("|---|---|---|---|---|");
    let mut ticket = 0usize;
    for (case, first_seen) in [("resent", false), ("first_seen", true)] {
        let mut figures: [Vec<f64>; 3] = Default::default();
        let mut ratios = Vec::new();
        for _ in 0..rounds {
            let mut times: [Vec<f64>; 3] = Default::default();
            for _ in 0..reps {
                ticket += 1;
                let n = first_seen.then_some(ticket);
                for (i, (url, model)) in [
                    (&direct, "bench-model"),
                    (&builtin, "auto"),
                    (&detected, "auto"),
                ]
                .into_iter()
                .enumerate()
                {
                    let request = body(model, n);
                    let start = Instant::now();
                    let status = rt.block_on(send(&client, url, request));
                    times[i].push(start.elapsed().as_secs_f64() * 1000.0);
                    if status != 200 {
                        eprintln!("{url} answered {status}");
                        std::process::exit(1);
                    }
                }
            }
            let [d, b, x] = times.map(support::median);
            ratios.push((x - d) / (b - d));
            for (all, m) in figures.iter_mut().zip([d, b, x]) {
                all.push(m);
            }
        }
        let [d, b, x] = figures.map(support::median);
        println!(
            "| {case} | {d:.3} | {b:.3} | {x:.3} | {:.2}× |",
            support::median(ratios)
        );
    }
}
