//! The harness of the response cache tests: a real `src serve` on `127.0.0.1:0` over the
//! built-in simulator, the repository's real MiniLM encoder through ONNX Runtime, request lines
//! kept in memory, and a small HTTP client that sends API keys and reads event streams.
//!
//! Nothing here skips: a missing `models/` directory or ONNX Runtime library fails the test with
//! the command that provides it (see [`crate::models`]).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::header::HeaderMap;
use hyper::Method;
use serde_json::{json, Value};
use src_runtime::log::RequestLog;
use src_runtime::{Components, ServerHandle};

use crate::models::{load_library, sample, with_models};
use crate::{Http, TestResult, PATIENCE};

/// The providers and the encoder every cache policy here uses; `{models}` is the repository's
/// `models/` directory.
pub const PROVIDERS: &str = r#"
backend sim { url = "http://127.0.0.1:9/v1"  simulated = true }
model small  { backend = sim  serves = "Qwen/Qwen3-0.6B" }
model strong { backend = sim  serves = "Qwen/Qwen3-8B" }
encoder minilm { path = "{models}/minilm" }
"#;

pub const PASSWORD: &str = "How do I reset my password?";
/// MiniLM puts this at ≈ 0.99 of [`PASSWORD`].
pub const PARAPHRASE: &str = "How can I reset my password?";
/// And this at ≈ 0.07.
pub const UNRELATED: &str = "What is the capital of France?";

/// A running router and what the tests read from it.
pub struct Served {
    pub server: ServerHandle,
    pub dir: tempfile::TempDir,
    pub lines: Arc<Mutex<Vec<Value>>>,
    pub client: Http,
}

/// One answer.
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `x-sr-cache`, or `<none>`.
    pub fn cache(&self) -> &str {
        self.header("x-sr-cache").unwrap_or("<none>")
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The data of each event of an event-stream answer.
    pub fn events(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.body)
            .split("\n\n")
            .filter_map(|e| e.trim().strip_prefix("data: ").map(str::to_owned))
            .collect()
    }

    /// The assistant text of a chat answer, streamed or not.
    pub fn text(&self) -> String {
        let json = self.json();
        if let Some(text) = json["choices"][0]["message"]["content"].as_str() {
            return text.to_owned();
        }
        self.events()
            .iter()
            .filter_map(|e| serde_json::from_str::<Value>(e).ok())
            .filter_map(|e| {
                e["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect()
    }
}

/// Writes `policy` (with `{models}` filled in) and serves it with the standard components.
pub async fn serve(policy: &str) -> TestResult<Served> {
    let dir = tempfile::tempdir()?;
    write_policy(dir.path(), policy)?;
    let (server, lines) = start(dir.path()).await?;
    Ok(Served {
        server,
        dir,
        lines,
        client: Http::new(),
    })
}

pub fn write_policy(dir: &Path, policy: &str) -> TestResult {
    std::fs::write(dir.join("policy.sr"), with_models(policy)?)?;
    Ok(())
}

/// A server over the policy in `dir`, its request lines kept in memory.
pub async fn start(
    dir: &Path,
) -> Result<(ServerHandle, Arc<Mutex<Vec<Value>>>), Box<dyn std::error::Error + Send + Sync>> {
    load_library()?;
    let cfg = crate::config(dir);
    let (log, lines) = RequestLog::memory();
    let server = src_runtime::spawn(cfg, Components::with_log(log)).await?;
    Ok((server, lines))
}

/// A chat body of one user message.
pub fn chat(prompt: &str) -> Value {
    json!({"model": "auto", "messages": [{"role": "user", "content": prompt}]})
}

impl Served {
    /// `POST /v1/chat/completions` with `body` and API key `key` (none when empty).
    pub async fn chat(&self, body: &Value, key: &str) -> TestResult<Answer> {
        self.post("/v1/chat/completions", body, key).await
    }

    pub async fn ask(&self, prompt: &str, key: &str) -> TestResult<Answer> {
        self.chat(&chat(prompt), key).await
    }

    pub async fn post(&self, path: &str, body: &Value, key: &str) -> TestResult<Answer> {
        self.post_with(path, body, key, &[]).await
    }

    /// [`Served::post`] with extra request headers.
    pub async fn post_with(
        &self,
        path: &str,
        body: &Value,
        key: &str,
        headers: &[(&str, &str)],
    ) -> TestResult<Answer> {
        let bearer = format!("Bearer {key}");
        let mut all = headers.to_vec();
        if !key.is_empty() {
            all.push(("authorization", bearer.as_str()));
        }
        let url = format!("http://{}{path}", self.server.addr);
        let answer = self
            .client
            .send(Method::POST, &url, body.to_string(), &all)
            .await?;
        Ok(Answer {
            status: answer.status,
            headers: answer.headers,
            body: answer.body,
        })
    }

    pub async fn metrics(&self) -> TestResult<String> {
        let url = format!("http://{}/metrics", self.server.admin_addr);
        Ok(self.client.send(Method::GET, &url, "", &[]).await?.text())
    }

    /// The value of `name{labels}` on `/metrics` (0 when absent).
    pub async fn metric(&self, name: &str, labels: &str) -> TestResult<f64> {
        Ok(sample(&self.metrics().await?, name, labels))
    }

    /// Waits until `n` answers have been stored.
    pub async fn stored(&self, n: f64) -> TestResult {
        let started = Instant::now();
        loop {
            let stored = self
                .metric("src_cache_stores_total", "result=\"stored\"")
                .await?;
            if stored >= n {
                return Ok(());
            }
            if started.elapsed() > PATIENCE {
                return Err(format!("{stored} answers stored, expected {n}").into());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Requests the simulated backend received so far.
    pub fn backend_requests(&self) -> usize {
        self.server
            .simulators()
            .iter()
            .map(|s| s.received().len())
            .sum()
    }

    /// The request log lines' `fields`, oldest first.
    pub fn log(&self) -> Vec<Value> {
        self.lines
            .lock()
            .map(|l| l.iter().map(|line| line["fields"].clone()).collect())
            .unwrap_or_default()
    }
}
