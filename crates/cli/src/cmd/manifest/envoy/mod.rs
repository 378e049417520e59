//! `src manifest --format envoy`: a complete Envoy v3 static configuration for running `src` as
//! the gateway's external processor, written to survive the router's faults.
//!
//! The listener's `http_connection_manager` runs, in order:
//!
//! 1. `envoy.filters.http.header_mutation`: a client's router-owned headers (`x-sr-*`,
//!    `x-selected-model`, `x-gateway-model-name`, `x-dynamo-session-id`) are removed before
//!    anything reads them, so none reaches a backend or steers a route even when the router is
//!    not asked;
//! 2. `envoy.filters.http.ext_proc` (gRPC to `src` on a cluster speaking HTTP/2): the router
//!    rewrites the body's `model` and sets `x-selected-model` (the served id) and `x-sr-backend`
//!    (the backend's policy name); `route_cache_action: CLEAR` makes Envoy pick the route again
//!    after that mutation, and the routes ([`routes`]) send each served id to the cluster of the
//!    backend serving it;
//! 3. with `--fail-open` only, `envoy.filters.http.lua` ([`fallback`]): a request the router did
//!    not decide goes to the default route's model instead of every backend's 404;
//! 4. the router.
//!
//! Deadlines ([`Deadlines`]): the router has `message_timeout` to decide, but Envoy does not
//! time a full-duplex exchange (neither `message_timeout` nor the gRPC service's `timeout`
//! applies to it), so the connection manager's `stream_idle_timeout` bounds it: a stalled
//! router is answered 504 within the decision deadline. Every forwarding route then sets its own
//! `idle_timeout` (a backend's `timeout` is a silence limit, as in `src serve`) and no total
//! deadline, so a long stream that keeps talking is never cut. Envoy's own failures are
//! answered in the router's JSON error shape ([`replies`]), and every cluster's circuit breakers
//! are raised from Envoy's 1,024 to `--max-requests`.
//!
//! `failure_mode_allow` is false unless `--fail-open`, which policies with blocks or guards may
//! not use: an unreachable ExtProc must not let a request past its safety gates.

mod fallback;
mod replies;
mod routes;

use super::{Endpoint, Options};
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use src_compiler::hir::{BudgetUnit, CheckedPolicy};
use src_runtime::headers;
use std::time::Duration;

/// The silence a backend may keep when it declares no `timeout` (as `src serve`).
const DEFAULT_BACKEND_TIMEOUT: Duration = Duration::from_secs(300);
/// What a decision may take beyond `message_timeout` before Envoy gives up on the router: the
/// client's own pauses while its body arrives (they count as the stream's silence too) and the
/// trip to the router.
const DECISION_GRACE: Duration = Duration::from_secs(1);
/// How often Envoy pings its HTTP/2 connections to the router, so that one to a stopped
/// process is closed instead of kept for every new request.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
pub const EXTPROC_CLUSTER: &str = "src_extproc";
/// The router's own HTTP listener, for what the external processor does not decide.
pub const ROUTER_CLUSTER: &str = "src_http";
const STAT_PREFIX: &str = "src_gateway";

/// Why a policy needs a fail-closed gateway, if it does.
pub fn fail_closed_reason(checked: &CheckedPolicy) -> Option<String> {
    if let Some(block) = checked.blocks.first() {
        return Some(format!("it has blocks (`{}`)", block.name));
    }
    checked
        .guards
        .first()
        .map(|g| format!("it has guards (`{}`)", g.name))
}

/// The times a gateway holds a request to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// What the router may take to decide (`message_timeout`).
    pub message: Duration,
    /// When a request the router has not answered is answered 504: the connection manager's
    /// `stream_idle_timeout`, which governs a request until a forwarding route replaces it.
    pub decision: Duration,
}

