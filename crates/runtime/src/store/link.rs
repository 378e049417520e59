//! The Redis connections every shared store is built on: multiplexed connections, one for each
//! serving shard ([`Link`]), to one server, a Redis Cluster or a Sentinel set's primary
//! ([`crate::store::topology`]), that connect lazily and reconnect by themselves, and every call
//! bounded by its user's timeout and guarded by the Redis's circuit breaker
//! ([`Redis::bounded`]): a dead Redis costs the calls in flight when it died at most their
//! timeout, and every later call nothing until a probe finds it back
//! ([`crate::store::health`]).
//!
//! A pooled connection that died with its server fails its next command ("broken pipe") even
//! once the server is back; [`Conn`] sends such a command once more, on the fresh connection
//! the manager starts, so the return of a Redis fails no request. Every store step is safe to
//! send twice: reads, scripts that check a version or an absence before writing, idempotent
//! sets; only a step the dead server may have run before dying (an outcome recorded without an
//! idempotency key) could count twice.
//!
//! Stores come from the checker as [`RedisTarget`]s, whose URLs are only what
//! this client opens (the tests below hold the two together); what can still fail here is the
//! environment: a server that is down or slow.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisError, RedisFuture, Value};
use src_compiler::hir::RedisTarget;

use crate::store::error::StoreError;
use crate::store::health::{Health, ProberGuard};
pub(crate) use crate::store::topology::connection_failed;
pub use crate::store::topology::redact;
pub use crate::store::topology::ScanNode;
use crate::store::topology::{failing_over, no_script, Inner, Pool, Scripts};

/// One connection of a link, sending a command again once when the connection under it had
/// died, and a script's body when the node answers `NOSCRIPT`.
#[derive(Clone)]
pub struct Conn {
    inner: Inner,
    scripts: Arc<Scripts>,
    retried: Counter,
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let answered = match self.inner.send(cmd).await {
                Err(err) if connection_failed(&err) => {
                    self.retried.inc();
                    self.inner.send(cmd).await
                }
                answered => answered,
            };
            match answered {
                Err(err) if no_script(&err) => match self.scripts.eval_for(cmd) {
                    Some(eval) => self.inner.send(&eval).await,
                    None => Err(err),
                },
                answered => answered,
            }
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            match self.inner.send_many(pipeline, offset, count).await {
                Err(err) if connection_failed(&err) => {
                    self.retried.inc();
                    self.inner.send_many(pipeline, offset, count).await
                }
                answered => answered,
            }
        })
    }

    fn get_db(&self) -> i64 {
        self.inner.db()
    }
}

impl Conn {
    /// The nodes a walk over every key must `SCAN`, each with a cursor of its own: the server,
    /// or every master of a cluster.
    pub async fn scan_nodes(&mut self) -> Result<Vec<ScanNode>, RedisError> {
        self.inner.scan_nodes().await
    }

    /// One `SCAN cursor MATCH pattern COUNT count` step on `node`: the next cursor (0 at the
    /// end) and the keys found.
    pub async fn scan_step(
        &mut self,
        node: &ScanNode,
        cursor: u64,
        pattern: &str,
        count: usize,
    ) -> Result<(u64, Vec<String>), RedisError> {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count);
        let answer = self.inner.send_to(node, &cmd).await?;
        Ok(redis::from_redis_value(answer)?)
    }
}

/// Lazy connections to one Redis (a server, a cluster or a Sentinel set's primary), one for
/// each serving shard where the topology allows: a call made on a shard goes out on a
/// connection whose task runs on that shard, not through a wake-up of whichever thread made
/// the connection first.
pub struct Link {
    pool: Pool,
    timeout: Duration,
    scripts: Arc<Scripts>,
    health: Arc<Health>,
}

