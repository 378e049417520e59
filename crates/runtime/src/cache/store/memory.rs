//! The embedded cache store (`store = memory`, the default): answers in this process only.
//!
//! Bounded three ways, so a router facing endless distinct prompts cannot grow without end: at
//! most `max_entries` entries and `max_bytes` bytes in all (the least recently used entry makes
//! room), at most [`PER_SCOPE`] entries per scope (the oldest of the scope makes room), and no
//! entry over `max_entry_bytes`. Entries older than the ttl are dropped when their scope is
//! looked up, and a few at the cold end of the LRU order on every insert. One short mutex; the
//! scan of a scope (at most [`PER_SCOPE`] dot products) runs under it and nothing awaits.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use crate::cache::scope::Scope;
use crate::cache::store::{
    candidates, live, similarity, Accept, CacheStore, Inserted, Nearest, StoreError, PER_SCOPE,
};
use crate::hooks::BoxFuture;

/// Bytes counted per entry besides its body and vector (maps, ids, timestamps).
const OVERHEAD: usize = 128;

/// Entries at the cold end of the LRU order checked for expiry on each insert.
const SWEEP: usize = 16;

/// A new answer this similar to a live one of its scope, to a question the look-alike check
/// finds the same, replaces it instead of sitting beside it (two identical requests that missed
/// at the same time store one entry).
const SAME: f32 = 0.9999;

struct Entry {
    scope: Scope,
    vector: Arc<[f32]>,
    question: Box<str>,
    body: Bytes,
    created_ms: u64,
    /// Position in the LRU order.
    tick: u64,
    size: usize,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<u64, Entry>,
    /// Entry ids per scope, oldest first.
    scopes: HashMap<Scope, VecDeque<u64>>,
    /// tick → entry id; the first is the least recently used.
    lru: BTreeMap<u64, u64>,
    bytes: usize,
    tick: u64,
    next_id: u64,
}

impl Inner {
    fn remove(&mut self, id: u64) {
        let Some(entry) = self.entries.remove(&id) else {
            return;
        };
        self.lru.remove(&entry.tick);
        self.bytes = self.bytes.saturating_sub(entry.size);
        if let Some(ids) = self.scopes.get_mut(&entry.scope) {
            ids.retain(|&i| i != id);
            if ids.is_empty() {
                self.scopes.remove(&entry.scope);
            }
        }
    }

    fn touch(&mut self, id: u64) {
        self.tick += 1;
        let tick = self.tick;
        if let Some(entry) = self.entries.get_mut(&id) {
            self.lru.remove(&entry.tick);
            entry.tick = tick;
            self.lru.insert(tick, id);
        }
    }
}

/// An in-process, bounded, LRU cache store.
pub struct MemoryCache {
    inner: Mutex<Inner>,
    max_entries: usize,
    max_bytes: usize,
    max_entry_bytes: usize,
}

impl MemoryCache {
    /// A store of at most `max_entries` entries and `max_bytes` bytes, none over
    /// `max_entry_bytes` of body.
    pub fn new(max_entries: usize, max_bytes: usize, max_entry_bytes: usize) -> MemoryCache {
        MemoryCache {
            inner: Mutex::new(Inner::default()),
            max_entries: max_entries.max(1),
            max_bytes,
            max_entry_bytes,
        }
    }

