//! Where cached answers live: one small async trait, an in-process implementation
//! ([`MemoryCache`]) and two shared ones that every router replica reads: [`RedisCache`] and a
//! vector database, [`MilvusCache`].
//!
//! A store only keeps entries — a unit vector, the question it embeds, an answer body, a creation
//! time — per scope and finds the nearest ones; the caller decides what a hit is (the threshold
//! and [`Accept`], the look-alike check on the stored question) and how old is too old (the
//! ttl), and passes its clock's time, so one clock governs a request and tests can move it.

pub mod memory;
pub mod milvus;
pub mod redis;

pub use self::memory::MemoryCache;
pub use self::milvus::MilvusCache;
pub use self::redis::RedisCache;

use bytes::Bytes;

use crate::cache::scope::Scope;
use crate::hooks::BoxFuture;
pub use crate::store::StoreError;

/// Entries compared per scope by the Redis store: the newest this many are kept (and scanned on
/// each lookup). The memory store indexes its scopes and bounds only the whole.
pub const PER_SCOPE: usize = 64;

/// Candidates at the threshold offered to [`Accept`], best first, before a lookup gives up: a
/// look-alike refused leaves room for the true paraphrase just below it.
pub const CANDIDATES: usize = 4;

/// Whether a stored question may answer the request: the look-alike check
/// (`src_compiler::lookalike`). Asked only of entries whose similarity reached the threshold.
pub type Accept<'a> = dyn Fn(&str) -> bool + Send + Sync + 'a;

/// Accepts every stored question (cosine alone: tests and tools).
pub fn accept_all(_: &str) -> bool {
    true
}

/// What [`CacheStore::nearest`] looks for.
#[derive(Clone, Copy)]
pub struct Lookup<'a> {
    /// The partition searched; no other scope's entry ever answers.
    pub scope: &'a Scope,
    /// The request's embedding, a unit vector.
    pub vector: &'a [f32],
    /// The least similarity of a hit.
    pub threshold: f64,
    /// The caller's clock, the time the ttl is measured to.
    pub now_ms: u64,
    /// Entries created this long before `now_ms` or earlier are expired.
    pub ttl_ms: u64,
    /// The look-alike check on a candidate's stored question.
    pub accept: &'a Accept<'a>,
}

/// The answer of [`CacheStore::nearest`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Nearest {
    /// The similarity of the nearest live entry; `None` when the scope holds none.
    pub score: Option<f32>,
    /// Its answer, when the score reached the threshold and [`Accept`] took its question.
    pub body: Option<Bytes>,
    /// Entries at the threshold whose question [`Accept`] refused.
    pub rejected: u32,
}

/// The whole memory store's bounds (`max_entries`, `max_bytes` in the policy's `cache`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub max_entries: usize,
    pub max_bytes: usize,
}

/// The answer of [`CacheStore::insert`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inserted {
    Stored,
    /// Over the per-entry size limit: not stored.
    TooLarge,
}

/// Cached answers, shared by every request of every policy generation that names the store.
pub trait CacheStore: Send + Sync {
    /// `memory`, `redis` or `milvus`, for logs.
    fn kind(&self) -> &'static str;

    /// The nearest entry of the lookup's scope to its vector among those younger than its ttl,
    /// with its body when its similarity is at least the threshold and `accept` takes its
    /// question; the entries at the threshold are offered to `accept` best first, at most
    /// [`CANDIDATES`] of them, and the first taken answers (its score is then the one reported).
    /// Using an entry counts as a use (LRU).
    fn nearest<'a>(&'a self, lookup: Lookup<'a>) -> BoxFuture<'a, Result<Nearest, StoreError>>;

    /// Stores an answer to `question` (whose embedding is `vector`) under `scope`, kept for at
    /// most `ttl_ms`.
    fn insert<'a>(
        &'a self,
        scope: &'a Scope,
        vector: &'a [f32],
        question: &'a str,
        body: Bytes,
        now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Inserted, StoreError>>;

    /// Entries held, when the store can tell cheaply (the memory store; not Redis).
    fn entries(&self) -> Option<u64> {
        None
    }

    /// Applies the policy's bounds; a store bounded otherwise (Redis: by the ttl) ignores them.
    fn bound(&self, _bounds: Bounds) {}
}

/// Cosine similarity of two unit vectors; vectors of different lengths (different encoders)
/// are not comparable and score below any threshold.
pub fn similarity(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() || a.is_empty() {
        return f32::NEG_INFINITY;
    }
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The entries at `threshold` among `scored` (`(entry, score)`), best first, at most
/// [`CANDIDATES`] of them; both stores rank the same way.
pub fn candidates<T>(mut scored: Vec<(T, f32)>, threshold: f64) -> Vec<(T, f32)> {
    scored.retain(|(_, score)| f64::from(*score) >= threshold);
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    scored.truncate(CANDIDATES);
    scored
}

/// Whether an entry created at `created_ms` is still live at `now_ms` under `ttl_ms`.
pub fn live(created_ms: u64, now_ms: u64, ttl_ms: u64) -> bool {
    now_ms < created_ms.saturating_add(ttl_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn similarity_is_the_dot_product_of_comparable_vectors() {
        assert!((similarity(&[0.6, 0.8], &[0.6, 0.8]) - 1.0).abs() < 1e-6);
        assert!(similarity(&[1.0, 0.0], &[0.0, 1.0]).abs() < 1e-6);
        assert_eq!(similarity(&[1.0], &[1.0, 0.0]), f32::NEG_INFINITY);
        assert_eq!(similarity(&[], &[]), f32::NEG_INFINITY);
    }

    #[test]
    fn an_entry_lives_for_its_ttl_and_not_a_millisecond_more() {
        assert!(live(1_000, 1_000, 10));
        assert!(live(1_000, 1_009, 10));
        assert!(!live(1_000, 1_010, 10));
        assert!(live(u64::MAX - 1, u64::MAX - 1, u64::MAX));
    }
}
