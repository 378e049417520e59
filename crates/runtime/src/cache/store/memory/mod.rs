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
//!
//! Two kinds of lock, neither held across an await: the store's (the entries, the LRU order, the
//! byte count), held briefly, and one per graph. A lookup asks its scope's graph under the
//! graph's lock alone, so a search in a large scope (the slow part of a lookup) holds up
//! neither the store nor another scope; it then takes the store's lock to score the proposals.
//! Where both are held (inserts, removals), the store's is taken first.

pub mod index;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;

use self::index::{Graph, Precision};
use crate::cache::scope::Scope;
use crate::cache::store::{
    candidates, live, similarity, Bounds, CacheStore, Inserted, Lookup, Nearest, StoreError,
    CANDIDATES,
};
use crate::hooks::BoxFuture;

/// Bytes counted per entry besides its body, question and exact vector: the maps, the LRU order
/// and the ids (about 250). A scope's graph (its copy of each vector, its links and the slack
/// of its doubled capacity) is counted apart, as the graph reports it ([`Graph::reserved`]):
/// per entry that is 796 bytes in a graph of a million and up to 1,700 in one of 10,000, so no
/// per-entry figure fits both. Measured: docs/operations.md, "Sizing the memory cache".
pub const OVERHEAD: usize = 256;

/// Entries at the cold end of the LRU order checked for expiry on each insert.
const SWEEP: usize = 16;

/// A scope this large gets a graph; a smaller one is scanned exactly.
pub const INDEX_FROM: usize = 256;

/// How the graphs store their copy of each vector: a byte per dimension. At a million entries
/// it keeps the graph at 796 bytes per entry (1,333 in half precision) and finds the nearest
/// entry as often; it searches in 0.6× the time of half precision (docs/benchmarks.md). Every
/// proposed entry is scored on its exact vector, so a score never changes.
pub const PRECISION: Precision = Precision::I8;

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

/// A scope's graph, locked on its own (after the store's lock when both are held).
type Shared = Arc<Mutex<Graph>>;

/// A poisoned graph lock only means a panic mid-call into the library; the graph stays usable
/// or fails its next call, which unindexes the scope.
fn locked(graph: &Shared) -> MutexGuard<'_, Graph> {
    graph.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One scope's entries.
#[derive(Default)]
struct Partition {
    /// Entry ids, oldest first (ids grow with every insert).
    ids: BTreeSet<u64>,
    /// From [`INDEX_FROM`] entries on; dropped (the scope is scanned) should the library fail.
    graph: Option<Shared>,
    /// The graph's bytes as last counted in the store's total ([`recount`]).
    graph_bytes: usize,
}

/// Brings the store's byte count `bytes` up to date with `part`'s graph (grown, shrunk, built
/// or dropped) after any change to it.
fn recount(bytes: &mut usize, part: &mut Partition) {
    let now = part.graph.as_ref().map_or(0, |g| locked(g).reserved());
    *bytes = bytes.saturating_sub(part.graph_bytes) + now;
    part.graph_bytes = now;
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
            Ok(graph) => self.graph = Some(Arc::new(Mutex::new(graph))),
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
                self.bytes = self.bytes.saturating_sub(part.graph_bytes);
                self.scopes.remove(&entry.scope);
            } else {
                if let Some(Err(err)) = part.graph.as_ref().map(|g| locked(g).remove(id)) {
                    part.unindex(err);
                }
                recount(&mut self.bytes, part);
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
    /// proposals and an idle hour costs one sweep, not one search per 16 entries. `asked` are
    /// the graph's proposals when the caller asked it before taking the store's lock (ids of
    /// entries gone since are skipped); otherwise, or to ask again, the graph is asked here.
    fn near(
        &mut self,
        scope: &Scope,
        vector: &[f32],
        now_ms: u64,
        ttl_ms: u64,
        mut asked: Option<Vec<u64>>,
    ) -> Vec<(u64, f32)> {
        loop {
            let Some(part) = self.scopes.get_mut(scope) else {
                return Vec::new();
            };
            let proposed = match (part.graph.as_ref(), asked.take()) {
                (Some(_), Some(ids)) => Some(Ok(ids)),
                (Some(graph), None) => ask(graph, vector),
                (None, _) => None,
            };
            let (ids, indexed): (Vec<u64>, bool) = match proposed {
                Some(Ok(ids)) => (ids, true),
                Some(Err(err)) => {
                    part.unindex(err);
                    recount(&mut self.bytes, part);
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

/// The graph's proposals for `vector`; `None` when it holds vectors of another length.
fn ask(graph: &Shared, vector: &[f32]) -> Option<Result<Vec<u64>, index::IndexError>> {
    let graph = locked(graph);
    (graph.dims() == vector.len()).then(|| graph.nearest(vector, PROPOSED))
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

    /// Bytes an entry counts towards `max_bytes` besides its share of a graph, which counts
    /// apart ([`OVERHEAD`]).
    pub fn entry_size(body: usize, question: usize, dims: usize) -> usize {
        body + question + dims * std::mem::size_of::<f32>() + OVERHEAD
    }

    /// A poisoned lock only means another request panicked mid-update of plain data; carry on.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The proposals of `scope`'s graph, asked under the graph's lock alone; `None` for a
    /// scanned scope (or a failed search, which [`Inner::near`] meets again and handles).
    fn asked(&self, scope: &Scope, vector: &[f32]) -> Option<Vec<u64>> {
        let graph = self.lock().scopes.get(scope)?.graph.clone()?;
        ask(&graph, vector)?.ok()
    }

    fn find(&self, lookup: Lookup<'_>) -> Nearest {
        let Lookup {
            scope,
            vector,
            threshold,
            now_ms,
            ttl_ms,
            accept,
        } = lookup;
        let asked = self.asked(scope, vector);
        let mut inner = self.lock();
        let scored = inner.near(scope, vector, now_ms, ttl_ms, asked);
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
        if body.len() > self.max_entry_bytes {
            return Inserted::TooLarge;
        }
        let asked = self.asked(scope, vector);
        let mut inner = self.lock();
        if size > inner.bounds.max_bytes {
            return Inserted::TooLarge;
        }
        let same: Vec<u64> = inner
            .near(scope, vector, now_ms, ttl_ms, asked)
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
            scopes,
            entries,
            bytes,
            ..
        } = &mut *inner;
        let part = scopes.entry(*scope).or_default();
        part.ids.insert(id);
        match part.graph.as_ref() {
            Some(graph) => {
                let added = {
                    let mut graph = locked(graph);
                    // Another length (never within one encoder's scope): scanned like the rest.
                    (graph.dims() == vector.len()).then(|| graph.add(id, vector))
                };
                if let Some(Err(err)) = added {
                    part.unindex(err);
                }
            }
            None => part.index(entries, vector.len(), self.index_from),
        }
        recount(bytes, part);
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

    fn nearest<'a>(&'a self, lookup: Lookup<'a>) -> BoxFuture<'a, Result<Nearest, StoreError>> {
        ready(Ok(self.find(lookup)))
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
mod tests;