    /// Entries held (expired ones included until they are looked at or evicted).
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held, as the `max_bytes` bound counts them.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// A poisoned lock only means another request panicked mid-update of plain data; carry on.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn find(
        &self,
        scope: &Scope,
        vector: &[f32],
        threshold: f64,
        now_ms: u64,
        ttl_ms: u64,
        accept: &Accept<'_>,
    ) -> Nearest {
        let mut inner = self.lock();
        let Some(ids) = inner.scopes.get(scope) else {
            return Nearest::default();
        };
        let mut expired = Vec::new();
        let mut scored: Vec<(u64, f32)> = Vec::with_capacity(ids.len());
        for &id in ids {
            let Some(entry) = inner.entries.get(&id) else {
                continue;
            };
            if !live(entry.created_ms, now_ms, ttl_ms) {
                expired.push(id);
                continue;
            }
            scored.push((id, similarity(&entry.vector, vector)));
        }
        for id in expired {
            inner.remove(id);
        }
        let best = scored.iter().map(|s| s.1).reduce(f32::max);
        let mut nearest = Nearest {
            score: best,
            ..Nearest::default()
        };
        for (id, score) in candidates(scored, threshold) {
            let Some(entry) = inner.entries.get(&id) else {
                continue;
            };
            if accept(&entry.question) {
                nearest.body = Some(entry.body.clone());
                nearest.score = Some(score);
                inner.touch(id);
                break;
            }
            nearest.rejected += 1;
        }
        nearest
    }

    fn put(
        &self,
        scope: &Scope,
        vector: &[f32],
        question: &str,
        body: Bytes,
        now_ms: u64,
        ttl_ms: u64,
    ) -> Inserted {
        let size = body.len() + question.len() + std::mem::size_of_val(vector) + OVERHEAD;
        if body.len() > self.max_entry_bytes || size > self.max_bytes {
            return Inserted::TooLarge;
        }
        let mut inner = self.lock();
        let same: Vec<u64> = inner
            .scopes
            .get(scope)
            .into_iter()
            .flatten()
            .filter(|id| {
                inner.entries.get(id).is_some_and(|e| {
                    similarity(&e.vector, vector) >= SAME
                        && src_compiler::lookalike::agree(&e.question, question).is_ok()
                })
            })
            .copied()
            .collect();
        for id in same {
            inner.remove(id);
        }
        inner.next_id += 1;
        inner.tick += 1;
        let (id, tick) = (inner.next_id, inner.tick);
        inner.entries.insert(
            id,
            Entry {
                scope: *scope,
                vector: vector.into(),
                question: question.into(),
                body,
                created_ms: now_ms,
                tick,
                size,
            },
        );
        inner.lru.insert(tick, id);
        inner.bytes += size;
        let ids = inner.scopes.entry(*scope).or_default();
        ids.push_back(id);
        let over: Vec<u64> = if ids.len() > PER_SCOPE {
            ids.iter().take(ids.len() - PER_SCOPE).copied().collect()
        } else {
            Vec::new()
        };
        for old in over {
            inner.remove(old);
        }
        let cold: Vec<u64> = inner
            .lru
            .values()
            .take(SWEEP)
            .copied()
            .filter(|id| {
                inner
                    .entries
                    .get(id)
                    .is_some_and(|e| !live(e.created_ms, now_ms, ttl_ms))
            })
            .collect();
        for old in cold {
            inner.remove(old);
        }
        while inner.entries.len() > self.max_entries || inner.bytes > self.max_bytes {
            let Some((_, &oldest)) = inner.lru.iter().next() else {
                break;
            };
            inner.remove(oldest);
        }
        Inserted::Stored
    }
}

