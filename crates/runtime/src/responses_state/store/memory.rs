//! The in-process response store: at most `max_entries` responses and `max_bytes` bytes in all
//! (the least recently used makes room), each gone at its expiry. One short mutex; nothing
//! awaits while holding it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;

use crate::hooks::BoxFuture;
use crate::responses_state::store::ResponseStore;
use crate::store::StoreError;

/// Bytes counted per entry besides its value (keys, maps, timestamps).
const OVERHEAD: usize = 128;

type Key = (String, String);

struct Entry {
    value: Bytes,
    expires_ms: u64,
    tick: u64,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<Key, Entry>,
    /// tick → key; the first is the least recently used.
    lru: BTreeMap<u64, Key>,
    bytes: usize,
    tick: u64,
}

impl Inner {
    fn size(key: &Key, value: &Bytes) -> usize {
        key.0.len() + key.1.len() + value.len() + OVERHEAD
    }

    fn remove(&mut self, key: &Key) -> Option<Entry> {
        let entry = self.entries.remove(key)?;
        self.lru.remove(&entry.tick);
        self.bytes = self.bytes.saturating_sub(Inner::size(key, &entry.value));
        Some(entry)
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }
}

/// Responses in this process only.
pub struct MemoryResponses {
    max_entries: usize,
    max_bytes: usize,
    inner: Mutex<Inner>,
}

impl MemoryResponses {
    pub fn new(max_entries: usize, max_bytes: usize) -> MemoryResponses {
        MemoryResponses {
            max_entries: max_entries.max(1),
            max_bytes: max_bytes.max(1),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Responses held (expired ones included until they are read or make room).
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held, as the bound counts them.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// A poisoned lock only means another request panicked mid-update of plain data.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn read(&self, key: Key, now_ms: u64) -> Option<Bytes> {
        let mut inner = self.lock();
        let expired = inner.entries.get(&key)?.expires_ms <= now_ms;
        if expired {
            inner.remove(&key);
            return None;
        }
        let tick = inner.next_tick();
        let entry = inner.entries.get_mut(&key)?;
        let old = std::mem::replace(&mut entry.tick, tick);
        let value = entry.value.clone();
        inner.lru.remove(&old);
        inner.lru.insert(tick, key);
        Some(value)
    }

    fn write(&self, key: Key, value: Bytes, expires_ms: u64) {
        let size = Inner::size(&key, &value);
        let mut inner = self.lock();
        inner.remove(&key);
        if size > self.max_bytes {
            return;
        }
        while inner.entries.len() >= self.max_entries || inner.bytes + size > self.max_bytes {
            let Some(coldest) = inner.lru.first_key_value().map(|(_, k)| k.clone()) else {
                break;
            };
            inner.remove(&coldest);
        }
        let tick = inner.next_tick();
        inner.lru.insert(tick, key.clone());
        inner.bytes += size;
        inner.entries.insert(
            key,
            Entry {
                value,
                expires_ms,
                tick,
            },
        );
    }
}

fn key(tenant: &str, id: &str) -> Key {
    (tenant.to_owned(), id.to_owned())
}

fn ready<'a, T: Send + 'a>(value: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

impl ResponseStore for MemoryResponses {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn get<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Option<Bytes>, StoreError>> {
        ready(Ok(self.read(key(tenant, id), now_ms)))
    }

    fn put<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        value: Bytes,
        now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.write(key(tenant, id), value, now_ms.saturating_add(ttl_ms));
        ready(Ok(()))
    }

    fn delete<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let removed = self.lock().remove(&key(tenant, id));
        ready(Ok(removed.is_some_and(|e| e.expires_ms > now_ms)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(store: &MemoryResponses, tenant: &str, id: &str, now: u64) -> Option<Bytes> {
        store
            .get(tenant, id, now)
            .await
            .expect("memory never fails")
    }

    #[tokio::test]
    async fn a_response_is_kept_for_its_tenant_until_its_expiry() {
        let store = MemoryResponses::new(10, 1 << 20);
        store
            .put("t1", "r", Bytes::from_static(b"one"), 0, 100)
            .await
            .expect("stored");
        assert_eq!(
            get(&store, "t1", "r", 99).await.as_deref(),
            Some(&b"one"[..])
        );
        assert_eq!(get(&store, "t2", "r", 99).await, None, "another tenant");
        assert_eq!(get(&store, "t1", "r", 100).await, None, "expired");
        assert!(store.is_empty());
    }

    #[tokio::test]
    async fn the_least_recently_used_makes_room_by_count_and_by_bytes() {
        let store = MemoryResponses::new(2, 1 << 20);
        for id in ["a", "b"] {
            store
                .put("t", id, Bytes::from_static(b"x"), 0, 1_000)
                .await
                .expect("stored");
        }
        assert!(
            get(&store, "t", "a", 1).await.is_some(),
            "`a` is now the most recent"
        );
        store
            .put("t", "c", Bytes::from_static(b"x"), 1, 1_000)
            .await
            .expect("stored");
        assert!(get(&store, "t", "b", 2).await.is_none(), "`b` was evicted");
        assert!(get(&store, "t", "a", 2).await.is_some());

        let one = 2 * OVERHEAD;
        let store = MemoryResponses::new(100, one * 2);
        let value = Bytes::from(vec![b'x'; one - OVERHEAD - 2]);
        for id in ["a", "b", "c"] {
            store
                .put("t", id, value.clone(), 0, 1_000)
                .await
                .expect("stored");
        }
        assert_eq!(store.len(), 2);
        assert!(store.bytes() <= one * 2);
        assert!(get(&store, "t", "a", 1).await.is_none());
        let huge = Bytes::from(vec![b'x'; one * 3]);
        store
            .put("t", "huge", huge, 0, 1_000)
            .await
            .expect("refused quietly");
        assert!(
            get(&store, "t", "huge", 1).await.is_none(),
            "larger than the whole store"
        );
    }

    #[tokio::test]
    async fn delete_says_whether_there_was_a_response() {
        let store = MemoryResponses::new(10, 1 << 20);
        store
            .put("t", "r", Bytes::from_static(b"x"), 0, 100)
            .await
            .expect("stored");
        assert_eq!(store.delete("u", "r", 1).await, Ok(false));
        assert_eq!(store.delete("t", "r", 1).await, Ok(true));
        assert_eq!(store.delete("t", "r", 1).await, Ok(false));
        assert_eq!(store.bytes(), 0);
    }
}
