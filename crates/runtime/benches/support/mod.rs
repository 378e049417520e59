//! Set-up the runtime's benchmarks share: the repository's paths, ONNX Runtime and a model
//! loaded as a bench needs them (or the bench ends saying how to get them), the coding policy
//! the decision benchmarks compile, its request, a runtime and a Redis client for the `PING`
//! floor, and the timing helpers (a mean over many calls, a median over rounds).

#![allow(
    dead_code,
    reason = "each benchmark uses the part of the support it needs"
)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use src_compiler::request::RequestView;
use src_compiler::{CheckOptions, CompiledPolicy, EngineKind};
use src_dsl::ast::Device;
use src_runtime::models::{Model, Role};
use tokio::runtime::Runtime;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Loads ONNX Runtime from `$ORT_DYLIB_PATH` or where `scripts/models.sh` puts it; ends the
/// bench (exit 2) when it cannot.
pub fn load_onnx_runtime() {
    let lib = std::env::var_os("ORT_DYLIB_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".cache/ort/lib/libonnxruntime.so.1.31.1"));
    if let Err(e) = src_runtime::models::load_from(&lib) {
        eprintln!("{e}: run scripts/models.sh first");
        std::process::exit(2);
    }
}

/// `loaded`, or the end of the bench (exit 2) saying how to build the model.
pub fn model_or_exit<E: std::fmt::Display>(loaded: Result<Model, E>) -> Model {
    match loaded {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}: run scripts/models.sh first");
            std::process::exit(2);
        }
    }
}

/// The model in `dir` on the CPU with `threads` intra-op threads; see [`model_or_exit`].
pub fn load_model(dir: &Path, role: Role, threads: usize) -> Model {
    model_or_exit(Model::load(dir, role, Device::Cpu, threads))
}

/// Two simulated models and a coding route to the strong one.
pub const CODING_POLICY: &str = r#"
backend sim { url = "http://127.0.0.1:9/v1"  simulated = true }
model small  { backend = sim  serves = "small"  cost = 0.1 }
model strong { backend = sim  serves = "strong" cost = 1.0 }
route coding priority 10 { when contains(prompt, ["stack trace", "segfault", "compile error"])  to strong }
route default { to small }
"#;

/// `text` checked and compiled for the JIT.
pub fn compile(text: &str) -> CompiledPolicy {
    let checked = src_compiler::check(
        src_compiler::load::load_str("bench.sr", text),
        &CheckOptions::default(),
    )
    .policy
    .unwrap_or_else(|| panic!("the bench policy does not check"));
    match src_compiler::compile(checked, EngineKind::Jit) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    }
}

/// A chat request about a segfault (the coding route's), with a key and `extra` headers.
pub fn coding_request(extra: &[(&str, &str)]) -> RequestView {
    let body = serde_json::json!({
        "model": "auto",
        "messages": [
            {"role": "system", "content": "You are a careful coding assistant."},
            {"role": "user", "content": "my program segfaults after the compile error is fixed"}
        ]
    });
    let mut headers = vec![("authorization".to_owned(), "Bearer sk-bench".to_owned())];
    headers.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    RequestView::from_chat(&body, &headers).unwrap_or_default()
}

/// A single-threaded runtime with IO and time.
pub fn runtime() -> Runtime {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("{e}"),
    }
}

/// A connection of the `redis` client to `url`, for a `PING` through it.
pub fn pinger(rt: &Runtime, url: &str) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(url).unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(client.get_multiplexed_async_connection())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// One `PING` through `connection`; the answer.
pub fn ping(rt: &Runtime, connection: &mut redis::aio::MultiplexedConnection) -> String {
    rt.block_on(redis::cmd("PING").query_async(connection))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The mean time of `iters` calls of `f`.
pub fn mean(iters: u32, mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        f();
    }
    start.elapsed() / iters
}

/// The middle value (the upper one of an even count); `None` when there is none.
pub fn middle<T: Copy + PartialOrd>(mut values: Vec<T>) -> Option<T> {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    values.get(values.len() / 2).copied()
}

/// The median of `values`; NaN when there are none.
pub fn median(values: Vec<f64>) -> f64 {
    middle(values).unwrap_or(f64::NAN)
}

/// The median seconds of `reps` calls of `f`, after one untimed call.
pub fn median_secs(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    median(
        (0..reps)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed().as_secs_f64()
            })
            .collect(),
    )
}
