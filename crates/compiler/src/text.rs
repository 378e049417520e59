//! The text builtins of docs/language.md, "Expressions and types": phrase matching (`contains`,
//! `hits`, `density`, `sequence`), `words`, the `tokens` estimate and the regex helpers
//! (`count`, `matches`); the typo-tolerant `fuzzy`/`fuzzy_hits` ([`FuzzySet`]) and `bm25`.
//!
//! Phrase lists are literals in the policy, so each becomes one [`PhraseSet`] at policy load:
//! phrases are folded and deduplicated once and compiled into a single Aho-Corasick automaton.
//! A request then costs one fold of its text (borrowed when already lowercase) and one
//! overlapping scan. The scan is overlapping on purpose: a word-boundary check can reject the
//! match a leftmost search would report (`err` inside `error`) while an overlapping one (`error`)
//! is valid, so every candidate must be seen.
//!
//! Matching rules, which `docs/language.md` repeats for policy authors:
//! - on the folded text and phrases ([`fold`]): compatibility-normalised (NFKC), hidden
//!   characters (zero-width, soft hyphen, bidirectional controls, NUL) removed, caseless
//!   (Unicode lowercasing plus `ß` = `ss`, `ς` = `σ`, `İ` = `i`), accents off Latin letters
//!   dropped, and look-alikes of ASCII (Cyrillic `о`, Greek `ο`) read as the ASCII they imitate;
//! - a phrase edge that is a word character of a space-separated script (letter, digit, `_`)
//!   must sit on a word boundary in the text; other edges (`+` in `c++`, a Han or Thai
//!   character) match anywhere;
//! - any run of whitespace inside a phrase matches any run of whitespace in the text
//!   (the `spaces` module: both are searched with each run written as one space);
//! - an empty phrase never occurs, and an empty list never holds.

#[cfg(test)]
mod approximate_tests;
mod ascii_words;
mod bm25;
mod confusables;
mod fold;
#[cfg(test)]
mod fold_tests;
mod fuzzy;
mod spaces;
#[cfg(test)]
mod tests;

use aho_corasick::{AhoCorasick, MatchKind};
use regex::Regex;
use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::ControlFlow;
use unicode_segmentation::UnicodeSegmentation;

pub use fold::{fold, unhide};
use fold::{is_han_or_kana, is_unspaced, is_word_char};
pub use fuzzy::FuzzySet;

/// A precompiled phrase list: build once per list literal, query per request.
#[derive(Debug, Clone)]
pub struct PhraseSet {
    matcher: Matcher,
    /// Per distinct folded phrase (pattern id): whether each edge needs a word boundary.
    edges: Vec<Edges>,
    /// Pattern ids in list order, for `sequence`; empty when the list can never hold in
    /// sequence (it is empty, or one of its phrases is).
    in_order: Vec<usize>,
    /// Whether a phrase holds whitespace, so that the text's whitespace runs are collapsed
    /// before the search; without one they cannot change a match.
    spaced: bool,
}

#[derive(Debug, Clone, Copy)]
struct Edges {
    left: bool,
    right: bool,
}

#[derive(Debug, Clone)]
enum Matcher {
    /// No non-empty phrase: nothing can occur.
    Empty,
    Automaton(AhoCorasick),
    /// Used only if the automaton cannot be built (it has size limits), so a huge list still
    /// loads and gives the same answers, just slower.
    Naive(Vec<String>),
}

impl PhraseSet {
    pub fn new(phrases: &[String]) -> PhraseSet {
        let mut ids: HashMap<String, usize> = HashMap::new();
        let mut patterns: Vec<String> = Vec::new();
        let mut edges = Vec::new();
        let mut in_order = Vec::with_capacity(phrases.len());
        let mut has_empty = false;
        for phrase in phrases {
            let folded = fold(phrase);
            let folded =
                spaces::collapse_whitespace(&folded).unwrap_or_else(|| folded.into_owned());
            if folded.is_empty() {
                has_empty = true;
                continue;
            }
            let next = patterns.len();
            let id = *ids.entry(folded.clone()).or_insert(next);
            if id == next {
                edges.push(Edges {
                    left: folded.chars().next().is_some_and(is_word_char),
                    right: folded.chars().next_back().is_some_and(is_word_char),
                });
                patterns.push(folded);
            }
            in_order.push(id);
        }
        if has_empty {
            in_order.clear();
        }
        let spaced = patterns.iter().any(|p| spaces::has_whitespace(p));
        let matcher = if patterns.is_empty() {
            Matcher::Empty
        } else {
            match AhoCorasick::builder()
                .match_kind(MatchKind::Standard)
                // Patterns are folded, so this only lets ASCII text skip folding.
                .ascii_case_insensitive(true)
                .build(&patterns)
            {
                Ok(ac) => Matcher::Automaton(ac),
                Err(_) => Matcher::Naive(patterns),
            }
        };
        PhraseSet {
            matcher,
            edges,
            in_order,
            spaced,
        }
    }

