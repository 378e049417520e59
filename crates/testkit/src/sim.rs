//! The built-in simulator on its own (`src_runtime::sim`): a configuration of two paced models,
//! a client bound to its base URL, and readers of what it streams.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Method, Response};
use serde_json::{json, Value};
use src_runtime::sim::{SimConfig, SimHandle, SimModel};

pub use crate::{Answer, TestResult};

/// Any failure of a test step.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

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
        client: crate::Http::new(),
    };
    Ok((handle, http))
}

/// A client of one simulator: paths are relative to its base URL.
#[derive(Clone)]
pub struct Http {
    pub base: String,
    client: crate::Http,
}

impl Http {
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Result<Response<Incoming>, Error> {
        let method = Method::from_bytes(method.as_bytes())?;
        let url = format!("{}{path}", self.base);
        self.client.open(method, &url, body, headers).await
    }

    pub async fn call(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Result<Answer, Error> {
        let response = self.send(method, path, headers, body).await?;
        crate::http::read(response).await
    }

    pub async fn chat(&self, body: &Value) -> Result<Answer, Error> {
        self.chat_with(&[], body).await
    }

    /// `POST /v1/chat/completions` with `body` and `headers`.
    pub async fn chat_with(&self, headers: &[(&str, &str)], body: &Value) -> Result<Answer, Error> {
        crate::http::read(self.open_chat(headers, body).await?).await
    }

    /// `POST /v1/chat/completions` with `body` and `headers`, the response's body left unread.
    pub async fn open_chat(
        &self,
        headers: &[(&str, &str)],
        body: &Value,
    ) -> Result<Response<Incoming>, Error> {
        self.send("POST", "/v1/chat/completions", headers, body.to_string())
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
