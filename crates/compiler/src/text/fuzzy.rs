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
//! How a request stays cheap: a mean of `k` similarities is at most their largest, so a phrase
//! can only match where one of its words is itself at least `MIN` similar to the text word at its
//! place. Matching looks for those *anchors*, one text word at a time, and checks a whole phrase
//! only around one. The phrase words at least `MIN` similar to a text word are looked up by the
//! text word's deletion variants ([`variants`]) — a handful of probes, whatever the number of
//! phrases — or, for the lengths where that costs more than comparing (short lists, long words),
//! by comparing the phrase words of a length that can reach `MIN`, each through a character-set
//! bound first. Everything on the phrase side (words, variants, the plan per text-word length) is
//! built once per list, at policy load, into [`FuzzySet`].

mod distance;
mod ends;
#[cfg(test)]
pub(super) mod reference;
mod runs;
mod seen;
mod sliced;
mod variants;

use super::fold;
use super::fold::{is_unspaced, is_word_char};
use distance::Distance;
use ends::{ends_for, Ends, EndsBuilder};
use seen::Seen;
use sliced::{Sliced, MOST_LEVELS};
use std::collections::{HashMap, HashSet};
use variants::{all_variants, hash, powers, variant_count, Index, Prefixes};

/// Slack of the threshold comparison, so that a similarity computed as `1 - 1/5` meets a
/// written `0.8` whatever the rounding of either.
const EPSILON: f64 = 1e-9;

/// Room added to edit budgets, per character, so that rounding `(1 - MIN) · len` never loses an
/// edit the slack allows (a budget one too large only lets a candidate reach the distance).
const ROOM: f64 = 1e-7;

/// The most deletions a text word's probes cover (a 9-letter word has 10 variants at 1).
const TEXT_DEPTH: usize = 2;

/// The most variants indexed for one phrase word.
const PHRASE_VARIANTS: usize = 1024;

/// Plans are tabled for text words of up to this many characters; longer ones compare.
const PLANNED: usize = 256;

/// A probe costs about this many character-set comparisons.
const PROBE_COST: usize = 4;

/// A precompiled fuzzy phrase list with its threshold.
#[derive(Debug, Clone)]
pub struct FuzzySet {
    min: f64,
    /// Distinct words of the phrases.
    words: Vec<Word>,
    /// Distinct phrases as word ids; a phrase without words (only punctuation) never matches.
    phrases: Vec<Box<[u32]>>,
    /// Per word id: where it occurs, as `(phrase, position in the phrase)`.
    occurrences: Vec<Box<[(u32, u32)]>>,
    /// Word ids by character length, and the lengths that have any.
    by_len: Vec<Vec<u32>>,
    lengths: Vec<usize>,
    /// Per length of the longer word: the most edits that keep two words `MIN` similar.
    budgets: Vec<usize>,
    /// Deletion variants of the phrase words that some probing plan needs.
    index: Index,
    /// The phrase words' ends, checked before probing the lengths that allow one edit.
    ends: Ends,
    /// Per text-word length in characters: how its anchors are found, and for the compared
    /// lengths, the phrase words to compare.
    plans: Vec<Plan>,
    compared: Vec<Box<[Group]>>,
    pow: Vec<u64>,
}

/// The phrase words a text word of one length is compared with that share an edit budget,
/// whatever their own lengths, so that one character-set scan covers them all.
#[derive(Debug, Clone)]
struct Group {
    budget: usize,
    ids: Box<[u32]>,
    masks: Box<[u64]>,
    sliced: Sliced,
}

