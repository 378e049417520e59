//! `bm25(t, [...])`: Okapi BM25 of the text, taken as the one document, against the phrases as
//! the query terms.
//!
//! `score = Σ over distinct terms of tf·(k1 + 1) / (tf + k1·(1 − b + b·|D| / avgdl))` with
//! `k1 = 1.2`, `b = 0.75`, `avgdl = 100` words and `|D| = words(t)`. With a single document the
//! inverse document frequency carries no information, so every distinct term weighs 1 and the
//! score is the sum of BM25's saturated term frequencies: each term adds at most `k1 + 1 = 2.2`,
//! and a text longer than `avgdl` words needs more occurrences for the same score. A term's
//! occurrences (`tf`) are counted by the rules of `contains` (folded, on word boundaries,
//! overlapping occurrences each counted).

use super::{words, PhraseSet};
use std::ops::ControlFlow;

/// Term frequency saturation.
pub const K1: f64 = 1.2;
/// Length normalisation strength.
pub const B: f64 = 0.75;
/// The document length, in words, at which no length normalisation applies.
pub const AVGDL: f64 = 100.0;

impl PhraseSet {
    /// The BM25 score of `text` for this list's distinct phrases as query terms.
    pub fn bm25(&self, text: &str) -> f64 {
        let terms = self.edges.len();
        if terms == 0 {
            return 0.0;
        }
        let mut tf = vec![0u32; terms];
        self.scan(text, |id, _, _| {
            if let Some(n) = tf.get_mut(id) {
                *n = n.saturating_add(1);
            }
            ControlFlow::Continue(())
        });
        let length = words(text) as f64;
        let norm = K1 * (1.0 - B + B * length / AVGDL);
        tf.iter()
            .filter(|&&n| n > 0)
            .map(|&n| {
                let n = f64::from(n);
                n * (K1 + 1.0) / (n + norm)
            })
            .sum()
    }
}
