//! The Redis connections every shared store is built on: multiplexed connections, one for each
//! serving shard ([`Link`]), that connect lazily and reconnect by themselves, and every call
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
//! Store URLs come from the checker as [`src_compiler::hir::RedisUrl`]s, which accept only what
//! this client opens (the tests below hold the two together); what can still fail here is the
//! environment: a server that is down or slow.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Cmd, Pipeline, RedisError, RedisFuture, Value};

use crate::shard::{PerShard, DEFAULT_SLOTS};
use crate::store::error::StoreError;
use crate::store::health::{Health, ProberGuard};

/// A lazy connection manager. It makes one connection attempt when a connection is needed
/// and none again before the next call: a request never waits out connection retries, and
/// while the Redis is down its breaker's prober is what tries again.
fn manager(client: Client, timeout: Duration) -> Result<ConnectionManager, StoreError> {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_number_of_retries(0)
        .set_max_delay(timeout);
    ConnectionManager::new_lazy_with_config(client, config)
        .map_err(|e| StoreError::Config(e.to_string()))
}

/// One pooled connection, sending a command again once when the connection under it had died.
#[derive(Clone)]
pub struct Conn {
    inner: ConnectionManager,
    retried: Counter,
}

/// Whether `err` says the connection (not the command) failed: a dead socket, or a connection
/// attempt that failed earlier and is remembered. The manager starts a fresh connection when it
/// answers one, so a second send waits for that connection. A timeout is not sent again: it
/// would double the wait.
fn connection_failed(err: &RedisError) -> bool {
    !err.is_timeout() && (err.is_io_error() || err.is_unrecoverable_error())
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            match self.inner.send_packed_command(cmd).await {
                Err(err) if connection_failed(&err) => {
                    self.retried.inc();
                    self.inner.send_packed_command(cmd).await
                }
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
            match self
                .inner
                .send_packed_commands(pipeline, offset, count)
                .await
            {
                Err(err) if connection_failed(&err) => {
                    self.retried.inc();
                    self.inner
                        .send_packed_commands(pipeline, offset, count)
                        .await
                }
                answered => answered,
            }
        })
    }

    fn get_db(&self) -> i64 {
        self.inner.get_db()
    }
}

/// Lazy connections to one Redis, one for each serving shard (and one for the threads off the
/// shards): a call made on a shard goes out on a connection whose task runs on that shard, not
/// through a wake-up of whichever thread made the connection first.
pub struct Link {
    client: Client,
    timeout: Duration,
    /// The connection made with the link, for the threads off the shards and as the fallback.
    first: ConnectionManager,
    shards: PerShard<ConnectionManager>,
    health: Arc<Health>,
}

impl Link {
    /// Checks `url` and prepares the first connection (nothing is sent until the first call).
    /// Must be called inside a Tokio runtime.
    pub fn connect(url: &str, timeout: Duration) -> Result<Link, StoreError> {
        Link::with_health(url, timeout, Arc::new(Health::alone(redact(url))))
    }

    /// As [`Link::connect`], reporting to `health` (shared by every link to the same Redis).
    pub fn with_health(
        url: &str,
        timeout: Duration,
        health: Arc<Health>,
    ) -> Result<Link, StoreError> {
        let client = open(url)?;
        let first = manager(client.clone(), timeout)?;
        Ok(Link {
            client,
            timeout,
            first,
            shards: PerShard::new(DEFAULT_SLOTS),
            health,
        })
    }

    /// The calling thread's connection, made on its first call (inside that thread's runtime).
    pub fn connection(&self) -> Conn {
        let inner = if crate::shard::slot() == 0 {
            self.first.clone()
        } else {
            self.shards
                .get_or_init(|| {
                    // The URL and the settings were accepted for `first`; should another
                    // connection still be refused, the shard shares `first`.
                    manager(self.client.clone(), self.timeout)
                        .unwrap_or_else(|_| self.first.clone())
                })
                .clone()
        };
        Conn {
            inner,
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

/// The client of `url`; opening one connects to nothing.
fn open(url: &str) -> Result<Client, StoreError> {
    Client::open(url).map_err(|e| StoreError::Config(format!("`{}`: {e}", redact(url))))
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
        Ok(Err(e)) if connection_failed(&e) => (Err(StoreError::Unavailable(e.to_string())), true),
        Ok(Err(e)) => (Err(StoreError::Rejected(e.to_string())), false),
        Ok(Ok(v)) => (Ok(v), false),
    }
}

/// The URL without its password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://…@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