impl Link {
    /// Checks `url` and prepares the first connection (nothing is sent until the first call).
    /// Must be called inside a Tokio runtime.
    pub fn connect(url: &str, timeout: Duration) -> Result<Link, StoreError> {
        Ok(Link {
            pool: Pool::single(url, timeout)?,
            timeout,
            scripts: Arc::default(),
            health: Arc::new(Health::alone(redact(url))),
        })
    }

    /// The link to `target`, reporting to `health` (shared by every link to the same Redis).
    pub fn with_health(
        target: &RedisTarget,
        timeout: Duration,
        health: Arc<Health>,
    ) -> Result<Link, StoreError> {
        Ok(Link {
            pool: Pool::open(target, timeout)?,
            timeout,
            scripts: Arc::default(),
            health,
        })
    }

    /// The calling thread's connection, made on its first call (inside that thread's runtime).
    pub fn connection(&self) -> Conn {
        Conn {
            inner: self.pool.connection(),
            scripts: Arc::clone(&self.scripts),
            retried: self.health.retried(),
        }
    }

    pub fn health(&self) -> &Arc<Health> {
        &self.health
    }

    /// Runs one call under `timeout` unless the breaker is open; a failure to reach the store
    /// opens it and starts the prober.
    async fn guarded<T>(
        self: &Arc<Self>,
        timeout: Duration,
        op: &'static str,
        step: impl Future<Output = Result<T, RedisError>>,
    ) -> Result<T, StoreError> {
        self.health.admit()?;
        let (result, unreachable) = attempt(timeout, op, step).await;
        if let (Err(err), true) = (&result, unreachable) {
            self.pool.renew_after_failure();
            if let Some(wait) = self.health.failed(op, err) {
                self.probe_after(wait);
            }
        }
        result
    }

    /// Probes the store off the request path, after `wait` and then after each back-off the
    /// breaker answers, until a probe reaches it.
    fn probe_after(self: &Arc<Self>, wait: Duration) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.health.abandon();
            return;
        };
        let link = Arc::clone(self);
        runtime.spawn(async move {
            let mut guard = ProberGuard {
                health: Arc::clone(&link.health),
                done: false,
            };
            let mut wait = wait;
            loop {
                tokio::time::sleep(wait).await;
                link.pool.renew();
                let mut conn = link.connection();
                let cmd = redis::cmd("PING");
                let ping = cmd.query_async::<String>(&mut conn);
                let (answer, _) = attempt(link.timeout, "probe", ping).await;
                match link.health.probed(answer.is_ok()) {
                    Some(next) => wait = next,
                    None => break,
                }
            }
            guard.done = true;
        });
    }
}

/// One store's use of a [`Link`]: the shared connections and the store's bound on each call.
#[derive(Clone)]
pub struct Redis {
    link: Arc<Link>,
    timeout: Duration,
}

impl Redis {
    pub(crate) fn new(link: Arc<Link>, timeout: Duration) -> Redis {
        Redis { link, timeout }
    }

    /// A link of its own (not shared through a registry), for a store built alone.
    pub fn connect(url: &str, timeout: Duration) -> Result<Redis, StoreError> {
        Ok(Redis::new(Arc::new(Link::connect(url, timeout)?), timeout))
    }

    /// The calling thread's connection.
    pub fn connection(&self) -> Conn {
        self.link.connection()
    }

    /// `code` as a script the link's connections can run on any node: one that answers
    /// `NOSCRIPT` is sent the body.
    pub fn script(&self, code: &'static str) -> redis::Script {
        let script = redis::Script::new(code);
        self.link.scripts.register(&script, code);
        script
    }

    /// Whether this is a Redis Cluster, where one script touches keys of one slot only.
    pub fn is_cluster(&self) -> bool {
        self.link.pool.is_cluster()
    }

    /// The bound on each call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The breaker and metrics of the Redis this store is on.
    pub fn health(&self) -> &Arc<Health> {
        self.link.health()
    }

