//! Typo-tolerant phrase matching: `fuzzy(t, [...], MIN)` and `fuzzy_hits(t, [...], MIN)`.
//!
//! The measure, which `docs/language.md` repeats for policy authors:
//! - text and phrases are folded as for `contains` ([`fold`]) and cut into words by Unicode word
//!   segmentation (UAX #29; a Han or Kana character is a word of its own);
//! - two words are `1 - d / max(len)` similar, where `len` counts characters and `d` is the
//!   optimal-string-alignment distance (Levenshtein plus the swap of two adjacent characters,
//!   each edit costing 1), so `urgnet` is `1 - 1/6 ≈ 0.83` similar to `urgent`;
//! - a phrase of `k` words matches where some run of `k` consecutive words of the text has a mean
//!   word similarity of at least `MIN` (word `j` of the run against word `j` of the phrase).
//!
//! Phrases are folded, split and deduplicated once, at policy load, into [`FuzzySet`]. A request
//! costs one fold and one segmentation of its text, then per distinct word of the text only the
//! phrase words whose length can reach the threshold are compared (words of length `L` can only
//! be `s` similar to words of length `s·L ..= L/s`), each first through a character-set bound and
//! then a distance computation that gives up as soon as the bound is exceeded.

use super::fold;
use std::collections::{HashMap, HashSet};
use unicode_segmentation::UnicodeSegmentation;

/// Slack of the threshold comparison, so that a similarity computed as `1 - 1/5` meets a
/// written `0.8` whatever the rounding of either.
const EPSILON: f64 = 1e-9;

/// A precompiled fuzzy phrase list with its threshold.
#[derive(Debug, Clone)]
pub struct FuzzySet {
    /// Distinct words of the phrases.
    words: Vec<Word>,
    /// Word ids by character length, for the length window of a text word.
    by_len: Vec<Vec<u32>>,
    /// Distinct phrases as word ids; a phrase without words (only punctuation) never matches.
    phrases: Vec<Vec<u32>>,
    min: f64,
    /// The lowest word similarity that can still take part in a match: in a run of `k` words
    /// the other `k - 1` contribute at most 1 each.
    floor: f64,
}

#[derive(Debug, Clone)]
struct Word {
    chars: Box<[char]>,
    mask: u64,
}

impl FuzzySet {
    /// `min` is the checked threshold in (0, 1].
    pub fn new(phrases: &[String], min: f64) -> FuzzySet {
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut words: Vec<Word> = Vec::new();
        let mut seen: HashSet<Vec<u32>> = HashSet::new();
        let mut out: Vec<Vec<u32>> = Vec::new();
        for phrase in phrases {
            let folded = fold(phrase);
            let phrase_words: Vec<u32> = segment(&folded)
                .map(|w| {
                    *ids.entry(w.to_string()).or_insert_with(|| {
                        let chars: Box<[char]> = w.chars().collect();
                        words.push(Word {
                            mask: mask(&chars),
                            chars,
                        });
                        (words.len() - 1) as u32
                    })
                })
                .collect();
            if !phrase_words.is_empty() && seen.insert(phrase_words.clone()) {
                out.push(phrase_words);
            }
        }
        let longest = out.iter().map(Vec::len).max().unwrap_or(1);
        let floor = (1.0 - longest as f64 * (1.0 - min)).max(0.0);
        let max_len = words.iter().map(|w| w.chars.len()).max().unwrap_or(0);
        let mut by_len = vec![Vec::new(); max_len + 1];
        for (id, w) in words.iter().enumerate() {
            by_len[w.chars.len()].push(id as u32);
        }
        FuzzySet {
            words,
            by_len,
            phrases: out,
            min,
            floor,
        }
    }

    /// Whether any phrase matches.
    pub fn any(&self, text: &str) -> bool {
        let scan = self.prepare(text);
        self.phrases.iter().any(|p| scan.matches(self, p))
    }

    /// How many distinct phrases match.
    pub fn hits(&self, text: &str) -> i64 {
        let scan = self.prepare(text);
        let n = self
            .phrases
            .iter()
            .filter(|p| scan.matches(self, p))
            .count();
        i64::try_from(n).unwrap_or(i64::MAX)
    }

    /// Segments the text and computes, per distinct text word, its similarity to each phrase
    /// word that reaches [`FuzzySet::floor`].
    fn prepare(&self, text: &str) -> Scan {
        let folded = fold(text);
        let mut distinct: HashMap<&str, u32> = HashMap::new();
        let mut sims: Vec<Vec<(u32, f64)>> = Vec::new();
        let mut sequence: Vec<u32> = Vec::new();
        let mut chars: Vec<char> = Vec::new();
        let mut dp = Distance::default();
        for w in segment(&folded) {
            let next = sims.len() as u32;
            let id = *distinct.entry(w).or_insert(next);
            if id == next {
                chars.clear();
                chars.extend(w.chars());
                sims.push(self.similar_words(&chars, &mut dp));
            }
            sequence.push(id);
        }
        Scan { sequence, sims }
    }

