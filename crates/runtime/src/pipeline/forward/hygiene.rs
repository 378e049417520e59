//! Header hygiene between the client, the router and a backend: which client headers travel
//! upstream (all but RFC 9110 §7.6.1's hop-by-hop ones and the names only the router sets) and
//! which answer headers travel back: only those a client's SDK reads ([`returned`]), never a
//! backend's internals (`server`, its timing, cookies for its own host).

use hyper::header::{HeaderMap, HeaderName};

use crate::headers;

/// Client headers that are about the client's connection, not the request, or that the router
/// sets itself. `accept-encoding` is dropped so answers arrive uncompressed: the router reads
/// usage evidence from them.
pub(super) const NOT_FORWARDED: [&str; 12] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "accept-encoding",
    "expect",
];

/// Upstream answer headers a client gets, by name: what describes the body, and what the
/// official SDKs read (`retry-after`, `retry-after-ms` and `x-should-retry` steer their
/// retries; the request ids, `x-request-id` and Anthropic's `request-id`, are what a
/// provider's support asks for).
pub(super) const RETURNED: [&str; 9] = [
    "content-type",
    "content-length",
    "content-encoding",
    "cache-control",
    "retry-after",
    "retry-after-ms",
    "x-should-retry",
    "x-request-id",
    "request-id",
];

/// Upstream answer headers a client gets, by prefix: OpenAI's and Anthropic's own (`openai-
/// processing-ms`, `anthropic-ratelimit-*`, ..) and the rate limits OpenAI-compatible servers
/// report (`x-ratelimit-*`).
pub(super) const RETURNED_PREFIXES: [&str; 3] = ["openai-", "anthropic-", "x-ratelimit-"];

/// Whether `connection` lists `name` as a hop-by-hop header of this connection (RFC 9110 §7.6.1).
fn named_by_connection(headers: &HeaderMap, name: &HeaderName) -> bool {
    headers
        .get_all(hyper::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case(name.as_str()))
}

/// Client headers minus hop-by-hop ones (`proxy-*` included), those only the router sets, and
/// `cookie` (a browser session for the router's host means nothing to a backend). The router's
/// own are added over them.
pub(super) fn client_headers(client: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(client.len() + 6);
    // Most requests have no `connection` header: then no name needs looking up in it.
    let has_connection = client.contains_key(hyper::header::CONNECTION);
    for (name, value) in client {
        let lower = name.as_str();
        let dropped = NOT_FORWARDED.contains(&lower)
            || lower.starts_with("proxy-")
            || lower == "cookie"
            || headers::router_owned(lower)
            || (has_connection && named_by_connection(client, name));
        if !dropped {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// Whether an upstream answer header reaches the client: one of [`RETURNED`] or
/// [`RETURNED_PREFIXES`].
pub(crate) fn returned(name: &HeaderName) -> bool {
    let name = name.as_str();
    RETURNED.contains(&name) || RETURNED_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Room for the headers the router adds to a relayed answer (`x-sr-*`, `x-selected-model`),
/// so that adding them does not grow the map.
const ROUTER_ROOM: usize = 8;

/// Of an upstream answer's headers, those a client gets ([`returned`], and with `sim_account`
/// the simulator's `x-sim-*` account), less any the `connection` header names as the upstream
/// connection's own. They are moved, in order and with every value, into a map with room for
/// the router's own headers: an answer loses most of its names (`date`, `server`, the backend's
/// timing), and taking each out of the upstream map costs a hash and a shift of the map's
/// entries, several times what moving the few kept ones does. No value is copied.
pub(super) fn returned_headers(upstream: HeaderMap, sim_account: bool) -> HeaderMap {
    // Most answers have no `connection` header: then no name needs looking up in it.
    let hop_by_hop: Vec<String> = upstream
        .get_all(hyper::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|token| token.trim().to_ascii_lowercase())
        .collect();
    let kept = |name: &HeaderName| {
        (returned(name) || (sim_account && name.as_str().starts_with(crate::headers::SIM_PREFIX)))
            && !hop_by_hop.iter().any(|token| token == name.as_str())
    };
    let mut out = HeaderMap::with_capacity(RETURNED.len().min(upstream.keys_len()) + ROUTER_ROOM);
    // The map yields a name with its first value only; its further values come nameless.
    let mut current: Option<HeaderName> = None;
    for (name, value) in upstream {
        if let Some(name) = name {
            current = kept(&name).then_some(name);
        }
        if let Some(name) = &current {
            out.append(name, value);
        }
    }
    out
}