#[derive(Debug, Clone)]
struct Word {
    chars: Box<[char]>,
    mask: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Plan {
    /// No phrase word is near enough in length.
    Nothing,
    /// Probe the variants with up to this many deletions.
    Probe(u8),
    /// Compare the phrase words of the lengths that can reach `MIN`.
    Compare,
}

impl FuzzySet {
    /// `min` is the checked threshold in (0, 1].
    pub fn new(phrases: &[String], min: f64) -> FuzzySet {
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut words: Vec<Word> = Vec::new();
        let mut seen: HashSet<Vec<u32>> = HashSet::new();
        let mut out: Vec<Box<[u32]>> = Vec::new();
        for phrase in phrases {
            let folded = fold(phrase);
            let phrase_words: Vec<u32> = segment(&folded)
                .map(|w| {
                    *ids.entry(w.to_string()).or_insert_with(|| {
                        let chars: Box<[char]> = w.chars().collect();
                        words.push(Word {
                            mask: mask(chars.iter().map(|&c| u32::from(c))),
                            chars,
                        });
                        (words.len() - 1) as u32
                    })
                })
                .collect();
            if !phrase_words.is_empty() && seen.insert(phrase_words.clone()) {
                out.push(phrase_words.into());
            }
        }
        let mut occurrences = vec![Vec::new(); words.len()];
        for (p, phrase) in out.iter().enumerate() {
            for (j, &w) in phrase.iter().enumerate() {
                occurrences[w as usize].push((p as u32, j as u32));
            }
        }
        let max_len = words.iter().map(|w| w.chars.len()).max().unwrap_or(0);
        let mut by_len = vec![Vec::new(); max_len + 1];
        for (id, w) in words.iter().enumerate() {
            by_len[w.chars.len()].push(id as u32);
        }
        let lengths: Vec<usize> = (1..=max_len).filter(|&l| !by_len[l].is_empty()).collect();
        let budgets = (0..=PLANNED.max(max_len) + max_len)
            .map(|longest| budget(min, longest))
            .collect();
        let mut set = FuzzySet {
            min,
            words,
            phrases: out,
            occurrences: occurrences.into_iter().map(Vec::into_boxed_slice).collect(),
            by_len,
            lengths,
            budgets,
            index: Index::new(Vec::new()),
            ends: Ends::default(),
            plans: Vec::new(),
            compared: Vec::new(),
            pow: powers(PLANNED),
        };
        set.plan(PROBE_COST);
        set
    }

    /// A set that probes wherever the index can serve, so tests reach that path on short lists.
    #[cfg(test)]
    pub(super) fn probing(phrases: &[String], min: f64) -> FuzzySet {
        let mut set = FuzzySet::new(phrases, min);
        set.plan(0);
        set
    }

    /// Whether some text-word length is served by probing the index.
    #[cfg(test)]
    pub(super) fn probes(&self) -> bool {
        self.plans.iter().any(|p| matches!(p, Plan::Probe(_)))
    }

    /// The most edits that keep two words, the longer of `longest` characters, at least `MIN`
    /// similar.
    fn budget(&self, longest: usize) -> usize {
        match self.budgets.get(longest) {
            Some(&b) => b,
            None => budget(self.min, longest),
        }
    }

    /// Whether words of `a` and `b` characters can be at least `MIN` similar.
    fn in_window(&self, a: usize, b: usize) -> bool {
        a.abs_diff(b) <= self.budget(a.max(b))
    }

    /// The phrase-word lengths that words of `a` characters can be `MIN` similar to.
    fn window(&self, a: usize) -> Vec<usize> {
        self.lengths
            .iter()
            .copied()
            .filter(|&b| self.in_window(a, b))
            .collect()
    }

    /// The phrase words that words of `a` characters can be `MIN` similar to, grouped by the
    /// most edits that allows.
    fn groups(&self, a: usize) -> Box<[Group]> {
        let mut by_budget: Vec<(usize, Vec<u32>)> = Vec::new();
        for &b in self.lengths.iter().filter(|&&b| self.in_window(a, b)) {
            let budget = self.budget(a.max(b));
            let at = match by_budget.iter().position(|g| g.0 == budget) {
                Some(at) => at,
                None => {
                    by_budget.push((budget, Vec::new()));
                    by_budget.len() - 1
                }
            };
            by_budget[at].1.extend_from_slice(&self.by_len[b]);
        }
        by_budget
            .into_iter()
            .map(|(budget, ids)| {
                let masks: Box<[u64]> =
                    ids.iter().map(|&id| self.words[id as usize].mask).collect();
                Group {
                    budget,
                    sliced: Sliced::new(&masks),
                    ids: ids.into(),
                    masks,
                }
            })
            .collect()
    }

