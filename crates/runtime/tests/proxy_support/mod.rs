//! Shared harness of the routing proxy's end-to-end tests: a policy in a temporary directory, a
//! real `src serve` on `127.0.0.1:0` with its request log kept in memory, a plain hyper client,
//! and a scripted raw-TCP upstream for byte-exact and disconnect tests.

#![allow(
    dead_code,
    reason = "each test binary uses a different subset of the helpers"
)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::HeaderMap;
use hyper::{Method, Request};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use src_runtime::log::RequestLog;
use src_runtime::{Components, ServeConfig, ServerHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Bounded waits for things that happen asynchronously (a log line, a reload): generous, since
/// they only bound a failure, never measure speed.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A running router over a policy written to a temporary directory.
pub struct Router {
    pub server: ServerHandle,
    pub dir: tempfile::TempDir,
    pub log: Arc<Mutex<Vec<Value>>>,
    pub client: Http,
}

impl Router {
    pub async fn start(policy: &str) -> TestResult<Router> {
        Router::start_with(policy, |_| {}).await
    }

    pub async fn start_with(
        policy: &str,
        tweak: impl FnOnce(&mut ServeConfig),
    ) -> TestResult<Router> {
        Router::start_full(policy, tweak, |_| {}).await
    }

    /// With the components (model runtime, sessions) adjusted too.
    pub async fn start_full(
        policy: &str,
        tweak: impl FnOnce(&mut ServeConfig),
        components: impl FnOnce(&mut Components),
    ) -> TestResult<Router> {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("policy.sr"), policy)?;
        let mut cfg = ServeConfig::ephemeral(dir.path());
        cfg.sim_time_scale = 0.0;
        cfg.watch = false;
        cfg.probe_interval = Duration::from_millis(100);
        cfg.probe_timeout = Duration::from_millis(500);
        cfg.reload_debounce = Duration::from_millis(50);
        tweak(&mut cfg);
        let (log, lines) = RequestLog::memory();
        let mut parts = Components::with_log(log);
        components(&mut parts);
        let server = src_runtime::spawn(cfg, parts).await?;
        Ok(Router {
            server,
            dir,
            log: lines,
            client: Http::new(),
        })
    }

    pub fn sims(&self) -> Vec<Arc<src_runtime::sim::SimHandle>> {
        self.server.simulators()
    }

    pub fn policy_path(&self) -> PathBuf {
        self.dir.path().join("policy.sr")
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server.addr)
    }

    pub fn admin_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server.admin_addr)
    }

    pub async fn chat(&self, body: &Value, headers: &[(&str, &str)]) -> TestResult<Answer> {
        self.client
            .send(
                Method::POST,
                &self.url("/v1/chat/completions"),
                body.to_string(),
                headers,
            )
            .await
    }

    pub async fn get(&self, path: &str) -> TestResult<Answer> {
        self.client
            .send(Method::GET, &self.url(path), String::new(), &[])
            .await
    }

    /// The request log line of `request_id`, waiting for it (streams log when they end).
    pub async fn log_line(&self, request_id: &str) -> TestResult<Value> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let found = self
                .log
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .find(|l| l["fields"]["request_id"] == request_id)
                .cloned();
            if let Some(line) = found {
                return Ok(line["fields"].clone());
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!("no log line for request `{request_id}`").into());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A whole answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> TestResult<Value> {
        serde_json::from_slice(&self.body)
            .map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&self.body)).into())
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The OpenAI error envelope's fields, or a failure naming what came back instead.
    pub fn error(&self) -> TestResult<(String, Option<String>, String)> {
        let v = self.json()?;
        let e = &v["error"];
        let message = e["message"].as_str().ok_or("no error.message")?.to_owned();
        let kind = e["type"].as_str().ok_or("no error.type")?.to_owned();
        Ok((message, e["code"].as_str().map(str::to_owned), kind))
    }

    /// The assistant text of a chat completion.
    pub fn content(&self) -> TestResult<String> {
        let v = self.json()?;
        Ok(v["choices"][0]["message"]["content"]
            .as_str()
            .ok_or_else(|| format!("no content in {v}"))?
            .to_owned())
    }
}

/// A plain HTTP/1 client.
#[derive(Clone)]
pub struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Http {
    pub fn new() -> Http {
        Http {
            client: Client::builder(TokioExecutor::new()).build(HttpConnector::new()),
        }
    }

    pub async fn send(
        &self,
        method: Method,
        url: &str,
        body: impl Into<Bytes>,
        headers: &[(&str, &str)],
    ) -> TestResult<Answer> {
        let response = self.open(method, url, body, headers).await?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await?.to_bytes();
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    /// Sends and returns the response with its body unread (for streaming tests).
    pub async fn open(
        &self,
        method: Method,
        url: &str,
        body: impl Into<Bytes>,
        headers: &[(&str, &str)],
    ) -> TestResult<hyper::Response<hyper::body::Incoming>> {
        let mut request = Request::builder().method(method).uri(url);
        let mut has_type = false;
        for (name, value) in headers {
            has_type |= name.eq_ignore_ascii_case("content-type");
            request = request.header(*name, *value);
        }
        if !has_type {
            request = request.header("content-type", "application/json");
        }
        let request = request.body(Full::new(body.into()))?;
        Ok(self.client.request(request).await?)
    }
}

/// Sends raw bytes on a fresh connection and returns everything the server wrote before closing
/// (or before `PATIENCE`).
pub async fn raw_exchange(addr: SocketAddr, request: &[u8]) -> TestResult<String> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(request).await?;
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match tokio::time::timeout(PATIENCE, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Err(_) => break,
            Ok(Ok(n)) => {
                out.extend_from_slice(&buf[..n]);
                // One answer is all these tests want: stop at the end of its headers + body.
                if answer_complete(&out) {
                    break;
                }
            }
            Ok(Err(e)) => return Err(e.into()),
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn answer_complete(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    let Some(head_end) = text.find("\r\n\r\n") else {
        return false;
    };
    let head = text[..head_end].to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    match length {
        Some(n) => bytes.len() >= head_end + 4 + n,
        None => false,
    }
}

/// A standard policy on the built-in simulator: two routed models, a refusing block and a
/// redirecting block, plugins on the coding route.
pub const POLICY: &str = r#"
backend sim { url = "http://127.0.0.1:9/v1"  simulated = true }

model small  { backend = sim  serves = "Qwen/Qwen3-0.6B"  aliases = ["qwen-small"] }
model strong { backend = sim  serves = "Qwen/Qwen3-8B" }
model safe   { backend = sim  serves = "safe-model" }

signal code_talk = contains(prompt, ["stack trace", "segfault"])
signal secret    = matches(prompt, "password\\s*=")

block leaked_secret { when secret  status = 422  message = "remove the credential" }
block jailbreak     { when contains(prompt, ["ignore previous instructions"])  to safe }

route coding priority 20 {
  when code_talk
  to strong else small
  system_prompt = "You are a careful engineer."
  headers { "x-compliance" = "on" }
  reasoning = high
}
route default { to small }
"#;

pub fn user(text: &str) -> Value {
    serde_json::json!({"model": "auto", "messages": [{"role": "user", "content": text}]})
}