    /// Runs one call under the store's timeout; `op` names it in the error. Answers
    /// [`StoreError::Skipped`] at once while the Redis's breaker is open.
    pub async fn bounded<T>(
        &self,
        op: &'static str,
        step: impl Future<Output = Result<T, RedisError>>,
    ) -> Result<T, StoreError> {
        self.link.guarded(self.timeout, op, step).await
    }

    /// As [`Redis::bounded`], under `timeout` instead of the store's.
    pub async fn bounded_within<T>(
        &self,
        timeout: Duration,
        op: &'static str,
        step: impl Future<Output = Result<T, RedisError>>,
    ) -> Result<T, StoreError> {
        self.link.guarded(timeout, op, step).await
    }
}

/// Runs one call under `timeout`; `op` names it in the error. Also answers whether a failure
/// means the store could not be reached (a timeout or a connection failure), not that it
/// answered an error.
async fn attempt<T>(
    timeout: Duration,
    op: &'static str,
    step: impl Future<Output = Result<T, RedisError>>,
) -> (Result<T, StoreError>, bool) {
    match tokio::time::timeout(timeout, step).await {
        Err(_) => (Err(StoreError::Timeout { op, after: timeout }), true),
        Ok(Err(e)) if e.is_timeout() => (Err(StoreError::Timeout { op, after: timeout }), true),
        Ok(Err(e)) if connection_failed(&e) || failing_over(&e) => {
            (Err(StoreError::Unavailable(e.to_string())), true)
        }
        Ok(Err(e)) => (Err(StoreError::Rejected(e.to_string())), false),
        Ok(Ok(v)) => (Ok(v), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::topology::open;

    #[test]
    fn passwords_are_kept_out_of_messages() {
        assert_eq!(
            redact("redis://:hunter2@host:6379/0"),
            "redis://…@host:6379/0"
        );
        assert_eq!(redact("redis://host:6379"), "redis://host:6379");
        let Err(StoreError::Config(why)) = open("redis://:hunter2@host:notaport") else {
            panic!("a bad port is a configuration error");
        };
        assert!(!why.contains("hunter2"), "{why}");
    }

    /// URLs of every form the checker's `RedisUrl` knows, and near misses.
    const URLS: &[&str] = &[
        "redis://127.0.0.1:6379",
        "redis://127.0.0.1:6379/",
        "redis://127.0.0.1:6379/0",
        "redis://localhost/15",
        "redis://:hunter2@cache.internal:6380/3",
        "redis://user:p%40ss@[::1]:6379/",
        "redis://host/?protocol=resp3",
        "redis://host/?protocol=9&protocol=2",
        "redis://host/?protocol=2&protocol=9",
        "redis://host/#fragment",
        "REDIS://HOST:6379",
        "rediss://cache.example.com:6380/0",
        "rediss://cache.example.com/#insecure",
        "rediss://cache.example.com/#verify",
        "valkey://localhost",
        "valkeys://localhost:6380",
        "unix:///run/redis.sock",
        "redis+unix:///run/redis.sock?db=2",
        "valkey+unix:///run/valkey.sock?db=x",
        "unix://host/run.sock",
        "redis://",
        "redis://0.0.0.0:6379",
        "redis://[::]:6379",
        "redis://host/zero",
        "redis://host/-1",
        "redis://host/0/1",
        "redis://:%FF@host",
        "redis://host:notaport",
        "redis://host:99999",
        "redis//host",
        "127.0.0.1:6379",
        "http://not-redis",
        "",
    ];

    #[test]
    fn the_client_opens_every_url_the_checker_accepts() {
        let mut accepted = 0;
        for url in URLS {
            if let Ok(parsed) = src_compiler::hir::RedisUrl::parse(url) {
                accepted += 1;
                assert!(
                    open(parsed.as_str()).is_ok(),
                    "the checker accepts `{url}`, the client does not"
                );
            }
        }
        assert!(accepted >= 15, "only {accepted} URLs were accepted");
    }
}
