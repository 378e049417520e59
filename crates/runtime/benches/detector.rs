//! A detector's cost against its encoder's: `models/pii_ner` is the `models/minilm` graph with a
//! per-token head, so a detector call (tokenize, run, read the logits into entities) is compared
//! with an encoder call (tokenize, run, pool) on the same texts — a short prompt and a
//! paragraph, one at a time and as a batch of 32 — and a long text read in windows with the
//! encoder's windows of the same size. The ratio is what a detector adds over the encoder it
//! is built on: the head and the reading of its logits.
//!
//! The two alternate for several rounds, so that a change in the machine's load falls on both;
//! the ratio reported is the median of the rounds' ratios.
//!
//! `cargo bench -p src-runtime --bench detector [-- --quick]`; needs `scripts/models.sh`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use src_dsl::ast::Device;
use src_runtime::models::{Model, Reading, Role};

const SHORT: &str = "Can you email David Miller about the invoice before Friday?";
const PARAGRAPH: &str = "Olga Petrova met Hiroshi Tanaka in Kyoto to review the quarterly \
results, the supply chain delays that affected deliveries in the northern region, and the plan \
that Marco Rossi prepared in Milan for the next meeting, including staffing and budget. ";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn time_ms(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let times: Vec<f64> = (0..reps)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    median(times)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (rounds, reps) = if quick { (3, 5) } else { (7, 15) };
    let library = std::env::var_os("ORT_DYLIB_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".cache/ort/lib/libonnxruntime.so.1.31.1"));
    if let Err(e) = src_runtime::models::load_from(&library) {
        eprintln!("skipped: {e} (run scripts/models.sh)");
        return;
    }
    let load = |name: &str, role: Role| {
        Model::load(&repo().join("models").join(name), role, Device::Cpu, 1)
    };
    let (mut detector, mut encoder) = match (
        load("pii_ner", Role::Detector),
        load("minilm", Role::Encoder),
    ) {
        (Ok(d), Ok(e)) => (d, e),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("skipped: {e} (run scripts/models.sh)");
            return;
        }
    };
    let paragraph = PARAGRAPH.to_string();
    let long = PARAGRAPH.repeat(24);
    let batch: Vec<String> = (0..32).map(|i| format!("{i} {SHORT}")).collect();
    let batch: Vec<&str> = batch.iter().map(String::as_str).collect();
    // The detector's windows are its max_length (128); the encoder reads the same size.
    let windows = Reading {
        window: Some(detector.max_length),
        limit: 64,
    };
    println!("detector (pii_ner) against its encoder (minilm), median of {rounds} rounds");
    println!("| case | detector ms | encoder ms | detector / encoder |");
    println!("|---|---|---|---|");
    type Case<'a> = (
        &'a str,
        Box<dyn Fn(&mut Model) + 'a>,
        Box<dyn Fn(&mut Model) + 'a>,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            "short prompt, one text",
            Box::new(|m: &mut Model| drop(m.detect(SHORT, Reading::FIRST))),
            Box::new(|m: &mut Model| drop(m.infer(&[SHORT]))),
        ),
        (
            "paragraph (40 words), one text",
            Box::new(|m: &mut Model| drop(m.detect(&paragraph, Reading::FIRST))),
            Box::new(|m: &mut Model| drop(m.infer(&[paragraph.as_str()]))),
        ),
        (
            "short prompts, a batch of 32",
            Box::new(|m: &mut Model| {
                if let Ok(cut) = batch
                    .iter()
                    .map(|t| m.encode(t))
                    .collect::<Result<Vec<_>, _>>()
                {
                    drop(m.infer_encoded(&cut));
                }
            }),
            Box::new(|m: &mut Model| drop(m.infer(&batch))),
        ),
        (
            "long text in 128-token windows",
            Box::new(|m: &mut Model| drop(m.detect(&long, windows))),
            Box::new(|m: &mut Model| {
                if let Ok(cut) = m.windows(&long, windows) {
                    drop(m.infer_encoded(&cut.encodings));
                }
            }),
        ),
    ];
    for (name, run_detector, run_encoder) in &cases {
        let (mut d_ms, mut e_ms, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            let d = time_ms(reps, || run_detector(&mut detector));
            let e = time_ms(reps, || run_encoder(&mut encoder));
            d_ms.push(d);
            e_ms.push(e);
            ratios.push(d / e);
        }
        println!(
            "| {name} | {:.2} | {:.2} | {:.2}× |",
            median(d_ms),
            median(e_ms),
            median(ratios)
        );
    }
}
