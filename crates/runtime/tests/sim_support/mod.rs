//! A small real HTTP client for talking to the simulator in tests.

#![allow(
    dead_code,
    reason = "each test binary uses a different subset of the helpers"
)]

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use src_runtime::sim::{SimConfig, SimHandle, SimModel};

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type TestResult = Result<(), Error>;

pub const MODEL: &str = "Qwen/Qwen3-8B";
pub const SMALL: &str = "Qwen/Qwen3-0.6B";

/// Two served models, fast enough for tests but still paced (per token, 0.02 ms real).
pub fn config() -> SimConfig {
    SimConfig {
        models: vec![SimModel::new(MODEL), SimModel::new(SMALL)],
        seed: 42,
        time_scale: 0.001,
        ..SimConfig::default()
    }
}

pub async fn sim(cfg: SimConfig) -> Result<(SimHandle, Http), Error> {
    let handle = SimHandle::spawn(cfg).await?;
    let http = Http {
        base: handle.base_url(),
        client: Client::builder(TokioExecutor::new()).build_http(),
    };
    Ok((handle, http))
}

#[derive(Clone)]
pub struct Http {
    pub base: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

/// A fully read answer.
pub struct Answer {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> Result<Value, Error> {
        Ok(serde_json::from_slice(&self.body)?)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn header_f64(&self, name: &str) -> Result<f64, Error> {
        let value = self
            .header(name)
            .ok_or_else(|| format!("no `{name}` header"))?;
        Ok(value.parse()?)
    }
}

impl Http {
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Result<Response<Incoming>, Error> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        Ok(self
            .client
            .request(request.body(Full::new(body.into()))?)
            .await?)
    }

    pub async fn call(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Result<Answer, Error> {
        let response = self.send(method, path, headers, body).await?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await?.to_bytes();
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    pub async fn chat(&self, body: &Value) -> Result<Answer, Error> {
        self.call("POST", "/v1/chat/completions", &[], body.to_string())
            .await
    }

    pub async fn get(&self, path: &str) -> Result<Answer, Error> {
        self.call("GET", path, &[], Bytes::new()).await
    }
}

pub fn chat_body(model: &str, prompt: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": prompt}]})
}

pub fn stream_body(model: &str, prompt: &str) -> Value {
    json!({
        "model": model,
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": prompt}],
    })
}

/// Reads a body frame by frame, keeping the frames as they arrived and whether it ended in an
/// error (a broken connection).
pub async fn frames(response: Response<Incoming>) -> (Vec<Bytes>, Option<hyper::Error>) {
    let mut body = response.into_body();
    let mut frames = Vec::new();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                if let Ok(data) = frame.into_data() {
                    frames.push(data);
                }
            }
            Err(error) => return (frames, Some(error)),
        }
    }
    (frames, None)
}

/// The `data:` payloads of an SSE byte stream, in order.
pub fn sse_data(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .split("\n\n")
        .filter_map(|event| {
            event
                .lines()
                .find_map(|line| line.strip_prefix("data: ").map(str::to_owned))
        })
        .collect()
}

/// Waits (yielding, bounded) until `condition` holds; a test never passes on a timeout.
pub async fn eventually(mut condition: impl FnMut() -> bool) -> bool {
    for _ in 0..2000 {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    false
}

/// A prompt long enough to span several 16-token cache blocks.
pub fn long_prompt(tag: &str) -> String {
    format!(
        "{tag}: {}",
        "the quick brown fox jumps over the lazy dog. ".repeat(12)
    )
}
