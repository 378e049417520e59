//! Typo-tolerant phrase matching: `fuzzy(t, [...], MIN)` and `fuzzy_hits(t, [...], MIN)`.
//!
//! The measure, which `docs/language.md` repeats for policy authors:
//! - text and phrases are folded as for `contains` ([`fold`]) and cut into words: runs of the
//!   word characters of `contains`' boundary rule, each Han, Kana, Thai, ... letter on its own;
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
use super::fold::{is_unspaced, is_word_char};
use std::collections::{HashMap, HashSet};

/// Slack of the threshold comparison, so that a similarity computed as `1 - 1/5` meets a
/// written `0.8` whatever the rounding of either.
const EPSILON: f64 = 1e-9;

/// A precompiled fuzzy phrase list with its threshold.
#[derive(Debug, Clone)]
pub struct FuzzySet {
    /// Distinct words of the phrases.
    words: Vec<Word>,
    /// Phrase words by the lowest similarity at which they can still take part in a match.
    groups: Vec<Group>,
    /// Distinct phrases as word ids; a phrase without words (only punctuation) never matches.
    phrases: Vec<Vec<u32>>,
    /// Per word id: the phrases that start with it.
    starting: Vec<Vec<u32>>,
    min: f64,
}

/// Phrase words that share a floor: in a phrase of `k` words the other `k - 1` contribute at
/// most 1 each, so a word below `1 - k·(1 - MIN)` similar cannot be part of a match. Single-word
/// phrases (the common case) need `MIN` itself, which narrows the lengths worth comparing.
#[derive(Debug, Clone)]
struct Group {
    floor: f64,
    /// Word ids by character length, for the length window of a text word.
    by_len: Vec<Vec<u32>>,
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
        // Per word: the most words of a phrase it belongs to, which sets its floor.
        let mut longest = vec![0usize; words.len()];
        let mut starting = vec![Vec::new(); words.len()];
        for (index, phrase) in out.iter().enumerate() {
            for &w in phrase {
                longest[w as usize] = longest[w as usize].max(phrase.len());
            }
            starting[phrase[0] as usize].push(index as u32);
        }
        let max_len = words.iter().map(|w| w.chars.len()).max().unwrap_or(0);
        let mut groups: Vec<(usize, Group)> = Vec::new();
        for (id, w) in words.iter().enumerate() {
            let k = longest[id];
            let at = match groups.iter().position(|(g, _)| *g == k) {
                Some(at) => at,
                None => {
                    groups.push((
                        k,
                        Group {
                            floor: (1.0 - k as f64 * (1.0 - min)).max(0.0),
                            by_len: vec![Vec::new(); max_len + 1],
                        },
                    ));
                    groups.len() - 1
                }
            };
            groups[at].1.by_len[w.chars.len()].push(id as u32);
        }
        FuzzySet {
            words,
            groups: groups.into_iter().map(|(_, g)| g).collect(),
            phrases: out,
            starting,
            min,
        }
    }

    /// Whether any phrase matches.
    pub fn any(&self, text: &str) -> bool {
        let scan = self.prepare(text);
        let found = scan
            .candidates(self)
            .any(|(phrase, at)| scan.matches_at(self, phrase, at));
        found
    }

    /// How many distinct phrases match.
    pub fn hits(&self, text: &str) -> i64 {
        let scan = self.prepare(text);
        let mut matched = vec![false; self.phrases.len()];
        let mut n = 0usize;
        for (phrase, at) in scan.candidates(self) {
            if !matched[phrase as usize] && scan.matches_at(self, phrase, at) {
                matched[phrase as usize] = true;
                n += 1;
            }
        }
        i64::try_from(n).unwrap_or(i64::MAX)
    }

    /// Segments the text and computes, per distinct text word, its similarity to each phrase
    /// word that reaches the floor of its [`Group`].
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
        if len == 0 {
            return found;
        }
        let text_mask = mask(chars);
        for group in &self.groups {
            let top = group.by_len.len().saturating_sub(1);
            let (lo, hi) = if group.floor > 0.0 {
                let lo = (group.floor * len as f64 - EPSILON).ceil().max(1.0) as usize;
                let hi = ((len as f64 / group.floor) + EPSILON).floor() as usize;
                (lo, hi.min(top))
            } else {
                (1, top)
            };
            let Some(buckets) = group.by_len.get(lo..=hi) else {
                continue;
            };
            for &id in buckets.iter().flatten() {
                let word = &self.words[id as usize];
                let longest = len.max(word.chars.len());
                // The most edits that keep the similarity at or above the floor.
                let budget = ((1.0 - group.floor) * longest as f64 + EPSILON).floor() as usize;
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

    /// `(phrase, position)` pairs worth checking, in text order: a match needs its first word
    /// at or above its floor, so only phrases starting with a word similar to the text's word
    /// at that position can match there.
    fn candidates<'s>(&'s self, set: &'s FuzzySet) -> impl Iterator<Item = (u32, usize)> + 's {
        self.sequence.iter().enumerate().flat_map(move |(at, &t)| {
            self.sims
                .get(t as usize)
                .into_iter()
                .flatten()
                .flat_map(move |&(w, _)| {
                    set.starting
                        .get(w as usize)
                        .into_iter()
                        .flatten()
                        .map(move |&p| (p, at))
                })
        })
    }

    /// Whether phrase `phrase` matches the run of words starting at `at`.
    fn matches_at(&self, set: &FuzzySet, phrase: u32, at: usize) -> bool {
        let Some(words) = set.phrases.get(phrase as usize) else {
            return false;
        };
        let k = words.len();
        let Some(run) = self.sequence.get(at..at + k) else {
            return false;
        };
        let needed = set.min * k as f64 - EPSILON;
        let mut total = 0.0;
        for (j, (&t, &p)) in run.iter().zip(words).enumerate() {
            total += self.similarity(t, p);
            // The words left can add at most 1 each.
            if total + ((k - j - 1) as f64) < needed {
                return false;
            }
        }
        total >= needed
    }
}

/// The words of folded text: maximal runs of the word characters of the boundary rule of
/// `contains` ([`is_word_char`]: letters, digits, `_`, combining marks), and each letter of a
/// script written without spaces on its own; everything else separates words. A hand-written
/// scan rather than UAX #29 segmentation, which costs several times more per byte.
fn segment(folded: &str) -> impl Iterator<Item = &str> {
    let mut rest = folded.char_indices().peekable();
    std::iter::from_fn(move || loop {
        let (start, c) = rest.next()?;
        if is_word_char(c) {
            let mut end = start + c.len_utf8();
            while let Some(&(at, next)) = rest.peek() {
                if !is_word_char(next) {
                    break;
                }
                end = at + next.len_utf8();
                rest.next();
            }
            return folded.get(start..end);
        }
        if is_unspaced(c) && c.is_alphanumeric() {
            return folded.get(start..start + c.len_utf8());
        }
    })
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

#[cfg(test)]
pub(super) fn words_of(text: &str) -> Vec<String> {
    segment(&fold(text)).map(str::to_owned).collect()
}
