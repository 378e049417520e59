//! The shared cache store (`store = redis("redis://…")`): answers every router replica reads.
//!
//! Keys are named by [`KeySpace`], tagged by scope so a scope's list and bodies share one Redis
//! Cluster slot:
//! - the scope's list (`KeySpace::cache_list`) — newest first, capped at [`PER_SCOPE`] elements,
//!   of `'Q' | id (16 bytes) | created ms (u64 LE) | dimensions (u16 LE) | embedding (f32 LE…) |
//!   question (UTF-8)`; it expires `ttl` after the last answer stored in the scope. The question
//!   rides in the list so the look-alike check runs on the one `LRANGE`; the leading tag and the
//!   dimension count keep elements of the earlier layout (no question) from being misread;
//! - each answer body (`KeySpace::cache_body`), expiring `ttl` after it was stored.
//!
//! A lookup is one `LRANGE` of the scope (scored and checked here), then, only for a hit, one
//! `GET` of the best accepted entry's body; a body that expired or was evicted in between is a miss. Storing is one
//! atomic pipeline (`SET … PX`, `LPUSH`, `LTRIM`, `PEXPIRE`). Memory is bounded by the per-scope
//! cap, the per-entry size limit and the ttl; under pressure Redis's own `maxmemory` policy
//! may evict bodies early, which only costs misses. Every call has a timeout and the connection
//! reconnects by itself, as the session store's does.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use redis::RedisError;

use crate::cache::scope::Scope;
use crate::cache::store::{
    candidates, live, similarity, CacheStore, Inserted, Lookup, Nearest, StoreError, PER_SCOPE,
};
use crate::hooks::BoxFuture;
use crate::store::{KeySpace, Redis};

/// The first byte of an element of this layout.
const TAG: u8 = b'Q';

/// Bytes of an element before its embedding.
const HEADER: usize = 1 + 16 + 8 + 2;

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
fn encode(id: &[u8; 16], created_ms: u64, vector: &[f32], question: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + vector.len() * 4 + question.len());
    out.push(TAG);
    out.extend_from_slice(id);
    out.extend_from_slice(&created_ms.to_le_bytes());
    // Encoders have at most a few thousand dimensions; a longer vector is stored truncated and
    // so never compares (its length differs from every query's).
    let dims = u16::try_from(vector.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&dims.to_le_bytes());
    for x in vector.iter().take(usize::from(dims)) {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.extend_from_slice(question.as_bytes());
    out
}

/// One decoded list element.
#[derive(Debug, PartialEq)]
struct Element<'a> {
    id: &'a [u8],
    created_ms: u64,
    vector: Vec<f32>,
    question: &'a str,
}

/// The element `bytes`; `None` when it is not one of this layout.
fn decode(bytes: &[u8]) -> Option<Element<'_>> {
    let (&tag, rest) = bytes.split_first()?;
    if tag != TAG || rest.len() < HEADER - 1 {
        return None;
    }
    let (id, rest) = rest.split_at(16);
    let (created, rest) = rest.split_at(8);
    let (dims, rest) = rest.split_at(2);
    let dims = usize::from(u16::from_le_bytes(dims.try_into().ok()?));
    if rest.len() < dims * 4 {
        return None;
    }
    let (vector, question) = rest.split_at(dims * 4);
    let vector = vector
        .chunks_exact(4)
        .map(|c| c.try_into().map(f32::from_le_bytes))
        .collect::<Result<Vec<f32>, _>>()
        .ok()?;
    Some(Element {
        id,
        created_ms: u64::from_le_bytes(created.try_into().ok()?),
        vector,
        question: std::str::from_utf8(question).ok()?,
    })
}

fn millis(ttl_ms: u64) -> u64 {
    ttl_ms.max(1)
}

impl CacheStore for RedisCache {
    fn kind(&self) -> &'static str {
        "redis"
    }

    fn nearest<'a>(&'a self, lookup: Lookup<'a>) -> BoxFuture<'a, Result<Nearest, StoreError>> {
        let Lookup {
            scope,
            vector,
            threshold,
            now_ms,
            ttl_ms,
            accept,
        } = lookup;
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
            let mut scored: Vec<(Element<'_>, f32)> = Vec::with_capacity(elements.len());
            for element in &elements {
                // An element this build cannot read (another layout) is skipped, not an error.
                let Some(element) = decode(element) else {
                    continue;
                };
                if !live(element.created_ms, now_ms, ttl_ms) {
                    continue;
                }
                let score = similarity(&element.vector, vector);
                scored.push((element, score));
            }
            let mut nearest = Nearest {
                score: scored.iter().map(|s| s.1).reduce(f32::max),
                ..Nearest::default()
            };
            let Some((id, score)) = candidates(scored, threshold)
                .into_iter()
                .find(|(element, _)| {
                    let taken = accept(element.question);
                    nearest.rejected += u32::from(!taken);
                    taken
                })
                .map(|(element, score)| (element.id.to_vec(), score))
            else {
                return Ok(nearest);
            };
            let body: Option<Vec<u8>> = self
                .bounded(
                    "get",
                    redis::cmd("GET")
                        .arg(body_key(scope, &id))
                        .query_async(&mut conn),
                )
                .await?;
            nearest.score = Some(score);
            nearest.body = body.map(Bytes::from);
            Ok(nearest)
        })
    }

    fn insert<'a>(
        &'a self,
        scope: &'a Scope,
        vector: &'a [f32],
        question: &'a str,
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
                .arg(encode(&id, now_ms, vector, question))
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
        let element = encode(&id, 1_234, &vector, "convert 5 km to miles");
        assert_eq!(element.len(), HEADER + 12 + 21);
        assert_eq!(
            decode(&element),
            Some(Element {
                id: &id,
                created_ms: 1_234,
                vector: vector.clone(),
                question: "convert 5 km to miles",
            })
        );
        assert_eq!(decode(&element[..HEADER - 1]), None);
        assert_eq!(decode(&element[..HEADER + 3]), None);
        // The earlier layout (`id | created | embedding`, no tag) is not read.
        let mut earlier = id.to_vec();
        earlier.extend_from_slice(&1_234u64.to_le_bytes());
        earlier.extend_from_slice(&[0u8; 12]);
        assert_eq!(decode(&earlier), None);
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
