//! Detection quality of the built-in personal data recognizers on the labelled set
//! (`tests/data/pii/labelled.jsonl`): precision and recall per type, every type on at once, as
//! a policy naming them all runs them.
//!
//! A match is span-exact: a found entity counts as right only when a labelled entity has the
//! same type, start and end. A partial overlap (a card found without its last group, an address
//! with a trailing dot) counts twice against the recognizer: a false positive for the span it
//! found and a false negative for the one it missed. An entity found under another type is the
//! same: wrong for the type found, missed for the type labelled.
//!
//! The floors below are what the recognizers score today, rounded down: the test fails when a
//! recognizer gets worse on the set, and the floors are raised when one gets better. The table
//! and every mistake are printed (`cargo test --test pii_quality -- --nocapture`).

mod pii_labelled;

use pii_labelled::{all_types, load, path, predict, Span};
use src_compiler::pii::EntityType;
use std::collections::{BTreeMap, BTreeSet};

/// Per type: (precision floor, recall floor), in percent.
const FLOORS: [(&str, f64, f64); 9] = [
    ("email", 100.0, 100.0),
    ("phone", 100.0, 100.0),
    ("credit_card", 100.0, 100.0),
    ("iban", 100.0, 100.0),
    ("us_ssn", 100.0, 100.0),
    ("ip_address", 100.0, 100.0),
    ("api_key", 100.0, 100.0),
    ("private_key", 100.0, 100.0),
    ("jwt", 100.0, 100.0),
];

#[derive(Default)]
struct Counts {
    tp: usize,
    fp: usize,
    fn_: usize,
}

impl Counts {
    fn precision(&self) -> f64 {
        percent(self.tp, self.tp + self.fp)
    }
    fn recall(&self) -> f64 {
        percent(self.tp, self.tp + self.fn_)
    }
}

/// `n / d` in percent; 100 when there is nothing to get wrong.
fn percent(n: usize, d: usize) -> f64 {
    if d == 0 {
        100.0
    } else {
        100.0 * n as f64 / d as f64
    }
}

#[test]
fn recognizers_hold_their_precision_and_recall_on_the_labelled_set() {
    let named: Vec<&str> = FLOORS.iter().map(|f| f.0).collect();
    let all: Vec<&str> = EntityType::ALL.iter().map(|t| t.name()).collect();
    assert_eq!(named, all, "a floor for every built-in type");
    let records = load(&path());
    assert!(
        records.len() >= 300,
        "the set has {} sentences",
        records.len()
    );
    let recognizers = all_types();
    let mut counts: BTreeMap<String, Counts> = BTreeMap::new();
    let mut mistakes = Vec::new();
    for record in &records {
        let gold: BTreeSet<Span> = record.entities.iter().cloned().collect();
        let found = predict(&recognizers, &record.text);
        for span in found.union(&gold) {
            let c = counts.entry(span.kind.clone()).or_default();
            match (found.contains(span), gold.contains(span)) {
                (true, true) => c.tp += 1,
                (true, false) => c.fp += 1,
                (false, _) => c.fn_ += 1,
            }
            if found.contains(span) != gold.contains(span) {
                let what = if gold.contains(span) {
                    "missed"
                } else {
                    "wrong"
                };
                let value: String = record
                    .text
                    .chars()
                    .skip(span.start)
                    .take(span.end - span.start)
                    .collect();
                mistakes.push(format!("{what} {} {}: {value:?}", span.kind, record.id));
            }
        }
    }
    println!("type          labelled  found  precision  recall");
    let mut failures = Vec::new();
    for (name, p_floor, r_floor) in FLOORS {
        let c = counts.remove(name).unwrap_or_default();
        println!(
            "{name:<13} {:>8} {:>6} {:>9.1}% {:>6.1}%",
            c.tp + c.fn_,
            c.tp + c.fp,
            c.precision(),
            c.recall()
        );
        assert!(c.tp + c.fn_ > 0, "the set labels no {name}");
        if c.precision() < p_floor || c.recall() < r_floor {
            failures.push(format!(
                "{name}: precision {:.1}% (floor {p_floor}%), recall {:.1}% (floor {r_floor}%)",
                c.precision(),
                c.recall()
            ));
        }
    }
    assert!(
        counts.is_empty(),
        "types outside the floors: {:?}",
        counts.keys()
    );
    for m in &mistakes {
        println!("{m}");
    }
    assert!(
        failures.is_empty(),
        "below the floors:\n{}",
        failures.join("\n")
    );
}
