//! Where stores are found: the Redis links every store of a server shares ([`Links`]), the
//! stores each kind has built for the policies' store declarations ([`StoreSet`]), and every
//! store timeout with its environment override ([`Timeouts`]).
//!
//! A policy names a store (`store = memory` or `store = redis("…")`, a
//! [`StoreDef`]); sessions, the cache and stored responses each build their store for it on
//! first use and keep it across reloads that name it again. Whatever they build on one Redis
//! shares one [`Link`] per (URL, timeout), as do the shared cooldowns and the model memo, so a
//! server opens one set of connections to each Redis however many stores live there. A new store
//! kind (Redis Cluster, Sentinel, a vector database) is one more arm where links are made and
//! one more implementation of each store trait; the callers do not change.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use src_compiler::hir::{RedisTarget, RedisUrl, StoreDef};

use crate::store::breaker::Backoff;
use crate::store::clock::{Clock, SystemClock};
use crate::store::error::StoreError;
use crate::store::health::{Health, LinkMetrics};
use crate::store::link::{Link, Redis};
use crate::store::topology::Pool;

/// The longest wait between two probes of a cluster's or a Sentinel set's breaker.
pub const FAILOVER_PROBE_CAP: Duration = Duration::from_millis(250);

/// The bound on each Redis call unless one is configured.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);

/// Overrides the bound of the session store's calls, which stored responses and the shared
/// model memo follow (milliseconds).
pub const SESSION_TIMEOUT_ENV: &str = "SRC_SESSION_REDIS_TIMEOUT_MS";
/// Overrides the bound of the cache store's calls (milliseconds).
pub const CACHE_TIMEOUT_ENV: &str = "SRC_CACHE_REDIS_TIMEOUT_MS";

/// The bound on each call, per use of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Pins and outcomes; stored responses and the shared model memo use the same.
    pub session: Duration,
    /// Cached answers.
    pub cache: Duration,
    /// Shared cooldowns (written and read off the request path).
    pub cooldown: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            session: DEFAULT_TIMEOUT,
            cache: DEFAULT_TIMEOUT,
            cooldown: DEFAULT_TIMEOUT,
        }
    }
}

impl Timeouts {
    /// The defaults, overridden by [`SESSION_TIMEOUT_ENV`] and [`CACHE_TIMEOUT_ENV`] as `read`
    /// answers them (the server passes its environment reader).
    pub fn from_lookup(read: impl Fn(&str) -> Option<u64>) -> Timeouts {
        let mut timeouts = Timeouts::default();
        if let Some(ms) = read(SESSION_TIMEOUT_ENV) {
            timeouts.session = Duration::from_millis(ms.max(1));
        }
        if let Some(ms) = read(CACHE_TIMEOUT_ENV) {
            timeouts.cache = Duration::from_millis(ms.max(1));
        }
        timeouts
    }
}

/// The Redis links of a server, one per (Redis, timeout), shared by every store built on them,
/// and one [`Health`] (breaker) per Redis, shared by its links. A Redis is one server, a
/// cluster or a Sentinel set, as a policy names it ([`RedisTarget`]).
pub struct Links {
    open: Mutex<Vec<(RedisTarget, Duration, Arc<Link>)>>,
    healths: Mutex<Vec<(RedisTarget, Arc<Health>)>>,
    metrics: LinkMetrics,
    clock: Arc<dyn Clock>,
    backoff: Backoff,
}

impl Default for Links {
    fn default() -> Self {
        Links::with_clock(Arc::new(SystemClock), Backoff::default())
    }
}

impl Links {
    pub fn new() -> Links {
        Links::default()
    }

    /// Links whose breakers read `clock` and wait `backoff` between probes.
    pub fn with_clock(clock: Arc<dyn Clock>, backoff: Backoff) -> Links {
        Links {
            open: Mutex::new(Vec::new()),
            healths: Mutex::new(Vec::new()),
            metrics: LinkMetrics::default(),
            clock,
            backoff,
        }
    }

    /// The link metrics (`src_store_breaker_state`, `src_store_skipped_total`, ...).
    pub fn metrics(&self) -> &LinkMetrics {
        &self.metrics
    }

    /// Adds the link metrics to the server's registry.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.metrics.register(registry);
    }

    /// The health of `target`, made on first use.
    fn health(&self, target: &RedisTarget) -> Arc<Health> {
        let mut healths = self.healths.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, health)) = healths.iter().find(|(t, _)| t == target) {
            return Arc::clone(health);
        }
        // A cluster or a Sentinel set is back as soon as a replica is promoted (about a node
        // timeout): its probes wait at most `FAILOVER_PROBE_CAP`, not the full back-off.
        let backoff = if Pool::fails_over(target) {
            Backoff {
                first: self.backoff.first,
                cap: self.backoff.cap.min(FAILOVER_PROBE_CAP),
            }
        } else {
            self.backoff
        };
        let health = Arc::new(Health::new(
            shown(target),
            backoff,
            Arc::clone(&self.clock),
            self.metrics.clone(),
        ));
        healths.push((target.clone(), Arc::clone(&health)));
        health
    }

    /// The link to `target` for calls bounded by `timeout`, made on first use (lazily: nothing
    /// is sent until the first call). A target the client refuses is an error and is not kept.
    /// Must be called inside a Tokio runtime.
    pub fn redis(&self, target: &RedisTarget, timeout: Duration) -> Result<Redis, StoreError> {
        let mut open = self.lock();
        if let Some((_, _, link)) = open.iter().find(|(t, d, _)| t == target && *d == timeout) {
            return Ok(Redis::new(Arc::clone(link), timeout));
        }
        let link = Arc::new(Link::with_health(target, timeout, self.health(target))?);
        open.push((target.clone(), timeout, Arc::clone(&link)));
        Ok(Redis::new(link, timeout))
    }

    /// As [`Links::redis`], for one server's URL.
    pub fn redis_url(&self, url: &str, timeout: Duration) -> Result<Redis, StoreError> {
        let url = RedisUrl::parse(url).map_err(|e| StoreError::Config(e.to_string()))?;
        self.redis(&RedisTarget::Single(url), timeout)
    }

    /// Links made so far.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, Vec<(RedisTarget, Duration, Arc<Link>)>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The stores of one kind built for the store declarations policies made, each kept across
