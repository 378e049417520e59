//! The phrase builtins on a 10 kB prompt against 200 phrases: exact `contains` (the baseline, and
//! on the prompt with its sentences on lines of their own, plain and indented, whose whitespace
//! runs are collapsed first), `fuzzy` at MIN 0.8, `fuzzy_hits` and `bm25`.
//!
//! The prompt is 10 kB of words drawn from a 2,000-word pseudo-vocabulary (lengths 2 to 11, so
//! roughly the spread of English); the phrases are drawn from another pseudo-vocabulary, a fifth
//! of them two words long, and none occurs, so every call scans the whole prompt (the worst case
//! for `contains` and `fuzzy`, which stop at the first match).
//!
//! A second group draws the phrases from the prompt's own letters, keeping only those that are
//! not 0.8 similar anywhere in it: near misses, which no character-set filter can tell apart
//! from the prompt's words. A third runs the first group's phrases over the prompt written with
//! accents and Cyrillic letters (every third word), where folding rebuilds the text: the cost of
//! normalisation, accent and look-alike folding against the ASCII prompt.

use criterion::{criterion_group, criterion_main, Criterion};
use src_compiler::text::{FuzzySet, PhraseSet};
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

    fn word(&mut self, alphabet: &[u8]) -> String {
        let len = 2 + (self.next() % 10) as usize;
        (0..len)
            .map(|_| char::from(alphabet[(self.next() % alphabet.len() as u64) as usize]))
            .collect()
    }
}

fn prompt() -> String {
    let mut rng = Lcg(7);
    let vocabulary: Vec<String> = (0..2000).map(|_| rng.word(b"etaoinshrdlucmfw")).collect();
    let mut text = String::new();
    while text.len() < 10_000 {
        let w = &vocabulary[(rng.next() % vocabulary.len() as u64) as usize];
        text.push_str(w);
        text.push_str(if rng.next().is_multiple_of(12) {
            ". "
        } else {
            " "
        });
    }
    text
}

/// 200 phrases of letters from `alphabet`, a fifth of them two words long, that `keep` accepts.
fn phrases(alphabet: &[u8], keep: impl Fn(&str) -> bool) -> Vec<String> {
    let mut rng = Lcg(11);
    let mut out = Vec::new();
    while out.len() < 200 {
        let w = rng.word(alphabet);
        let phrase = if out.len() % 5 == 0 {
            format!("{w} {}", rng.word(alphabet))
        } else {
            w
        };
        if keep(&phrase) {
            out.push(phrase);
        }
    }
    out
}

fn bench_text(c: &mut Criterion) {
    let text = prompt();
    run_group(
        c,
        "text_10kB_200_phrases",
        &text,
        phrases(b"gypbvkjxqz", |_| true),
    );
    let near_misses = phrases(b"etaoinshrdlucmfw", |p| {
        !FuzzySet::new(&[p.to_string()], 0.8).any(&text)
    });
    run_group(c, "text_10kB_200_phrases_same_letters", &text, near_misses);
    run_group(
        c,
        "text_10kB_200_phrases_accents_cyrillic",
        &disguised(&text),
        phrases(b"gypbvkjxqz", |_| true),
    );
}

/// The prompt with every third word accented (`e` → `é`, `u` → `ü`) and every fifth written
/// with Cyrillic `о` and `а` for `o` and `a`.
fn disguised(text: &str) -> String {
    text.split(' ')
        .enumerate()
        .map(|(i, w)| match (i % 3, i % 5) {
            (_, 0) => w.replace('o', "\u{43e}").replace('a', "\u{430}"),
            (0, _) => w.replace('e', "é").replace('u', "ü"),
            _ => w.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn run_group(c: &mut Criterion, name: &str, text: &str, list: Vec<String>) {
    let text = text.to_string();
    // The same prompt with a line break after each sentence, as pasted logs have, and with
    // each line indented, as pasted code is.
    let lines = text.replace(". ", ".\n");
    let indented = text.replace(". ", ".\n    ");
    let exact = PhraseSet::new(&list);
    let fuzzy = FuzzySet::new(&list, 0.8);
    assert!(
        !exact.contains(&text)
            && !exact.contains(&lines)
            && !exact.contains(&indented)
            && !fuzzy.any(&text),
        "no phrase occurs"
    );
    let mut group = c.benchmark_group(name);
    group.bench_function("contains", |b| b.iter(|| exact.contains(black_box(&text))));
    group.bench_function("contains_lines", |b| {
        b.iter(|| exact.contains(black_box(&lines)))
    });
    group.bench_function("contains_indented", |b| {
        b.iter(|| exact.contains(black_box(&indented)))
    });
    group.bench_function("fuzzy_0.8", |b| b.iter(|| fuzzy.any(black_box(&text))));
    group.bench_function("fuzzy_hits_0.8", |b| {
        b.iter(|| fuzzy.hits(black_box(&text)))
    });
    group.bench_function("bm25", |b| b.iter(|| exact.bm25(black_box(&text))));
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = bench_text
}
criterion_main!(benches);