    /// Chooses a plan per text-word length and indexes the variants the probing ones need.
    ///
    /// For words of `a` and `b` characters at most `d` edits apart, the common string is
    /// reached by at most `d - (b - a)` deletions from the shorter and `d` from the longer (each
    /// insertion on one side is a deletion on the other), which bounds both sides' depths.
    fn plan(&mut self, probe_cost: usize) {
        let mut plans = vec![Plan::Nothing];
        let mut compared_groups = vec![Box::default()];
        let mut phrase_depth: Vec<Option<usize>> = vec![None; self.by_len.len()];
        let mut ends = EndsBuilder::default();
        for a in 1..=PLANNED {
            let window = self.window(a);
            if window.is_empty() {
                plans.push(Plan::Nothing);
                compared_groups.push(Box::default());
                continue;
            }
            let mut text_depth = 0;
            let mut most_edits = 0;
            let mut needs = Vec::with_capacity(window.len());
            let mut compared = 0;
            for &b in &window {
                let d = self.budget(a.max(b));
                most_edits = most_edits.max(d);
                text_depth = text_depth.max(d - b.saturating_sub(a));
                needs.push((b, d - a.saturating_sub(b)));
                compared += self.by_len[b].len();
            }
            let affordable = needs
                .iter()
                .all(|&(b, need)| variant_count(b, need) <= PHRASE_VARIANTS);
            let probes = variant_count(a, text_depth);
            if text_depth <= TEXT_DEPTH && affordable && probes * probe_cost < compared.max(1) {
                for (b, need) in needs {
                    let depth = &mut phrase_depth[b];
                    *depth = Some(depth.map_or(need, |d| d.max(need)));
                }
                if text_depth > 0 && most_edits <= 1 {
                    let words = window
                        .iter()
                        .flat_map(|&b| self.by_len[b].iter())
                        .map(|&id| &*self.words[id as usize].chars);
                    ends.length(a, ends_for(a), words);
                }
                plans.push(Plan::Probe(text_depth as u8));
                compared_groups.push(Box::default());
            } else {
                plans.push(Plan::Compare);
                compared_groups.push(self.groups(a));
            }
        }
        let mut entries = Vec::new();
        let mut hashes = Vec::new();
        for (id, w) in self.words.iter().enumerate() {
            if let Some(Some(depth)) = phrase_depth.get(w.chars.len()) {
                hashes.clear();
                all_variants(&w.chars, *depth, &mut hashes);
                entries.extend(hashes.iter().map(|&h| (h, id as u32)));
            }
        }
        self.index = Index::new(entries);
        self.ends = ends.build();
        self.plans = plans;
        self.compared = compared_groups;
    }

    /// Whether any phrase matches.
    pub fn any(&self, text: &str) -> bool {
        self.matching(text, 1) > 0
    }

    /// How many distinct phrases match.
    pub fn hits(&self, text: &str) -> i64 {
        i64::try_from(self.matching(text, self.phrases.len())).unwrap_or(i64::MAX)
    }

    /// How many distinct phrases match, counting no further than `enough`.
    fn matching(&self, text: &str, enough: usize) -> usize {
        if self.phrases.is_empty() || enough == 0 {
            return 0;
        }
        let folded = fold(text);
        let mut words: Vec<&str> = Vec::with_capacity(folded.len() / 4);
        segment_into(&folded, &mut words);
        let mut scan = Scan {
            set: self,
            words: &words,
            ascii: folded.is_ascii(),
            matched: vec![false; self.phrases.len()],
            count: 0,
            chars: Vec::new(),
            other: Vec::new(),
            prefixes: Prefixes::default(),
            found: Vec::new(),
            anchor: Distance::default(),
            dp: Distance::default(),
            seen: Seen::with_room(words.len()),
        };
        for (at, word) in words.iter().enumerate() {
            if scan.anchors_at(at, word, enough) {
                break;
            }
        }
        scan.count
    }

