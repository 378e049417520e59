//! The labelled personal data set (`tests/data/pii/labelled.jsonl`, made by `generate.py`
//! beside it) and the built-in recognizers' answers on it, in the set's coordinates: entity
//! spans in Unicode code points, so the same file scores Presidio (whose spans are Python
//! string indices) in `scripts/bench/pii_presidio.py`.

use serde::{Deserialize, Serialize};
use src_compiler::pii::{EntityType, Recognizers};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// One labelled entity: its type name and code point span.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
pub struct Span {
    #[serde(rename = "type")]
    pub kind: String,
    pub start: usize,
    pub end: usize,
}

/// One sentence of the set and the entities it holds.
#[derive(Debug, Deserialize)]
pub struct Record {
    pub id: String,
    pub text: String,
    pub entities: Vec<Span>,
}

/// Where the set lives: the workspace's `tests/data/pii/labelled.jsonl`.
pub fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/pii/labelled.jsonl")
}

/// Every record of the set at `path`, each label checked against its text: `value` is the
/// text the span covers.
pub fn load(path: &std::path::Path) -> Vec<Record> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let raw: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{e} in {l}"));
            let record: Record =
                serde_json::from_value(raw.clone()).unwrap_or_else(|e| panic!("{e} in {l}"));
            for (span, label) in record
                .entities
                .iter()
                .zip(raw["entities"].as_array().into_iter().flatten())
            {
                let covered: String = record
                    .text
                    .chars()
                    .skip(span.start)
                    .take(span.end.saturating_sub(span.start))
                    .collect();
                assert_eq!(
                    Some(covered.as_str()),
                    label["value"].as_str(),
                    "{}",
                    record.id
                );
            }
            record
        })
        .collect()
}

/// What `recognizers` find in `text`, as code point spans.
pub fn predict(recognizers: &Recognizers, text: &str) -> BTreeSet<Span> {
    let chars = |byte: usize| text[..byte].chars().count();
    recognizers
        .find(text)
        .into_iter()
        .map(|f| Span {
            kind: f.kind.name().to_string(),
            start: chars(f.span.start),
            end: chars(f.span.end),
        })
        .collect()
}

/// The recognizers of every built-in type, as a `pii` atom naming all of them builds them.
pub fn all_types() -> Recognizers {
    Recognizers::new(&EntityType::ALL).unwrap_or_else(|e| panic!("built-in patterns: {e}"))
}
