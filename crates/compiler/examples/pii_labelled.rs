//! The built-in personal data recognizers over the labelled set, for the comparison with
//! Presidio (`scripts/bench/pii_presidio.sh`): prints one JSON object with what they found in
//! each sentence (code point spans, as the set labels them) and how long whole passes over the
//! set took, so both detectors are scored by one script and timed on the same sentences.
//!
//! `cargo run --release -p src-compiler --example pii_labelled -- [SET] [PASSES]`

#[path = "../tests/pii_labelled/mod.rs"]
mod pii_labelled;

use src_compiler::pii::{EntityType, Recognizers};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let set = args.next().map_or_else(pii_labelled::path, Into::into);
    let passes: usize = args.next().and_then(|p| p.parse().ok()).unwrap_or(50);
    let records = pii_labelled::load(&set);
    let recognizers = pii_labelled::all_types();

    let predictions: BTreeMap<&str, Vec<pii_labelled::Span>> = records
        .iter()
        .map(|r| {
            let found = pii_labelled::predict(&recognizers, &r.text);
            (r.id.as_str(), found.into_iter().collect())
        })
        .collect();

    // The six types Presidio's pattern recognizers cover, timed apart so the speed ratio
    // can compare like with like.
    let six = Recognizers::new(&[
        EntityType::Email,
        EntityType::Phone,
        EntityType::CreditCard,
        EntityType::Iban,
        EntityType::UsSsn,
        EntityType::IpAddress,
    ])
    .unwrap_or_else(|e| panic!("built-in patterns: {e}"));
    let texts: Vec<&str> = records.iter().map(|r| r.text.as_str()).collect();
    let out = serde_json::json!({
        "sentences": records.len(),
        "labelled": records.iter().map(|r| r.entities.len()).sum::<usize>(),
        "predictions": predictions,
        "pass_seconds": time(&recognizers, &texts, passes),
        "pass_seconds_six": time(&six, &texts, passes),
    });
    println!("{out}");
}

/// Seconds each of `passes` whole passes took, `find` on every sentence: what a `pii` atom
/// does per message. Spans stay byte ranges here; the conversion is for scoring only.
fn time(recognizers: &Recognizers, texts: &[&str], passes: usize) -> Vec<f64> {
    (0..passes)
        .map(|_| {
            let start = Instant::now();
            for text in texts {
                black_box(recognizers.find(black_box(text)));
            }
            start.elapsed().as_secs_f64()
        })
        .collect()
}
