//! The model memo in an agent's tool loop: ten turns of one task (the same last user message,
//! a growing history of tool calls and results) through `src serve` with a prompt guard and a
//! domain classifier on `prompt` (the repository's real models), with the memo off
//! (`SRC_MODEL_MEMO_BYTES=0`) and on. Reported: model calls per loop and the mean routing
//! latency per turn (`src_routing_seconds`, from parsed request to decision), and the ratio.
//!
//! Each loop is a new task, so the memo carries nothing from one loop to the next: a loop pays
//! its first turn's model calls on both sides. The two servers run in the same process and
//! alternate loops, so a change in the machine's load falls on both.
//!
//! `cargo bench -p src-runtime --bench memo [-- --quick]`; needs `scripts/models.sh`.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::json;
use src_runtime::hooks::NoSessions;
use src_runtime::log::RequestLog;
use src_runtime::models::{MemoOptions, ModelOptions, OnnxModels};
use src_runtime::{Components, ServeConfig, ServerHandle};
use support::repo;

const TURNS: usize = 10;

type Error = Box<dyn std::error::Error>;

/// The guard reads each prompt whole (`window = 256`), as when the memo's figures were first
/// taken: in 32-token windows one window of the benign task text scores 0.51 and the block
/// would refuse every loop.
fn policy(models: &Path) -> String {
    let models = models.display();
    format!(
        r#"
backend sim {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model small  {{ backend = sim  serves = "Qwen/Qwen3-0.6B" }}
model strong {{ backend = sim  serves = "Qwen/Qwen3-8B" }}
guard prompt_guard {{ path = "{models}/prompt_guard"  window = 256 }}
classifier domain  {{ path = "{models}/domain"  labels = [math, code, law, other] }}
signal attack = prompt_guard(prompt)
signal topic  = domain(prompt)
block injection {{ when attack > 0.5  message = "blocked by the prompt guard" }}
route maths   priority 20 {{ when topic is math  to strong }}
route default             {{ to small }}
"#
    )
}

/// Turn `turn` of loop `task`: the task's user message, then a tool call and its result for
/// every earlier turn.
fn turn_body(task: usize, turn: usize) -> String {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a careful assistant with a calculator tool."}),
        json!({"role": "user", "content": format!(
            "Task {task}: work out the compound interest on a loan of {} dollars at 4% over \
             {} years, showing each step and checking it with the calculator.",
            1000 + task * 37, 3 + task % 7)}),
    ];
    for i in 0..turn {
        let id = format!("call_{i}");
        messages.push(
            json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": id, "type": "function",
            "function": {"name": "calc", "arguments": format!("{{\"step\":{i}}}")}}]}),
        );
        messages.push(json!({"role": "tool", "tool_call_id": id,
                             "content": format!("step {i}: 1040.00")}));
    }
    json!({"model": "auto", "messages": messages, "max_tokens": 4}).to_string()
}

struct Side {
    name: &'static str,
    server: ServerHandle,
    _dir: tempfile::TempDir,
}

async fn start(name: &'static str, memo: MemoOptions, models: &Path) -> Result<Side, Error> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("policy.sr"), policy(models))?;
    let mut cfg = ServeConfig::ephemeral(dir.path());
    cfg.sim_time_scale = 0.0;
    cfg.watch = false;
    cfg.probe_interval = Duration::from_secs(3600);
    let options = ModelOptions {
        memo,
        ..ModelOptions::from_env()
    };
    let components = Components {
        models: Arc::new(OnnxModels::new(options)),
        sessions: Arc::new(NoSessions),
        log: RequestLog::Off,
        links: Default::default(),
    };
    let server = src_runtime::spawn(cfg, components).await?;
    Ok(Side {
        name,
        server,
        _dir: dir,
    })
}

type HttpClient = Client<HttpConnector, Full<Bytes>>;

async fn post(client: &HttpClient, url: &str, body: String) -> Result<(), Error> {
    let request = Request::post(url)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))?;
    let response = client.request(request).await?;
    let status = response.status().as_u16();
    let _ = response.into_body().collect().await?;
    if status != 200 {
        return Err(format!("{url} answered {status}").into());
    }
    Ok(())
}

