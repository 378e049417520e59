//! Deletion variants, the index that finds phrase words near a text word without comparing it
//! to each of them (the idea of SymSpell).
//!
//! Two words at most `d` edits apart (optimal string alignment) both reduce to one common string
//! by deleting at most `d` characters from each: a substitution or a swap deletes one character
//! on each side, an insertion or a deletion one on one side. So once every phrase word's
//! variants are indexed, probing a text word's own variants finds every phrase word within its
//! budget. Variants are known by a polynomial hash, from which the hashes of every variant with
//! one or two deletions follow in O(1) each from the word's prefix hashes; two strings may share
//! a hash, which only adds a candidate that the distance then rejects.

/// The hash base (odd, so that powers of it never vanish modulo 2⁶⁴).
const BASE: u64 = 0x9E37_79B9_7F4A_7C15;

pub(super) fn step(h: u64, c: u32) -> u64 {
    h.wrapping_mul(BASE).wrapping_add(u64::from(c))
}

/// The hash of a whole word, as [`Prefixes`] ends with it.
pub(super) fn hash(chars: impl Iterator<Item = u32>) -> u64 {
    chars.fold(0, step)
}

/// `BASE⁰ ..= BASEⁿ`.
pub(super) fn powers(n: usize) -> Vec<u64> {
    let mut out = Vec::with_capacity(n + 1);
    let mut p = 1u64;
    for _ in 0..=n {
        out.push(p);
        p = p.wrapping_mul(BASE);
    }
    out
}

/// The hash of every variant of `chars` with at most `depth` characters deleted (each set of
/// deleted positions once, so a variant reached twice is listed twice).
pub(super) fn all_variants(chars: &[char], depth: usize, out: &mut Vec<u64>) {
    fn go(chars: &[char], h: u64, left: usize, out: &mut Vec<u64>) {
        match chars.split_first() {
            None => out.push(h),
            Some((&c, rest)) => {
                go(rest, step(h, u32::from(c)), left, out);
                if left > 0 {
                    go(rest, h, left - 1, out);
                }
            }
        }
    }
    go(chars, 0, depth, out);
}

/// How many variants [`all_variants`] lists for a word of `len` characters.
pub(super) fn variant_count(len: usize, depth: usize) -> usize {
    let mut total = 0usize;
    let mut choose = 1usize;
    for k in 0..=depth.min(len) {
        total = total.saturating_add(choose);
        choose = choose.saturating_mul(len - k) / (k + 1);
    }
    total
}

/// One text word's prefix hashes, from which its variants' hashes follow.
#[derive(Default)]
pub(super) struct Prefixes {
    hashes: Vec<u64>,
}

impl Prefixes {
    /// From the word's characters as code points (an ASCII word's bytes are its code points,
    /// so either gives the same hashes).
    pub(super) fn of(&mut self, chars: impl ExactSizeIterator<Item = u32>) {
        // Written in place over a table kept from word to word: no capacity check per push.
        let n = chars.len();
        self.hashes.resize(n + 1, 0);
        let mut h = 0;
        for (slot, c) in self.hashes[1..].iter_mut().zip(chars) {
            h = step(h, c);
            *slot = h;
        }
    }

    /// The hash of the whole word.
    pub(super) fn whole(&self) -> u64 {
        self.hashes.last().copied().unwrap_or(0)
    }

    /// The hash of characters `from..to`.
    fn span(&self, pow: &[u64], from: usize, to: usize) -> u64 {
        self.hashes[to].wrapping_sub(self.hashes[from].wrapping_mul(pow[to - from]))
    }

    /// Calls `f` with the hash of the word and of each variant with one deletion, then, for
    /// `depth` 2, of each with two; `pow` must reach the word's length.
    #[inline]
    pub(super) fn variants(&self, pow: &[u64], depth: u8, mut f: impl FnMut(u64)) {
        let n = self.hashes.len() - 1;
        f(self.hashes[n]);
        if depth == 0 {
            return;
        }
        // Deleting character i: H[i]·B^(n-1-i) + (H[n] - H[i+1]·B^(n-1-i)), which is
        // H[n] + B^(n-1-i)·(H[i] - H[i+1]), one multiplication.
        let whole = self.hashes[n];
        for (pair, &p) in self.hashes.windows(2).zip(pow[..n].iter().rev()) {
            f(whole.wrapping_add(p.wrapping_mul(pair[0].wrapping_sub(pair[1]))));
        }
        if depth == 1 {
            return;
        }
        for i in 0..n {
            let left = self.hashes[i];
            for j in i + 1..n {
                let middle = self.span(pow, i + 1, j);
                let right = self.span(pow, j + 1, n);
                let head = left.wrapping_mul(pow[j - i - 1]).wrapping_add(middle);
                f(head.wrapping_mul(pow[n - 1 - j]).wrapping_add(right));
            }
        }
    }
}

