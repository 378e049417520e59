//! Test support shared by the workspace's integration tests, so that each test says what it
//! checks and not how to reach a server: an HTTP client ([`http`]), a real `src serve` spawned
//! in-process over a policy in a temporary directory ([`router`]), a real `redis-server` on a
//! free port ([`redis`]) and a six-node Redis Cluster or a Sentinel set ([`redis_topology`]),
//! upstreams that record what the router sent and answer as scripted
//! ([`upstream`]) or fail on purpose at the TCP level ([`fault`]), an Envoy `ext_proc` client
//! ([`extproc`]), every front door driven alike ([`doors`]), the built-in simulator's client
//! ([`sim`]), the model and cache harnesses ([`models`], [`cache`]), the session fixture ([`sessions`]), and the check every log
//! line must pass with a writer to read a log back ([`log_lines`]).
//!
//! It links `src-runtime`, so it is only ever a dev-dependency: the runtime's own unit tests keep
//! their fakes in the runtime crate (a second copy of its types would not be theirs).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test support: a failed step fails the test that asked for it"
)]

use std::time::Duration;

pub mod cache;
pub mod doors;
pub mod extproc;
pub mod fault;
pub mod http;
pub mod log_lines;
pub mod milvus;
pub mod models;
mod process;
pub mod redis;
pub mod redis_topology;
pub mod router;
pub mod sessions;
pub mod sim;
pub mod upstream;

pub use http::{raw_exchange, Answer, Http};
pub use router::{config, one_model, user, Router, POLICY};

/// A port free on `127.0.0.1` right now (for a server that must be given one, not `0`).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port on 127.0.0.1")
}

/// What a test returns: any error fails it with its message.
pub type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Bounded waits for things that happen asynchronously (a log line, a reload): generous, since
/// they only bound a failure, never measure speed.
pub const PATIENCE: Duration = Duration::from_secs(20);
