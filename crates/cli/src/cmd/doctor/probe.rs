//! The live requests of `src doctor`, made with the router's own HTTP clients
//! ([`src_runtime::upstream::Upstream`]) and TLS trust ([`src_runtime::tls`]), so that what
//! passes here reaches each backend the way `src serve` will.

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use hyper::Request;
use serde_json::Value as Json;
use src_runtime::upstream::{read_bounded, Upstream};
use std::path::Path;
use std::time::{Duration, Instant};

/// The largest answer read: a one-token completion is small.
const MAX_ANSWER_BYTES: usize = 1 << 20;
/// Time allowed to open a connection (TCP and TLS handshake), as `src serve` allows.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A backend's answer to one chat completion.
#[derive(Debug)]
pub struct Completion {
    pub status: u16,
    /// From sending the request to the end of the answer.
    pub latency: Duration,
    /// The answer's `model`, when it is a JSON object with one.
    pub model: Option<String>,
    /// The answer's `error.message`, or the start of a body that is not JSON.
    pub error: Option<String>,
}

/// The clients and the async runtime they run on.
pub struct Probe {
    runtime: tokio::runtime::Runtime,
    upstream: Upstream,
}

impl Probe {
    pub fn new(backend_ca: Option<&Path>) -> Result<Probe> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        let tls = src_runtime::tls::client_config(backend_ca)
            .context("cannot set up TLS for backends")?;
        // The clients' connection pools need the runtime to exist when they are built.
        let upstream = runtime.block_on(async { Upstream::new(CONNECT_TIMEOUT, tls, 0) });
        Ok(Probe { runtime, upstream })
    }

    /// The served ids of `GET {base}/models`, or why there are none.
    pub fn catalog(
        &self,
        base: &str,
        api_key: Option<&str>,
        timeout: Duration,
    ) -> Result<Vec<String>, String> {
        let text = self.runtime.block_on(src_runtime::catalog::fetch(
            &self.upstream,
            base,
            api_key,
            timeout,
        ))?;
        src_compiler::check::parse_catalog(&text).map_err(|why| {
            format!(
                "the answer of `{}/models` {why}",
                base.trim_end_matches('/')
            )
        })
    }

    /// `POST {base}/chat/completions` with `body`, the `headers` given and the key as a bearer
    /// token. `Err` when no answer came (connect failure, timeout, broken exchange).
    pub fn complete(
        &self,
        base: &str,
        api_key: Option<&str>,
        headers: &[(String, String)],
        body: &Json,
        timeout: Duration,
    ) -> Result<Completion, String> {
        let url = format!("{}/chat/completions", base.trim_end_matches('/'));
        let mut request = Request::post(&url)
            .header(CONTENT_TYPE, "application/json")
            .header(USER_AGENT, "src-doctor")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| format!("`{url}` is not a usable URL: {e}"))?;
        for (name, value) in headers {
            let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) else {
                return Err(format!("header `{name}` cannot be sent"));
            };
            request.headers_mut().insert(name, value);
        }
        if let Some(key) = api_key {
            let value = HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| "the API key is not a valid header value".to_string())?;
            request.headers_mut().insert(AUTHORIZATION, value);
        }
        self.runtime.block_on(async {
            let started = Instant::now();
            let response = self
                .upstream
                .send(request, timeout)
                .await
                .map_err(|e| e.to_string())?;
            let status = response.status().as_u16();
            let left = timeout.saturating_sub(started.elapsed());
            let body = read_bounded(response.into_body(), MAX_ANSWER_BYTES, left, &url).await?;
            Ok(read_completion(status, started.elapsed(), &body))
        })
    }
}

fn read_completion(status: u16, latency: Duration, body: &[u8]) -> Completion {
    let json: Option<Json> = serde_json::from_slice(body).ok();
    let model = json
        .as_ref()
        .and_then(|j| j.get("model"))
        .and_then(Json::as_str)
        .map(str::to_string);
    let error = match &json {
        Some(j) => j
            .pointer("/error/message")
            .or_else(|| j.get("message"))
            .or_else(|| j.get("error"))
            .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_string)),
        None if body.is_empty() => None,
        None => Some(String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned()),
    };
    Completion {
        status,
        latency,
        model,
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_for_their_model_and_error() {
        let ok = read_completion(200, Duration::ZERO, br#"{"model":"tiny-a","choices":[]}"#);
        assert_eq!(ok.model.as_deref(), Some("tiny-a"));
        assert_eq!(ok.error, None);
        let missing = read_completion(
            404,
            Duration::ZERO,
            br#"{"error":{"message":"model `x` not found"}}"#,
        );
        assert_eq!(missing.error.as_deref(), Some("model `x` not found"));
        let text = read_completion(502, Duration::ZERO, b"bad gateway");
        assert_eq!(text.error.as_deref(), Some("bad gateway"));
    }
}
