//! The embedded cache store (`store = memory`, the default): answers in this process only.
//!
//! Bounded so that a router facing endless distinct prompts cannot grow without end: at most
//! `max_entries` entries and `max_bytes` bytes in all (the least recently used entry makes room;
//! the policy's `cache` may set both), and no entry over `max_entry_bytes`. A scope has no
//! bound of its own: a chat application with one system prompt is one scope. Entries older than
//! the ttl are dropped when a lookup meets them, and a few at the cold end of the LRU order on
//! every insert.
//!
//! Each scope is a partition: a lookup never looks outside its own. A scope of fewer than
//! [`INDEX_FROM`] entries is scanned exactly (cheaper than a graph at that size); a larger one
//! keeps an HNSW graph ([`index::Graph`]) that proposes the nearest few, which are then scored
//! on their exact vectors. Every removal — eviction, expiry, replacement — leaves the graph too.
//! One short mutex; nothing awaits under it.

pub mod index;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use self::index::{Graph, Precision};
use crate::cache::scope::Scope;
use crate::cache::store::{
    candidates, live, similarity, Accept, Bounds, CacheStore, Inserted, Nearest, StoreError,
    CANDIDATES,
};
use crate::hooks::BoxFuture;

/// Bytes counted per entry besides its body, question and vectors: the graph's links (about
/// 750–920 bytes at 16 neighbours), the maps, the LRU order and the ids (about 250). Counted for
/// every entry, indexed or not. Measured: docs/operations.md, "Sizing the memory cache".
pub const OVERHEAD: usize = 1024;

/// Entries at the cold end of the LRU order checked for expiry on each insert.
const SWEEP: usize = 16;

/// A scope this large gets a graph; a smaller one is scanned exactly.
pub const INDEX_FROM: usize = 256;

/// How the graphs store their copy of each vector: half precision halves it, and since every
/// proposed entry is scored on its exact vector, answers do not change (docs/benchmarks.md).
pub const PRECISION: Precision = Precision::F16;

/// Ids the graph proposes per lookup: room for the [`CANDIDATES`] offered to the look-alike
/// check after expired entries are dropped and the exact scores re-rank them.
const PROPOSED: usize = CANDIDATES * 4;

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

/// One scope's entries.
#[derive(Default)]
struct Partition {
    /// Entry ids, oldest first (ids grow with every insert).
    ids: BTreeSet<u64>,
    /// From [`INDEX_FROM`] entries on; dropped (the scope is scanned) should the library fail.
    graph: Option<Graph>,
}

impl Partition {
    /// Builds the graph once the scope is large enough, from the vectors of length `dims`.
    fn index(&mut self, entries: &HashMap<u64, Entry>, dims: usize, index_from: usize) {
        if self.graph.is_some() || self.ids.len() < index_from {
            return;
        }
        let built = Graph::new(dims, PRECISION).and_then(|mut graph| {
            for id in &self.ids {
                if let Some(e) = entries.get(id).filter(|e| e.vector.len() == dims) {
                    graph.add(*id, &e.vector)?;
                }
            }
            Ok(graph)
        });
        match built {
            Ok(graph) => self.graph = Some(graph),
            Err(err) => tracing::warn!(%err, "cannot index a cache scope; scanning it instead"),
        }
    }

    fn unindex(&mut self, err: index::IndexError) {
        tracing::warn!(%err, "the cache scope's index failed; scanning the scope instead");
        self.graph = None;
    }
}

struct Inner {
    entries: HashMap<u64, Entry>,
    scopes: HashMap<Scope, Partition>,
    /// tick → entry id; the first is the least recently used.
    lru: BTreeMap<u64, u64>,
    bytes: usize,
    tick: u64,
    next_id: u64,
    bounds: Bounds,
}

