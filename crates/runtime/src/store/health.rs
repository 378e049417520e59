//! What one Redis is doing, as every link to it sees it: its [`Breaker`] driven by real time,
//! the prober that runs while it is open, the one log line per state change, and the link
//! metrics (`src_store_breaker_state`, `src_store_skipped_total`, `src_store_retried_total`).
//!
//! One [`Health`] per Redis URL, shared by the links made for it with different timeouts, so an
//! outage met by the session store also spares the cache on the same server a timeout.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::metrics as names;
use crate::store::breaker::{Admit, AfterProbe, Backoff, Breaker, Change};
use crate::store::clock::{Clock, SystemClock};
use crate::store::error::StoreError;

/// The label naming a store link: its URL without the password.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LinkLabels {
    pub store: String,
}

/// The link metrics of a server; cheap to clone (the families are shared).
#[derive(Clone, Default)]
pub struct LinkMetrics {
    pub state: Family<LinkLabels, Gauge<i64, std::sync::atomic::AtomicI64>>,
    pub skipped: Family<LinkLabels, Counter>,
    pub retried: Family<LinkLabels, Counter>,
}

impl LinkMetrics {
    /// Adds the link metrics to a registry (the server's, so `GET /metrics` shows them).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            names::STORE_BREAKER_STATE,
            "1 while calls to a store are skipped after a failure, else 0",
            self.state.clone(),
        );
        registry.register(
            names::STORE_SKIPPED,
            "Store calls answered unavailable at once because the store had failed",
            self.skipped.clone(),
        );
        registry.register(
            names::STORE_RETRIED,
            "Store calls sent again on a fresh connection after a dropped one",
            self.retried.clone(),
        );
    }
}

/// One Redis's breaker and what reports on it.
pub struct Health {
    labels: LinkLabels,
    breaker: Mutex<Breaker>,
    clock: Arc<dyn Clock>,
    metrics: LinkMetrics,
    /// Counts calls retried on a fresh connection; handed to each connection.
    retried: Counter,
    skipped: Counter,
    state: Gauge<i64, std::sync::atomic::AtomicI64>,
    /// Failed calls that met the breaker already open (in flight when it opened).
    late_failures: AtomicU64,
}

impl Health {
    pub fn new(
        store: String,
        backoff: Backoff,
        clock: Arc<dyn Clock>,
        metrics: LinkMetrics,
    ) -> Health {
        let labels = LinkLabels { store };
        let retried = metrics.retried.get_or_create(&labels).clone();
        let skipped = metrics.skipped.get_or_create(&labels).clone();
        let state = metrics.state.get_or_create(&labels).clone();
        Health {
            labels,
            breaker: Mutex::new(Breaker::new(backoff)),
            clock,
            metrics,
            retried,
            skipped,
            state,
            late_failures: AtomicU64::new(0),
        }
    }

    /// A health of its own, on the system clock, reported nowhere (a store built alone).
    pub fn alone(store: String) -> Health {
        Health::new(
            store,
            Backoff::default(),
            Arc::new(SystemClock),
            LinkMetrics::default(),
        )
    }

    /// The label value naming this store.
    pub fn store(&self) -> &str {
        &self.labels.store
    }

    pub fn metrics(&self) -> &LinkMetrics {
        &self.metrics
    }

    pub(crate) fn retried(&self) -> Counter {
        self.retried.clone()
    }

    fn lock(&self) -> MutexGuard<'_, Breaker> {
        self.breaker.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `Err(Skipped)` when the breaker is open: the caller answers at once.
    pub fn admit(&self) -> Result<(), StoreError> {
        let now = self.clock.now_ms();
        match self.lock().admit(now) {
            Admit::Call => Ok(()),
            Admit::Skip { probe_in } => {
                self.skipped.inc();
                Err(StoreError::Skipped { probe_in })
            }
        }
    }