/// reloads that name it again (so a reload keeps a memory store's contents).
pub struct StoreSet<S: ?Sized> {
    built: Mutex<Vec<(StoreDef, Arc<S>)>>,
}

impl<S: ?Sized> Default for StoreSet<S> {
    fn default() -> Self {
        StoreSet {
            built: Mutex::new(Vec::new()),
        }
    }
}

impl<S: ?Sized> StoreSet<S> {
    pub fn new() -> StoreSet<S> {
        StoreSet::default()
    }

    /// Serves `def` from `store` (tests, embedding); an earlier store for `def` stays first.
    pub fn insert(&self, def: StoreDef, store: Arc<S>) {
        self.lock().push((def, store));
    }

    /// The store built for `def`, building it with `build` on first use. A failed build is
    /// not kept: the next call tries again.
    pub fn get_or_build(
        &self,
        def: &StoreDef,
        build: impl FnOnce(&StoreDef) -> Result<Arc<S>, StoreError>,
    ) -> Result<Arc<S>, StoreError> {
        let mut built = self.lock();
        if let Some((_, store)) = built.iter().find(|(d, _)| d == def) {
            return Ok(Arc::clone(store));
        }
        let store = build(def)?;
        built.push((def.clone(), Arc::clone(&store)));
        Ok(store)
    }

    fn lock(&self) -> MutexGuard<'_, Vec<(StoreDef, Arc<S>)>> {
        self.built.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `memory`, `redis`, `redis_cluster`, `redis_sentinel` or `milvus`: the kind of store `def` declares,
/// before one is built.
pub fn kind_of(def: &StoreDef) -> &'static str {
    match def {
        StoreDef::Memory => "memory",
        StoreDef::Redis(target) => target.kind(),
        StoreDef::Milvus(_) => "milvus",
    }
}

/// How a Redis is named in logs and metrics: its one URL, else its form, passwords hidden.
fn shown(target: &RedisTarget) -> String {
    match target {
        RedisTarget::Single(url) => crate::store::link::redact(url.as_str()),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_follow_the_environment_reader() {
        let read = |name: &str| match name {
            SESSION_TIMEOUT_ENV => Some(40),
            CACHE_TIMEOUT_ENV => Some(0),
            _ => None,
        };
        let t = Timeouts::from_lookup(read);
        assert_eq!(t.session, Duration::from_millis(40));
        assert_eq!(t.cache, Duration::from_millis(1), "zero is raised to 1 ms");
        assert_eq!(t.cooldown, DEFAULT_TIMEOUT);
        assert_eq!(Timeouts::from_lookup(|_| None), Timeouts::default());
    }

    #[test]
    fn a_store_is_built_once_per_declaration_and_failures_are_not_kept() {
        let set: StoreSet<str> = StoreSet::new();
        let a = set.get_or_build(&StoreDef::Memory, |_| Ok(Arc::from("a")));
        let b = set.get_or_build(&StoreDef::Memory, |_| Ok(Arc::from("b")));
        match (a, b) {
            (Ok(a), Ok(b)) => assert!(Arc::ptr_eq(&a, &b)),
            other => panic!("the first build is kept: {other:?}"),
        }
        let redis = match RedisUrl::parse("redis://127.0.0.1:1/") {
            Ok(url) => StoreDef::Redis(url.into()),
            Err(e) => panic!("a plain URL parses: {e:?}"),
        };
        let failed = set.get_or_build(&redis, |_| Err(StoreError::Config("no".into())));
        assert!(failed.is_err());
        let later = set.get_or_build(&redis, |_| Ok(Arc::from("r")));
        assert_eq!(later.ok().as_deref(), Some("r"));
    }

    #[tokio::test]
    async fn one_link_per_url_and_timeout() {
        let links = Links::new();
        let url = "redis://127.0.0.1:1/";
        let t = Duration::from_millis(50);
        assert!(links.redis_url(url, t).is_ok());
        assert!(links.redis_url(url, t).is_ok());
        assert_eq!(links.len(), 1, "the same URL and bound share one link");
        assert!(links.redis_url(url, Duration::from_millis(60)).is_ok());
        assert_eq!(links.len(), 2);
        assert!(links.redis_url("not a url", t).is_err());
        assert_eq!(links.len(), 2, "a refused URL is not kept");
        let cluster = RedisTarget::cluster(&["redis://127.0.0.1:1", "redis://127.0.0.1:2"]);
        let cluster = cluster.unwrap_or_else(|e| panic!("two nodes make a cluster: {e}"));
        assert!(links.redis(&cluster, t).is_ok());
        assert!(links.redis(&cluster, t).is_ok());
        assert_eq!(links.len(), 3, "a cluster is one more link, made once");
        let (a, b) = match (
            links.redis_url(url, t),
            links.redis_url(url, Duration::from_millis(60)),
        ) {
            (Ok(a), Ok(b)) => (a, b),
            _ => panic!("known links are answered again"),
        };
        assert!(
            Arc::ptr_eq(a.health(), b.health()),
            "one breaker per Redis, whatever the timeout"
        );
    }
}