impl Inner {
    fn remove(&mut self, id: u64) {
        let Some(entry) = self.entries.remove(&id) else {
            return;
        };
        self.lru.remove(&entry.tick);
        self.bytes = self.bytes.saturating_sub(entry.size);
        if let Some(part) = self.scopes.get_mut(&entry.scope) {
            part.ids.remove(&id);
            if part.ids.is_empty() {
                self.scopes.remove(&entry.scope);
            } else if let Some(graph) = part.graph.as_mut() {
                if let Err(err) = graph.remove(id) {
                    part.unindex(err);
                }
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

    /// The live entries of `scope` near `vector` with their exact similarity: every entry of a
    /// scanned scope, the graph's proposals in an indexed one. Expired entries met on the way
    /// are removed (from the graph too); in an indexed scope, every expired entry of the scope
    /// then goes at once and the graph is asked again, so they leave no hole among the
    /// proposals and an idle hour costs one sweep, not one search per 16 entries.
    fn near(&mut self, scope: &Scope, vector: &[f32], now_ms: u64, ttl_ms: u64) -> Vec<(u64, f32)> {
        loop {
            let Some(part) = self.scopes.get_mut(scope) else {
                return Vec::new();
            };
            let proposed = match part.graph.as_ref() {
                Some(graph) if graph.dims() == vector.len() => {
                    Some(graph.nearest(vector, PROPOSED))
                }
                _ => None,
            };
            let (ids, indexed): (Vec<u64>, bool) = match proposed {
                Some(Ok(ids)) => (ids, true),
                Some(Err(err)) => {
                    part.unindex(err);
                    (part.ids.iter().copied().collect(), false)
                }
                None => (part.ids.iter().copied().collect(), false),
            };
            let mut expired = Vec::new();
            let mut scored = Vec::with_capacity(ids.len());
            for id in ids {
                let Some(entry) = self.entries.get(&id) else {
                    continue;
                };
                if live(entry.created_ms, now_ms, ttl_ms) {
                    scored.push((id, similarity(&entry.vector, vector)));
                } else {
                    expired.push(id);
                }
            }
            if expired.is_empty() {
                return scored;
            }
            if !indexed {
                for id in expired {
                    self.remove(id);
                }
                return scored;
            }
            self.purge(scope, now_ms, ttl_ms);
        }
    }

    /// Removes every expired entry of `scope`.
    fn purge(&mut self, scope: &Scope, now_ms: u64, ttl_ms: u64) {
        let Some(part) = self.scopes.get(scope) else {
            return;
        };
        let expired: Vec<u64> = part
            .ids
            .iter()
            .copied()
            .filter(|id| {
                self.entries
                    .get(id)
                    .is_some_and(|e| !live(e.created_ms, now_ms, ttl_ms))
            })
            .collect();
        for id in expired {
            self.remove(id);
        }
    }

    fn evict(&mut self, now_ms: u64, ttl_ms: u64) {
        let cold: Vec<u64> = self
            .lru
            .values()
            .take(SWEEP)
            .copied()
            .filter(|id| {
                self.entries
                    .get(id)
                    .is_some_and(|e| !live(e.created_ms, now_ms, ttl_ms))
            })
            .collect();
        for old in cold {
            self.remove(old);
        }
        self.shrink();
    }

    /// Drops the least recently used entries until both bounds hold.
    fn shrink(&mut self) {
        while self.entries.len() > self.bounds.max_entries || self.bytes > self.bounds.max_bytes {
            let Some((_, &oldest)) = self.lru.iter().next() else {
                break;
            };
            self.remove(oldest);
        }
    }
}

/// An in-process, bounded, LRU cache store.
pub struct MemoryCache {
    inner: Mutex<Inner>,
    max_entry_bytes: usize,
    index_from: usize,
}

impl MemoryCache {
    /// A store of at most `max_entries` entries and `max_bytes` bytes, none over
    /// `max_entry_bytes` of body.
    pub fn new(max_entries: usize, max_bytes: usize, max_entry_bytes: usize) -> MemoryCache {
        MemoryCache {
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                scopes: HashMap::new(),
                lru: BTreeMap::new(),
                bytes: 0,
                tick: 0,
                next_id: 0,
                bounds: Bounds {
                    max_entries: max_entries.max(1),
                    max_bytes,
                },
            }),
            max_entry_bytes,
            index_from: INDEX_FROM,
        }
    }

    /// Indexes scopes from `entries` entries on instead of [`INDEX_FROM`] (tests, benchmarks).
    pub fn index_from(mut self, entries: usize) -> MemoryCache {
        self.index_from = entries.max(1);
        self
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

    /// The bounds in force.
    pub fn bounds(&self) -> Bounds {
        self.lock().bounds
    }

    /// Bytes an entry counts towards `max_bytes`.
    pub fn entry_size(body: usize, question: usize, dims: usize) -> usize {
        body + question + dims * (std::mem::size_of::<f32>() + PRECISION.bytes()) + OVERHEAD
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
        let scored = inner.near(scope, vector, now_ms, ttl_ms);
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
        let size = MemoryCache::entry_size(body.len(), question.len(), vector.len());
        let mut inner = self.lock();
        if body.len() > self.max_entry_bytes || size > inner.bounds.max_bytes {
            return Inserted::TooLarge;
        }
        let same: Vec<u64> = inner
            .near(scope, vector, now_ms, ttl_ms)
            .into_iter()
            .filter(|&(id, score)| {
                score >= SAME
                    && inner.entries.get(&id).is_some_and(|e| {
                        src_compiler::lookalike::agree(&e.question, question).is_ok()
                    })
            })
            .map(|(id, _)| id)
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
        let Inner {
            scopes, entries, ..
        } = &mut *inner;
        let part = scopes.entry(*scope).or_default();
        part.ids.insert(id);
        match part.graph.as_mut() {
            Some(graph) if graph.dims() == vector.len() => {
                if let Err(err) = graph.add(id, vector) {
                    part.unindex(err);
                }
            }
            // Another length (never within one encoder's scope): scanned like the rest.
            Some(_) => {}
            None => part.index(entries, vector.len(), self.index_from),
        }
        inner.evict(now_ms, ttl_ms);
        Inserted::Stored
    }

    /// Applies new bounds (a reloaded policy's), evicting at once what no longer fits.
    fn set_bounds(&self, bounds: Bounds) {
        let mut inner = self.lock();
        let bounds = Bounds {
            max_entries: bounds.max_entries.max(1),
            ..bounds
        };
        if inner.bounds != bounds {
            inner.bounds = bounds;
            inner.shrink();
        }
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

    fn bound(&self, bounds: Bounds) {
        self.set_bounds(bounds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::store::accept_all;
    use crate::cache::store::Bounds;
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
        // The body, the question `q`, the vector, its copy in a graph and the bookkeeping.
        let entry = |n: usize| n + 1 + 2 * (4 + PRECISION.bytes()) + OVERHEAD;
        assert_eq!(entry(100), MemoryCache::entry_size(100, 1, 2));
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

    /// Point `i` of `n` spread round the circle: for `n` up to 400, neighbours are further
    /// apart than a replacement (cosine 0.9999) and than a 0.99999 threshold.
    fn spread(i: usize, n: usize) -> Vec<f32> {
        at(i as f32 * std::f32::consts::TAU / n as f32)
    }

    #[test]
    fn a_scope_keeps_every_entry_scanned_or_indexed() {
        for index_from in [usize::MAX, 8] {
            let s = store().index_from(index_from);
            let n = 300;
            for i in 0..n {
                s.put(
                    &scope(1),
                    &spread(i, n),
                    "q",
                    body(&i.to_string()),
                    i as u64,
                    HOUR,
                );
            }
            assert_eq!(s.len(), n, "no entry of the scope made room for another");
            for i in [0, 1, 150, n - 1] {
                assert_eq!(
                    s.find(&scope(1), &spread(i, n), 0.99999, 1_000, HOUR, &accept_all)
                        .body,
                    Some(body(&i.to_string())),
                    "entry {i}, graph from {index_from}"
                );
            }
        }
    }

    #[test]
    fn evicted_and_expired_entries_leave_the_graph() {
        let n = 100;
        let s = MemoryCache::new(n, 1 << 30, 1 << 20).index_from(8);
        for i in 0..n {
            s.put(
                &scope(1),
                &spread(i, 2 * n),
                "q",
                body(&i.to_string()),
                0,
                HOUR,
            );
        }
        // The count bound: each of the next 50 pushes out the least recently used (the oldest).
        for i in n..n + 50 {
            s.put(
                &scope(1),
                &spread(i, 2 * n),
                "q",
                body(&i.to_string()),
                1,
                HOUR,
            );
        }
        assert_eq!(s.len(), n);
        for i in 0..50 {
            let near = s.find(&scope(1), &spread(i, 2 * n), 0.99999, 2, HOUR, &accept_all);
            assert_eq!(near.body, None, "evicted entry {i} answered");
            // Its nearest live neighbour is another entry, never the evicted one.
            assert!(near.score.is_some_and(|score| score < 0.99999));
        }
        assert_eq!(
            s.find(&scope(1), &spread(50, 2 * n), 0.99999, 2, HOUR, &accept_all)
                .body,
            Some(body("50"))
        );
        {
            let inner = s.lock();
            let graph = inner.scopes[&scope(1)].graph.as_ref().expect("indexed");
            assert_eq!(graph.len(), n, "the graph holds exactly the live entries");
        }
        // The ttl: the entries stored at 0 expire at HOUR, those stored at 1 a millisecond later.
        let near = s.find(&scope(1), &spread(60, 2 * n), 0.2, HOUR, HOUR, &accept_all);
        assert_eq!(
            near.body.map(|b| b.len()),
            Some(3),
            "only the entries stored at 1 answer"
        );
        assert_eq!(
            s.len(),
            50,
            "every expired entry the graph proposed was dropped"
        );
        let inner = s.lock();
        assert_eq!(
            inner.scopes[&scope(1)].graph.as_ref().map(Graph::len),
            Some(50)
        );
    }

    #[test]
    fn policy_bounds_apply_at_once() {
        let s = store();
        for i in 0..10u8 {
            s.put(&scope(i), &at(0.0), "q", body("x"), 0, HOUR);
        }
        s.set_bounds(Bounds {
            max_entries: 4,
            max_bytes: 1 << 30,
        });
        assert_eq!(s.len(), 4);
        s.set_bounds(Bounds {
            max_entries: 100,
            max_bytes: MemoryCache::entry_size(1, 1, 2) * 2,
        });
        assert_eq!(s.len(), 2);
        assert!(s
            .find(&scope(9), &at(0.0), 0.9, 1, HOUR, &accept_all)
            .body
            .is_some());
        assert!(s
            .find(&scope(7), &at(0.0), 0.9, 1, HOUR, &accept_all)
            .body
            .is_none());
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
