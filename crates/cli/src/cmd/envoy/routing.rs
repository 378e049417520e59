//! W022: where an Envoy config sends each model's requests. Once the router has decided, a
//! request carries `x-selected-model` (the served id) and `x-sr-backend` (the backend's name)
//! and Envoy picks its route again; the route's cluster must reach the backend that serves the
//! model. For each model, a chat request with those headers is matched against the route table
//! of every connection manager that runs the external processor (its `*` virtual host, or every
//! one when none has `*`), Envoy's first match wins, and the cluster's endpoints are compared
//! with the host and port of the backend's `url`.
//!
//! Only what can be read for sure is judged: a route matching on something this reading does not
//! evaluate (a regular expression, a query parameter, a runtime fraction), a route to a cluster
//! named by a header, a cluster without static endpoints (EDS, a route table from RDS) ends the
//! search for that model without a warning.

use serde_json::Value;
use src_compiler::hir::{BackendDef, CheckedPolicy, ModelDef};
use src_dsl::{codes, Diagnostic};
use src_runtime::headers;
use std::collections::HashMap;

/// The `@type` of the HTTP external processing filter's config.
const EXT_PROC_TYPE: &str = "envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor";
/// The path of the request a model's routing is judged on.
const PROBE_PATH: &str = "/v1/chat/completions";

/// A host and port.
type Address = (String, u16);

/// The route tables and static clusters of an Envoy config.
#[derive(Debug, Clone, Default)]
pub struct Routing {
    /// Each connection manager's routes, in match order, with the manager's name.
    tables: Vec<(String, Vec<Value>)>,
    /// Cluster name → its static endpoints (`None` when it has none this reading can see).
    clusters: HashMap<String, Option<Vec<Address>>>,
}

/// Where a request goes.
#[derive(Debug, Clone, PartialEq)]
enum Destination {
    /// To these clusters (one, or the weighted ones), by the route named so.
    Clusters(Vec<String>, String),
    /// Answered by Envoy itself (a direct response, a redirect) with this status.
    Answered(u64, String),
    /// No route matches: Envoy's 404.
    Nowhere,
    /// Something this reading does not evaluate decides.
    Unknown,
}

impl Routing {
    pub fn of(doc: &Value) -> Routing {
        let mut routing = Routing::default();
        collect(doc, &mut routing);
        for cluster in doc["static_resources"]["clusters"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(name) = cluster["name"].as_str() {
                routing
                    .clusters
                    .insert(name.to_string(), endpoints(cluster));
            }
        }
        routing
    }

    /// W022 for every model whose requests a table sends elsewhere than its backend.
    pub fn diagnostics(&self, policy: &CheckedPolicy, file: &str) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for model in &policy.models {
            let Some(backend) = policy.backends.get(model.backend.index()) else {
                continue;
            };
            if seen.contains(&(model.serves.as_str(), backend.name.as_str())) {
                continue;
            }
            seen.push((&model.serves, &backend.name));
            let Some(expected) = address(backend) else {
                continue;
            };
            let request = [
                (headers::SELECTED_MODEL, model.serves.as_str()),
                (headers::GATEWAY_MODEL_NAME, model.serves.as_str()),
                (headers::SR_BACKEND, backend.name.as_str()),
                (":method", "POST"),
                (":path", PROBE_PATH),
            ];
            for (manager, routes) in &self.tables {
                let destination = destination(routes, &request);
                let place = format!("`{manager}` in `{file}`");
                if let Some(d) =
                    self.misrouted(policy, (model, backend), &expected, &destination, &place)
                {
                    out.push(d);
                }
            }
        }
        out
    }

    /// The warning for `model` (on `backend`, at `expected`) going to `destination` in the
    /// connection manager named by `place`, if that is not its backend.
    fn misrouted(
        &self,
        policy: &CheckedPolicy,
        (model, backend): (&ModelDef, &BackendDef),
        expected: &Address,
        destination: &Destination,
        place: &str,
    ) -> Option<Diagnostic> {
        let what = format!(
            "requests for model `{}` (`{}` on backend `{}`)",
            model.name, model.serves, backend.name
        );
        let want = format!("{}:{}", expected.0, expected.1);
        let message = match destination {
            Destination::Unknown => return None,
            Destination::Nowhere => {
                format!("{what} match no route of {place}: Envoy answers them 404")
            }
            Destination::Answered(status, route) => format!(
                "{what} take {route} of {place}, which Envoy answers itself ({status}): they \
                 never reach the backend"
            ),
            Destination::Clusters(names, route) => {
                let mut wrong = Vec::new();
                for name in names {
                    match self.clusters.get(name) {
                        None => wrong.push(format!("cluster `{name}` is not defined")),
                        Some(None) => return None,
                        Some(Some(addresses)) => {
                            if !addresses.iter().any(|a| same(a, expected)) {
                                let shown: Vec<String> = addresses
                                    .iter()
                                    .map(|(h, p)| {
                                        let owner = owner(policy, (h, *p))
                                            .map(|b| format!(" (backend `{b}`)"))
                                            .unwrap_or_default();
                                        format!("{h}:{p}{owner}")
                                    })
                                    .collect();
                                let shown = if shown.is_empty() {
                                    "no endpoint".to_string()
                                } else {
                                    shown.join(", ")
                                };
                                wrong.push(format!("cluster `{name}` reaches {shown}"));
                            }
                        }
                    }
                }
                if wrong.is_empty() {
                    return None;
                }
                format!(
                    "{what} take {route} of {place}, but {}, not {want}",
                    wrong.join("; ")
                )
            }
        };
        let mut headers_set = format!("`{}: {}`", headers::SELECTED_MODEL, model.serves);
        if policy
            .models
            .iter()
            .any(|m| m.serves == model.serves && m.backend != model.backend)
        {
            headers_set.push_str(&format!(" and `{}: {}`", headers::SR_BACKEND, backend.name));
        }
        Some(
            Diagnostic::warning(codes::GATEWAY_ROUTE, message, model.span)
                .with_label_message(format!("served by backend `{}` at {want}", backend.name))
                .with_help(format!(
                    "route requests with {headers_set} to a cluster whose endpoint is {want} \
                     (`src manifest --format envoy` writes these routes from the policy)"
                )),
        )
    }
}

