//! Model inference: Rust (tokenize + run + softmax, `ort` with one intra-op thread) against the
//! Python reference (`scripts/models/bench.py`: onnxruntime + tokenizers) on the same prompts —
//! about 16 tokens and exactly 256 — single and as a batch of 32; then the micro-batcher at
//! concurrency 16: unbatched (1) against batched (32 texts, 2 ms, the default padded-token
//! bound) and batched without the token bound.
//!
//! Rust and Python alternate for several rounds so that a change in the machine's load during
//! the run falls on both sides; the ratio reported is the median of the rounds' ratios.
//!
//! `cargo bench -p src-runtime --bench models [-- --quick]`; needs `scripts/models.sh`. Prints
//! medians of wall time; compare figures from one run only (the machine may be shared).

mod support;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use src_dsl::ast::Device;
use src_runtime::models::{softmax, BatchOptions, Batcher, Model, ModelMetrics, Reading, Role};
use support::{load_onnx_runtime, median, median_secs, model_or_exit, repo};

const SHORT: &str = "Please summarise the main points of this article about solar power.";
const PARAGRAPH: &str =
    "The committee reviewed the quarterly results, discussed the supply chain delays that \
affected deliveries in the northern region, and asked the operations team to prepare a \
detailed plan for the next meeting, including staffing, budget and risk estimates. ";

/// Median milliseconds of `reps` calls of `f`, after one untimed call.
fn median_ms(reps: usize, f: impl FnMut()) -> f64 {
    median_secs(reps, f) * 1000.0
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
    // One untimed burst first: the session's first run at a new shape plans its memory.
    let warm: Vec<_> = (0..16)
        .map(|c| batcher.submit(format!("{c} {base}"), Reading::FIRST))
        .collect();
    for rx in warm {
        let _ = rx.blocking_recv();
    }
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
                    let _ = batcher
                        .submit(format!("{c} {i} {base}"), Reading::FIRST)
                        .await;
                }
            }));
        }
        for t in tasks {
            let _ = t.await;
        }
    });
    (16 * per_client) as f64 / start.elapsed().as_secs_f64()
}

/// One side's medians for one round, in ms per item.
#[derive(Debug, Clone, Copy, Default)]
struct Figures {
    single: f64,
    batch: f64,
}

struct Case {
    name: &'static str,
    texts: Vec<String>,
    single_reps: f64,
    batch_reps: f64,
    per_client: usize,
}

fn rust_round(model: &mut Model, case: &Case, reps: impl Fn(f64) -> usize) -> Figures {
    let one = [case.texts[0].as_str()];
    let all: Vec<&str> = case.texts.iter().map(String::as_str).collect();
    let run = |model: &mut Model, texts: &[&str]| {
        if let Ok(rows) = model.infer(texts) {
            rows.iter().for_each(|r| drop(softmax(r)));
        }
    };
    Figures {
        single: median_ms(reps(case.single_reps), || run(model, &one)),
        batch: median_ms(reps(case.batch_reps), || run(model, &all)) / all.len() as f64,
    }
}

/// Runs bench.py once; answers its figures for "short" and "long".
fn python_round(dir: &Path, quick: bool) -> Option<[Figures; 2]> {
    let python = repo().join(".cache/venv-models/bin/python");
    let mut cmd = Command::new(python);
    cmd.arg(repo().join("scripts/models/bench.py")).arg(dir);
    if quick {
        cmd.arg("--quick");
    }
    let out = match cmd.output() {
        Ok(out) if out.status.success() => out,
        Ok(out) => {
            eprintln!("bench.py failed: {}", String::from_utf8_lossy(&out.stderr));
            return None;
        }
        Err(e) => {
            eprintln!("cannot run bench.py: {e}");
            return None;
        }
    };
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let figures = |name: &str| {
        let r = &report["results"][name];
        Some(Figures {
            single: r["single"]["end_to_end_ms_per_item"].as_f64()?,
            batch: r["batch_32"]["end_to_end_ms_per_item"].as_f64()?,
        })
    };
    Some([figures("short")?, figures("long")?])
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let dir = repo().join("models/prompt_guard");
    load_onnx_runtime();
    let load = |threads| Model::load(&dir, Role::Guard, Device::Cpu, threads);
    let mut model = model_or_exit(load(1));
    let scale = if quick { 0.2 } else { 1.0 };
    let reps = |n: f64| ((n * scale) as usize).max(3);
    let rounds = if quick { 1 } else { 3 };
    let cases = [
        Case {
            name: "short",
            texts: texts(SHORT, 32),
            single_reps: 200.0,
            batch_reps: 30.0,
            per_client: 24,
        },
        Case {
            name: "long",
            texts: texts(&PARAGRAPH.repeat(12), 32),
            single_reps: 40.0,
            batch_reps: 6.0,
            per_client: 4,
        },
    ];
    for case in &cases {
        let tokens = model.token_count(&case.texts[0]).unwrap_or(0);
        println!("{}: {tokens} tokens", case.name);
    }
    // ratios[case] = (single, batch) Rust / Python, one per round
    let mut ratios: [Vec<(f64, f64)>; 2] = [Vec::new(), Vec::new()];
    for round in 1..=rounds {
        let rust: Vec<Figures> = cases
            .iter()
            .map(|c| rust_round(&mut model, c, reps))
            .collect();
        let python = python_round(&dir, quick);
        for (i, case) in cases.iter().enumerate() {
            let r = rust[i];
            print!(
                "round {round} {:5}: Rust single {:.2} ms, batch of 32 {:.2} ms/item",
                case.name, r.single, r.batch
            );
            match python {
                Some(p) => {
                    let p = p[i];
                    println!(
                        " | Python single {:.2} ms, batch of 32 {:.2} ms/item | ratio single {:.2}, batch {:.2}",
                        p.single,
                        p.batch,
                        r.single / p.single,
                        r.batch / p.batch
                    );
                    ratios[i].push((r.single / p.single, r.batch / p.batch));
                }
                None => println!(),
            }
        }
    }
    for (i, case) in cases.iter().enumerate() {
        if !ratios[i].is_empty() {
            println!(
                "{:5} Rust/Python, median of {} rounds: single {:.2}, batch of 32 {:.2}",
                case.name,
                ratios[i].len(),
                median(ratios[i].iter().map(|r| r.0).collect()),
                median(ratios[i].iter().map(|r| r.1).collect())
            );
        }
    }
    for case in &cases {
        let base = case.texts[0].trim_start_matches("0 ");
        let per_client = ((case.per_client as f64 * scale) as usize).max(2);
        let rate = |options: BatchOptions| {
            load(1).map_or(0.0, |m| concurrent(m, options, base, per_client))
        };
        let unbatched = rate(BatchOptions {
            max: 1,
            wait: Duration::ZERO,
            max_tokens: None,
        });
        let batched = rate(BatchOptions::default());
        let unbounded = rate(BatchOptions {
            max_tokens: Some(usize::MAX),
            ..BatchOptions::default()
        });
        println!(
            "{:5} concurrency 16: unbatched {unbatched:.1} items/s; batched (32, 2 ms, {} tokens) {batched:.1} items/s, gain {:.2}x; without the token bound {unbounded:.1} items/s, gain {:.2}x",
            case.name,
            BatchOptions::default().token_bound("cpu"),
            batched / unbatched.max(1e-9),
            unbounded / unbatched.max(1e-9)
        );
    }
}
