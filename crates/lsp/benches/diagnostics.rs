//! Diagnostics latency after an edit on a 1,000-route policy: re-parse, re-index and re-check
//! the edited policy and convert its diagnostics, which is the work the server does once the
//! debounce expires (target: ≤ 50 ms).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark fails outright on an unexpected error"
)]

use criterion::{criterion_group, criterion_main, Criterion};
use src_lsp::diagnostics::check_policy;
use src_lsp::uri::path_to_uri;
use src_lsp::workspace::{Analysis, Gathered};
use std::path::PathBuf;

fn policy(routes: usize, edit: usize) -> String {
    let mut text = String::from(
        "backend sim { url = \"http://127.0.0.1:8000/v1\"  simulated = true }\n\
         model small  { backend = sim  serves = \"Qwen/Qwen3-0.6B\"  cost = 0.1 }\n\
         model strong { backend = sim  serves = \"Qwen/Qwen3-8B\"  cost = 1.0 }\n\
         signal long_chat = tokens(history) > 2k\n",
    );
    for i in 0..routes {
        let target = if i % 2 == 0 { "strong" } else { "small" };
        text.push_str(&format!(
            "route r{i} priority {p} {{ when contains(prompt, [\"word{i}\", \"edit{edit}\"]) and long_chat  to {target} }}\n",
            p = i + 1
        ));
    }
    text.push_str("route default { to small }\n");
    text
}

fn bench(c: &mut Criterion) {
    let path = PathBuf::from("/tmp/src-lsp-bench/policy.sr");
    let uri = path_to_uri(&path).unwrap();
    let mut edit = 0;
    c.bench_function("diagnostics after an edit, 1000 routes", |b| {
        b.iter(|| {
            edit += 1;
            let gathered = Gathered {
                root: PathBuf::from("/tmp/src-lsp-bench"),
                files: vec![(uri.clone(), path.clone(), policy(1000, edit))],
            };
            let analysis = Analysis::new(gathered);
            let checked = check_policy(&analysis);
            assert_eq!(checked.per_file.len(), 1);
            checked
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
