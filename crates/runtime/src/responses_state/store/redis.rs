//! The shared response store (`session { store = redis("redis://…") }`): responses every router
//! replica reads, so a conversation stored through one replica continues through another.
//!
//! One string per response (`KeySpace::response`), written with `SET … PX ttl`; key parts are
//! escaped, so no tenant or id can spell another's key. The connection is a shared
//! [`crate::store::link`]: lazy, reconnecting, every call bounded.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use redis::RedisError;

use crate::hooks::BoxFuture;
use crate::responses_state::store::ResponseStore;
use crate::store::{KeySpace, Redis, StoreError};

/// Responses in a Redis server shared by every replica.
pub struct RedisResponses {
    conn: Redis,
    /// The key of a (tenant, id): stored responses, or their sealed vaults.
    key: fn(&str, &str) -> String,
}

impl RedisResponses {
    /// A store for `url`; connects lazily. Must be called inside a Tokio runtime.
    pub fn connect(url: &str, timeout: Duration) -> Result<RedisResponses, StoreError> {
        Ok(RedisResponses::on(Redis::connect(url, timeout)?))
    }

    /// A store on `conn`, a link shared through [`crate::store::Links`].
    pub fn on(conn: Redis) -> RedisResponses {
        RedisResponses {
            conn,
            key: KeySpace::response,
        }
    }

    /// The sealed vaults of responses (`KeySpace::vault`) on `conn`.
    pub fn vaults_on(conn: Redis) -> RedisResponses {
        RedisResponses {
            conn,
            key: KeySpace::vault,
        }
    }

    async fn bounded<T>(
        &self,
        op: &'static str,
        step: impl Future<Output = Result<T, RedisError>>,
    ) -> Result<T, StoreError> {
        self.conn.bounded(op, step).await
    }
}

impl ResponseStore for RedisResponses {
    fn kind(&self) -> &'static str {
        "redis"
    }

    fn get<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        _now_ms: u64,
    ) -> BoxFuture<'a, Result<Option<Bytes>, StoreError>> {
        Box::pin(async move {
            let mut conn = self.conn.connection();
            let key = (self.key)(tenant, id);
            let value: Option<Vec<u8>> = self
                .bounded("get", redis::cmd("GET").arg(&key).query_async(&mut conn))
                .await?;
            Ok(value.map(Bytes::from))
        })
    }

    fn put<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        value: Bytes,
        _now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut conn = self.conn.connection();
            let key = (self.key)(tenant, id);
            let mut command = redis::cmd("SET");
            command
                .arg(&key)
                .arg(value.as_ref())
                .arg("PX")
                .arg(ttl_ms.max(1));
            self.bounded("put", command.query_async::<()>(&mut conn))
                .await
        })
    }

    fn delete<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        _now_ms: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let mut conn = self.conn.connection();
            let key = (self.key)(tenant, id);
            let removed: u64 = self
                .bounded("delete", redis::cmd("DEL").arg(&key).query_async(&mut conn))
                .await?;
            Ok(removed > 0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_cannot_spell_another_tenant_s() {
        let key = KeySpace::response;
        assert_eq!(key("t", "resp_1"), "sr:v1:resp:t:resp_1");
        assert_ne!(key("a:b", "c"), key("a", "b:c"));
        assert_eq!(key("a%3Ab", "c"), "sr:v1:resp:a%253Ab:c");
    }
}
