//! Header hygiene between the client, the router and a backend: which client headers travel
//! upstream and which answer headers travel back (RFC 9110 §7.6.1's hop-by-hop rule, plus the
//! names only the router sets).

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

/// Upstream answer headers that belong to the upstream connection.
pub(super) const NOT_RETURNED: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

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
    for (name, value) in client {
        let lower = name.as_str();
        if !NOT_FORWARDED.contains(&lower)
            && !lower.starts_with("proxy-")
            && lower != "cookie"
            && !headers::router_owned(lower)
            && !named_by_connection(client, name)
        {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// Removes from an upstream answer's headers those about the upstream connection: the
/// [`NOT_RETURNED`] names and any the `connection` header lists.
pub(super) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let listed: Vec<HeaderName> = headers
        .get_all(hyper::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|token| HeaderName::from_bytes(token.trim().as_bytes()).ok())
        .collect();
    for name in listed {
        headers.remove(name);
    }
    for name in NOT_RETURNED {
        if headers.contains_key(name) {
            headers.remove(name);
        }
    }
}
