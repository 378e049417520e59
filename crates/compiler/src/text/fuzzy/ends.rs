//! A necessary condition for one edit, checked before a text word's deletion variants are
//! probed: two words at most one edit apart (optimal string alignment), the longer of at least
//! `2q + 1` characters, share their first `q` characters or their last `q`.
//!
//! Why: a substitution, deletion, insertion or swap that starts at a position below `q` ends
//! before the last `q` characters of the longer word (it reaches position `q` at most, and `q <
//! len - q`), so those stay in place counted from the end; one that starts at `q` or later leaves
//! the first `q` alone. So for each text-word length whose phrase words in reach all allow at
//! most one edit, the first and the last `q` characters of every phrase word in reach go into a
//! bit filter at policy load, and a text word whose two ends are both absent anchors nothing:
//! two lookups settle it, with no prefix hashes, no variants and no memo of seen words. Most
//! words of a prompt are settled this way, since few share an end with some phrase word.

/// The longest ends kept: three characters already make ends rare among unrelated words, and
/// longer ones would leave out more of the short lengths.
const MOST_Q: usize = 3;

/// The ends of the phrase words, by text-word length.
#[derive(Debug, Clone, Default)]
pub(super) struct Ends {
    /// Per text-word length: how many characters its ends have, 0 where the filter is not used.
    q: Vec<u8>,
    /// One bit per hash bucket, set where some end falls.
    filter: Vec<u64>,
    shift: u32,
}

/// Collects the ends of the phrase words for each text-word length that uses the filter.
#[derive(Default)]
pub(super) struct EndsBuilder {
    q: Vec<u8>,
    keys: Vec<u64>,
}

/// The most characters the ends can have for text words of `len` characters (0: none), so that
/// every pair with them has a longer word of at least `2q + 1` (the text word's own length
/// bounds the longer from below).
pub(super) fn ends_for(len: usize) -> usize {
    (len.saturating_sub(1) / 2).min(MOST_Q)
}

impl EndsBuilder {
    /// Text words of `len` characters check ends of `q` characters (at most [`ends_for`]`(len)`)
    /// against those of `phrase_words`, each of at least `q` characters, which must be every
    /// phrase word they can be `MIN` similar to, all within one edit.
    pub(super) fn length<'w>(
        &mut self,
        len: usize,
        q: usize,
        phrase_words: impl Iterator<Item = &'w [char]>,
    ) {
        if q == 0 || q > ends_for(len) {
            return;
        }
        if self.q.len() <= len {
            self.q.resize(len + 1, 0);
        }
        self.q[len] = q as u8;
        for w in phrase_words {
            if w.len() < q {
                continue;
            }
            let code = |c: &char| u32::from(*c);
            self.keys.push(key(len, 0, w[..q].iter().map(code)));
            self.keys
                .push(key(len, 1, w[w.len() - q..].iter().map(code)));
        }
    }

    pub(super) fn build(mut self) -> Ends {
        self.keys.sort_unstable();
        self.keys.dedup();
        // About 32 bits per end: a word with neither end passes about one time in sixteen.
        let bits = (self.keys.len() * 32).next_power_of_two().max(64);
        let shift = 64 - bits.trailing_zeros();
        let mut filter = vec![0u64; bits / 64];
        for &k in &self.keys {
            let bit = bucket(k, shift);
            filter[bit / 64] |= 1 << (bit % 64);
        }
        Ends {
            q: self.q,
            filter,
            shift,
        }
    }
}

impl Ends {
    /// How many characters the ends of text words of `len` characters have (0: not checked).
    #[inline(always)]
    pub(super) fn q(&self, len: usize) -> usize {
        self.q.get(len).map_or(0, |&q| usize::from(q))
    }

    /// Whether a text word of `len` characters, whose first and last `q(len)` characters are
    /// `head` and `tail`, may be within one edit of some phrase word (false: of none).
    #[inline(always)]
    pub(super) fn admits(
        &self,
        len: usize,
        head: impl Iterator<Item = u32>,
        tail: impl Iterator<Item = u32>,
    ) -> bool {
        self.has(key(len, 0, head)) || self.has(key(len, 1, tail))
    }

