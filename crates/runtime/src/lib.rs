//! The runtime side of `src`: what runs while policies serve traffic (`src serve`).
//!
//! The top-level modules form layers: a module uses only modules of lower layers, never one of
//! its own layer or above, so no two modules import each other, however indirectly. Unit tests
//! follow the same rule. From the bottom:
//!
//! 0. Leaves, using no other module of the crate:
//!    - [`headers`]: every header name and fixed value.
//!    - [`credentials`]: what counts as a client's credential, in headers and policy expressions.
//!    - [`metrics`]: every metric name.
//!    - [`exposition`]: the metrics text formats and their negotiation on `Accept`.
//!    - [`hex`]: bytes as lowercase hexadecimal.
//!    - [`limits`]: the bounds on one client connection (timeouts, head size, connection count).
//!    - [`tls`]: the TLS client configuration backends are reached with.
//!    - [`log`]: the tracing subscriber, and the record and the one line of a finished request.
//!    - [`record`]: `--record`: decided requests appended to bounded files for `src whatif`.
//!    - `shard`: which serving shard a thread is, and values kept one per shard.
//! 1. Over the leaves:
//!    - [`openai`]: the wire format: the two APIs, error bodies, usage evidence.
//!    - [`trace`]: request ids and W3C trace context.
//!    - [`upstream`]: the pooled HTTP clients and how their failures are classified.
//!    - [`store`]: the layer under every store: one error, every Redis key name, the shared
//!      Redis links and store registries with their timeouts, `failure.store`, the stores' clock.
//! 2. Over the wire format and the clients:
//!    - [`hooks`]: the component traits the pipeline calls (model signals, sessions).
//!    - [`otel`]: OpenTelemetry spans of a request's phases and their OTLP export.
//!    - [`sim`]: an OpenAI-compatible simulated backend with a latency model and a prefix cache.
//!    - [`catalog`]: what a backend says it serves, for `src check --live`.
//! 3. Settings and endpoints:
//!    - [`config`]: the serve settings and their environment overrides.
//!    - `fakes` (tests, `fakes` feature): a model runtime with scripted answers.
//!    - [`backends`]: backend endpoints and the pool of simulated backends.
//! 4. The policy and the sessions:
//!    - [`policy_store`]: the compiled policy and its lookup tables, swapped whole per reload.
//!    - [`session`]: session identity, pins, `protect` holds and their stores.
//! 5. Over the sessions:
//!    - [`models`]: the ONNX model runtime behind model-backed signals.
//!    - [`watch`]: what the request path keeps for the console's watchers: the live feed, each
//!      session's recent decisions, the request counts, who sent a request.
//! 6. [`telemetry`]: the server's Prometheus registry and label sets, the spans, and the
//!    console's feed and counts it holds.
//! 7. What reports to the telemetry:
//!    - [`cache`]: the response cache's scopes, stores, fills and stream assembly.
//!    - [`cooldown`]: per-model cooldowns after consecutive failures, shared through Redis.
//! 8. Over the cache and the cooldowns:
//!    - [`relay`]: the response bodies, the relay that streams an upstream answer through, and
//!      the request's completion (its one log line and its metrics).
//!    - [`readiness`]: the last probe of each backend and the `/readyz` report.
//!    - [`secrets`]: taking a known secret out of a text or a relayed error body.
//! 9. [`anthropic`]: the Messages API and its translation for OpenAI-only backends.
//! 10. [`pipeline`]: one module per step of a proxied request: intake, decide, cache step,
//!     signals, forward, answer.
//! 11. [`responses_state`]: stateful `/v1/responses`: kept answers and `previous_response_id`.
//! 12. Over the pipeline:
//!     - [`app`]: the server's shared state ([`App`](app::App)) and its pluggable [`Components`].
//!     - [`door`]: the front-door driver, and the chat, Responses and Messages doors over it.
//! 13. Over the server's state:
//!     - [`console`]: the operator console's page and its JSON/SSE API.
//!     - [`extproc`]: the Envoy front door (`ext_proc` v3 gRPC) over the same pipeline steps.
//!     - [`reload`]: policy file watching, SIGHUP, recompiling and swapping the snapshot.
//! 14. [`server`]: the listeners, the route table, the admin answers and the backend probes.

pub mod anthropic;
pub mod app;
pub mod backends;
pub mod budget;
pub mod cache;
pub mod catalog;
pub mod config;
pub mod console;
pub mod cooldown;
pub mod credentials;
pub mod door;
pub mod exposition;
pub mod extproc;
#[cfg(any(test, feature = "fakes"))]
pub mod fakes;
pub mod headers;
pub mod hex;
pub mod hooks;
pub mod limits;
pub mod log;
pub mod metrics;
pub mod models;
pub mod openai;
pub mod otel;
pub mod pipeline;
pub mod policy_store;
pub mod readiness;
pub mod record;
pub mod relay;
pub mod reload;
pub mod responses_state;
pub mod secrets;
pub mod server;
pub mod session;
mod shard;
pub mod sim;
pub mod store;
pub mod telemetry;
pub mod tls;
pub mod trace;
pub mod upstream;
pub mod watch;

pub use app::Components;
pub use config::{AdminToken, ServeArgs, ServeConfig};
pub use server::{serve, spawn, ServeError, ServerHandle};
