//! The console page and its files, compiled into the binary: no build step, no CDN, works
//! offline. They carry no data, so they are served without the admin token; the page asks for
//! the token when the API answers 401.

use bytes::Bytes;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Method, Response};

use crate::relay::body::ProxyBody;

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/console.js");
const STYLE: &str = include_str!("assets/console.css");

/// The page file at `path`, for `GET`/`HEAD`; `None` for any other request.
pub fn lookup(method: &Method, path: &str) -> Option<Response<ProxyBody>> {
    if !matches!(*method, Method::GET | Method::HEAD) {
        return None;
    }
    let (body, kind) = match path {
        "/" | "/index.html" => (INDEX, "text/html; charset=utf-8"),
        "/console.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        "/console.css" => (STYLE, "text/css; charset=utf-8"),
        _ => return None,
    };
    let mut response = Response::new(ProxyBody::from(Bytes::from_static(body.as_bytes())));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Some(response)
}
