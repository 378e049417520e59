//! The response cache's metrics. Names live in [`crate::metrics`]; label values are fixed words,
//! never prompts, scopes or tenants.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::cache::store::CacheStore;
use crate::metrics as names;
use crate::store::StoreErrorLabels;
use crate::telemetry::ResultLabels;

/// Every cache metric; cheap to clone (the families are shared).
#[derive(Clone, Default)]
pub struct CacheMetrics {
    pub lookups: Family<ResultLabels, Counter>,
    pub entries: Gauge<u64, AtomicU64>,
    pub stores: Family<ResultLabels, Counter>,
    pub store_errors: Family<StoreErrorLabels, Counter>,
}

impl CacheMetrics {
    /// Adds the metrics to a registry (the server's, so `GET /metrics` shows them).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            names::CACHE_LOOKUPS,
            "Response cache lookups by result",
            self.lookups.clone(),
        );
        registry.register(
            names::CACHE_ENTRIES,
            "Entries held by the in-process response cache",
            self.entries.clone(),
        );
        registry.register(
            names::CACHE_STORES,
            "Relayed answers offered to the response cache, by result",
            self.stores.clone(),
        );
        registry.register(
            names::CACHE_STORE_ERRORS,
            "Response cache store failures by store, operation and kind",
            self.store_errors.clone(),
        );
    }

    pub fn lookup(&self, result: &'static str) {
        self.lookups.get_or_create(&ResultLabels { result }).inc();
    }

    pub fn stored(&self, result: &'static str) {
        self.stores.get_or_create(&ResultLabels { result }).inc();
    }

    /// A failure of `store` (`memory`, `redis`) doing `op`.
    pub fn store_error(&self, store: &'static str, op: &'static str, kind: &'static str) {
        self.store_errors
            .get_or_create(&StoreErrorLabels { store, op, kind })
            .inc();
    }

    /// Sets the entries gauge from a store that can count its entries.
    pub fn observe(&self, store: &dyn CacheStore) {
        if let Some(n) = store.entries() {
            self.entries.set(n);
        }
    }

    /// The Prometheus text of these metrics alone (tests and tools that hold no registry).
    pub fn encode(&self) -> String {
        let mut registry = Registry::default();
        self.register(&mut registry);
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }
}