/// The backend's host and port, from its `url`.
fn address(backend: &BackendDef) -> Option<Address> {
    let url = url::Url::parse(backend.url.trim_end_matches('/')).ok()?;
    let host = url
        .host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    Some((host, url.port_or_known_default()?))
}

fn same(a: &Address, b: &Address) -> bool {
    a.1 == b.1 && a.0.eq_ignore_ascii_case(&b.0)
}

/// The policy's backend at `address`, if one is.
fn owner<'a>(policy: &'a CheckedPolicy, (host, port): (&str, u16)) -> Option<&'a str> {
    policy
        .backends
        .iter()
        .find(|b| address(b).is_some_and(|a| same(&a, &(host.to_string(), port))))
        .map(|b| b.name.as_str())
}

fn has_ext_proc(manager: &Value) -> bool {
    manager["http_filters"].as_array().is_some_and(|filters| {
        filters.iter().any(|f| {
            f["typed_config"]["@type"]
                .as_str()
                .is_some_and(|t| t.ends_with(EXT_PROC_TYPE))
        })
    })
}

/// The routes of a manager's inline route table: its `*` virtual host's, else every one's.
fn table(manager: &Value) -> Vec<Value> {
    let hosts = manager["route_config"]["virtual_hosts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let any = |h: &&Value| {
        h["domains"]
            .as_array()
            .is_some_and(|d| d.iter().any(|d| d == "*"))
    };
    let chosen: Vec<&Value> = if hosts.iter().any(|h| any(&h)) {
        hosts.iter().filter(any).collect()
    } else {
        hosts.iter().collect()
    };
    chosen
        .into_iter()
        .flat_map(|h| h["routes"].as_array().cloned().unwrap_or_default())
        .collect()
}

fn collect(value: &Value, out: &mut Routing) {
    match value {
        Value::Object(map) => {
            if map.contains_key("http_filters")
                && map.contains_key("route_config")
                && has_ext_proc(value)
            {
                let name = map
                    .get("stat_prefix")
                    .and_then(Value::as_str)
                    .unwrap_or("http_connection_manager")
                    .to_string();
                out.tables.push((name, table(value)));
            }
            for v in map.values() {
                collect(v, out);
            }
        }
        Value::Array(items) => {
            for v in items {
                collect(v, out);
            }
        }
        _ => {}
    }
}

/// A cluster's static endpoints; `None` when they come from elsewhere (EDS).
fn endpoints(cluster: &Value) -> Option<Vec<Address>> {
    let groups = cluster["load_assignment"]["endpoints"].as_array()?;
    let mut out = Vec::new();
    for group in groups {
        for lb in group["lb_endpoints"].as_array().into_iter().flatten() {
            let socket = &lb["endpoint"]["address"]["socket_address"];
            let (Some(host), Some(port)) =
                (socket["address"].as_str(), socket["port_value"].as_u64())
            else {
                return None;
            };
            out.push((host.to_ascii_lowercase(), u16::try_from(port).ok()?));
        }
    }
    Some(out)
}

/// Envoy's first route matching the request.
fn destination(routes: &[Value], request: &[(&str, &str)]) -> Destination {
    for (i, route) in routes.iter().enumerate() {
        match matches(&route["match"], request) {
            None => return Destination::Unknown,
            Some(false) => continue,
            Some(true) => {}
        }
        let name = match route["name"].as_str() {
            Some(name) => format!("route `{name}`"),
            None => format!("route {} (unnamed)", i + 1),
        };
        if let Some(status) = route["direct_response"]["status"].as_u64() {
            return Destination::Answered(status, name);
        }
        if route.get("redirect").is_some() {
            return Destination::Answered(301, name);
        }
        let action = &route["route"];
        if let Some(cluster) = action["cluster"].as_str() {
            return Destination::Clusters(vec![cluster.to_string()], name);
        }
        if let Some(weighted) = action["weighted_clusters"]["clusters"].as_array() {
            let names = weighted
                .iter()
                .filter_map(|c| c["name"].as_str().map(String::from))
                .collect();
            return Destination::Clusters(names, name);
        }
        return Destination::Unknown;
    }
    Destination::Nowhere
}

