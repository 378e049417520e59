//! Sending one turn to an OpenAI-compatible endpoint and timing its answer.
//!
//! The client is the router's own pooled one ([`Upstream`]: HTTP/1.1, or TLS with HTTP/2 where
//! offered), so a replay reaches an endpoint the way `src serve` reaches a backend. The answer's
//! body is read to its end and kept whole: judging it (a complete completion, a stream that ends
//! with `[DONE]`) is [`super::judge`]'s business, and a body that breaks off is kept with the
//! reason it broke.

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request};
use serde_json::Value;
use src_runtime::upstream::{error_chain, Upstream};
use std::time::{Duration, Instant};

/// How long an answer may take, head and body together. Agent turns on a loaded backend can be
/// slow; a stalled one must still end the run.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What came back for one request.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    /// Response headers, names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    /// Why the body ended before its end (a dropped connection, the timeout).
    pub broken: Option<String>,
    /// From sending the request to the end of the body.
    pub latency_ms: f64,
    /// From sending the request to the first body bytes.
    pub first_byte_ms: Option<f64>,
}

impl Answer {
    /// The first header named `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A request that got no answer at all.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct SendError(pub String);

/// Sends turns to one base URL (`http://host:port/v1`).
#[derive(Clone)]
pub struct Sender {
    upstream: Upstream,
    base: String,
}

impl Sender {
    pub fn new(base_url: &str) -> Result<Sender, SendError> {
        let tls = src_runtime::tls::client_config(None).map_err(|e| SendError(e.to_string()))?;
        let base = base_url.trim_end_matches('/').to_string();
        base.parse::<hyper::Uri>()
            .ok()
            .filter(|u| matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some())
            .ok_or_else(|| SendError(format!("`{base_url}` is not an http or https URL")))?;
        Ok(Sender {
            upstream: Upstream::new(CONNECT_TIMEOUT, tls, 0),
            base,
        })
    }

    /// POSTs `body` to `base + path` with `headers`, and reads the whole answer.
    pub async fn post(
        &self,
        path: &str,
        body: &Value,
        headers: &[(String, String)],
    ) -> Result<Answer, SendError> {
        let url = format!("{}{path}", self.base);
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(&url)
            .header(CONTENT_TYPE, "application/json");
        for (name, value) in headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| SendError(format!("`{name}` is not a valid header name")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| SendError(format!("the value of `{name}` is not a valid header")))?;
            request = request.header(name, value);
        }
        let request = request
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| SendError(format!("cannot build the request to `{url}`: {e}")))?;
        let started = Instant::now();
        let response = self
            .upstream
            .send(request, ANSWER_TIMEOUT)
            .await
            .map_err(|e| SendError(e.to_string()))?;
        let (parts, mut incoming) = response.into_parts();
        let headers = parts
            .headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let mut body = BytesMut::new();
        let mut first_byte_ms = None;
        let mut broken = None;
        let deadline = tokio::time::Instant::from_std(started) + ANSWER_TIMEOUT;
        loop {
            match tokio::time::timeout_at(deadline, incoming.frame()).await {
                Err(_) => {
                    broken = Some(format!("the answer did not end within {ANSWER_TIMEOUT:?}"));
                    break;
                }
                Ok(None) => break,
                Ok(Some(Err(e))) => {
                    broken = Some(format!("the answer broke off: {}", error_chain(&e)));
                    break;
                }
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        if !data.is_empty() && first_byte_ms.is_none() {
                            first_byte_ms = Some(ms_since(started));
                        }
                        body.extend_from_slice(&data);
                    }
                }
            }
        }
        Ok(Answer {
            status: parts.status.as_u16(),
            headers,
            body: body.freeze(),
            broken,
            latency_ms: ms_since(started),
            first_byte_ms,
        })
    }
}

fn ms_since(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}
