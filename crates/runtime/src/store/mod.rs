//! The store layer under every shared state of the runtime: the one error stores answer
//! ([`StoreError`]), every Redis key name ([`KeySpace`]), the Redis links and the per-kind store
//! registries ([`Links`], [`StoreSet`]) with every store timeout ([`Timeouts`]), the one
//! `failure.store` verdict ([`failure`]) and the stores' clock ([`clock`]).
//!
//! The stores themselves — pins (`session::store`), cached answers (`cache::store`), stored
//! responses (`responses_state::store`), shared cooldowns (`cooldown`) and the shared model memo
//! (`models::shared_memo`) — live with what they serve and are built on this layer. It imports
//! nothing from them, nor from the pipeline, the console or the models: a new store kind (Redis
//! Cluster, Sentinel, a vector database) starts here.
//!
//! - [`error`]: [`StoreError`], one for every store;
//! - [`keyspace`]: [`KeySpace`], every key the runtime writes and its Cluster hash tag;
//! - [`link`]: lazily connected, time-bounded Redis connections, one per serving shard, that
//!   send a command again once on a fresh connection when the pooled one had died;
//! - [`topology`]: those connections to one server, a Redis Cluster or a Sentinel set's primary,
//!   and a script's body for a node that answers `NOSCRIPT`;
//! - [`breaker`]: the circuit breaker of a Redis, as a state machine without IO;
//! - [`health`]: that breaker on real time, its prober, its log lines and the link metrics;
//! - [`survey`]: what a store's servers say it is made of (masters, replicas, slots), for
//!   `src doctor`;
//! - [`registry`]: [`Links`] (one link per Redis, shared), [`StoreSet`] (the stores built for
//!   the policies' store declarations) and [`Timeouts`];
//! - [`failure`]: `failure.store = open | closed`, logged once;
//! - [`clock`]: Unix milliseconds, from the system or moved by hand.

pub mod breaker;
pub mod clock;
pub mod error;
pub mod failure;
pub mod health;
pub mod keyspace;
pub mod link;
pub mod registry;
pub mod survey;
pub mod topology;

pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{StoreError, StoreErrorLabels};
pub use health::LinkMetrics;
pub use keyspace::KeySpace;
pub use link::Redis;
pub use registry::{kind_of, Links, StoreSet, Timeouts, DEFAULT_TIMEOUT};
