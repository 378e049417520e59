//! The Redis connections every shared store is built on: multiplexed connections, one for each
//! serving shard ([`Link`]), that connect lazily and reconnect by themselves, and every call
//! bounded by its user's timeout ([`Redis::bounded`]), so a dead Redis costs a request at most
//! that long.
//!
//! Store URLs come from the checker as [`src_compiler::hir::RedisUrl`]s, which accept only what
//! this client opens (the tests below hold the two together); what can still fail here is the
//! environment: a server that is down or slow.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, RedisError};

use crate::shard::{PerShard, DEFAULT_SLOTS};
use crate::store::error::StoreError;

fn manager(client: Client, timeout: Duration) -> Result<ConnectionManager, StoreError> {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_number_of_retries(2)
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(timeout);
    ConnectionManager::new_lazy_with_config(client, config)
        .map_err(|e| StoreError::Config(e.to_string()))
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
}

impl Link {
    /// Checks `url` and prepares the first connection (nothing is sent until the first call).
    /// Must be called inside a Tokio runtime.
    pub fn connect(url: &str, timeout: Duration) -> Result<Link, StoreError> {
        let client = open(url)?;
        let first = manager(client.clone(), timeout)?;
        Ok(Link {
            client,
            timeout,
            first,
            shards: PerShard::new(DEFAULT_SLOTS),
        })
    }

    /// The calling thread's connection, made on its first call (inside that thread's runtime).
    pub fn connection(&self) -> ConnectionManager {
        if crate::shard::slot() == 0 {
            return self.first.clone();
        }
        self.shards
            .get_or_init(|| {
                // The URL and the settings were accepted for `first`; should another connection
                // still be refused, the shard shares `first`.
                manager(self.client.clone(), self.timeout).unwrap_or_else(|_| self.first.clone())
            })
            .clone()
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
    pub fn connection(&self) -> ConnectionManager {
        self.link.connection()
    }

    /// The bound on each call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs one call under the store's timeout; `op` names it in the error.
    pub async fn bounded<T>(
        &self,
        op: &'static str,
        step: impl Future<Output = Result<T, RedisError>>,
    ) -> Result<T, StoreError> {
        bounded(self.timeout, op, step).await
    }
}

/// The client of `url`; opening one connects to nothing.
fn open(url: &str) -> Result<Client, StoreError> {
    Client::open(url).map_err(|e| StoreError::Config(format!("`{}`: {e}", redact(url))))
}

/// Runs one call under `timeout`; `op` names it in the error.
pub async fn bounded<T>(
    timeout: Duration,
    op: &'static str,
    step: impl Future<Output = Result<T, RedisError>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(timeout, step).await {
        Err(_) => Err(StoreError::Timeout { op, after: timeout }),
        Ok(Err(e)) if e.is_timeout() => Err(StoreError::Timeout { op, after: timeout }),
        Ok(Err(e)) => Err(StoreError::Unavailable(e.to_string())),
        Ok(Ok(v)) => Ok(v),
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
