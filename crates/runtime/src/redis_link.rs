//! The Redis connection the shared stores (session pins, the response cache) are built on: one
//! multiplexed connection that connects lazily and reconnects by itself, and every call bounded
//! by the store's timeout, so a dead Redis costs a request at most that long.

use std::future::Future;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, RedisError};

/// Why a Redis call produced nothing; each store turns it into its own error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LinkError {
    Timeout { op: &'static str, after: Duration },
    Unavailable(String),
    Config(String),
}

/// A lazy connection to `url` (nothing is sent until the first call). Must be called inside a
/// Tokio runtime.
pub(crate) fn connect(url: &str, timeout: Duration) -> Result<ConnectionManager, LinkError> {
    let client =
        Client::open(url).map_err(|e| LinkError::Config(format!("`{}`: {e}", redact(url))))?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_number_of_retries(2)
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(timeout);
    ConnectionManager::new_lazy_with_config(client, config)
        .map_err(|e| LinkError::Config(e.to_string()))
}

/// Whether `url` can name a Redis server at all (checked when a policy loads).
pub(crate) fn check_url(url: &str) -> Result<(), LinkError> {
    Client::open(url)
        .map(|_| ())
        .map_err(|e| LinkError::Config(format!("`{}`: {e}", redact(url))))
}

/// Runs one call under `timeout`; `op` names it in the error.
pub(crate) async fn bounded<T>(
    timeout: Duration,
    op: &'static str,
    step: impl Future<Output = Result<T, RedisError>>,
) -> Result<T, LinkError> {
    match tokio::time::timeout(timeout, step).await {
        Err(_) => Err(LinkError::Timeout { op, after: timeout }),
        Ok(Err(e)) if e.is_timeout() => Err(LinkError::Timeout { op, after: timeout }),
        Ok(Err(e)) => Err(LinkError::Unavailable(e.to_string())),
        Ok(Ok(v)) => Ok(v),
    }
}

/// The URL without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
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
        let Err(LinkError::Config(why)) = check_url("redis://:hunter2@host:notaport") else {
            panic!("a bad port is a configuration error");
        };
        assert!(!why.contains("hunter2"), "{why}");
    }
}
