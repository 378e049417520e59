//! Asking a backend which models it serves (`GET {url}/models`), for `src check --live`: the
//! same clients, TLS trust and authorization as the router's forwarding, so a check that passes
//! here reaches the backend the way `src serve` will.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, AUTHORIZATION, USER_AGENT};
use hyper::Request;

use crate::upstream::{read_bounded, Upstream};

/// The largest catalog read: a `/v1/models` answer is small; anything bigger is not one.
const MAX_CATALOG_BYTES: usize = 4 << 20;

/// The body of `GET {base}/models`, or why there is none. `api_key` is sent as a bearer token.
pub async fn fetch(
    upstream: &Upstream,
    base: &str,
    api_key: Option<&str>,
    timeout: Duration,
) -> Result<String, String> {
    let url = format!("{}/models", base.trim_end_matches('/'));
    let mut request = Request::get(&url)
        .body(Full::new(Bytes::new()))
        .map_err(|e| format!("`{url}` is not a usable URL: {e}"))?;
    request
        .headers_mut()
        .insert(USER_AGENT, HeaderValue::from_static("src-check"));
    if let Some(key) = api_key {
        let value = HeaderValue::from_str(&format!("Bearer {key}"))
            .map_err(|_| "the API key is not a valid header value".to_string())?;
        request.headers_mut().insert(AUTHORIZATION, value);
    }
    let response = upstream
        .send(request, timeout)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = read_bounded(response.into_body(), MAX_CATALOG_BYTES, timeout, &url).await?;
    if !status.is_success() {
        return Err(format!("`{url}` answered {}", status.as_u16()));
    }
    String::from_utf8(body.to_vec()).map_err(|_| format!("the answer of `{url}` is not UTF-8"))
}