/// Whether a route's `match` takes the request; `None` when it tests something not read here.
fn matches(matcher: &Value, request: &[(&str, &str)]) -> Option<bool> {
    let Value::Object(fields) = matcher else {
        return None;
    };
    let path = request
        .iter()
        .find(|(n, _)| *n == ":path")
        .map_or("", |(_, v)| *v);
    let mut verdict = true;
    for (key, value) in fields {
        let holds = match key.as_str() {
            "prefix" => path.starts_with(value.as_str()?),
            "path" => path == value.as_str()?,
            "headers" => {
                let mut all = true;
                for header in value.as_array()? {
                    all &= header_matches(header, request)?;
                }
                all
            }
            "case_sensitive" | "grpc" => true,
            _ => return None,
        };
        verdict &= holds;
    }
    Some(verdict)
}

fn header_matches(matcher: &Value, request: &[(&str, &str)]) -> Option<bool> {
    let name = matcher["name"].as_str()?.to_ascii_lowercase();
    let value = request
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(&name))
        .map(|(_, v)| *v);
    let string_test = |test: &Value| -> Option<bool> {
        let Value::Object(fields) = test else {
            return None;
        };
        let ignore_case = test["ignore_case"].as_bool().unwrap_or(false);
        let fold = |s: &str| {
            if ignore_case {
                s.to_ascii_lowercase()
            } else {
                s.to_string()
            }
        };
        let Some(value) = value else {
            return Some(false);
        };
        let value = fold(value);
        let mut verdict = None;
        for (key, expected) in fields {
            let expected = match key.as_str() {
                "ignore_case" => continue,
                _ => fold(expected.as_str()?),
            };
            verdict = Some(match key.as_str() {
                "exact" => value == expected,
                "prefix" => value.starts_with(&expected),
                "suffix" => value.ends_with(&expected),
                "contains" => value.contains(&expected),
                _ => return None,
            });
        }
        verdict
    };
    let holds = if let Some(test) = matcher.get("string_match") {
        string_test(test)?
    } else if let Some(exact) = matcher.get("exact_match") {
        value == Some(exact.as_str()?)
    } else if let Some(prefix) = matcher.get("prefix_match") {
        value.is_some_and(|v| prefix.as_str().is_some_and(|p| v.starts_with(p)))
    } else if let Some(present) = matcher.get("present_match") {
        value.is_some() == present.as_bool()?
    } else if matcher.as_object().is_some_and(|m| {
        m.keys()
            .all(|k| matches!(k.as_str(), "name" | "invert_match"))
    }) {
        // A header matcher with only a name matches when the header is present.
        value.is_some()
    } else {
        return None;
    };
    Some(holds != matcher["invert_match"].as_bool().unwrap_or(false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const REQUEST: [(&str, &str); 3] = [
        ("x-selected-model", "org/small"),
        ("x-sr-backend", "fast"),
        (":path", "/v1/chat/completions"),
    ];

    #[test]
    fn the_first_matching_route_decides() {
        let routes = vec![
            json!({"name": "models", "match": {"path": "/v1/models"}, "route": {"cluster": "router"}}),
            json!({"name": "big", "match": {"prefix": "/v1/", "headers": [
                {"name": "x-selected-model", "string_match": {"exact": "org/big"}}]},
                "route": {"cluster": "big"}}),
            json!({"name": "small", "match": {"prefix": "/", "headers": [
                {"name": "x-selected-model", "exact_match": "org/small"},
                {"name": "x-sr-backend", "present_match": true}]},
                "route": {"cluster": "fast"}}),
            json!({"name": "rest", "match": {"prefix": "/"}, "direct_response": {"status": 404}}),
        ];
        assert_eq!(
            destination(&routes, &REQUEST),
            Destination::Clusters(vec!["fast".into()], "route `small`".into())
        );
        assert_eq!(
            destination(&routes[3..], &REQUEST),
            Destination::Answered(404, "route `rest`".into())
        );
        assert_eq!(destination(&routes[..2], &REQUEST), Destination::Nowhere);
    }

    #[test]
    fn what_is_not_read_here_decides_nothing() {
        let regex =
            vec![json!({"match": {"safe_regex": {"regex": ".*"}}, "route": {"cluster": "x"}})];
        assert_eq!(destination(&regex, &REQUEST), Destination::Unknown);
        let inverted = json!({"name": "x-sr-backend", "string_match": {"exact": "fast"},
            "invert_match": true});
        assert_eq!(header_matches(&inverted, &REQUEST), Some(false));
        let folded = json!({"name": "X-Selected-Model",
            "string_match": {"exact": "ORG/SMALL", "ignore_case": true}});
        assert_eq!(header_matches(&folded, &REQUEST), Some(true));
    }
}