    /// A call met `err` reaching the store. Answers the wait before the first probe when this
    /// failure opened the breaker (the caller then starts the prober), having logged it.
    pub fn failed(&self, op: &'static str, err: &StoreError) -> Option<Duration> {
        let now = self.clock.now_ms();
        let change = self.lock().failed(now);
        match change {
            Some(Change::Opened { probe_in }) => {
                self.state.set(1);
                tracing::warn!(
                    store = %self.labels.store,
                    op,
                    %err,
                    error = err.kind(),
                    probe_in_ms = millis(probe_in),
                    "a store is unreachable; its calls are skipped until a probe reaches it"
                );
                Some(probe_in)
            }
            _ => {
                self.late_failures.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// A probe answered (`reached`) or not; `None` once the breaker closed (logged).
    pub fn probed(&self, reached: bool) -> Option<Duration> {
        let now = self.clock.now_ms();
        let after = self.lock().probed(now, reached);
        match after {
            AfterProbe::Again { wait } => {
                tracing::debug!(store = %self.labels.store, wait_ms = millis(wait), "a store probe failed");
                Some(wait)
            }
            AfterProbe::Closed(Change::Closed { skipped, down }) => {
                self.state.set(0);
                let late = self.late_failures.swap(0, Ordering::Relaxed);
                tracing::info!(
                    store = %self.labels.store,
                    skipped,
                    failed_in_flight = late,
                    down_ms = millis(down),
                    "a store is reachable again; its calls go out"
                );
                None
            }
            AfterProbe::Closed(Change::Opened { .. }) => None,
        }
    }

    /// The prober went away without closing the breaker (its runtime shut down): let calls
    /// out again, so the next failure opens it with a prober on a live runtime.
    pub(crate) fn abandon(&self) {
        let mut breaker = self.lock();
        if breaker.state().gauge() != 0 {
            *breaker = Breaker::new(breaker.backoff());
            self.state.set(0);
            tracing::debug!(store = %self.labels.store, "a store prober stopped; calls go out again");
        }
    }

    /// 0 closed, 1 open.
    pub fn gauge(&self) -> i64 {
        self.lock().state().gauge()
    }
}

/// Closes the breaker should the prober be dropped before the store answered it.
pub(crate) struct ProberGuard {
    pub health: Arc<Health>,
    pub done: bool,
}

impl Drop for ProberGuard {
    fn drop(&mut self) {
        if !self.done {
            self.health.abandon();
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::clock::ManualClock;

    fn health(clock: Arc<ManualClock>) -> Health {
        Health::new(
            "redis://127.0.0.1:1/".into(),
            Backoff::default(),
            clock,
            LinkMetrics::default(),
        )
    }

    fn encode(metrics: &LinkMetrics) -> String {
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }

    #[test]
    fn skipped_calls_and_the_state_are_counted_once_per_store() {
        let clock = Arc::new(ManualClock::new(0));
        let h = health(Arc::clone(&clock));
        assert_eq!(h.admit(), Ok(()));
        let down = StoreError::Unavailable("connection refused".into());
        assert_eq!(h.failed("get", &down), Some(Duration::from_millis(100)));
        assert_eq!(h.failed("get", &down), None, "one opening per outage");
        for _ in 0..3 {
            assert!(matches!(h.admit(), Err(StoreError::Skipped { .. })));
        }
        let text = encode(h.metrics());
        assert!(
            text.contains("src_store_breaker_state{store=\"redis://127.0.0.1:1/\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("src_store_skipped_total{store=\"redis://127.0.0.1:1/\"} 3"),
            "{text}"
        );
        clock.advance(100);
        assert_eq!(h.probed(false), Some(Duration::from_millis(200)));
        assert_eq!(h.probed(true), None);
        assert_eq!(h.gauge(), 0);
        assert_eq!(h.admit(), Ok(()));
    }

    #[test]
    fn a_dropped_prober_lets_calls_out_again() {
        let h = Arc::new(health(Arc::new(ManualClock::new(0))));
        h.failed("get", &StoreError::Unavailable("down".into()));
        assert_eq!(h.gauge(), 1);
        drop(ProberGuard {
            health: Arc::clone(&h),
            done: false,
        });
        assert_eq!(h.gauge(), 0);
        assert_eq!(h.admit(), Ok(()));
    }
}
