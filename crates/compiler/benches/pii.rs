//! The built-in personal data recognizers (`pii` with every type on) over a 10 kB prompt,
//! against `contains` with ten phrases on the same text in the same run (the baseline), and
//! the one-pass search against the search family by family it replaced (`_per_family`, the
//! reference it is tested against) in the same run.
//!
//! The prompt is prose from a pseudo-vocabulary with what makes recognizers work in real text:
//! numbers of every length, dates, times, version strings, order numbers, hyphenated words,
//! `::` paths. The clean prompt holds none of the nine types (every recognizer's candidates are
//! refused or never found: the common case); the second holds two entities of each type spread
//! through it, so every family's candidates are found and validated.

use criterion::{criterion_group, criterion_main, Criterion};
use src_compiler::pii::{EntityType, Recognizers};
use src_compiler::text::PhraseSet;
use std::hint::black_box;
use std::time::Duration;

/// A deterministic pseudo-random sequence (a 64-bit LCG), so every run sees the same text.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

const NOISE: &[&str] = &[
    "version 1.2.3",
    "order 12345678",
    "on 2024-01-15",
    "at 12:30:45",
    "build 4.18.0-425",
    "std::io::Error",
    "item #40213",
    "well-known",
    "v2.0.0.1",
    "3 x 4 = 12",
    "ticket 4111 1111 1111 1112",
];

const ENTITIES: &[&str] = &[
    "jane.doe@example.com",
    "+44 20 7946 0958",
    "4111 1111 1111 1111",
    "DE89 3704 0044 0532 0130 00",
    "123-45-6789",
    "192.168.0.1",
    "AKIAIOSFODNN7EXAMPLE",
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n-----END PRIVATE KEY-----",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl",
];

fn prompt(entities: bool) -> String {
    let mut rng = Lcg(7);
    let letters = b"etaoinshrdlucmfw";
    let mut text = String::new();
    let mut placed = 0;
    while text.len() < 10_000 {
        let r = rng.next();
        if r.is_multiple_of(17) {
            text.push_str(NOISE[(rng.next() % NOISE.len() as u64) as usize]);
        } else if entities && r % 29 == 1 && placed < 2 * ENTITIES.len() {
            text.push_str(ENTITIES[placed % ENTITIES.len()]);
            placed += 1;
        } else {
            let len = 2 + (rng.next() % 10) as usize;
            text.extend((0..len).map(|_| char::from(letters[(rng.next() % 16) as usize])));
        }
        text.push_str(if rng.next().is_multiple_of(12) {
            ". "
        } else {
            " "
        });
    }
    text
}

fn bench(c: &mut Criterion) {
    let all = Recognizers::new(&EntityType::ALL)
        .unwrap_or_else(|e| panic!("the recognizers do not compile: {e}"));
    let phrases: Vec<String> = [
        "stack trace",
        "segfault",
        "compile error",
        "refund",
        "password reset",
        "kubernetes",
        "invoice",
        "outage",
        "ransomware",
        "jailbreak",
    ]
    .map(String::from)
    .to_vec();
    let contains = PhraseSet::new(&phrases);
    let clean = prompt(false);
    let with = prompt(true);
    assert!(
        all.find(&clean).is_empty(),
        "the clean prompt holds an entity"
    );
    let found = all.find(&with);
    assert_eq!(
        found,
        all.find_per_family(&with),
        "the two searches disagree"
    );
    for t in EntityType::ALL {
        assert!(found.iter().any(|f| f.kind == t), "no {t} in the prompt");
    }
    assert!(!contains.contains(&clean) && !contains.contains(&with));

    let mut g = c.benchmark_group("pii_10kB");
    g.measurement_time(Duration::from_secs(3));
    g.bench_function("contains_10_phrases_clean", |b| {
        b.iter(|| contains.contains(black_box(&clean)))
    });
    g.bench_function("all_types_clean", |b| {
        b.iter(|| all.find(black_box(&clean)))
    });
    g.bench_function("all_types_clean_per_family", |b| {
        b.iter(|| all.find_per_family(black_box(&clean)))
    });
    g.bench_function("contains_10_phrases_entities", |b| {
        b.iter(|| contains.contains(black_box(&with)))
    });
    g.bench_function("all_types_18_entities", |b| {
        b.iter(|| all.find(black_box(&with)))
    });
    g.bench_function("all_types_18_entities_per_family", |b| {
        b.iter(|| all.find_per_family(black_box(&with)))
    });
    g.bench_function("any_all_types_clean", |b| {
        b.iter(|| all.any(black_box(&clean)))
    });
    g.bench_function("any_all_types_entities", |b| {
        b.iter(|| all.any(black_box(&with)))
    });
    g.finish();

    // Each type alone on the clean prompt: where the time of `all_types_clean` goes.
    let mut g = c.benchmark_group("pii_10kB_clean_one_type");
    g.measurement_time(Duration::from_secs(2));
    for t in EntityType::ALL {
        let one = Recognizers::new(&[t])
            .unwrap_or_else(|e| panic!("the recognizers do not compile: {e}"));
        g.bench_function(t.name(), |b| b.iter(|| one.find(black_box(&clean))));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
