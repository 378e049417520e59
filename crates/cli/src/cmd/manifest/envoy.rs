//! `src manifest --format envoy`: a complete Envoy v3 static configuration for running `src` as
//! the gateway's external processor.
//!
//! The listener's `http_connection_manager` runs `envoy.filters.http.ext_proc` (gRPC to `src`
//! on a STATIC or DNS cluster speaking HTTP/2) and then the router. The ExtProc rewrites the
//! body's `model` and sets `x-selected-model` (the served id) and `x-sr-backend` (the backend's
//! policy name); `route_cache_action: CLEAR` makes Envoy pick the route again after that
//! mutation, and the routes send each served id to the cluster of the backend serving it (both
//! headers are matched when one id is bound on several backends). `failure_mode_allow` is false
//! unless `--fail-open`, which policies with blocks or guards may not use: an unreachable
//! ExtProc must not let a request past its safety gates.

use super::{Endpoint, Options};
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use src_compiler::hir::CheckedPolicy;
use std::collections::BTreeMap;
use std::time::Duration;

/// Upstream response time allowed when a backend declares no `timeout` (as `src serve`).
const DEFAULT_ROUTE_TIMEOUT: Duration = Duration::from_secs(300);
const EXTPROC_CLUSTER: &str = "src_extproc";

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

/// What the filter sends the router. Failing closed, the body goes `FULL_DUPLEX_STREAMED`:
/// headers and body are answered together once the body is whole, one round trip for the
/// decision (the mode needs the trailers, which can end a body). Failing open it goes
/// `BUFFERED`: Envoy can only pass a request on without the router if it kept the body itself.
fn processing_mode(fail_open: bool) -> Value {
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
        "response_body_mode": "NONE",
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

/// A cluster of one endpoint: STATIC for an IP address, STRICT_DNS for a name.
fn cluster(name: &str, host: &str, port: u16, connect_timeout: Duration) -> Value {
    let kind = if host.parse::<std::net::IpAddr>().is_ok() {
        "STATIC"
    } else {
        "STRICT_DNS"
    };
    json!({
        "name": name,
        "type": kind,
        "connect_timeout": seconds(connect_timeout),
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": address(host, port)}}]}],
        },
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
    let (extproc_host, extproc_port) = opts.extproc()?;
    // The same timeout `src check --envoy` asks for.
    let program = src_compiler::ir::lower(checked).context("cannot lower the policy")?;
    let timeout = crate::cmd::envoy::message_timeout(checked, &program, opts.model_timeout);
    let mut clusters = vec![{
        let mut c = cluster(
            EXTPROC_CLUSTER,
            &extproc_host,
            extproc_port,
            Duration::from_secs(1),
        );
        c["typed_extension_protocol_options"] = json!({
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}},
            }
        });
        c
    }];
    let mut backend_cluster = BTreeMap::new();
    for backend in &checked.backends {
        let endpoint = Endpoint::of(backend)?;
        let name = format!("backend_{}", backend.name);
        let mut c = cluster(&name, &endpoint.host, endpoint.port, Duration::from_secs(5));
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
        clusters.push(c);
        backend_cluster.insert(backend.name.clone(), (name, endpoint, backend.timeout_ms));
    }
    // Served id → the backends serving it, in declaration order, without repeats.
    let mut serving: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for model in &checked.models {
        let backend = checked.backends[model.backend.index()].name.as_str();
        let list = serving.entry(model.serves.as_str()).or_default();
        if !list.contains(&backend) {
            list.push(backend);
        }
    }
    let mut routes = Vec::new();
    for (served, backends) in &serving {
        for backend in backends {
            let Some((cluster, endpoint, timeout_ms)) = backend_cluster.get(*backend) else {
                continue;
            };
            let mut headers = vec![json!({
                "name": "x-selected-model",
                "string_match": {"exact": served},
            })];
            if backends.len() > 1 {
                headers.push(json!({"name": "x-sr-backend", "string_match": {"exact": backend}}));
            }
            routes.push(json!({
                "name": format!("{backend}/{served}"),
                "match": {"prefix": "/v1/", "headers": headers},
                "route": route_action(cluster, endpoint, *timeout_ms),
            }));
        }
    }
    routes.push(fallthrough(checked, opts, &backend_cluster));
    let ext_proc = json!({
        "name": "envoy.filters.http.ext_proc",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor",
            "grpc_service": {
                "envoy_grpc": {"cluster_name": EXTPROC_CLUSTER},
                "timeout": seconds(timeout),
            },
            "failure_mode_allow": opts.fail_open,
            "message_timeout": seconds(timeout),
            "processing_mode": processing_mode(opts.fail_open),
            "route_cache_action": "CLEAR",
        }
    });
    let (listen_host, listen_port) = opts.listen()?;
    Ok(json!({
        "admin": {"address": address("127.0.0.1", opts.envoy_admin_port)},
        "static_resources": {
            "listeners": [{
                "name": "src_gateway",
                "address": address(&listen_host, listen_port),
                "filter_chains": [{"filters": [{
                    "name": "envoy.filters.network.http_connection_manager",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                        "stat_prefix": "src_gateway",
                        "route_config": {
                            "name": "src_models",
                            "virtual_hosts": [{
                                "name": "models",
                                "domains": ["*"],
                                "routes": routes,
                            }],
                        },
                        "http_filters": [
                            ext_proc,
                            {
                                "name": "envoy.filters.http.router",
                                "typed_config": {
                                    "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
                                },
                            },
                        ],
                    },
                }]}],
            }],
            "clusters": clusters,
        },
    }))
}

/// Sends to `cluster`, with the path's `/v1` replaced by the backend's base path when it has
/// another one, and the backend's own host name in `Host` (virtual-hosted and TLS backends
/// need it).
fn route_action(cluster: &str, endpoint: &Endpoint, timeout_ms: Option<u64>) -> Value {
    let timeout = timeout_ms
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_ROUTE_TIMEOUT);
    let mut action = json!({
        "cluster": cluster,
        "timeout": seconds(timeout),
        "host_rewrite_literal": endpoint.authority(),
    });
    if endpoint.path != "/v1" {
        action["prefix_rewrite"] = json!(format!("{}/", endpoint.path));
    }
    action
}

/// A request without a served id to route on. Fail-closed: the ExtProc answers every request
/// it decides (with a mutation or an immediate answer), so this is a request it did not see:
/// refuse it. Fail-open: the ExtProc may be down; send the request as the client wrote it to
/// the default route's backend.
fn fallthrough(
    checked: &CheckedPolicy,
    opts: &Options,
    clusters: &BTreeMap<String, (String, Endpoint, Option<u64>)>,
) -> Value {
    let default_model = &checked.models[checked.routes[checked.default_route().index()].to.index()];
    let default_backend = &checked.backends[default_model.backend.index()].name;
    match clusters.get(default_backend) {
        Some((cluster, endpoint, timeout_ms)) if opts.fail_open => json!({
            "name": "unrouted",
            "match": {"prefix": "/"},
            "route": route_action(cluster, endpoint, *timeout_ms),
        }),
        _ => json!({
            "name": "unrouted",
            "match": {"prefix": "/"},
            "direct_response": {
                "status": 404,
                "body": {"inline_string": "{\"error\":{\"message\":\"no model was selected for this request\",\"type\":\"invalid_request_error\",\"code\":\"model_not_found\"}}"},
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_as_envoy_reads_them() {
        assert_eq!(seconds(Duration::from_millis(2450)), "2.450s");
        assert_eq!(seconds(Duration::from_secs(300)), "300.000s");
    }
}