impl Deadlines {
    pub fn of(checked: &CheckedPolicy, model_timeout: Duration) -> Result<Deadlines> {
        let program = src_compiler::ir::lower(checked).context("cannot lower the policy")?;
        // The same timeout `src check --envoy` asks for.
        let message = crate::cmd::envoy::message_timeout(checked, &program, model_timeout);
        Ok(Deadlines {
            message,
            decision: message + DECISION_GRACE,
        })
    }
}

/// Whether the router must read answers' bodies: the policy has `tokens` or `cost` budgets,
/// charged the usage an answer reports (a streamed chat answer is asked for it, and that chunk
/// taken out of what the client gets).
pub fn reads_usage(checked: &CheckedPolicy) -> bool {
    checked
        .budgets
        .iter()
        .any(|b| b.unit != BudgetUnit::Requests)
}

/// What the filter sends the router. Failing closed, the body goes `FULL_DUPLEX_STREAMED`:
/// headers and body are answered together once the body is whole, one round trip for the
/// decision (the mode needs the trailers, which can end a body). Failing open it goes
/// `BUFFERED`: Envoy can only pass a request on without the router if it kept the body itself.
/// The answer's body is sent `STREAMED` only when the router reads usage from it
/// ([`reads_usage`]): each chunk then waits for the router's answer, which costs a round trip
/// to it per chunk.
fn processing_mode(fail_open: bool, usage: bool) -> Value {
    let (body, trailers) = if fail_open {
        ("BUFFERED", "SKIP")
    } else {
        ("FULL_DUPLEX_STREAMED", "SEND")
    };
    json!({
        "request_header_mode": "SEND",
        "request_body_mode": body,
        "request_trailer_mode": trailers,
        "response_header_mode": "SEND",
        "response_body_mode": if usage { "STREAMED" } else { "NONE" },
        "response_trailer_mode": "SKIP",
    })
}

/// Envoy's duration form: `2.450s`.
fn seconds(d: Duration) -> String {
    format!("{}.{:03}s", d.as_secs(), d.subsec_millis())
}

fn address(host: &str, port: u16) -> Value {
    json!({"socket_address": {"address": host, "port_value": port}})
}

/// A cluster of one endpoint: STATIC for an IP address, STRICT_DNS for a name. Its circuit
/// breakers allow `max_requests` of everything at once (Envoy's defaults: 1,024 connections,
/// pending and active requests, 3 retries).
fn cluster(
    name: &str,
    host: &str,
    port: u16,
    connect_timeout: Duration,
    max_requests: u32,
) -> Value {
    let kind = if host.parse::<std::net::IpAddr>().is_ok() {
        "STATIC"
    } else {
        "STRICT_DNS"
    };
    json!({
        "name": name,
        "type": kind,
        "connect_timeout": seconds(connect_timeout),
        "circuit_breakers": {"thresholds": [{
            "priority": "DEFAULT",
            "max_connections": max_requests,
            "max_pending_requests": max_requests,
            "max_requests": max_requests,
            "max_retries": max_requests,
        }]},
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": address(host, port)}}]}],
        },
    })
}

/// The router's external processor: gRPC over HTTP/2, pinged so that a connection to a
/// stopped router is dropped within the decision deadline.
fn extproc_cluster(opts: &Options, deadlines: Deadlines) -> Result<Value> {
    let (host, port) = opts.extproc()?;
    let mut c = cluster(
        EXTPROC_CLUSTER,
        &host,
        port,
        Duration::from_secs(1),
        opts.max_requests,
    );
    c["typed_extension_protocol_options"] = json!({
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            "explicit_http_config": {"http2_protocol_options": {
                "connection_keepalive": {
                    "interval": seconds(KEEPALIVE_INTERVAL),
                    "timeout": seconds(deadlines.decision),
                },
            }},
        }
    });
    Ok(c)
}

fn backend_cluster(name: &str, endpoint: &Endpoint, max_requests: u32) -> Value {
    let mut c = cluster(
        name,
        &endpoint.host,
        endpoint.port,
        Duration::from_secs(5),
        max_requests,
    );
    if endpoint.tls {
        c["transport_socket"] = json!({
            "name": "envoy.transport_sockets.tls",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                "sni": endpoint.host,
                "common_tls_context": {
                    "validation_context": {
                        "trusted_ca": {"filename": "/etc/ssl/certs/ca-certificates.crt"}
                    }
                },
            }
        });
    }
    c
}