    /// Per distinct phrase, in list order: the highest `MIN` at which it matches `text`, which
    /// is its best mean word similarity at any place plus the threshold's slack (0 when the text
    /// has fewer words than it). `fuzzy(text, list, m)` holds exactly when one of these is at
    /// least `m`, whatever `MIN` this set was built with. Computed exhaustively, for offline use
    /// (`src calibrate` sweeps thresholds over it), not on the request path.
    pub fn reach(&self, text: &str) -> Vec<f64> {
        let folded = fold(text);
        let mut distinct: HashMap<&str, usize> = HashMap::new();
        let mut sims: Vec<Vec<f64>> = Vec::new();
        let mut sequence = Vec::new();
        let mut dp = Distance::default();
        for w in segment(&folded) {
            let next = sims.len();
            let id = *distinct.entry(w).or_insert(next);
            if id == next {
                let chars: Vec<char> = w.chars().collect();
                sims.push(
                    self.words
                        .iter()
                        .map(|p| {
                            let longest = chars.len().max(p.chars.len());
                            let d = dp.bounded(&chars, &p.chars, longest).unwrap_or(longest);
                            similarity(d, longest)
                        })
                        .collect(),
                );
            }
            sequence.push(id);
        }
        self.phrases
            .iter()
            .map(|phrase| {
                let k = phrase.len();
                sequence
                    .windows(k)
                    .map(|run| {
                        let total = run
                            .iter()
                            .zip(phrase.iter())
                            .map(|(&t, &p)| sims[t][p as usize])
                            .fold(0.0, |sum, s| sum + s);
                        (total + EPSILON) / k as f64
                    })
                    .fold(0.0, f64::max)
            })
            .collect()
    }
}

/// The most edits that keep two words, the longer of `longest` characters, at least `min`
/// similar.
fn budget(min: f64, longest: usize) -> usize {
    let edits = ((1.0 - min + ROOM) * longest as f64).floor();
    (edits.max(0.0) as usize).min(longest)
}

/// Whether `bits` has at most `k` bits set: clearing the lowest `k` leaves nothing. Cheaper than
/// a population count where the target has no instruction for one, and `k` is small here.
fn at_most_bits(mut bits: u64, k: usize) -> bool {
    for _ in 0..k {
        if bits == 0 {
            return true;
        }
        bits &= bits - 1;
    }
    bits == 0
}

/// Appends the ids of `ids` that `found` lacks; out of line, so the probe loop that calls it
/// for the few variants past the filter stays small.
#[inline(never)]
fn add_new(found: &mut Vec<u32>, ids: &[u32]) {
    for &id in ids {
        if !found.contains(&id) {
            found.push(id);
        }
    }
}

/// `1 - d / longest`, the one formula every path uses, so that equal inputs give equal sums.
fn similarity(d: usize, longest: usize) -> f64 {
    if longest == 0 {
        return 1.0;
    }
    1.0 - d as f64 / longest as f64
}

/// One request's matching state: buffers reused from word to word, so a scan allocates a few
/// times per call and never per word or per candidate.
struct Scan<'s> {
    set: &'s FuzzySet,
    words: &'s [&'s str],
    /// Whether the folded text is ASCII, so a word's bytes are its characters.
    ascii: bool,
    matched: Vec<bool>,
    count: usize,
    /// The current text word's characters, and another's while a phrase is checked.
    chars: Vec<char>,
    other: Vec<char>,
    prefixes: Prefixes,
    /// Phrase words found near the current text word (each once).
    found: Vec<u32>,
    /// Distances from the current text word, learnt once for all its candidates.
    anchor: Distance,
    /// Distances of the other words of a phrase checked around an anchor.
    dp: Distance,
    /// Words already found to anchor nothing.
    seen: Seen,
}

