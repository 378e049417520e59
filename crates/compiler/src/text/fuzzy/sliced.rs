//! The character-set bound for many phrase words at once: a word with more than `budget` of the
//! text word's characters missing is more than `budget` edits away (each edit brings in at most
//! one of them), and counting the missing characters of 64 phrase words takes one bit operation
//! per character of the text word, not one comparison per phrase word.

/// Budgets at or above this fall back to comparing one word at a time.
pub(super) const MOST_LEVELS: usize = 4;

/// The phrase words of one length, 64 to a chunk, by character bit.
#[derive(Debug, Clone, Default)]
pub(super) struct Sliced {
    chunks: Vec<Chunk>,
}

#[derive(Debug, Clone)]
struct Chunk {
    /// Per character bit: which of the chunk's words have it.
    has: [u64; 64],
    /// Which of the chunk's 64 places hold a word.
    valid: u64,
}

impl Sliced {
    /// From the character sets of the words, in order.
    pub(super) fn new(masks: &[u64]) -> Sliced {
        let chunks = masks
            .chunks(64)
            .map(|part| {
                let mut has = [0u64; 64];
                for (j, &m) in part.iter().enumerate() {
                    let mut bits = m;
                    while bits != 0 {
                        has[bits.trailing_zeros() as usize] |= 1 << j;
                        bits &= bits - 1;
                    }
                }
                let valid = if part.len() == 64 {
                    u64::MAX
                } else {
                    (1u64 << part.len()) - 1
                };
                Chunk { has, valid }
            })
            .collect();
        Sliced { chunks }
    }

    /// Calls `f` with the place of every word that lacks at most `budget` of the characters of
    /// `text_mask`; `budget` must be below [`MOST_LEVELS`].
    pub(super) fn candidates(&self, text_mask: u64, budget: usize, f: impl FnMut(usize)) {
        // One copy per budget, so the counter updates unroll.
        match budget {
            0 => self.scan::<0>(text_mask, f),
            1 => self.scan::<1>(text_mask, f),
            2 => self.scan::<2>(text_mask, f),
            _ => self.scan::<3>(text_mask, f),
        }
    }

    fn scan<const BUDGET: usize>(&self, text_mask: u64, mut f: impl FnMut(usize)) {
        for (c, chunk) in self.chunks.iter().enumerate() {
            // levels[i]: the words that lack at least i + 1 of the characters seen so far.
            let mut levels = [0u64; MOST_LEVELS];
            let mut bits = text_mask;
            while bits != 0 {
                let missing = !chunk.has[bits.trailing_zeros() as usize];
                bits &= bits - 1;
                for i in (1..=BUDGET).rev() {
                    levels[i] |= levels[i - 1] & missing;
                }
                levels[0] |= missing;
                if chunk.valid & !levels[BUDGET] == 0 {
                    break;
                }
            }
            let mut alive = chunk.valid & !levels[BUDGET];
            while alive != 0 {
                f(c * 64 + alive.trailing_zeros() as usize);
                alive &= alive - 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_counting_each_word() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for n in [0usize, 1, 63, 64, 65, 150] {
            // Sparse masks, so that every budget keeps some words and drops others.
            let masks: Vec<u64> = (0..n).map(|_| next() & next() & next()).collect();
            let sliced = Sliced::new(&masks);
            for _ in 0..50 {
                let text = next() & next();
                for budget in 0..MOST_LEVELS {
                    let mut got = Vec::new();
                    sliced.candidates(text, budget, |j| got.push(j));
                    let want: Vec<usize> = (0..n)
                        .filter(|&j| (text & !masks[j]).count_ones() as usize <= budget)
                        .collect();
                    assert_eq!(got, want, "{n} words, budget {budget}");
                }
            }
        }
    }
}
