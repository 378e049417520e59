//! Who may talk to the admin listener at all, before its token is looked at: the `Host` a
//! request names, the `Origin` a browser adds, and the type of a body it posts.
//!
//! The admin API listens on loopback by default and then needs no token, so any page a local
//! browser opens could reach it: a DNS-rebinding page (its own name resolved to 127.0.0.1) reads
//! the live stream, the sessions and the policy, and a cross-origin `text/plain` form POST (which
//! needs no CORS preflight) runs explain. Three checks close that:
//! - the `Host` must be a loopback name (`localhost`, `127.0.0.1`, `[::1]`, any port) or one the
//!   operator configured (`--admin-host`, `SRC_ADMIN_HOSTS`), else 421;
//! - an `Origin`, when a browser sends one, must be the same origin as the `Host`, else 403;
//! - a POST body must be `application/json` (which a cross-origin page cannot send without a
//!   preflight the listener never grants), else 415.

use hyper::header::{CONTENT_TYPE, HOST, ORIGIN};
use hyper::{HeaderMap, Method, StatusCode};

use crate::openai::ApiError;

/// Host names answered whatever the configuration.
const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// The refusal of a request the admin listener must not answer; `None` when it may.
/// `authority` is the request URI's (HTTP/2 carries the host there rather than in `Host`).
pub fn refuse(
    headers: &HeaderMap,
    authority: Option<&str>,
    method: &Method,
    allowed: &[String],
) -> Option<ApiError> {
    let host = headers
        .get(HOST)
        .and_then(|v| v.to_str().ok())
        .or(authority);
    let Some(host) = host.filter(|h| host_allowed(h, allowed)) else {
        return Some(ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "invalid_request_error",
            Some("host_not_allowed"),
            "the admin API answers only loopback host names and those given with `--admin-host`",
        ));
    };
    if let Some(origin) = headers.get(ORIGIN) {
        let same = origin
            .to_str()
            .ok()
            .and_then(|o| o.split_once("://"))
            .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host));
        if !same {
            return Some(ApiError::new(
                StatusCode::FORBIDDEN,
                "invalid_request_error",
                Some("cross_origin"),
                "the admin API does not answer requests from other origins",
            ));
        }
    }
    if method == Method::POST && !is_json(headers) {
        return Some(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_request_error",
            Some("unsupported_media_type"),
            "the admin API takes `content-type: application/json` bodies",
        ));
    }
    None
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
}

/// Whether `host` (a `Host` header: a name and maybe a port) is loopback or configured. A
/// configured name with a port must match with that port; without one, with any port.
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let name = name_of(host);
    LOOPBACK_NAMES.iter().any(|n| name.eq_ignore_ascii_case(n))
        || allowed
            .iter()
            .any(|a| a.eq_ignore_ascii_case(host) || a.eq_ignore_ascii_case(name))
}

/// The name part of a `Host` value: `[::1]:8802` → `[::1]`, `localhost:8802` → `localhost`.
fn name_of(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    host.rsplit_once(':').map_or(host, |(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn with(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (k, v) in pairs {
            headers.insert(*k, HeaderValue::from_static(v));
        }
        headers
    }

    fn status(pairs: &[(&'static str, &'static str)], method: Method, allowed: &[&str]) -> u16 {
        let allowed: Vec<String> = allowed.iter().map(|s| (*s).to_owned()).collect();
        refuse(&with(pairs), None, &method, &allowed).map_or(200, |e| e.status.as_u16())
    }

    #[test]
    fn loopback_and_configured_hosts_pass_and_others_do_not() {
        for host in [
            "localhost",
            "localhost:8802",
            "127.0.0.1:1",
            "[::1]:8802",
            "[::1]",
        ] {
            assert_eq!(status(&[("host", host)], Method::GET, &[]), 200, "{host}");
        }
        assert_eq!(
            status(&[("host", "evil.example:8802")], Method::GET, &[]),
            421
        );
        assert_eq!(
            status(&[("host", "127.0.0.1.evil.example")], Method::GET, &[]),
            421
        );
        assert_eq!(status(&[], Method::GET, &[]), 421);
        assert_eq!(
            status(
                &[("host", "router.internal:8802")],
                Method::GET,
                &["router.internal"]
            ),
            200
        );
        assert_eq!(
            status(&[("host", "10.0.0.7:9")], Method::GET, &["10.0.0.7:8802"]),
            421
        );
    }

    #[test]
    fn a_foreign_origin_and_a_non_json_post_are_refused() {
        let host = ("host", "127.0.0.1:8802");
        assert_eq!(
            status(
                &[host, ("origin", "http://127.0.0.1:8802")],
                Method::GET,
                &[]
            ),
            200
        );
        assert_eq!(
            status(&[host, ("origin", "http://evil.example")], Method::GET, &[]),
            403
        );
        assert_eq!(status(&[host, ("origin", "null")], Method::GET, &[]), 403);
        assert_eq!(
            status(&[host, ("content-type", "text/plain")], Method::POST, &[]),
            415
        );
        assert_eq!(status(&[host], Method::POST, &[]), 415);
        assert_eq!(
            status(
                &[host, ("content-type", "application/json; charset=utf-8")],
                Method::POST,
                &[]
            ),
            200
        );
    }
}
