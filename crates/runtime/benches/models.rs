//! Model inference: Rust (tokenize + run + softmax, `ort` with one intra-op thread) against the
//! Python reference (`scripts/models/bench.py`: onnxruntime + tokenizers) in the same run, on the
//! same prompts — about 16 tokens and exactly 256 — single and as a batch of 32, and through the
//! micro-batcher at concurrency 16, batched (32, 2 ms) against unbatched (1).
//!
//! `cargo bench -p src-runtime --bench models [-- --quick]`; needs `scripts/models.sh`. Prints
//! medians of wall time; compare figures from one run only (the machine may be shared).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use src_dsl::ast::Device;
use src_runtime::models::{softmax, BatchOptions, Batcher, Model, ModelMetrics, Role};

const SHORT: &str = "Please summarise the main points of this article about solar power.";
const PARAGRAPH: &str =
    "The committee reviewed the quarterly results, discussed the supply chain delays that \
affected deliveries in the northern region, and asked the operations team to prepare a \
detailed plan for the next meeting, including staffing, budget and risk estimates. ";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn median_ms(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut times: Vec<f64> = (0..reps)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn texts(base: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{i} {base}")).collect()
}

/// Items per second through a batcher: 16 clients, each sending `per_client` texts in turn.
fn concurrent(model: Model, options: BatchOptions, base: &str, per_client: usize) -> f64 {
    let Ok(batcher) = Batcher::start(model, options, ModelMetrics::default()) else {
        return 0.0;
    };
    let batcher = Arc::new(batcher);
    let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    else {
        return 0.0;
    };
    let start = Instant::now();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for c in 0..16 {
            let batcher = Arc::clone(&batcher);
            let base = base.to_string();
            tasks.push(tokio::spawn(async move {
                for i in 0..per_client {
                    let _ = batcher.submit(format!("{c} {i} {base}")).await;
                }
            }));
        }
        for t in tasks {
            let _ = t.await;
        }
    });
    (16 * per_client) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let dir = repo().join("models/prompt_guard");
    let lib = std::env::var_os("ORT_DYLIB_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".cache/ort/lib/libonnxruntime.so.1.31.1"));
    if let Err(e) = src_runtime::models::load_from(&lib) {
        eprintln!("{e}: run scripts/models.sh first");
        std::process::exit(2);
    }
    let load = |threads| Model::load(&dir, Role::Guard, Device::Cpu, threads);
    let mut model = match load(1) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}: run scripts/models.sh first");
            std::process::exit(2);
        }
    };
    let scale = if quick { 0.2 } else { 1.0 };
    let reps = |n: f64| ((n * scale) as usize).max(3);
    let long = PARAGRAPH.repeat(12);
    println!("Rust (ort, 1 intra-op thread), models/prompt_guard, end to end per item:");
    for (name, base, single_reps, batch_reps, per_client) in [
        ("short", SHORT, 200.0, 30.0, 24),
        ("long", long.as_str(), 40.0, 6.0, 3),
    ] {
        let batch = texts(base, 32);
        let one = [batch[0].as_str()];
        let all: Vec<&str> = batch.iter().map(String::as_str).collect();
        let tokens = model.token_count(one[0]).unwrap_or(0);
        let single = median_ms(reps(single_reps), || {
            if let Ok(rows) = model.infer(&one) {
                rows.iter().for_each(|r| drop(softmax(r)));
            }
        });
        let batched = median_ms(reps(batch_reps), || {
            if let Ok(rows) = model.infer(&all) {
                rows.iter().for_each(|r| drop(softmax(r)));
            }
        }) / 32.0;
        println!(
            "  {name:5} ({tokens} tokens): single {single:.2} ms, batch of 32 {batched:.2} ms/item, gain {:.2}x",
            single / batched
        );
        let per_client = ((per_client as f64 * scale) as usize).max(2);
        let unbatched = load(1).map_or(0.0, |m| {
            concurrent(
                m,
                BatchOptions {
                    max: 1,
                    wait: Duration::ZERO,
                },
                base,
                per_client,
            )
        });
        let batched_rate = load(1).map_or(0.0, |m| {
            concurrent(m, BatchOptions::default(), base, per_client)
        });
        println!(
            "  {name:5} concurrency 16: unbatched {unbatched:.1} items/s, batched (32, 2 ms) {batched_rate:.1} items/s, gain {:.2}x",
            batched_rate / unbatched.max(1e-9)
        );
    }
    let python = repo().join(".cache/venv-models/bin/python");
    let mut cmd = Command::new(python);
    cmd.arg(repo().join("scripts/models/bench.py")).arg(&dir);
    if quick {
        cmd.arg("--quick");
    }
    match cmd.output() {
        Ok(out) if out.status.success() => {
            let report: serde_json::Value =
                serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
            println!("Python (onnxruntime + tokenizers, 1 intra-op thread), same prompts:");
            for name in ["short", "long"] {
                let r = &report["results"][name];
                println!(
                    "  {name:5}: single {} ms, batch of 32 {} ms/item, gain {}x",
                    r["single"]["end_to_end_ms_per_item"],
                    r["batch_32"]["end_to_end_ms_per_item"],
                    r["batching_gain_per_item"]
                );
            }
        }
        Ok(out) => eprintln!("bench.py failed: {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => eprintln!("cannot run bench.py: {e}"),
    }
}
