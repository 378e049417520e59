//! What a redaction's search found in a text, remembered per tenant so a conversation's history,
//! which comes back whole with every turn, is searched once rather than at every turn.
//!
//! The memo holds where the entities are and of which type (byte offsets into the text), never
//! what they are: a hit gives the spans, and the values are read from the text the request
//! carries. It is keyed by a 128-bit XXH3 of the text under a secret drawn when the process
//! starts, next to the same hash of the tenant, so nobody can make two texts collide without
//! that secret, and one tenant's texts never answer another's. What the search finds depends on
//! the text and the redacted types alone (the recognizers and their number plans are fixed per
//! process): each [`super::Redact`] owns its memo, so the types are part of the key by
//! construction, and a policy reload starts afresh.
//!
//! The memo is bounded in bytes ([`MEMO_BYTES`]): each text costs its key, the spans' list and
//! the cache's own bookkeeping ([`ENTRY_BYTES`]). Tenants share the bound: one that sends many
//! new texts evicts others' entries, which costs those a search again, never a wrong answer.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, LazyLock};

use quick_cache::sync::Cache;
use quick_cache::Weighter;
use xxhash_rust::xxh3::{xxh3_128_with_secret_input, SecretInput};

use super::Found;

/// The most bytes one redaction's memo holds (keys, spans and the cache's bookkeeping).
pub(super) const MEMO_BYTES: u64 = 2 << 20;

/// What one text's entry costs besides its spans: the key, the list's pointer and length, its
/// reference counts, and the cache's own slot (its hash, frequency and links), rounded up.
pub(super) const ENTRY_BYTES: u64 = 96;

/// What one span costs in the list.
const SPAN_BYTES: u64 = std::mem::size_of::<Found>() as u64;

/// XXH3's secret, drawn once per process: 192 bytes (the size of XXH3's default secret) from
/// std's randomly keyed SipHash, so no new source of randomness is needed. `None` only if
/// XXH3 refused the length, which it never does for 192 bytes: the memo is then off.
static SECRET: LazyLock<Option<SecretInput<[u8; 192]>>> = LazyLock::new(|| {
    let state = std::hash::RandomState::new();
    let mut secret = [0u8; 192];
    for (i, chunk) in secret.chunks_exact_mut(8).enumerate() {
        chunk.copy_from_slice(&state.hash_one(i).to_le_bytes());
    }
    SecretInput::try_new(secret)
});

/// The keyed hash of `bytes`; `None` when the memo is off.
pub(super) fn keyed(bytes: &[u8]) -> Option<u128> {
    SECRET
        .as_ref()
        .map(|secret| xxh3_128_with_secret_input(bytes, secret))
}

/// A text's key: its tenant's keyed hash and its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    scope: u128,
    text: u128,
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Both halves are already keyed hashes: the cache's hasher need not mix them again.
        state.write_u64((self.scope ^ self.text) as u64);
    }
}

/// The hasher of already hashed keys: it keeps the last `u64` written.
#[derive(Debug, Clone, Copy, Default)]
struct Hashed(u64);

impl Hasher for Hashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `Key` is hashed here, through `write_u64`; other input is folded, never lost.
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(word);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct BuildHashed;

impl BuildHasher for BuildHashed {
    type Hasher = Hashed;

    fn build_hasher(&self) -> Hashed {
        Hashed::default()
    }
}

/// An entry's weight: its bytes.
#[derive(Debug, Clone, Copy)]
struct Bytes;

impl Weighter<Key, Arc<[Found]>> for Bytes {
    fn weight(&self, _: &Key, spans: &Arc<[Found]>) -> u64 {
        ENTRY_BYTES + SPAN_BYTES * spans.len() as u64
    }
}

/// The spans found in texts, by tenant and text.
pub(super) struct Memo {
    cache: Cache<Key, Arc<[Found]>, Bytes, BuildHashed>,
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memo")
            .field("texts", &self.cache.len())
            .field("bytes", &self.cache.weight())
            .finish()
    }
}

impl Memo {
    pub(super) fn new() -> Memo {
        Memo::with_capacity(MEMO_BYTES)
    }

    pub(super) fn with_capacity(bytes: u64) -> Memo {
        // Most texts carry no entity or a few.
        let expected = (bytes / (ENTRY_BYTES + 2 * SPAN_BYTES)).max(1) as usize;
        Memo {
            cache: Cache::with(expected, bytes, Bytes, BuildHashed, Default::default()),
        }
    }

    /// The spans of `text` for the tenant whose keyed hash is `scope`: remembered, or found by
    /// `search` and remembered. Without a secret every text is searched.
    pub(super) fn spans(
        &self,
        scope: u128,
        text: &str,
        search: impl FnOnce() -> Vec<Found>,
    ) -> Arc<[Found]> {
        let Some(hash) = keyed(text.as_bytes()) else {
            return search().into();
        };
        let key = Key { scope, text: hash };
        if let Some(spans) = self.cache.get(&key) {
            // A key is 256 bits of keyed hashes, so a hit is this text's; the spans are still
            // checked to fall on its characters, so even a collision cannot cut a character.
            if fits(&spans, text) {
                return spans;
            }
        }
        let spans: Arc<[Found]> = search().into();
        self.cache.insert(key, spans.clone());
        spans
    }

    /// How many texts and bytes the memo holds.
    #[cfg(test)]
    pub(super) fn size(&self) -> (usize, u64) {
        (self.cache.len(), self.cache.weight())
    }
}

/// Whether every span lies on character boundaries of `text`.
fn fits(spans: &[Found], text: &str) -> bool {
    spans.iter().all(|f| {
        f.span.start <= f.span.end
            && text.is_char_boundary(f.span.start)
            && text.is_char_boundary(f.span.end)
    })
}
