//! The text words of one request already known to anchor no phrase, so that a word the prompt
//! repeats (most words of natural text are repeats: "the", "error", a variable's name) is looked
//! up in the phrase index once, not at every occurrence.
//!
//! Words are known by a hash and checked byte for byte on a hit, so two words sharing a hash
//! only cost a comparison; the answer is always exact.

/// An open-addressing set of word positions, sized once per request.
pub(super) struct Seen {
    /// Per slot: the hash's high half as a tag in the upper 32 bits, and the word's position
    /// plus one in the lower (0: empty). One integer rather than a pair, so the table comes
    /// zeroed from the allocator instead of being filled slot by slot.
    slots: Vec<u64>,
    shift: u32,
    /// Insertions left before the table would be more than three quarters full; past that it
    /// takes no more words, so a lookup always reaches an empty slot.
    room: usize,
}

impl Seen {
    /// Room for up to `words` insertions, at most about two thirds full.
    pub(super) fn with_room(words: usize) -> Seen {
        let size = (words + words / 2).next_power_of_two().max(2);
        Seen {
            slots: vec![0; size],
            shift: 64 - size.trailing_zeros(),
            room: size - size / 4 - 1,
        }
    }

    /// Whether `word`, of hash `hash`, was inserted at some position of `words`.
    #[inline]
    pub(super) fn has(&self, hash: u64, word: &str, words: &[&str]) -> bool {
        let tag = (hash >> 32) as u32;
        let mask = self.slots.len() - 1;
        let mut at = home(hash, self.shift);
        loop {
            let Some(&slot) = self.slots.get(at) else {
                return false;
            };
            let (slot_tag, place) = ((slot >> 32) as u32, slot as u32);
            if place == 0 {
                return false;
            }
            if slot_tag == tag && words.get(place as usize - 1) == Some(&word) {
                return true;
            }
            at = (at + 1) & mask;
        }
    }

    /// Records the word at position `place`, of hash `hash`; a set without room left ignores
    /// further words (they are then looked at again, never wrongly skipped).
    pub(super) fn insert(&mut self, hash: u64, place: usize) {
        let Ok(place) = u32::try_from(place + 1) else {
            return;
        };
        if self.room == 0 {
            return;
        }
        let mask = self.slots.len() - 1;
        let mut at = home(hash, self.shift);
        while let Some(slot) = self.slots.get_mut(at) {
            if *slot as u32 == 0 {
                *slot = (hash >> 32) << 32 | u64::from(place);
                self.room -= 1;
                return;
            }
            at = (at + 1) & mask;
        }
    }
}

fn home(hash: u64, shift: u32) -> usize {
    (hash.wrapping_mul(0xA076_1D64_78BD_642F) >> shift) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_exactly_the_inserted_words() {
        let words = ["alpha", "beta", "alpha", "gamma", "beta"];
        let mut seen = Seen::with_room(words.len());
        seen.insert(7, 0);
        assert!(seen.has(7, "alpha", &words));
        // Same hash, other bytes: a shared hash never makes a word look seen.
        assert!(!seen.has(7, "gamma", &words));
        assert!(!seen.has(8, "beta", &words));
        seen.insert(9, 1);
        assert!(seen.has(9, "beta", &words));
        assert!(seen.has(7, "alpha", &words));
    }

    #[test]
    fn crowded_buckets_and_a_full_table_stay_exact() {
        let words: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        // Every word on one hash, so every lookup walks the same chain.
        let mut seen = Seen::with_room(4);
        for place in 0..words.len() {
            seen.insert(42, place);
        }
        let inserted = (0..words.len())
            .filter(|&p| seen.has(42, words[p], &words))
            .count();
        // The table takes words up to three quarters of its slots; the rest are simply not
        // remembered, and a lookup still ends.
        assert_eq!(inserted, seen.slots.len() * 3 / 4 - 1);
        assert!(!seen.has(42, "absent", &words));
    }
}