/// `(routing seconds sum, routing count, guard calls, classifier calls)` from `/metrics`.
async fn scrape(client: &HttpClient, side: &Side) -> Result<[f64; 4], Error> {
    let url: hyper::Uri = format!("http://{}/metrics", side.server.admin_addr).parse()?;
    let body = client
        .get(url)
        .await?
        .into_body()
        .collect()
        .await?
        .to_bytes();
    let text = String::from_utf8_lossy(&body);
    // A series that is not there is an error, not a zero: a renamed metric would otherwise
    // print a bench of zeros.
    let value = |prefix: &str| -> Result<f64, Error> {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .ok_or_else(|| format!("`{prefix}` is not on the metrics page").into())
    };
    // A model's calls, summed over its series (they carry more labels than the model's name).
    let calls = |model: &str| -> Result<f64, Error> {
        let label = format!("model=\"{model}\"");
        let values: Vec<f64> = text
            .lines()
            .filter(|l| l.starts_with("src_model_calls_total{") && l.contains(&label))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .collect();
        // Before a model's first call it has no series on the page: none is a count of 0.
        Ok(values.iter().sum())
    };
    Ok([
        value("src_routing_seconds_sum ")?,
        value("src_routing_seconds_count ")?,
        calls("prompt_guard")?,
        calls("domain")?,
    ])
}

#[derive(Default, Clone, Copy)]
struct Totals {
    seconds: f64,
    turns: f64,
    guard: f64,
    classifier: f64,
    /// Routing seconds and turns after each loop's first turn.
    later_seconds: f64,
    later_turns: f64,
}

async fn run_loop(
    client: &HttpClient,
    side: &Side,
    task: usize,
    totals: &mut Totals,
) -> Result<(), Error> {
    let url = format!("http://{}/v1/chat/completions", side.server.addr);
    let before = scrape(client, side).await?;
    post(client, &url, turn_body(task, 0)).await?;
    let first = scrape(client, side).await?;
    for turn in 1..TURNS {
        post(client, &url, turn_body(task, turn)).await?;
    }
    let after = scrape(client, side).await?;
    totals.later_seconds += after[0] - first[0];
    totals.later_turns += after[1] - first[1];
    totals.seconds += after[0] - before[0];
    totals.turns += after[1] - before[1];
    totals.guard += after[2] - before[2];
    totals.classifier += after[3] - before[3];
    Ok(())
}

async fn bench(loops: usize) -> Result<(), Error> {
    let models = repo().join("models").canonicalize().map_err(|e| {
        format!("the repository's models are missing ({e}): run `scripts/models.sh` first")
    })?;
    let off = start(
        "memo off",
        MemoOptions {
            bytes: 0,
            ..MemoOptions::default()
        },
        &models,
    )
    .await?;
    let on = start("memo on", MemoOptions::default(), &models).await?;
    let client: HttpClient = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    // Untimed: the first runs at new shapes plan their memory.
    let mut warm = Totals::default();
    for side in [&off, &on] {
        run_loop(&client, side, 1_000_000, &mut warm).await?;
    }
    let mut totals = [Totals::default(); 2];
    for task in 0..loops {
        for (i, side) in [&off, &on].into_iter().enumerate() {
            // Both sides see the same tasks; their memos are separate.
            run_loop(&client, side, task, &mut totals[i]).await?;
        }
    }
    println!("{TURNS}-turn tool loop, guard + classifier on `prompt`, {loops} loops per side");
    let mut means = [0.0; 2];
    for (i, side) in [&off, &on].into_iter().enumerate() {
        let t = totals[i];
        let per_loop = |n: f64| n / loops as f64;
        means[i] = t.seconds / t.turns.max(1.0) * 1e3;
        println!(
            "  {:<9} guard calls/loop {:>4.1}  classifier calls/loop {:>4.1}  \
             mean routing latency/turn {:>8.3} ms (turns 2-{TURNS}: {:>8.3} ms)",
            side.name,
            per_loop(t.guard),
            per_loop(t.classifier),
            means[i],
            t.later_seconds / t.later_turns.max(1.0) * 1e3
        );
    }
    println!(
        "  ratio (memo off / memo on) of mean routing latency per turn: {:.1}x",
        means[0] / means[1].max(f64::MIN_POSITIVE)
    );
    for side in [off, on] {
        let _ = side.server.shutdown().await;
    }
    Ok(())
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let loops = if quick { 3 } else { 12 };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build();
    let outcome = match runtime {
        Ok(rt) => rt.block_on(bench(loops)),
        Err(e) => Err(e.into()),
    };
    if let Err(err) = outcome {
        eprintln!("memo bench failed: {err}");
        std::process::exit(1);
    }
}
