//! The shared cache store (`store = redis("redis://…")`): answers every router replica reads.
//!
//! Keys are named by [`KeySpace`], tagged by scope so a scope's list and bodies share one Redis
//! Cluster slot:
//! - the scope's list (`KeySpace::cache_list`) — newest first, capped at [`PER_SCOPE`] elements,
//!   of `id (16 bytes) | created ms (u64 LE) | embedding (f32 LE…)`; it expires `ttl` after the
//!   last answer stored in the scope;
//! - each answer body (`KeySpace::cache_body`), expiring `ttl` after it was stored.
//!
//! A lookup is one `LRANGE` of the scope (scored here), then, only for a hit, one `GET` of the
//! best entry's body; a body that expired or was evicted in between is a miss. Storing is one
//! atomic pipeline (`SET … PX`, `LPUSH`, `LTRIM`, `PEXPIRE`). Memory is bounded by the per-scope
//! cap, the per-entry size limit and the ttl; under pressure Redis's own `maxmemory` policy
//! may evict bodies early, which only costs misses. Every call has a timeout and the connection
//! reconnects by itself, as the session store's does.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use redis::RedisError;

use crate::cache::scope::Scope;
use crate::cache::store::{live, similarity, CacheStore, Inserted, Nearest, StoreError, PER_SCOPE};
use crate::hooks::BoxFuture;
use crate::store::{KeySpace, Redis};

/// Bytes of an element before its embedding.
const HEADER: usize = 16 + 8;

/// Answers in a Redis server shared by every replica.
pub struct RedisCache {
    conn: Redis,
    max_entry_bytes: usize,
}

impl RedisCache {
    /// A store for `url`; connects lazily (and reconnects by itself), so a Redis that is down
    /// at startup only fails the lookups made while it is down. Must be called inside a Tokio
    /// runtime.
    pub fn connect(
        url: &str,
        timeout: Duration,
        max_entry_bytes: usize,
    ) -> Result<RedisCache, StoreError> {
        Ok(RedisCache::on(
            Redis::connect(url, timeout)?,
            max_entry_bytes,
        ))
    }

    /// A store on `conn`, a link shared through [`crate::store::Links`].
    pub fn on(conn: Redis, max_entry_bytes: usize) -> RedisCache {
        RedisCache {
            conn,
            max_entry_bytes,
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

pub(crate) fn list_key(scope: &Scope) -> String {
    KeySpace::cache_list(&scope.0)
}

pub(crate) fn body_key(scope: &Scope, id: &[u8]) -> String {
    KeySpace::cache_body(&scope.0, id)
}

/// One list element.
fn encode(id: &[u8; 16], created_ms: u64, vector: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + vector.len() * 4);
    out.extend_from_slice(id);
    out.extend_from_slice(&created_ms.to_le_bytes());
    for x in vector {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// `(id, created ms, embedding)` of a list element; `None` when it is not one.
fn decode(element: &[u8]) -> Option<(&[u8], u64, Vec<f32>)> {
    if element.len() < HEADER || !(element.len() - HEADER).is_multiple_of(4) {
        return None;
    }
    let (id, rest) = element.split_at(16);
    let (created, vector) = rest.split_at(8);
    let created = u64::from_le_bytes(created.try_into().ok()?);
    let vector = vector
        .chunks_exact(4)
        .map(|c| c.try_into().map(f32::from_le_bytes))
        .collect::<Result<Vec<f32>, _>>()
        .ok()?;
    Some((id, created, vector))
}

fn millis(ttl_ms: u64) -> u64 {
    ttl_ms.max(1)
}

impl CacheStore for RedisCache {
    fn kind(&self) -> &'static str {
        "redis"
    }

    fn nearest<'a>(
        &'a self,
        scope: &'a Scope,
        vector: &'a [f32],
        threshold: f64,
        now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Nearest, StoreError>> {
        Box::pin(async move {
            let mut conn = self.conn.connection();
            let elements: Vec<Vec<u8>> = self
                .bounded(
                    "lookup",
                    redis::cmd("LRANGE")
                        .arg(list_key(scope))
                        .arg(0)
                        .arg(PER_SCOPE - 1)
                        .query_async(&mut conn),
                )
                .await?;
            let mut best: Option<(Vec<u8>, f32)> = None;
            for element in &elements {
                // An element this build cannot read (another layout) is skipped, not an error.
                let Some((id, created, stored)) = decode(element) else {
                    continue;
                };
                if !live(created, now_ms, ttl_ms) {
                    continue;
                }
                let score = similarity(&stored, vector);
                if best.as_ref().is_none_or(|(_, b)| score > *b) {
                    best = Some((id.to_vec(), score));
                }
            }
            let Some((id, score)) = best else {
                return Ok(Nearest::default());
            };
            if f64::from(score) < threshold {
                return Ok(Nearest {
                    score: Some(score),
                    body: None,
                });
            }
            let body: Option<Vec<u8>> = self
                .bounded(
                    "get",
                    redis::cmd("GET")
                        .arg(body_key(scope, &id))
                        .query_async(&mut conn),
                )
                .await?;
            Ok(Nearest {
                score: Some(score),
                body: body.map(Bytes::from),
            })
        })
    }

    fn insert<'a>(
        &'a self,
        scope: &'a Scope,
        vector: &'a [f32],
        body: Bytes,
        now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Inserted, StoreError>> {
        Box::pin(async move {
            if body.len() > self.max_entry_bytes {
                return Ok(Inserted::TooLarge);
            }
            let id: [u8; 16] = rand::random();
            let list = list_key(scope);
            let ttl = millis(ttl_ms);
            let mut pipe = redis::pipe();
            pipe.atomic()
                .cmd("SET")
                .arg(body_key(scope, &id))
                .arg(body.as_ref())
                .arg("PX")
                .arg(ttl)
                .ignore()
                .cmd("LPUSH")
                .arg(&list)
                .arg(encode(&id, now_ms, vector))
                .ignore()
                .cmd("LTRIM")
                .arg(&list)
                .arg(0)
                .arg(PER_SCOPE - 1)
                .ignore()
                .cmd("PEXPIRE")
                .arg(&list)
                .arg(ttl)
                .ignore();
            let mut conn = self.conn.connection();
            self.bounded("store", pipe.query_async::<()>(&mut conn))
                .await?;
            Ok(Inserted::Stored)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_survive_their_encoding() {
        let id = [7u8; 16];
        let vector = vec![0.6f32, -0.8, 0.0];
        let element = encode(&id, 1_234, &vector);
        assert_eq!(element.len(), HEADER + 12);
        let (got_id, created, got) = decode(&element).unwrap_or((&[], 0, Vec::new()));
        assert_eq!((got_id, created, got), (&id[..], 1_234, vector));
        assert_eq!(decode(&element[..HEADER - 1]), None);
        assert_eq!(decode(&element[..HEADER + 3]), None);
    }

    #[test]
    fn keys_are_versioned_and_per_scope() {
        let scope = Scope([0xab; 32]);
        let hex = "ab".repeat(32);
        assert_eq!(list_key(&scope), format!("sr:v1:cache:{{{hex}}}"));
        assert_eq!(
            body_key(&scope, &[1, 2]),
            format!("sr:v1:cache:{{{hex}}}:body:0102")
        );
    }
}
