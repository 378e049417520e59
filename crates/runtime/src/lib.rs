//! The runtime side of `src`: what runs while policies serve traffic.
//!
//! So far: [`sim`], an OpenAI-compatible simulated backend with a latency model and a prefix
//! cache; [`openai`], the wire-format pieces (error bodies, usage evidence) shared by every
//! server here; and the names of [`metrics`] and [`headers`], kept in one place each.

pub mod headers;
pub mod metrics;
pub mod openai;
pub mod sim;

pub mod app;
pub mod backends;
pub mod cache;
pub mod catalog;
pub mod config;
pub mod hooks;
pub mod log;
pub mod models;
pub mod pipeline;
pub mod policy_store;
pub mod readiness;
mod redis_link;
pub mod reload;
pub mod server;
pub mod session;
pub mod telemetry;
pub mod tls;
pub mod trace;
pub mod upstream;

pub use app::Components;
pub use config::{ServeArgs, ServeConfig};
pub use server::{serve, spawn, ServeError, ServerHandle};
