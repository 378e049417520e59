//! The embedded store (`store = memory`): pins and outcome windows in this process only.
//!
//! Bounded on purpose — a router facing unbounded session ids must not grow without end — so
//! each table is an LRU map with a per-entry expiry: expired entries vanish when touched, and
//! the least recently used entry makes room when a table is full. One short mutex per table;
//! nothing awaits while holding it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};

use crate::hooks::BoxFuture;
use crate::session::identity::Identity;
use crate::session::pin::Pin;
use crate::session::store::{
    retain_ms, Cas, OutcomeKey, OutcomeStats, Put, Recorded, SessionStore, StoreError, Verdict,
    IDEMPOTENCY_MS, OUTCOME_WINDOW,
};

/// Pins kept by default.
pub const DEFAULT_CAPACITY: usize = 100_000;

/// An in-process store of at most `capacity` pins (and as many outcome windows and
/// idempotency keys).
pub struct MemoryStore {
    pins: Mutex<Lru<Identity, Pin>>,
    outcomes: Mutex<Lru<OutcomeKey, VecDeque<Verdict>>>,
    seen_keys: Mutex<Lru<(Identity, String), ()>>,
}

impl MemoryStore {
    pub fn new(capacity: usize) -> MemoryStore {
        let capacity = capacity.max(1);
        MemoryStore {
            pins: Mutex::new(Lru::new(capacity)),
            outcomes: Mutex::new(Lru::new(capacity)),
            seen_keys: Mutex::new(Lru::new(capacity)),
        }
    }

    /// Pins currently held (stale ones included until they are touched or evicted).
    pub fn len(&self) -> usize {
        lock(&self.pins).map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Holds `pin` for `key`, whatever was held, kept for the pin's retention from its last
    /// use (a copy of what another store holds).
    pub fn remember(&self, key: &Identity, pin: &Pin, ttl_ms: u64) {
        lock(&self.pins).insert(
            key.clone(),
            pin.clone(),
            pin.seen_ms.saturating_add(retain_ms(ttl_ms)),
        );
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new(DEFAULT_CAPACITY)
    }
}

/// A poisoned lock only means another request panicked mid-update of plain data; the tables
/// stay consistent per entry, so carry on rather than fail every later request.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn ready<'a, T: Send + 'a>(value: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

impl SessionStore for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn list<'a>(
        &'a self,
        limit: usize,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Vec<(Identity, Pin)>, StoreError>> {
        let pins = lock(&self.pins);
        // Most recently used first, without marking anything used.
        let listed = pins
            .order
            .values()
            .rev()
            .filter_map(|key| pins.map.get(key).map(|e| (key, e)))
            .filter(|(_, e)| e.expires_ms > now_ms)
            .take(limit)
            .map(|(key, e)| (key.clone(), e.value.clone()))
            .collect();
        ready(Ok(listed))
    }

    fn get<'a>(
        &'a self,
        key: &'a Identity,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Option<Pin>, StoreError>> {
        ready(Ok(lock(&self.pins).get(key, now_ms).cloned()))
    }

    fn touch<'a>(
        &'a self,
        key: &'a Identity,
        now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let mut pins = lock(&self.pins);
        ready(Ok(touch_live(&mut pins, key, now_ms, ttl_ms).is_some()))
    }

    fn get_and_touch<'a>(
        &'a self,
        key: &'a Identity,
        now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Option<Pin>, StoreError>> {
        let mut pins = lock(&self.pins);
        let answer = match touch_live(&mut pins, key, now_ms, ttl_ms) {
            Some(pin) => Some(pin),
            None => pins.get(key, now_ms).cloned(),
        };
        ready(Ok(answer))
    }

    fn put_if_absent<'a>(
        &'a self,
        key: &'a Identity,
        pin: &'a Pin,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Put, StoreError>> {
        let mut pins = lock(&self.pins);
        let now_ms = pin.seen_ms;
        let answer = match pins.get(key, now_ms) {
            Some(existing) => Put::Exists(existing.clone()),
            None => {
                pins.insert(
                    key.clone(),
                    pin.clone(),
                    now_ms.saturating_add(retain_ms(ttl_ms)),
                );
                Put::Stored
            }
        };
        ready(Ok(answer))
    }

    fn compare_and_set<'a>(
        &'a self,
        key: &'a Identity,
        read: &'a Pin,
        pin: &'a Pin,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Cas, StoreError>> {
        let mut pins = lock(&self.pins);
        let now_ms = pin.seen_ms;
        let answer = match pins.get(key, now_ms) {
            Some(current) if current.version == read.version => {
                let mut stored = pin.clone();
                stored.turns = stored
                    .turns
                    .saturating_add(current.turns.saturating_sub(read.turns));
                stored.seen_ms = stored.seen_ms.max(current.seen_ms);
                pins.insert(
                    key.clone(),
                    stored,
                    now_ms.saturating_add(retain_ms(ttl_ms)),
                );
                Cas::Stored
            }
            other => Cas::Conflict(other.cloned()),
        };
        ready(Ok(answer))
    }

    fn record_outcome<'a>(
        &'a self,
        key: &'a OutcomeKey,
        verdict: Verdict,
        idempotency: Option<&'a str>,
        now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Recorded, StoreError>> {
        if let Some(idem) = idempotency {
            let mut seen = lock(&self.seen_keys);
            let scoped = (key.session.clone(), idem.to_owned());
            if seen.get(&scoped, now_ms).is_some() {
                return ready(Ok(Recorded::Duplicate));
            }
            seen.insert(scoped, (), now_ms.saturating_add(IDEMPOTENCY_MS));
        }
        let mut outcomes = lock(&self.outcomes);
        let expires = now_ms.saturating_add(retain_ms(ttl_ms));
        let mut window = outcomes.remove(key, now_ms).unwrap_or_default();
        window.push_front(verdict);
        window.truncate(OUTCOME_WINDOW);
        outcomes.insert(key.clone(), window, expires);
        ready(Ok(Recorded::New))
    }

    fn outcomes<'a>(
        &'a self,
        key: &'a OutcomeKey,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<OutcomeStats, StoreError>> {
        let stats = lock(&self.outcomes)
            .get(key, now_ms)
            .map(|w| OutcomeStats::of(w.iter().copied()))
            .unwrap_or_default();
        ready(Ok(stats))
    }
}