    /// The text as the patterns are searched for in it: folded (`ascii_as_is`: ASCII left as it
    /// is, for the automaton that ignores ASCII case) and, when a phrase holds whitespace, with
    /// its whitespace runs collapsed. Borrowed when neither changes anything.
    fn haystack<'t>(&self, text: &'t str, ascii_as_is: bool) -> Cow<'t, str> {
        let folded = if ascii_as_is && text.is_ascii() && !fold::has_hidden_ascii(text) {
            Cow::Borrowed(text)
        } else {
            fold(text)
        };
        if !self.spaced {
            return folded;
        }
        match spaces::collapse_whitespace(&folded) {
            Some(collapsed) => Cow::Owned(collapsed),
            None => folded,
        }
    }

    /// Whether any phrase occurs.
    pub fn contains(&self, text: &str) -> bool {
        let mut found = false;
        self.scan(text, |_, _, _| {
            found = true;
            ControlFlow::Break(())
        });
        found
    }

    /// How many distinct phrases occur (a phrase listed twice counts once).
    pub fn hits(&self, text: &str) -> i64 {
        let total = self.edges.len();
        let mut seen = Seen::new(total);
        let mut count = 0usize;
        self.scan(text, |id, _, _| {
            if seen.insert(id) {
                count += 1;
                if count == total {
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        });
        to_i64(count)
    }

    /// Phrase occurrences per word of `text`, 0 when it has no words. Occurrences are the most
    /// that fit without overlapping, so `["ignore", "ignore previous"]` counts
    /// "ignore previous" once.
    pub fn density(&self, text: &str) -> f64 {
        let words = words(text);
        if words == 0 {
            return 0.0;
        }
        let mut occurrences = 0u64;
        let mut last_end = 0usize;
        // Matches arrive by ascending end; taking each one that starts after the last taken
        // end is the classic earliest-end greedy, which maximises the non-overlapping count.
        self.scan(text, |_, start, end| {
            if start >= last_end {
                occurrences += 1;
                last_end = end;
            }
            ControlFlow::Continue(())
        });
        occurrences as f64 / words as f64
    }

    /// Whether the phrases occur in list order, left to right, without overlapping.
    pub fn sequence(&self, text: &str) -> bool {
        let wanted = &self.in_order;
        if wanted.is_empty() {
            return false;
        }
        let mut next = 0usize;
        let mut last_end = 0usize;
        // The first match of the wanted phrase that starts after the previous one ended is
        // the earliest-ending choice, and taking it never rules out a later phrase.
        self.scan(text, |id, start, end| {
            if wanted.get(next) == Some(&id) && start >= last_end {
                next += 1;
                last_end = end;
                if next == wanted.len() {
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        });
        next == wanted.len()
    }

    /// Calls `f(pattern id, start, end)` for every match that respects the word-boundary rule,
    /// in ascending order of `end`, with offsets into the searched text.
    fn scan(&self, text: &str, mut f: impl FnMut(usize, usize, usize) -> ControlFlow<()>) {
        match &self.matcher {
            Matcher::Empty => {}
            Matcher::Automaton(ac) => {
                // ASCII folds to its ASCII lowercase, which the automaton already ignores, and
                // word characters do not depend on case: search the request text as it is.
                let folded = self.haystack(text, true);
                let haystack: &str = &folded;
                for m in ac.find_overlapping_iter(haystack) {
                    let id = m.pattern().as_usize();
                    if self.on_boundaries(haystack, id, m.start(), m.end()) {
                        if let ControlFlow::Break(()) = f(id, m.start(), m.end()) {
                            return;
                        }
                    }
                }
            }
            Matcher::Naive(patterns) => {
                let folded = self.haystack(text, false);
                let haystack: &str = &folded;
                let mut found = Vec::new();
                for (id, pattern) in patterns.iter().enumerate() {
                    let mut from = 0;
                    while let Some(at) = haystack.get(from..).and_then(|rest| rest.find(pattern)) {
                        let start = from + at;
                        let end = start + pattern.len();
                        if self.on_boundaries(haystack, id, start, end) {
                            found.push((end, start, id));
                        }
                        from = start + haystack[start..].chars().next().map_or(1, char::len_utf8);
                    }
                }
                found.sort_unstable();
                for (end, start, id) in found {
                    if let ControlFlow::Break(()) = f(id, start, end) {
                        return;
                    }
                }
            }
        }
    }

    fn on_boundaries(&self, haystack: &str, id: usize, start: usize, end: usize) -> bool {
        let Some(edges) = self.edges.get(id) else {
            return false;
        };
        let left_ok = !edges.left
            || !haystack
                .get(..start)
                .and_then(|before| before.chars().next_back())
                .is_some_and(is_word_char);
        let right_ok = !edges.right
            || !haystack
                .get(end..)
                .and_then(|after| after.chars().next())
                .is_some_and(is_word_char);
        left_ok && right_ok
    }
}

/// Which pattern ids a scan has seen; a bit mask for the usual short lists, so `hits` does
/// not allocate per request.
enum Seen {
    Small(u64),
    Large(Vec<bool>),
}

impl Seen {
    fn new(total: usize) -> Seen {
        if total <= 64 {
            Seen::Small(0)
        } else {
            Seen::Large(vec![false; total])
        }
    }

    /// Marks `id`; true when it was not seen before.
    fn insert(&mut self, id: usize) -> bool {
        match self {
            Seen::Small(mask) => {
                let bit = 1u64 << (id % 64);
                let fresh = *mask & bit == 0;
                *mask |= bit;
                fresh
            }
            Seen::Large(seen) => match seen.get_mut(id) {
                Some(slot) => !std::mem::replace(slot, true),
                None => false,
            },
        }
    }
}

/// Word count by Unicode word segmentation (UAX #29), with each Han or Kana character counted
/// as a word, and each unbroken run of another unspaced script (Thai, Khmer, ...) as one word:
/// segmentation without a dictionary would otherwise count every Thai letter.
pub fn words(text: &str) -> i64 {
    if text.is_ascii() {
        return to_i64(ascii_words::count(text.as_bytes()));
    }
    to_i64(segmented_words(text))
}

/// `words` by the general segmenter, for text that is not ASCII.
fn segmented_words(text: &str) -> usize {
    let mut count = 0usize;
    let mut unspaced_run_end: Option<usize> = None;
    for (at, word) in text.unicode_word_indices() {
        let mut han_kana = 0usize;
        let mut other_unspaced = false;
        let mut spaced = false;
        for c in word.chars() {
            if is_han_or_kana(c) {
                han_kana += 1;
            } else if is_unspaced(c) {
                other_unspaced = true;
            } else if c.is_alphanumeric() {
                spaced = true;
            }
        }
        count += han_kana + usize::from(spaced);
        if other_unspaced {
            if unspaced_run_end != Some(at) {
                count += 1;
            }
            unspaced_run_end = Some(at + word.len());
        }
    }
    count
}

/// The documented token estimate when no tokenizer is declared: ⌈UTF-8 bytes / 4⌉.
pub fn tokens_estimate(text: &str) -> i64 {
    to_i64(text.len().div_ceil(4))
}

/// `count(TEXT, REGEX)`: the number of non-overlapping matches in the text as regexes read it
/// ([`fold::unhide`]).
pub fn count(regex: &Regex, text: &str) -> i64 {
    to_i64(regex.find_iter(&fold::unhide(text)).count())
}

/// `matches(TEXT, REGEX)`: whether the regex matches anywhere in the text as regexes read it
/// ([`fold::unhide`]).
pub fn matches(regex: &Regex, text: &str) -> bool {
    regex.is_match(&fold::unhide(text))
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