impl Scan<'_> {
    /// Checks every phrase anchored on text word `at`; true once `enough` phrases matched.
    fn anchors_at(&mut self, at: usize, word: &str, enough: usize) -> bool {
        let set = self.set;
        let len = if self.ascii {
            word.len()
        } else {
            word.chars().count()
        };
        let plan = set.plans.get(len).copied().unwrap_or(Plan::Compare);
        if plan == Plan::Nothing {
            return false;
        }
        self.chars.clear();
        if !self.ascii {
            self.chars.extend(word.chars());
        }
        self.found.clear();
        match plan {
            Plan::Nothing => return false,
            Plan::Probe(depth) => {
                let q = set.ends.q(len);
                if q > 0 {
                    let admitted = if self.ascii {
                        let bytes = word.as_bytes().iter().map(|&b| u32::from(b));
                        set.ends
                            .admits(len, bytes.clone().take(q), bytes.skip(len - q))
                    } else {
                        let chars = self.chars.iter().map(|&c| u32::from(c));
                        set.ends
                            .admits(len, chars.clone().take(q), chars.skip(len - q))
                    };
                    if !admitted {
                        return false;
                    }
                }
                if depth == 0 {
                    // The word itself is the only probe, cheaper than remembering it.
                    let whole = if self.ascii {
                        hash(word.bytes().map(u32::from))
                    } else {
                        hash(self.chars.iter().map(|&c| u32::from(c)))
                    };
                    if !set.index.may_have(whole) {
                        return false;
                    }
                    add_new(&mut self.found, set.index.lookup(whole));
                    if self.found.is_empty() {
                        return false;
                    }
                } else {
                    if self.ascii {
                        self.prefixes.of(word.bytes().map(u32::from));
                    } else {
                        self.prefixes.of(self.chars.iter().map(|&c| u32::from(c)));
                    }
                    if self.seen.has(self.prefixes.whole(), word, self.words) {
                        return false;
                    }
                    let found = &mut self.found;
                    self.prefixes.variants(&set.pow, depth, |h| {
                        if set.index.may_have(h) {
                            add_new(found, set.index.lookup(h));
                        }
                    });
                    if self.found.is_empty() {
                        self.seen.insert(self.prefixes.whole(), at);
                        return false;
                    }
                }
            }
            Plan::Compare => {
                let (text_mask, word_hash) = if self.ascii {
                    mask_and_hash(word.bytes().map(u32::from))
                } else {
                    mask_and_hash(self.chars.iter().map(|&c| u32::from(c)))
                };
                if self.seen.has(word_hash, word, self.words) {
                    return false;
                }
                let computed;
                let groups = match set.compared.get(len) {
                    Some(groups) => groups,
                    None => {
                        computed = set.groups(len);
                        &computed
                    }
                };
                for group in groups.iter() {
                    let (budget, ids, masks) = (group.budget, &group.ids, &group.masks);
                    let found = &mut self.found;
                    // Each edit removes at most one character missing from the other word.
                    let keep = |j: usize| {
                        if at_most_bits(masks[j] & !text_mask, budget) {
                            found.push(ids[j]);
                        }
                    };
                    if budget < MOST_LEVELS {
                        group.sliced.candidates(text_mask, budget, keep);
                    } else {
                        (0..ids.len())
                            .filter(|&j| at_most_bits(text_mask & !masks[j], budget))
                            .for_each(keep);
                    }
                }
                if self.found.is_empty() {
                    self.seen.insert(word_hash, at);
                    return false;
                }
            }
        }
        if self.ascii {
            // Characters are needed only to measure a candidate, which most words lack.
            self.chars.extend(word.bytes().map(char::from));
        }
        self.anchor.learn(&self.chars);
        for f in 0..self.found.len() {
            let id = self.found[f];
            let phrase_word = &set.words[id as usize].chars;
            let longest = len.max(phrase_word.len());
            let Some(d) = self.anchor.to(phrase_word, set.budget(longest)) else {
                continue;
            };
            let sim = similarity(d, longest);
            for &(p, j) in set.occurrences[id as usize].iter() {
                let (p, j) = (p as usize, j as usize);
                if self.matched[p] || j > at {
                    continue;
                }
                if self.matches_at(p, at - j, j, sim) {
                    self.matched[p] = true;
                    self.count += 1;
                    if self.count >= enough {
                        return true;
                    }
                }
            }
        }
        false
    }

    /// Whether phrase `p` matches the run of words from `start`, whose word `anchor` is `sim`
    /// similar to the phrase's. The sum runs in word order, as the measure defines it; a word
    /// is compared within the budget the words after it could still make up for.
    fn matches_at(&mut self, p: usize, start: usize, anchor: usize, sim: f64) -> bool {
        let set = self.set;
        let phrase = &set.phrases[p];
        let k = phrase.len();
        if start + k > self.words.len() {
            return false;
        }
        let needed = set.min * k as f64 - EPSILON;
        let mut total = 0.0;
        for (m, &w) in phrase.iter().enumerate() {
            if m == anchor {
                total += sim;
                continue;
            }
            let phrase_word = &set.words[w as usize].chars;
            self.other.clear();
            self.other.extend(self.words[start + m].chars());
            let longest = self.other.len().max(phrase_word.len());
            let required = needed - total - (k - m - 1) as f64;
            let budget = if required <= 0.0 {
                longest
            } else {
                // A word further than this is more than 10⁻⁶ / longest short of `required`,
                // far beyond any rounding of the sum.
                (((1.0 - required) * longest as f64 + 1e-6).floor().max(0.0) as usize).min(longest)
            };
            let Some(d) = self.dp.bounded(&self.other, phrase_word, budget) else {
                return false;
            };
            total += similarity(d, longest);
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

/// The words of folded text into `out`, as [`segment`] cuts them; a byte scan when the text is
/// ASCII, the common case, where every word character is one byte.
fn segment_into<'t>(folded: &'t str, out: &mut Vec<&'t str>) {
    if !folded.is_ascii() {
        out.extend(segment(folded));
        return;
    }
    runs::runs(folded.as_bytes(), |start, end| {
        if let Some(word) = folded.get(start..end) {
            out.push(word);
        }
    });
}

/// The character set ([`mask`]) and the hash ([`hash`]) of a word, in one pass over it.
fn mask_and_hash(chars: impl Iterator<Item = u32>) -> (u64, u64) {
    chars.fold((0, 0), |(m, h), c| (mask_with(m, c), variants::step(h, c)))
}

fn mask_with(m: u64, c: u32) -> u64 {
    m | (1u64 << (c.wrapping_mul(0x9E37_79B9) >> 26))
}

/// A 64-bit set of the characters of a word (hashed, so distinct characters may share a bit;
/// that only weakens the bound, never breaks it).
fn mask(chars: impl Iterator<Item = u32>) -> u64 {
    chars.fold(0u64, mask_with)
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