    #[inline(always)]
    fn has(&self, key: u64) -> bool {
        let bit = bucket(key, self.shift);
        self.filter
            .get(bit / 64)
            .is_some_and(|word| word & (1 << (bit % 64)) != 0)
    }
}

/// One end of a word, known by the text-word length, the side (0 first, 1 last) and its
/// characters.
#[inline(always)]
fn key(len: usize, side: u64, gram: impl Iterator<Item = u32>) -> u64 {
    gram.fold((len as u64) << 1 | side, |h, c| {
        h.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(u64::from(c))
    })
}

#[inline(always)]
fn bucket(key: u64, shift: u32) -> usize {
    (key.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> shift) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ends(len: usize, phrase_words: &[&str]) -> Ends {
        let words: Vec<Vec<char>> = phrase_words.iter().map(|w| w.chars().collect()).collect();
        let mut builder = EndsBuilder::default();
        builder.length(len, ends_for(len), words.iter().map(Vec::as_slice));
        builder.build()
    }

    fn admits(ends: &Ends, word: &str) -> bool {
        let chars: Vec<u32> = word.chars().map(u32::from).collect();
        let q = ends.q(chars.len());
        ends.admits(
            chars.len(),
            chars[..q].iter().copied(),
            chars[chars.len() - q..].iter().copied(),
        )
    }

    #[test]
    fn short_lengths_keep_no_ends() {
        assert_eq!(ends_for(4), 1);
        assert_eq!(ends_for(5), 2);
        assert_eq!(ends_for(7), 3);
        assert_eq!(ends_for(20), MOST_Q);
        let e = ends(4, &["abcd"]);
        // Asking for more than the length allows keeps nothing for it.
        let mut builder = EndsBuilder::default();
        builder.length(4, 2, std::iter::empty());
        assert_eq!(builder.build().q(4), 0);
        assert_eq!(e.q(4), 1);
        assert_eq!(e.q(5), 0);
    }

    #[test]
    fn words_sharing_no_end_are_refused() {
        let e = ends(8, &["segfault", "deadline"]);
        assert!(admits(&e, "segfualt"));
        assert!(admits(&e, "xxxdline"));
        assert!(!admits(&e, "urgently"));
        assert!(!admits(&e, "kubernet"));
        // Ends are kept per text-word length.
        assert!(!admits(&ends(9, &["segfault"]), "segfault"));
    }

    fn edited(word: &[char], kind: u8, at: usize, c: char) -> Vec<char> {
        let mut w = word.to_vec();
        let i = at % (w.len() + 1);
        match kind {
            0 => w.insert(i, c),
            1 if i < w.len() => {
                w.remove(i);
            }
            2 if i < w.len() => w[i] = c,
            3 if i + 1 < w.len() => w.swap(i, i + 1),
            _ => {}
        }
        w
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Every word one edit from a phrase word passes, at its own length.
        #[test]
        fn one_edit_never_loses_a_word(
            base in "[abcé]{4,12}",
            kind in 0u8..4,
            at in 0usize..16,
            c in proptest::sample::select(&['a', 'b', 'x', 'é'][..]),
        ) {
            let phrase: Vec<char> = base.chars().collect();
            let text = edited(&phrase, kind, at, c);
            let len = text.len();
            let q = ends_for(len);
            prop_assume!(q > 0 && phrase.len().abs_diff(len) <= 1);
            let mut builder = EndsBuilder::default();
            builder.length(len, q, std::iter::once(phrase.as_slice()));
            let e = builder.build();
            let code: Vec<u32> = text.iter().map(|&c| u32::from(c)).collect();
            prop_assert!(e.admits(len, code[..q].iter().copied(), code[len - q..].iter().copied()));
        }
    }
}
