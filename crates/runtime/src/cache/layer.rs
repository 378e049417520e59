//! The server's cache component: its options, its clock, its metrics and the stores policies
//! name. A store is built on first use and kept across reloads that name it again (so a reload
//! keeps the memory store's entries; scopes include the encoder's fingerprint, so a reload that
//! changes the encoder never compares new vectors with old ones).

use std::sync::Arc;
use std::time::Duration;

use src_compiler::hir::{CacheDef, StoreDef};

use crate::cache::metrics::CacheMetrics;
use crate::cache::store::{Bounds, CacheStore, MemoryCache, MilvusCache, RedisCache};
use crate::hooks::ModelSignals;
use crate::store::{Clock, Links, StoreError, StoreSet, SystemClock, Timeouts};

/// How long an entry answers when the policy's `cache` declares no `ttl`: one hour.
pub const DEFAULT_TTL_MS: u64 = 60 * 60 * 1000;

/// The largest per-entry limit: answers are read whole only up to this size (see the relay).
const MAX_ENTRY_LIMIT: usize = 16 << 20;

/// Bounds of the cache stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheOptions {
    /// Entries the memory store keeps.
    pub max_entries: usize,
    /// Bytes the memory store keeps (bodies, embeddings and bookkeeping).
    pub max_bytes: usize,
    /// Largest answer body stored, in either store (at most 16 MiB).
    pub max_entry_bytes: usize,
    /// Bound on each call to a shared store (Redis or Milvus).
    pub redis_timeout: Duration,
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions {
            max_entries: 10_000,
            max_bytes: 256 << 20,
            max_entry_bytes: 1 << 20,
            redis_timeout: Timeouts::default().cache,
        }
    }
}

impl CacheOptions {
    /// The defaults, overridden by `SRC_CACHE_MAX_ENTRIES`, `SRC_CACHE_MAX_BYTES`,
    /// `SRC_CACHE_MAX_ENTRY_BYTES` and `SRC_CACHE_REDIS_TIMEOUT_MS` when set to a number
    /// (anything else is logged and ignored).
    pub fn from_env() -> CacheOptions {
        let mut options = CacheOptions::default();
        let read = crate::config::env_number;
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        if let Some(n) = read("SRC_CACHE_MAX_ENTRIES") {
            options.max_entries = size(n).max(1);
        }
        if let Some(n) = read("SRC_CACHE_MAX_BYTES") {
            options.max_bytes = size(n);
        }
        if let Some(n) = read("SRC_CACHE_MAX_ENTRY_BYTES") {
            options.max_entry_bytes = size(n);
        }
        options.redis_timeout = Timeouts::from_lookup(read).cache;
        options.max_entry_bytes = options.max_entry_bytes.min(MAX_ENTRY_LIMIT);
        options
    }
}

/// The response cache of a server.
pub struct CacheLayer {
    pub(crate) models: Arc<dyn ModelSignals>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) options: CacheOptions,
    stores: StoreSet<dyn CacheStore>,
    links: Arc<Links>,
    pub(crate) metrics: CacheMetrics,
}

impl CacheLayer {
    /// Embeds prompts with `models` (the server's model runtime).
    pub fn new(models: Arc<dyn ModelSignals>, options: CacheOptions) -> CacheLayer {
        CacheLayer {
            models,
            clock: Arc::new(SystemClock),
            options: CacheOptions {
                max_entry_bytes: options.max_entry_bytes.min(MAX_ENTRY_LIMIT),
                ..options
            },
            stores: StoreSet::new(),
            links: Arc::default(),
            metrics: CacheMetrics::default(),
        }
    }

    /// Reads time from `clock` instead of the system clock (tests).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> CacheLayer {
        self.clock = clock;
        self
    }

    /// Serves `def` from `store` instead of building one (tests, embedding).
    pub fn with_store(self, def: StoreDef, store: Arc<dyn CacheStore>) -> CacheLayer {
        self.stores.insert(def, store);
        self
    }

    /// Builds Redis stores on `links`, the server's shared Redis links.
    pub fn with_links(mut self, links: Arc<Links>) -> CacheLayer {
        self.links = links;
        self
    }

    pub fn options(&self) -> CacheOptions {
        self.options
    }

    /// The memory store's bounds under `def`: the policy's where it sets them, else the
    /// server's options.
    pub fn bounds(&self, def: &CacheDef) -> Bounds {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        Bounds {
            max_entries: def.max_entries.map_or(self.options.max_entries, size),
            max_bytes: def.max_bytes.map_or(self.options.max_bytes, size),
        }
    }

    pub fn metrics(&self) -> &CacheMetrics {
        &self.metrics
    }

    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.metrics.register(registry);
    }

    /// The store a policy names, built on first use and kept across reloads that name it again.
    pub fn store(&self, def: &StoreDef) -> Result<Arc<dyn CacheStore>, StoreError> {
        let o = self.options;
        self.stores.get_or_build(def, |def| {
            Ok(match def {
                StoreDef::Memory => Arc::new(MemoryCache::new(
                    o.max_entries,
                    o.max_bytes,
                    o.max_entry_bytes,
                )),
                StoreDef::Redis(target) => Arc::new(RedisCache::on(
                    self.links.redis(target, o.redis_timeout)?,
                    o.max_entry_bytes,
                )),
                StoreDef::Milvus(target) => Arc::new(MilvusCache::new(
                    target.clone(),
                    o.redis_timeout,
                    o.max_entry_bytes,
                )),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::NoModelSignals;

    #[test]
    fn a_store_is_built_once_and_shared() {
        let layer = CacheLayer::new(Arc::new(NoModelSignals), CacheOptions::default());
        let a = layer.store(&StoreDef::Memory);
        let b = layer.store(&StoreDef::Memory);
        match (a, b) {
            (Ok(a), Ok(b)) => assert!(Arc::ptr_eq(&a, &b)),
            _ => panic!("the memory store always builds"),
        }
    }

    #[test]
    fn the_entry_limit_is_capped() {
        let layer = CacheLayer::new(
            Arc::new(NoModelSignals),
            CacheOptions {
                max_entry_bytes: usize::MAX,
                ..CacheOptions::default()
            },
        );
        assert_eq!(layer.options().max_entry_bytes, MAX_ENTRY_LIMIT);
    }
}