/// Variant hash → the phrase words that have it: an open-addressing table over one flat list.
#[derive(Debug, Clone)]
pub(super) struct Index {
    slots: Vec<Slot>,
    ids: Vec<u32>,
    shift: u32,
    /// One bit per hash bucket, set where some key falls: most probes miss, and this answers
    /// them from a table small enough to stay in the first-level cache.
    filter: Vec<u64>,
    filter_shift: u32,
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    key: u64,
    start: u32,
    /// 0 marks an empty slot.
    len: u32,
}

impl Index {
    /// From `(variant hash, word id)` pairs.
    pub(super) fn new(mut entries: Vec<(u64, u32)>) -> Index {
        entries.sort_unstable();
        entries.dedup();
        let mut groups: Vec<(u64, u32, u32)> = Vec::new();
        let mut ids = Vec::with_capacity(entries.len());
        for (key, id) in entries {
            match groups.last_mut() {
                Some(g) if g.0 == key => g.2 += 1,
                _ => groups.push((key, ids.len() as u32, 1)),
            }
            ids.push(id);
        }
        // At most half full, so a probe ends after a slot or two.
        let size = (groups.len() * 2).next_power_of_two().max(2);
        let shift = 64 - size.trailing_zeros();
        let mut slots = vec![Slot::default(); size];
        // About 16 bits per key: a miss passes the filter about one time in sixteen.
        let bits = (groups.len() * 16).next_power_of_two().max(64);
        let filter_shift = 64 - bits.trailing_zeros();
        let mut filter = vec![0u64; bits / 64];
        for &(key, _, _) in &groups {
            let bit = filter_bit(key, filter_shift);
            filter[bit / 64] |= 1 << (bit % 64);
        }
        for (key, start, len) in groups {
            let mut at = home(key, shift);
            while slots[at].len != 0 {
                at = (at + 1) & (size - 1);
            }
            slots[at] = Slot { key, start, len };
        }
        Index {
            slots,
            ids,
            shift,
            filter,
            filter_shift,
        }
    }

    /// The words with a variant of hash `key` (the scan calls its two parts apart).
    #[cfg(test)]
    pub(super) fn get(&self, key: u64) -> &[u32] {
        if self.may_have(key) {
            self.lookup(key)
        } else {
            &[]
        }
    }

    /// Whether some word may have a variant of hash `key` (false: none has). Most probes end
    /// here, so this part is small enough to inline into the loop over a word's variants.
    #[inline(always)]
    pub(super) fn may_have(&self, key: u64) -> bool {
        let bit = filter_bit(key, self.filter_shift);
        self.filter
            .get(bit / 64)
            .is_some_and(|word| word & (1 << (bit % 64)) != 0)
    }

    /// The words with a variant of hash `key`, from the table; out of line, since a probe
    /// reaches it only past the filter.
    #[inline(never)]
    pub(super) fn lookup(&self, key: u64) -> &[u32] {
        let mask = self.slots.len() - 1;
        let mut at = home(key, self.shift);
        loop {
            let Some(slot) = self.slots.get(at) else {
                return &[];
            };
            if slot.len == 0 {
                return &[];
            }
            if slot.key == key {
                let start = slot.start as usize;
                return self
                    .ids
                    .get(start..start + slot.len as usize)
                    .unwrap_or(&[]);
            }
            at = (at + 1) & mask;
        }
    }
}

/// A different mix from [`home`], so the filter and the table do not fail on the same keys.
fn filter_bit(key: u64, shift: u32) -> usize {
    (key.wrapping_mul(0x9FB2_1C65_1E98_DF25) >> shift) as usize
}

fn home(key: u64, shift: u32) -> usize {
    (key.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> shift) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(s: &str) -> Vec<char> {
        s.chars().collect()
    }

    #[test]
    fn prefix_variants_are_the_enumerated_ones() {
        let pow = powers(16);
        for word in ["", "a", "ab", "urgent", "aab", "编译错误x"] {
            let w = chars(word);
            for depth in 0..=2u8 {
                let mut want = Vec::new();
                all_variants(&w, usize::from(depth), &mut want);
                let mut got = Vec::new();
                let mut p = Prefixes::default();
                p.of(w.iter().map(|&c| u32::from(c)));
                p.variants(&pow, depth, |h| got.push(h));
                assert_eq!(p.whole(), hash(w.iter().map(|&c| u32::from(c))));
                want.sort_unstable();
                got.sort_unstable();
                assert_eq!(got, want, "{word} at depth {depth}");
                assert_eq!(want.len(), variant_count(w.len(), usize::from(depth)));
            }
        }
    }

    #[test]
    fn a_swap_and_a_substitution_share_a_variant() {
        let variants = |s: &str, d: usize| {
            let mut v = Vec::new();
            all_variants(&chars(s), d, &mut v);
            v
        };
        let index = Index::new(variants("urgent", 1).into_iter().map(|h| (h, 7)).collect());
        for near in ["urgnet", "urgant", "urgen", "urgentt"] {
            assert!(
                variants(near, 1).iter().any(|&h| index.get(h) == [7]),
                "{near}"
            );
        }
        assert!(variants("outage", 1)
            .iter()
            .all(|&h| index.get(h).is_empty()));
        assert!(Index::new(Vec::new()).get(0).is_empty());
    }
}
