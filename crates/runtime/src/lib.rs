//! The runtime side of `src`: what runs while policies serve traffic (`src serve`).
//!
//! Modules are layered, and each imports only from the layers below its own.
//!
//! **Composition root**: the running server.
//! - [`app`]: the server's shared state ([`App`](app::App)) and its pluggable [`Components`].
//! - [`server`]: the listeners, the route table, the admin answers and the backend probes.
//! - [`door`]: the front-door driver, and the chat, Responses and Messages doors over it.
//! - [`extproc`]: the Envoy front door (`ext_proc` v3 gRPC) over the same pipeline steps.
//! - [`reload`]: policy file watching, SIGHUP, recompiling and swapping the snapshot.
//!
//! **Request pipeline**: one module per step of a proxied request.
//! - [`pipeline`]: intake, decide, cache step, signals, forward, answer, relayed body, completion.
//! - [`anthropic`]: the Messages front door, and its translation for OpenAI-only backends.
//!
//! **Libraries**: know nothing of the server or of HTTP answers.
//! - [`policy_store`]: the compiled policy and its lookup tables, swapped whole per reload.
//! - [`cache`]: the response cache's scopes, stores, fills and stream assembly.
//! - [`session`]: session identity, pins, `protect` holds and their stores.
//! - [`models`]: the ONNX model runtime behind model-backed signals.
//! - [`backends`]: backend endpoints and the pool of simulated backends.
//! - [`readiness`]: the last probe of each backend and the `/readyz` report.
//! - [`record`]: `--record`: decided requests appended to bounded files for `src whatif`.
//! - [`catalog`]: what a backend says it serves, for `src check --live`.
//! - [`sim`]: an OpenAI-compatible simulated backend with a latency model and a prefix cache.
//! - `redis_link`: the lazily connected, time-bounded Redis connections the stores share.
//! - `shard`: which serving shard a thread is, and values kept one per shard.
//!
//! **Leaves**: import no layer above.
//! - [`hooks`]: the component traits the pipeline calls (model signals, sessions).
//! - [`openai`]: the wire format: the two APIs, error bodies, usage evidence.
//! - [`config`]: the serve settings and their environment overrides.
//! - [`upstream`]: the pooled HTTP clients and how their failures are classified.
//! - [`tls`]: the TLS client configuration backends are reached with.
//! - [`telemetry`]: the server's Prometheus registry and label sets.
//! - [`metrics`]: every metric name.
//! - [`exposition`]: the metrics text formats and their negotiation on `Accept`.
//! - [`headers`]: every header name and fixed value.
//! - [`hex`]: bytes as lowercase hexadecimal.
//! - [`limits`]: the bounds on one client connection (timeouts, head size, connection count).
//! - [`log`]: the tracing subscriber and the one line written per request.
//! - [`trace`]: request ids and W3C trace context.
//! - [`otel`]: OpenTelemetry spans of a request's phases and their OTLP export.

pub mod app;
pub mod console;
pub mod door;
pub mod extproc;
pub mod reload;
pub mod server;

pub mod anthropic;
pub mod pipeline;
pub mod relay;

pub mod backends;
pub mod cache;
pub mod catalog;
pub mod models;
pub mod policy_store;
pub mod readiness;
pub mod record;
mod redis_link;
pub mod responses_state;
pub mod session;
mod shard;
pub mod sim;

pub mod config;
pub mod cooldown;
pub mod exposition;
pub mod headers;
pub mod hex;
pub mod hooks;
pub mod limits;
pub mod log;
pub mod metrics;
pub mod openai;
pub mod otel;
pub mod telemetry;
pub mod tls;
pub mod trace;
pub mod upstream;
pub mod watch;

pub use app::Components;
pub use config::{AdminToken, ServeArgs, ServeConfig};
pub use server::{serve, spawn, ServeError, ServerHandle};
