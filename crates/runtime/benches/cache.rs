//! A cache hit's lookup with the look-alike check against the same lookup on cosine alone: the
//! request's question embedded by the repository's MiniLM (one intra-op thread), then the
//! nearest entry of a scope of 64 real entries found in the memory store, accepting the
//! candidate by cosine alone or only when `src_compiler::lookalike::agree` takes its question.
//! Also the check alone on one pair. The two lookups alternate for several rounds so that a
//! change in the machine's load falls on both; the ratio reported is the median of the rounds'.
//!
//! `cargo bench -p src-runtime --bench cache [-- --quick]`; needs `scripts/models.sh`.

mod support;

use bytes::Bytes;
use src_compiler::lookalike;
use src_runtime::cache::store::{accept_all, Lookup};
use src_runtime::cache::{CacheStore, MemoryCache, Scope};
use src_runtime::models::{Model, Role};
use support::{load_model, load_onnx_runtime, median, median_secs, repo};

/// Median microseconds of `reps` calls of `f`, after one untimed call.
fn micros(reps: usize, f: impl FnMut()) -> f64 {
    median_secs(reps, f) * 1e6
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    load_onnx_runtime();
    let mut model = load_model(&repo().join("models/minilm"), Role::Encoder, 1);
    let pairs =
        std::fs::read_to_string(repo().join("examples/cache/pairs.jsonl")).unwrap_or_default();
    let questions: Vec<String> = pairs
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["a"].as_str().map(str::to_owned))
        .take(64)
        .collect();
    let store = MemoryCache::new(10_000, 1 << 30, 1 << 20);
    let scope = Scope([1; 32]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap_or_else(|e| panic!("a runtime: {e}"));
    for q in &questions {
        let vector = model.infer(&[q.as_str()]).unwrap_or_default().remove(0);
        let _ = runtime.block_on(store.insert(
            &scope,
            &vector,
            q,
            Bytes::from_static(b"{}"),
            0,
            u64::MAX,
        ));
    }
    // A paraphrase of a stored question: a hit either way.
    let request = "How can I reset my password";
    let check = |stored: &str| lookalike::agree(request, stored).is_ok();
    let lookup = |model: &mut Model, with_check: bool| {
        let vector = model.infer(&[request]).unwrap_or_default().remove(0);
        let found = if with_check {
            runtime.block_on(store.nearest(Lookup {
                scope: &scope,
                vector: &vector,
                threshold: 0.86,
                now_ms: 1,
                ttl_ms: u64::MAX,
                accept: &check,
            }))
        } else {
            runtime.block_on(store.nearest(Lookup {
                scope: &scope,
                vector: &vector,
                threshold: 0.86,
                now_ms: 1,
                ttl_ms: u64::MAX,
                accept: &accept_all,
            }))
        };
        assert!(found.is_ok_and(|n| n.body.is_some()), "a hit");
    };
    let reps = if quick { 40 } else { 200 };
    let rounds = if quick { 3 } else { 7 };
    let mut ratios = Vec::new();
    let (mut plain, mut checked) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let p = micros(reps, || lookup(&mut model, false));
        let c = micros(reps, || lookup(&mut model, true));
        ratios.push(c / p);
        plain.push(p);
        checked.push(c);
    }
    let alone = micros(reps * 10, || {
        let _ = lookalike::agree("convert 5 km to miles", "how many miles is 5 km");
    });
    println!("scope of {} entries, MiniLM on one thread", questions.len());
    println!(
        "hit, cosine only:     {:8.1} µs (median of rounds)",
        median(plain)
    );
    println!("hit, with the check:  {:8.1} µs", median(checked));
    println!("the check on one pair: {:7.1} µs", alone);
    println!("ratio with/without:   {:8.3}", median(ratios));
}
