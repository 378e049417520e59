//! Parse + check of generated policies with 10, 100 and 1000 routes.
//!
//! The routes mix the condition shapes real policies use (class labels, score and int
//! thresholds, phrase lists, regexes, headers, boolean structure) so that every checking step,
//! the route implication analysis included, sees realistic work. The generated policies check
//! without errors (the bench asserts it), as the implication analysis only runs then.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use src_compiler::load::load_str;
use src_compiler::{check, CheckOptions};
use std::fmt::Write as _;
use std::hint::black_box;

fn policy(routes: usize) -> String {
    let mut s = String::from(
        "backend b { url = \"http://127.0.0.1:8000/v1\" }\n\
         model small { backend = b  serves = \"s\"  cost = 0.1 }\n\
         model strong { backend = b  serves = \"l\"  cost = 1.0 }\n\
         classifier domain { path = \"models/domain\"  labels = [math, code, law, other] }\n\
         guard shield { path = \"models/shield\" }\n\
         signal topic = domain(prompt)\n\
         signal attack = shield(prompt)\n\
         signal long_chat = tokens(history) > 8k\n\
         signal tier = header(\"x-tier\") ?? \"standard\"\n\
         block jailbreak { when attack > 0.9 }\n",
    );
    let labels = ["math", "code", "law", "other"];
    for i in 0..routes {
        let label = labels[i % labels.len()];
        let cond = match i % 6 {
            0 => format!("topic is {label} and tokens(prompt) > {}", 100 + i),
            1 => format!("contains(prompt, [\"word{i}\", \"phrase {i}\"]) or long_chat"),
            2 => format!(
                "attack > 0.{} and not (topic in [{label}, other])",
                1 + i % 8
            ),
            3 => format!(
                "matches(prompt, \"^ticket-{i}-[0-9]+$\") and request.tools > {}",
                i % 5
            ),
            4 => format!(
                "tier == \"gold{i}\" and (topic is {label} or words(prompt) < {})",
                10 + i
            ),
            _ => format!(
                "0.3 * attack + 0.7 * density(prompt, [\"x{i}\"]) > 0.{} and request.stream",
                1 + i % 9
            ),
        };
        let _ = writeln!(
            s,
            "route r{i} priority {} {{ when {cond}  to {} }}",
            routes - i,
            if i % 2 == 0 {
                "strong else small"
            } else {
                "small"
            }
        );
    }
    s.push_str("route default { to small }\n");
    s
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse_and_check");
    for n in [10, 100, 1000] {
        let text = policy(n);
        let outcome = check(load_str("bench.sr", &text), &CheckOptions::default());
        assert!(
            outcome.policy.is_some(),
            "the generated policy must check: {:#?}",
            outcome.diagnostics.iter().find(|d| d.is_error())
        );
        group.bench_with_input(BenchmarkId::from_parameter(n), &text, |b, text| {
            b.iter(|| {
                let outcome = check(
                    load_str("bench.sr", black_box(text)),
                    &CheckOptions::default(),
                );
                black_box(outcome.diagnostics.len())
            })
        });
    }
    group.finish();
    // Parsing alone, to tell the checker's share from the parser's.
    let mut group = c.benchmark_group("parse_only");
    for n in [10, 100, 1000] {
        let text = policy(n);
        group.bench_with_input(BenchmarkId::from_parameter(n), &text, |b, text| {
            b.iter(|| black_box(load_str("bench.sr", black_box(text)).files.len()))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