/// Removes the headers only the router may set, before the external processor runs: the
/// router sets them afresh when it decides, and nothing else may.
fn strip_router_headers() -> Value {
    let mut mutations =
        vec![json!({"remove_on_match": {"key_matcher": {"prefix": headers::SR_PREFIX}}})];
    mutations.extend(
        headers::ROUTER_SET
            .iter()
            .filter(|name| !name.starts_with(headers::SR_PREFIX))
            .map(|name| json!({"remove": name})),
    );
    json!({
        "name": "envoy.filters.http.header_mutation",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation",
            "mutations": {"request_mutations": mutations},
        },
    })
}

fn ext_proc(opts: &Options, deadlines: Deadlines, usage: bool) -> Value {
    json!({
        "name": "envoy.filters.http.ext_proc",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor",
            "grpc_service": {
                "envoy_grpc": {"cluster_name": EXTPROC_CLUSTER},
                "timeout": seconds(deadlines.message),
            },
            "failure_mode_allow": opts.fail_open,
            // A router that cannot be reached is unavailable (the router's own 503), not an
            // internal error of the gateway.
            "status_on_error": {"code": 503},
            "message_timeout": seconds(deadlines.message),
            "processing_mode": processing_mode(opts.fail_open, usage),
            "route_cache_action": "CLEAR",
        }
    })
}

/// The configuration as one YAML-ready value.
pub fn config(checked: &CheckedPolicy, opts: &Options) -> Result<Value> {
    if opts.fail_open {
        if let Some(why) = fail_closed_reason(checked) {
            bail!(
                "--fail-open refused: {why}, and a gateway that lets requests through when the \
                 external processor is unreachable would skip them; deploy it fail-closed"
            );
        }
    }
    let deadlines = Deadlines::of(checked, opts.model_timeout)?;
    let table = routes::Table::of(checked)?;
    let (router_host, router_port) = opts.router()?;
    let mut clusters = vec![
        extproc_cluster(opts, deadlines)?,
        cluster(
            ROUTER_CLUSTER,
            &router_host,
            router_port,
            Duration::from_secs(1),
            opts.max_requests,
        ),
    ];
    clusters.extend(
        table
            .backends
            .iter()
            .map(|b| backend_cluster(&b.cluster, &b.endpoint, opts.max_requests)),
    );
    let mut filters = vec![
        strip_router_headers(),
        ext_proc(opts, deadlines, reads_usage(checked)),
    ];
    if opts.fail_open {
        filters.push(fallback::filter(checked, &table));
    }
    filters.push(json!({
        "name": "envoy.filters.http.router",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
        },
    }));
    let (listen_host, listen_port) = opts.listen()?;
    Ok(json!({
        "admin": {"address": address("127.0.0.1", opts.envoy_admin_port)},
        "static_resources": {
            "listeners": [{
                "name": STAT_PREFIX,
                "address": address(&listen_host, listen_port),
                "filter_chains": [{"filters": [{
                    "name": "envoy.filters.network.http_connection_manager",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                        "stat_prefix": STAT_PREFIX,
                        "stream_idle_timeout": seconds(deadlines.decision),
                        "local_reply_config": replies::local_reply_config(),
                        "route_config": {
                            "name": "src_models",
                            "virtual_hosts": [{
                                "name": "models",
                                "domains": ["*"],
                                "routes": table.routes(checked, opts.fail_open),
                            }],
                        },
                        "http_filters": filters,
                    },
                }]}],
            }],
            "clusters": clusters,
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_as_envoy_reads_them() {
        assert_eq!(seconds(Duration::from_millis(2450)), "2.450s");
        assert_eq!(seconds(Duration::from_secs(300)), "300.000s");
        assert_eq!(seconds(Duration::ZERO), "0.000s");
    }
}