    fn similar_words(&self, chars: &[char], dp: &mut Distance) -> Vec<(u32, f64)> {
        let mut found = Vec::new();
        let len = chars.len();
        if len == 0 || self.by_len.is_empty() {
            return found;
        }
        let (lo, hi) = if self.floor > 0.0 {
            let lo = (self.floor * len as f64 - EPSILON).ceil().max(1.0) as usize;
            let hi = ((len as f64 / self.floor) + EPSILON).floor() as usize;
            (lo, hi.min(self.by_len.len() - 1))
        } else {
            (1, self.by_len.len() - 1)
        };
        if lo > hi {
            return found;
        }
        let text_mask = mask(chars);
        for bucket in &self.by_len[lo..=hi] {
            for &id in bucket {
                let word = &self.words[id as usize];
                let longest = len.max(word.chars.len());
                // The most edits that keep the similarity at or above the floor.
                let budget = ((1.0 - self.floor) * longest as f64 + EPSILON).floor() as usize;
                // Each edit changes at most two bits of the character-set masks.
                let lower = ((text_mask ^ word.mask).count_ones() as usize).div_ceil(2);
                if lower > budget {
                    continue;
                }
                if let Some(d) = dp.bounded(chars, &word.chars, budget) {
                    found.push((id, 1.0 - d as f64 / longest as f64));
                }
            }
        }
        found
    }
}

/// One request's text, ready for matching.
struct Scan {
    /// The text's words as indices into `sims`.
    sequence: Vec<u32>,
    /// Per distinct text word: `(phrase word id, similarity)` for the similarities at or above
    /// the floor.
    sims: Vec<Vec<(u32, f64)>>,
}

impl Scan {
    fn similarity(&self, text_word: u32, phrase_word: u32) -> f64 {
        self.sims
            .get(text_word as usize)
            .and_then(|s| s.iter().find(|(id, _)| *id == phrase_word))
            .map_or(0.0, |(_, s)| *s)
    }

    fn matches(&self, set: &FuzzySet, phrase: &[u32]) -> bool {
        let k = phrase.len();
        if k == 0 || self.sequence.len() < k {
            return false;
        }
        let needed = set.min * k as f64 - EPSILON;
        self.sequence.windows(k).any(|run| {
            let mut total = 0.0;
            for (j, (&t, &p)) in run.iter().zip(phrase).enumerate() {
                total += self.similarity(t, p);
                // The words left can add at most 1 each.
                if total + ((k - j - 1) as f64) < needed {
                    return false;
                }
            }
            total >= needed
        })
    }
}

/// The words of folded text: UAX #29 word segments that hold a letter or digit.
fn segment(folded: &str) -> impl Iterator<Item = &str> {
    folded.unicode_words()
}

/// A 64-bit set of the characters of a word (hashed, so distinct characters may share a bit;
/// that only weakens the bound, never breaks it).
fn mask(chars: &[char]) -> u64 {
    chars.iter().fold(0u64, |m, &c| {
        let h = u32::from(c).wrapping_mul(0x9E37_79B9) >> 26;
        m | (1u64 << h)
    })
}

/// Optimal-string-alignment distance with a budget; rows reused across calls.
#[derive(Default)]
struct Distance {
    before: Vec<usize>,
    previous: Vec<usize>,
    current: Vec<usize>,
}

impl Distance {
    /// The distance of `a` and `b`, or `None` when it exceeds `budget`.
    fn bounded(&mut self, a: &[char], b: &[char], budget: usize) -> Option<usize> {
        if a.len().abs_diff(b.len()) > budget {
            return None;
        }
        if a == b {
            return Some(0);
        }
        let width = b.len() + 1;
        let over = budget + 1;
        self.before.clear();
        self.before.resize(width, over);
        self.previous.clear();
        self.previous.extend(0..width);
        self.current.clear();
        self.current.resize(width, over);
        for i in 1..=a.len() {
            self.current[0] = i;
            let mut row_min = i;
            for j in 1..width {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut d = (self.previous[j] + 1)
                    .min(self.current[j - 1] + 1)
                    .min(self.previous[j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    d = d.min(self.before[j - 2] + 1);
                }
                self.current[j] = d;
                row_min = row_min.min(d);
            }
            // Every later cell descends from this row (or the one before, for a swap, which
            // still costs one more edit), so the distance can only grow from its minimum.
            if row_min > budget {
                return None;
            }
            std::mem::swap(&mut self.before, &mut self.previous);
            std::mem::swap(&mut self.previous, &mut self.current);
        }
        let d = self.previous[b.len()];
        (d <= budget).then_some(d)
    }
}

#[cfg(test)]
pub(super) fn osa_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    Distance::default()
        .bounded(&a, &b, a.len().max(b.len()))
        .unwrap_or(usize::MAX)
}

#[cfg(test)]
pub(super) fn osa_within(a: &str, b: &str, budget: usize) -> Option<usize> {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    Distance::default().bounded(&a, &b, budget)
}
