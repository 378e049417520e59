//! The per-model prefix cache: which prompt blocks a backend would still hold in its KV cache.
//!
//! A prompt is cut into blocks of whole tokens and each block is named by a hash chained over
//! every block before it, so a block hash stands for its entire prefix (as vLLM's block hashes
//! do). A request's cached tokens are the longest run of leading blocks already present.

use std::collections::{BTreeMap, HashMap};

/// Bytes per simulated token, matching the documented estimate ⌈UTF-8 bytes / 4⌉.
pub(crate) const TOKEN_BYTES: usize = 4;

/// Simulated token count of a rendered prompt.
pub(crate) fn count_tokens(prompt: &[u8]) -> u64 {
    prompt.len().div_ceil(TOKEN_BYTES) as u64
}

/// Chained hashes of every whole block of `block_size` whole tokens; a trailing partial block
/// is never cached.
pub(crate) fn block_hashes(prompt: &[u8], block_size: u32) -> Vec<u64> {
    let block_bytes = (block_size as usize).saturating_mul(TOKEN_BYTES).max(1);
    let mut previous = FNV_OFFSET;
    prompt
        .chunks_exact(block_bytes)
        .map(|block| {
            previous = fnv1a(fnv1a(FNV_OFFSET, &previous.to_le_bytes()), block);
            previous
        })
        .collect()
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a: stable across Rust versions and platforms, unlike `DefaultHasher`, so seeds and
/// block names mean the same thing in every build.
pub(crate) fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    hash
}

/// Hashes several fields without letting `("ab", "c")` collide with `("a", "bc")`.
pub(crate) fn fnv1a_fields(fields: &[&[u8]]) -> u64 {
    fields.iter().fold(FNV_OFFSET, |hash, field| {
        fnv1a(fnv1a(hash, &(field.len() as u64).to_le_bytes()), field)
    })
}

/// An LRU set of block hashes bounded by a block count.
#[derive(Debug)]
pub(crate) struct PrefixCache {
    capacity: usize,
    tick: u64,
    last_use: HashMap<u64, u64>,
    by_age: BTreeMap<u64, u64>,
}

impl PrefixCache {
    pub(crate) fn new(capacity: usize) -> PrefixCache {
        PrefixCache {
            capacity,
            tick: 0,
            last_use: HashMap::new(),
            by_age: BTreeMap::new(),
        }
    }

    /// Counts the leading blocks already cached, then records all of them as used.
    ///
    /// Blocks are touched last-to-first so that a prompt's tail is older than its head: under
    /// pressure the cache drops the ends of chains first and keeps the shared prefixes, which are
    /// the blocks other requests can still hit.
    pub(crate) fn lookup_and_insert(&mut self, blocks: &[u64]) -> usize {
        let hits = blocks
            .iter()
            .take_while(|block| self.last_use.contains_key(block))
            .count();
        if self.capacity > 0 {
            for block in blocks.iter().rev() {
                self.touch(*block);
            }
        }
        hits
    }

    pub(crate) fn len(&self) -> usize {
        self.last_use.len()
    }

    fn touch(&mut self, block: u64) {
        self.tick += 1;
        if let Some(previous) = self.last_use.insert(block, self.tick) {
            self.by_age.remove(&previous);
        }
        self.by_age.insert(self.tick, block);
        while self.last_use.len() > self.capacity {
            match self.by_age.pop_first() {
                Some((_, oldest)) => {
                    self.last_use.remove(&oldest);
                }
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn tokens_round_up_to_four_bytes() {
        assert_eq!(count_tokens(b""), 0);
        assert_eq!(count_tokens(b"abcd"), 1);
        assert_eq!(count_tokens(b"abcde"), 2);
    }

    #[test]
    fn only_whole_blocks_are_hashed_and_chains_share_prefixes() {
        let a = vec![b'a'; 64 * 3 + 10];
        let mut b = a.clone();
        b[64 * 2] = b'z';
        let (ha, hb) = (block_hashes(&a, 16), block_hashes(&b, 16));
        assert_eq!(ha.len(), 3);
        assert_eq!(ha[..2], hb[..2]);
        assert_ne!(ha[2], hb[2]);
        // Equal block contents at different depths are different blocks.
        assert_ne!(ha[0], ha[1]);
    }

    #[test]
    fn second_lookup_hits_the_shared_prefix() {
        let mut cache = PrefixCache::new(100);
        assert_eq!(cache.lookup_and_insert(&[1, 2, 3]), 0);
        assert_eq!(cache.lookup_and_insert(&[1, 2, 3, 4]), 3);
        assert_eq!(cache.lookup_and_insert(&[1, 9, 3]), 1);
        assert_eq!(cache.lookup_and_insert(&[7]), 0);
    }

    #[test]
    fn eviction_drops_chain_tails_first() {
        let mut cache = PrefixCache::new(3);
        cache.lookup_and_insert(&[1, 2, 3]);
        cache.lookup_and_insert(&[10]);
        assert_eq!(cache.len(), 3);
        // Block 3 (the tail of the older chain) went; its prefix still hits.
        assert_eq!(cache.lookup_and_insert(&[1, 2, 3]), 2);
    }

    #[test]
    fn zero_capacity_caches_nothing() {
        let mut cache = PrefixCache::new(0);
        cache.lookup_and_insert(&[1, 2]);
        assert_eq!(cache.lookup_and_insert(&[1, 2]), 0);
        assert_eq!(cache.len(), 0);
    }

    proptest! {
        #[test]
        fn never_exceeds_capacity_and_hits_are_a_cached_prefix(
            capacity in 0usize..20,
            requests in proptest::collection::vec(proptest::collection::vec(0u64..30, 0..12), 1..40),
        ) {
            let mut cache = PrefixCache::new(capacity);
            for blocks in &requests {
                let before: Vec<bool> = blocks.iter().map(|b| cache.last_use.contains_key(b)).collect();
                let hits = cache.lookup_and_insert(blocks);
                prop_assert!(before[..hits].iter().all(|cached| *cached));
                prop_assert!(hits == blocks.len() || !before[hits]);
                prop_assert!(cache.len() <= capacity);
                prop_assert_eq!(cache.len(), cache.by_age.len());
            }
        }
    }
}
