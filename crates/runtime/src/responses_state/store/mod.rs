//! Where stored responses live: one small async trait, an in-process implementation
//! ([`MemoryResponses`], bounded in entries and bytes) and a shared one ([`RedisResponses`])
//! that every router replica reads. Keys are (tenant, response id): a tenant never reads, lists
//! or deletes another's responses. Entries expire `ttl_ms` after they were written.

pub mod memory;
pub mod redis;

pub use self::memory::MemoryResponses;
pub use self::redis::RedisResponses;

use bytes::Bytes;

use crate::hooks::BoxFuture;
use crate::store::StoreError;

/// Stored responses, encoded (see [`crate::responses_state::StoredResponse::encode`]).
pub trait ResponseStore: Send + Sync {
    /// `memory` or `redis`, for logs.
    fn kind(&self) -> &'static str;

    fn get<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Option<Bytes>, StoreError>>;

    /// Stores (or replaces) a response for `ttl_ms`.
    fn put<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        value: Bytes,
        now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Removes a response; `false` when there was none.
    fn delete<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
}
