//! The route table of the generated Envoy configuration, in match order:
//!
//! 1. what the external processor does not decide but the router's own HTTP listener answers
//!    (`GET /v1/models`, the logical models; `POST /v1/messages`, which needs its answer
//!    translated; `/v1/router/` reports) goes to the router's listener, without asking the
//!    processor;
//! 2. one route per served id and backend, matching `x-selected-model` (and `x-sr-backend` when
//!    the id is bound on several backends) to the cluster of that backend;
//! 3. the rest: refused with a JSON 404 failing closed; failing open, the default route's
//!    backend as the client wrote it.
//!
//! Forwarding routes have no total deadline (`timeout: 0s`): a backend's `timeout` is how long
//! it may stay silent, as in `src serve`, so it is the route's `idle_timeout`, and a stream that
//! keeps talking lasts as long as it needs.

use super::{seconds, Endpoint, DEFAULT_BACKEND_TIMEOUT, ROUTER_CLUSTER};
use anyhow::Result;
use serde_json::{json, Value};
use src_compiler::hir::CheckedPolicy;
use src_runtime::headers;
use std::time::Duration;

/// Paths the router's HTTP listener answers that the external processor passes undecided:
/// (match kind, path).
const ROUTER_PATHS: [(&str, &str); 3] = [
    ("path", "/v1/models"),
    ("path", "/v1/messages"),
    ("prefix", "/v1/router/"),
];

/// The 404 of a request no route takes, in the OpenAI error shape the router answers with.
const UNROUTED_BODY: &str = "{\"error\":{\"message\":\"no route for this request: the gateway \
    forwards the requests the router decides (POST /v1/chat/completions, POST /v1/responses) \
    and the paths the router answers itself\",\"type\":\"invalid_request_error\",\"param\":null,\
    \"code\":\"not_found\"}}";

/// One backend as the gateway sends to it.
pub struct Backend {
    pub name: String,
    pub cluster: String,
    pub endpoint: Endpoint,
    /// How long it may stay silent.
    pub idle: Duration,
}

/// The policy's backends and which serve each served id.
pub struct Table {
    /// In declaration order.
    pub backends: Vec<Backend>,
    /// Served id → the indexes of the backends serving it, in declaration order, no repeats;
    /// ids in the order models are declared.
    pub serving: Vec<(String, Vec<usize>)>,
}

impl Table {
    pub fn of(checked: &CheckedPolicy) -> Result<Table> {
        let mut backends = Vec::new();
        for backend in &checked.backends {
            backends.push(Backend {
                name: backend.name.clone(),
                cluster: format!("backend_{}", backend.name),
                endpoint: Endpoint::of(backend)?,
                idle: backend
                    .timeout_ms
                    .map(Duration::from_millis)
                    .unwrap_or(DEFAULT_BACKEND_TIMEOUT),
            });
        }
        let mut serving: Vec<(String, Vec<usize>)> = Vec::new();
        for model in &checked.models {
            let backend = model.backend.index();
            match serving.iter_mut().find(|(id, _)| *id == model.serves) {
                Some((_, list)) if !list.contains(&backend) => list.push(backend),
                Some(_) => {}
                None => serving.push((model.serves.clone(), vec![backend])),
            }
        }
        Ok(Table { backends, serving })
    }

    /// The default route's served id and the index of its backend.
    pub fn default_model<'a>(&self, checked: &'a CheckedPolicy) -> (&'a str, usize) {
        let model = &checked.models[checked.routes[checked.default_route().index()].to.index()];
        (model.serves.as_str(), model.backend.index())
    }

    /// The routes, in match order.
    pub fn routes(&self, checked: &CheckedPolicy, fail_open: bool) -> Vec<Value> {
        let mut routes: Vec<Value> = ROUTER_PATHS
            .iter()
            .map(|(kind, path)| self.to_router(kind, path))
            .collect();
        for (served, backends) in &self.serving {
            for &index in backends {
                let backend = &self.backends[index];
                let mut matched = vec![json!({
                    "name": headers::SELECTED_MODEL,
                    "string_match": {"exact": served},
                })];
                if backends.len() > 1 {
                    matched.push(json!({
                        "name": headers::SR_BACKEND,
                        "string_match": {"exact": backend.name},
                    }));
                }
                routes.push(json!({
                    "name": format!("{}/{served}", backend.name),
                    "match": {"prefix": "/v1/", "headers": matched},
                    "route": forward(backend),
                }));
            }
        }
        let (_, default) = self.default_model(checked);
        routes.push(match self.backends.get(default) {
            Some(backend) if fail_open => json!({
                "name": "unrouted",
                "match": {"prefix": "/"},
                "route": forward(backend),
            }),
            _ => json!({
                "name": "unrouted",
                "match": {"prefix": "/"},
                "direct_response": {"status": 404, "body": {"inline_string": UNROUTED_BODY}},
                "response_headers_to_add": [{
                    "header": {"key": "content-type", "value": headers::APPLICATION_JSON},
                    "append_action": "OVERWRITE_IF_EXISTS_OR_ADD",
                }],
            }),
        });
        routes
    }

    /// A path the router's listener answers. The router applies each backend's silence limit
    /// itself; the route allows the longest of them. The processor is not asked: the router
    /// decides these requests itself (and the fail-open fallback leaves their paths alone).
    fn to_router(&self, kind: &str, path: &str) -> Value {
        let idle = self
            .backends
            .iter()
            .map(|b| b.idle)
            .max()
            .unwrap_or(DEFAULT_BACKEND_TIMEOUT);
        json!({
            "name": format!("router{path}"),
            "match": {kind: path},
            "route": {
                "cluster": ROUTER_CLUSTER,
                "timeout": seconds(Duration::ZERO),
                "idle_timeout": seconds(idle),
            },
            "typed_per_filter_config": {
                "envoy.filters.http.ext_proc": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute",
                    "disabled": true,
                },
            },
        })
    }
}

/// Sends to `backend`'s cluster, with the path's `/v1` replaced by the backend's base path when
/// it has another one, and the backend's own host name in `Host` (virtual-hosted and TLS
/// backends need it). No total deadline; the backend's silence limit.
fn forward(backend: &Backend) -> Value {
    let mut action = json!({
        "cluster": backend.cluster,
        "timeout": seconds(Duration::ZERO),
        "idle_timeout": seconds(backend.idle),
        "host_rewrite_literal": backend.endpoint.authority(),
    });
    if backend.endpoint.path != "/v1" {
        action["prefix_rewrite"] = json!(format!("{}/", backend.endpoint.path));
    }
    action
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unrouted_answer_is_an_openai_error() {
        let body: Value = serde_json::from_str(UNROUTED_BODY).unwrap_or_default();
        assert_eq!(body["error"]["code"], "not_found");
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert!(body["error"]["message"].is_string());
    }
}
