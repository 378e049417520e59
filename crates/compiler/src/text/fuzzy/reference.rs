//! The measure of `fuzzy` and `fuzzy_hits` computed the straightforward way, for tests to hold
//! the fast [`FuzzySet`](super::FuzzySet) to: every phrase at every run of the text's words, the
//! word similarities from `strsim`'s optimal string alignment, no index and no pruning.

use super::{fold, segment, EPSILON};

fn words(text: &str) -> Vec<String> {
    segment(&fold(text)).map(str::to_owned).collect()
}

fn similarity(a: &str, b: &str) -> f64 {
    let longest = a.chars().count().max(b.chars().count());
    1.0 - strsim::osa_distance(a, b) as f64 / longest as f64
}

/// The distinct phrases' word lists, in list order.
fn phrases(list: &[String]) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    for p in list {
        let w = words(p);
        if !w.is_empty() && !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

fn matches(text: &[String], phrase: &[String], min: f64) -> bool {
    let k = phrase.len();
    text.windows(k).any(|run| {
        let total = run
            .iter()
            .zip(phrase)
            .map(|(t, p)| similarity(t, p))
            .fold(0.0, |sum, s| sum + s);
        total >= min * k as f64 - EPSILON
    })
}

/// How many distinct phrases of `list` match `text` at `min`.
pub(in crate::text) fn hits(text: &str, list: &[String], min: f64) -> usize {
    let text = words(text);
    phrases(list)
        .iter()
        .filter(|p| matches(&text, p, min))
        .count()
}
