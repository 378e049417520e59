//! A `detector` with the repository's token-classification model (`models/pii_ner`): the Rust
//! runtime reads the same entities as the Python reference (`scripts/models/reference.py
//! --entities`, onnxruntime + tokenizers) span for span, scores to 1e-4, multi-byte names
//! included; a long text read in windows finds the entities of every window once; and through
//! `src serve`, `block names { when people(prompt, [PERSON]) }` refuses a prompt naming a person
//! and forwards one that names none, with one model run per text whatever types are asked.

use src_dsl::ast::Device;
use src_runtime::models::{Model, ModelOptions, Reading, Role};
use src_testkit::models::{load_library, model_dir, reference_entities, sample, serve};
use src_testkit::TestResult;

const TOLERANCE: f64 = 1e-4;

fn texts() -> Vec<&'static str> {
    vec![
        "My name is Sarah Johnson and I live in Berlin.",
        "Please send the invoice to Marco Rossi in Milan before Friday.",
        "Zoë Müller flew from Zürich to São Paulo with José Álvarez.",
        "Olga Petrova met Hiroshi Tanaka in Kyoto last spring.",
        "The meeting with Dr. Amelia Clarke is in Toronto.",
        "Our Q3 roadmap covers the new billing service and the API.",
        "can you refactor this function to use iterators?",
        "",
    ]
}

/// (type, start, end, score) of the reference's entities of one result.
fn expected(result: &serde_json::Value) -> TestResult<Vec<(String, usize, usize, f64)>> {
    result["entities"]
        .as_array()
        .ok_or("no entities")?
        .iter()
        .map(|e| {
            Ok((
                e["entity"].as_str().ok_or("no entity")?.to_string(),
                e["start"].as_u64().ok_or("no start")? as usize,
                e["end"].as_u64().ok_or("no end")? as usize,
                e["score"].as_f64().ok_or("no score")?,
            ))
        })
        .collect()
}

#[test]
fn detector_entities_match_the_reference() -> TestResult {
    load_library()?;
    let dir = model_dir("pii_ner")?;
    let texts = texts();
    let reference = reference_entities(&dir, &texts)?;
    let results = reference["results"].as_array().ok_or("no results")?;
    assert_eq!(results.len(), texts.len());
    let mut model = Model::load(&dir, Role::Detector, Device::Cpu, 1)?;
    let types = model.entity_types().to_vec();
    assert!(types.iter().any(|t| t == "PERSON"), "{types:?}");
    let mut compared = 0;
    for (text, result) in texts.iter().zip(results) {
        let want = expected(result)?;
        let got = model.detect(text, Reading::FIRST)?;
        assert_eq!(got.len(), want.len(), "`{text}`: {got:?} against {want:?}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(
                (types[g.kind].as_str(), g.start, g.end),
                (w.0.as_str(), w.1, w.2),
                "`{text}`: span of {g:?}"
            );
            // Spans are byte offsets on character boundaries.
            assert!(text.get(g.start..g.end).is_some(), "`{text}`: {g:?}");
            let diff = (f64::from(g.score) - w.3).abs();
            assert!(
                diff <= TOLERANCE,
                "`{text}`: score {} against {}",
                g.score,
                w.3
            );
            compared += 1;
        }
    }
    // The set holds persons and places: a reference that finds nothing proves nothing.
    assert!(compared >= 6, "only {compared} entities compared");
    Ok(())
}

#[test]
fn a_long_text_is_read_in_windows_and_finds_entities_in_every_one() -> TestResult {
    load_library()?;
    let dir = model_dir("pii_ner")?;
    let mut model = Model::load(&dir, Role::Detector, Device::Cpu, 1)?;
    let person = model
        .entity_types()
        .iter()
        .position(|t| t == "PERSON")
        .ok_or("no PERSON type")?;
    let opening = "My name is Sarah Johnson and I live in Berlin.";
    let closing = "Please send the invoice to Marco Rossi in Milan before Friday.";
    let filler = "the quarterly report covers revenue, costs and the roadmap. ".repeat(40);
    let text = format!("{opening} {filler}{closing}");
    let tail = text.len() - closing.len();
    // One window (the model's max_length) never reaches the closing sentence.
    let first = model.detect(&text, Reading::FIRST)?;
    assert!(first.iter().all(|e| e.end <= tail), "{first:?}");
    // Read in windows, the closing's person is found where it is in the text ...
    let whole = model.detect(
        &text,
        Reading {
            window: None,
            limit: 64,
        },
    )?;
    let closing_persons: Vec<&str> = whole
        .iter()
        .filter(|e| e.kind == person && e.start >= tail)
        .map(|e| &text[e.start..e.end])
        .collect();
    assert!(
        closing_persons.iter().any(|n| n.contains("Rossi")),
        "{closing_persons:?} in {whole:?}"
    );
    // ... and what two overlapping windows both read is one entity.
    for (i, a) in whole.iter().enumerate() {
        for b in &whole[i + 1..] {
            let overlap = a.start < b.end && b.start < a.end;
            assert!(!(a.kind == b.kind && overlap), "{a:?} and {b:?} overlap");
        }
    }
    // A text that fits one window reads the same however many windows it may take.
    let bounded = model.detect(
        opening,
        Reading {
            window: None,
            limit: 64,
        },
    )?;
    assert_eq!(bounded, model.detect(opening, Reading::FIRST)?);
    Ok(())
}

const POLICY: &str = r#"
backend sim { url = "http://127.0.0.1:9/v1"  simulated = true }
model small { backend = sim  serves = "Qwen/Qwen3-0.6B" }
model local { backend = sim  serves = "Qwen/Qwen3-8B" }

detector people { path = "{models}/pii_ner"  entities = [PERSON, LOCATION]  threshold = 0.5 }
signal names  = people(prompt, [PERSON])
signal places = people(prompt, [LOCATION])

block names { when names  status = 422  message = "names stay here" }
route places priority 10 { when places  to local }
route default { to small }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_on_a_detector_refuses_a_person_and_forwards_the_rest() -> TestResult {
    let served = serve(POLICY, ModelOptions::default()).await?;
    let calls = |metrics: &str| sample(metrics, "src_model_calls_total", "model=\"pii_ner\"");
    let (status, _, body) = served
        .chat("Can you email David Miller about the invoice?")
        .await?;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["message"], "names stay here", "{body}");

    let (status, route, body) = served
        .chat("can you refactor this function to use iterators?")
        .await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(route.as_deref(), Some("default"));
    // The block asked about persons and the route about places: one run of the text.
    assert_eq!(calls(&served.metrics().await?), 2.0);

    // The same prompt again is answered from the model memo.
    let (status, ..) = served
        .chat("Can you email David Miller about the invoice?")
        .await?;
    assert_eq!(status, 422);
    assert_eq!(calls(&served.metrics().await?), 2.0);
    Ok(())
}
