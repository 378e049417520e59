//! This replica's own copy of the pins it served or wrote on a shared store, consulted only
//! while that store cannot be reached (`failure.store = open`), so a session pinned before an
//! outage keeps its model through it on this replica — `protect` still holds in the middle of
//! a tool loop — instead of being routed as though it had no pin.
//!
//! One bounded [`MemoryStore`] per shared store declaration ([`LOCAL_PINS`] pins by default,
//! least recently used evicted first), each pin kept for its session's ttl like the shared
//! store keeps it. Nothing here is ever written back: when the store returns, its pins are the
//! truth again and this copy follows them.

use std::sync::Arc;

use src_compiler::hir::StoreDef;

use crate::session::identity::Identity;
use crate::session::pin::Pin;
use crate::session::store::{MemoryStore, SessionStore};
use crate::store::StoreSet;

/// Pins each shared store's local copy keeps by default.
pub const LOCAL_PINS: usize = 64 * 1024;

/// The local copies, one per shared store declaration.
pub struct LocalPins {
    capacity: usize,
    copies: StoreSet<MemoryStore>,
}

impl LocalPins {
    pub fn new(capacity: usize) -> LocalPins {
        LocalPins {
            capacity: capacity.max(1),
            copies: StoreSet::new(),
        }
    }

    fn copy(&self, def: &StoreDef) -> Option<Arc<MemoryStore>> {
        if matches!(def, StoreDef::Memory) {
            // A memory store is its own copy: it cannot be unreachable.
            return None;
        }
        self.copies
            .get_or_build(def, |_| Ok(Arc::new(MemoryStore::new(self.capacity))))
            .ok()
    }

    /// Keeps `pin`, as the shared store `def` now holds it, for `id`.
    pub fn remember(&self, def: &StoreDef, id: &Identity, pin: &Pin, ttl_ms: u64) {
        if let Some(copy) = self.copy(def) {
            copy.remember(id, pin, ttl_ms);
        }
    }

    /// The copy of `def` when it holds a pin for `id` (live or stale).
    pub async fn holding(
        &self,
        def: &StoreDef,
        id: &Identity,
        now_ms: u64,
    ) -> Option<Arc<MemoryStore>> {
        let copy = self.copy(def)?;
        match copy.get(id, now_ms).await {
            Ok(Some(_)) => Some(copy),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> Identity {
        Identity {
            tenant: "t".into(),
            id: s.into(),
        }
    }

    fn redis() -> StoreDef {
        match src_compiler::hir::RedisUrl::parse("redis://127.0.0.1:1/") {
            Ok(url) => StoreDef::Redis(url.into()),
            Err(e) => panic!("a plain URL parses: {e:?}"),
        }
    }

    #[tokio::test]
    async fn a_shared_store_keeps_a_bounded_copy_and_memory_none() {
        let local = LocalPins::new(2);
        let def = redis();
        for (i, s) in ["a", "b", "c"].iter().enumerate() {
            local.remember(&def, &id(s), &Pin::first("strong", None, i as u64), 1_000);
        }
        assert!(local.holding(&def, &id("a"), 10).await.is_none(), "evicted");
        let Some(copy) = local.holding(&def, &id("c"), 10).await else {
            panic!("the latest pin is kept");
        };
        assert_eq!(copy.len(), 2);
        // Kept for twice the ttl, as the shared store keeps it.
        assert!(local.holding(&def, &id("c"), 2_001).await.is_some());
        assert!(local.holding(&def, &id("c"), 2_003).await.is_none());
        local.remember(
            &StoreDef::Memory,
            &id("m"),
            &Pin::first("small", None, 0),
            1_000,
        );
        assert!(local
            .holding(&StoreDef::Memory, &id("m"), 1)
            .await
            .is_none());
    }
}