fn ready<'a, T: Send + 'a>(value: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

impl CacheStore for MemoryCache {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn nearest<'a>(
        &'a self,
        scope: &'a Scope,
        vector: &'a [f32],
        threshold: f64,
        now_ms: u64,
        ttl_ms: u64,
        accept: &'a Accept<'a>,
    ) -> BoxFuture<'a, Result<Nearest, StoreError>> {
        ready(Ok(
            self.find(scope, vector, threshold, now_ms, ttl_ms, accept)
        ))
    }

    fn insert<'a>(
        &'a self,
        scope: &'a Scope,
        vector: &'a [f32],
        question: &'a str,
        body: Bytes,
        now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Inserted, StoreError>> {
        ready(Ok(self.put(scope, vector, question, body, now_ms, ttl_ms)))
    }

    fn entries(&self) -> Option<u64> {
        Some(self.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::store::accept_all;
    use crate::session::{Clock, ManualClock};

    const HOUR: u64 = 3_600_000;

    fn scope(n: u8) -> Scope {
        Scope([n; 32])
    }

    /// A unit vector at `angle` radians in the plane: similarity is the cosine of the angle
    /// between two of them.
    fn at(angle: f32) -> Vec<f32> {
        vec![angle.cos(), angle.sin()]
    }

    fn store() -> MemoryCache {
        MemoryCache::new(1_000, 1 << 30, 1 << 20)
    }

    fn body(text: &str) -> Bytes {
        Bytes::from(text.to_owned())
    }

    #[test]
    fn the_nearest_entry_answers_when_it_reaches_the_threshold() {
        let s = store();
        assert_eq!(
            s.put(&scope(1), &at(0.0), "q", body("zero"), 0, HOUR),
            Inserted::Stored
        );
        assert_eq!(
            s.put(&scope(1), &at(1.0), "q", body("one"), 0, HOUR),
            Inserted::Stored
        );
        let near = s.find(&scope(1), &at(0.9), 0.95, 10, HOUR, &accept_all);
        assert_eq!(near.body, Some(body("one")));
        assert!((near.score.unwrap_or(0.0) - 0.1f32.cos()).abs() < 1e-5);
        // cos(0.4) ≈ 0.92 < 0.95: the nearest is reported, but it is no hit.
        let far = s.find(&scope(1), &at(0.5), 0.95, 10, HOUR, &accept_all);
        assert_eq!(far.body, None);
        assert!((far.score.unwrap_or(0.0) - 0.5f32.cos()).abs() < 1e-5);
        assert_eq!(
            s.find(&scope(1), &at(0.5), 0.8, 10, HOUR, &accept_all).body,
            Some(body("zero"))
        );
    }

    #[test]
    fn scopes_never_see_each_others_entries() {
        let s = store();
        s.put(&scope(1), &at(0.0), "q", body("tenant a"), 0, HOUR);
        assert_eq!(
            s.find(&scope(2), &at(0.0), 0.5, 1, HOUR, &accept_all),
            Nearest::default()
        );
        assert_eq!(
            s.find(&scope(1), &at(0.0), 0.5, 1, HOUR, &accept_all).body,
            Some(body("tenant a"))
        );
    }

    #[test]
    fn entries_expire_after_the_ttl_by_the_injected_clock() {
        let clock = ManualClock::new(1_000_000);
        let s = store();
        s.put(&scope(1), &at(0.0), "q", body("a"), clock.now_ms(), HOUR);
        clock.advance(HOUR - 1);
        assert!(s
            .find(&scope(1), &at(0.0), 0.9, clock.now_ms(), HOUR, &accept_all)
            .body
            .is_some());
        clock.advance(1);
        assert_eq!(
            s.find(&scope(1), &at(0.0), 0.9, clock.now_ms(), HOUR, &accept_all),
            Nearest::default()
        );
        // The expired entry was dropped when its scope was looked at.
        assert!(s.is_empty());
        // A shorter ttl (a reloaded policy) applies to entries stored under a longer one.
        s.put(&scope(1), &at(0.0), "q", body("b"), clock.now_ms(), HOUR);
        clock.advance(60_000);
        assert!(s
            .find(
                &scope(1),
                &at(0.0),
                0.9,
                clock.now_ms(),
                30_000,
                &accept_all
            )
            .body
            .is_none());
    }

    #[test]
    fn the_least_recently_used_entry_makes_room() {
        let s = MemoryCache::new(3, 1 << 30, 1 << 20);
        for (i, name) in ["a", "b", "c"].iter().enumerate() {
            s.put(&scope(i as u8), &at(0.0), "q", body(name), 0, HOUR);
        }
        // Using `a` makes `b` the least recently used.
        assert!(s
            .find(&scope(0), &at(0.0), 0.9, 1, HOUR, &accept_all)
            .body
            .is_some());
        s.put(&scope(3), &at(0.0), "q", body("d"), 2, HOUR);
        assert_eq!(s.len(), 3);
        assert!(s
            .find(&scope(1), &at(0.0), 0.9, 3, HOUR, &accept_all)
            .body
            .is_none());
        for kept in [0u8, 2, 3] {
            assert!(
                s.find(&scope(kept), &at(0.0), 0.9, 3, HOUR, &accept_all)
                    .body
                    .is_some(),
                "{kept}"
            );
        }
    }

    #[test]
    fn the_byte_bound_evicts_and_oversized_answers_are_refused() {
        // The body, the question `q`, the vector and the bookkeeping.
        let entry = |n: usize| n + 1 + 2 * 4 + OVERHEAD;
        let s = MemoryCache::new(1_000, entry(100) * 2, 150);
        assert_eq!(
            s.put(
                &scope(1),
                &at(0.0),
                "q",
                Bytes::from(vec![b'x'; 151]),
                0,
                HOUR
            ),
            Inserted::TooLarge
        );
        assert!(s.is_empty());
        s.put(
            &scope(1),
            &at(0.0),
            "q",
            Bytes::from(vec![b'a'; 100]),
            0,
            HOUR,
        );
        s.put(
            &scope(2),
            &at(0.0),
            "q",
            Bytes::from(vec![b'b'; 100]),
            0,
            HOUR,
        );
        assert_eq!(s.bytes(), entry(100) * 2);
        s.put(
            &scope(3),
            &at(0.0),
            "q",
            Bytes::from(vec![b'c'; 100]),
            0,
            HOUR,
        );
        assert_eq!(s.len(), 2);
        assert!(s.bytes() <= entry(100) * 2);
        assert!(s
            .find(&scope(1), &at(0.0), 0.9, 1, HOUR, &accept_all)
            .body
            .is_none());
    }

    #[test]
    fn a_scope_keeps_its_newest_entries() {
        let s = store();
        for i in 0..PER_SCOPE + 5 {
            // Spread out so that none replaces another.
            s.put(
                &scope(1),
                &at(i as f32 * 0.02),
                "q",
                body(&i.to_string()),
                i as u64,
                HOUR,
            );
        }
        assert_eq!(s.len(), PER_SCOPE);
        assert!(s
            .find(&scope(1), &at(0.0), 0.99999, 100, HOUR, &accept_all)
            .body
            .is_none());
        let newest = at((PER_SCOPE + 4) as f32 * 0.02);
        assert_eq!(
            s.find(&scope(1), &newest, 0.99999, 100, HOUR, &accept_all)
                .body,
            Some(body(&(PER_SCOPE + 4).to_string()))
        );
    }

    #[test]
    fn a_look_alike_with_the_same_vector_is_kept_beside_it() {
        let s = store();
        s.put(
            &scope(1),
            &at(0.0),
            "convert 5 km to miles",
            body("km"),
            0,
            HOUR,
        );
        s.put(
            &scope(1),
            &at(0.0),
            "convert 5 miles to km",
            body("mi"),
            1,
            HOUR,
        );
        assert_eq!(s.len(), 2);
        let only = |q: &'static str| move |stored: &str| stored == q;
        let near = s.find(
            &scope(1),
            &at(0.0),
            0.9,
            2,
            HOUR,
            &only("convert 5 km to miles"),
        );
        assert_eq!((near.body, near.rejected), (Some(body("km")), 0));
        // Equal scores are offered oldest first: the other question is refused on the way.
        let near = s.find(
            &scope(1),
            &at(0.0),
            0.9,
            2,
            HOUR,
            &only("convert 5 miles to km"),
        );
        assert_eq!((near.body, near.rejected), (Some(body("mi")), 1));
    }

    #[test]
    fn the_same_request_stored_twice_keeps_one_entry() {
        let s = store();
        s.put(&scope(1), &at(0.0), "q", body("first"), 0, HOUR);
        s.put(&scope(1), &at(0.0), "q", body("second"), 1, HOUR);
        assert_eq!(s.len(), 1);
        assert_eq!(
            s.find(&scope(1), &at(0.0), 0.9, 2, HOUR, &accept_all).body,
            Some(body("second"))
        );
    }
}