/// Touches the pin under `key` if it is live; answers it as touched.
fn touch_live(
    pins: &mut Lru<Identity, Pin>,
    key: &Identity,
    now_ms: u64,
    ttl_ms: u64,
) -> Option<Pin> {
    let pin = pins.get(key, now_ms)?;
    if pin.is_stale(now_ms, ttl_ms) {
        return None;
    }
    let touched = pin.clone().touched(now_ms);
    *pin = touched.clone();
    pins.set_expiry(key, now_ms.saturating_add(retain_ms(ttl_ms)));
    Some(touched)
}

struct Entry<V> {
    value: V,
    used: u64,
    expires_ms: u64,
}

/// A map bounded by `capacity` that forgets entries at their expiry and the least recently
/// used one when full. `order` maps a use tick to its key, so the LRU entry is its first key.
struct Lru<K, V> {
    map: HashMap<K, Entry<V>>,
    order: BTreeMap<u64, K>,
    tick: u64,
    capacity: usize,
}

impl<K: Hash + Eq + Clone, V> Lru<K, V> {
    fn new(capacity: usize) -> Lru<K, V> {
        Lru {
            map: HashMap::new(),
            order: BTreeMap::new(),
            tick: 0,
            capacity,
        }
    }

    fn next_tick(&mut self) -> u64 {
        self.tick = self.tick.wrapping_add(1);
        self.tick
    }

    /// The live entry under `key`, marked as just used; an expired one is dropped.
    fn get(&mut self, key: &K, now_ms: u64) -> Option<&mut V> {
        let expired = self.map.get(key)?.expires_ms <= now_ms;
        if expired {
            self.remove(key, now_ms);
            return None;
        }
        let tick = self.next_tick();
        let entry = self.map.get_mut(key)?;
        self.order.remove(&entry.used);
        entry.used = tick;
        self.order.insert(tick, key.clone());
        Some(&mut entry.value)
    }

    fn set_expiry(&mut self, key: &K, expires_ms: u64) {
        if let Some(entry) = self.map.get_mut(key) {
            entry.expires_ms = expires_ms;
        }
    }

    fn remove(&mut self, key: &K, _now_ms: u64) -> Option<V> {
        let entry = self.map.remove(key)?;
        self.order.remove(&entry.used);
        Some(entry.value)
    }

    fn insert(&mut self, key: K, value: V, expires_ms: u64) {
        if let Some(old) = self.map.remove(&key) {
            self.order.remove(&old.used);
        }
        while self.map.len() >= self.capacity {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.map.remove(&oldest);
        }
        let used = self.next_tick();
        self.order.insert(used, key.clone());
        self.map.insert(
            key,
            Entry {
                value,
                used,
                expires_ms,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_the_least_recently_used_entry() {
        let mut lru = Lru::new(2);
        lru.insert("a", 1, 100);
        lru.insert("b", 2, 100);
        assert_eq!(lru.get(&"a", 0).copied(), Some(1));
        lru.insert("c", 3, 100);
        assert_eq!(lru.get(&"b", 0), None);
        assert_eq!(lru.get(&"a", 0).copied(), Some(1));
        assert_eq!(lru.get(&"c", 0).copied(), Some(3));
        assert_eq!((lru.map.len(), lru.order.len()), (2, 2));
    }

    #[test]
    fn lru_forgets_entries_at_their_expiry() {
        let mut lru = Lru::new(4);
        lru.insert("a", 1, 10);
        assert!(lru.get(&"a", 9).is_some());
        assert!(lru.get(&"a", 10).is_none());
        assert!(lru.order.is_empty());
    }

    #[test]
    fn reinserting_a_key_keeps_one_entry() {
        let mut lru = Lru::new(2);
        lru.insert("a", 1, 10);
        lru.insert("a", 2, 10);
        lru.insert("b", 3, 10);
        assert_eq!(lru.get(&"a", 0).copied(), Some(2));
        assert_eq!((lru.map.len(), lru.order.len()), (2, 2));
    }
}
