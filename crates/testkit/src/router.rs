//! A real `src serve` for end-to-end tests: a policy in a temporary directory, the server
//! spawned in-process on `127.0.0.1:0` (and an ephemeral admin port) with its request log kept
//! in memory, and a plain HTTP client pointed at it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Method, Response};
use serde_json::Value;
use src_runtime::log::RequestLog;
use src_runtime::{Components, ServeConfig, ServerHandle};

use crate::http::{Answer, Http};
use crate::{TestResult, PATIENCE};

/// The configuration every test server starts from: [`ServeConfig::ephemeral`] over the policy
/// at `policy` (ports `127.0.0.1:0`, nothing kept on disk), the simulator answering at once, no
/// file watcher, and readiness probes every 100 ms.
pub fn config(policy: &Path) -> ServeConfig {
    let mut cfg = ServeConfig::ephemeral(policy);
    cfg.sim_time_scale = 0.0;
    cfg.watch = false;
    cfg.probe_interval = Duration::from_millis(100);
    cfg
}

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
        let mut cfg = config(dir.path());
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
        self.post("/v1/chat/completions", body, headers).await
    }

    /// `POST path` with `body` as JSON and `headers`.
    pub async fn post(
        &self,
        path: &str,
        body: &Value,
        headers: &[(&str, &str)],
    ) -> TestResult<Answer> {
        self.client
            .send(Method::POST, &self.url(path), body.to_string(), headers)
            .await
    }

    /// `POST path` with `body` as JSON and `headers`, the response's body left unread (for
    /// streaming tests).
    pub async fn open(
        &self,
        path: &str,
        body: &Value,
        headers: &[(&str, &str)],
    ) -> TestResult<Response<Incoming>> {
        self.client
            .open(Method::POST, &self.url(path), body.to_string(), headers)
            .await
    }

    pub async fn get(&self, path: &str) -> TestResult<Answer> {
        self.client
            .send(Method::GET, &self.url(path), String::new(), &[])
            .await
    }

    /// `GET path` on the admin listener (`/metrics`, the detailed `/readyz`, the console API).
    pub async fn admin_get(&self, path: &str) -> TestResult<Answer> {
        self.client
            .send(Method::GET, &self.admin_url(path), String::new(), &[])
            .await
    }

    /// `POST path` on the admin listener with `body` as JSON and `headers` (`/v1/console/explain`).
    pub async fn admin_post(
        &self,
        path: &str,
        body: &Value,
        headers: &[(&str, &str)],
    ) -> TestResult<Answer> {
        self.client
            .send(
                Method::POST,
                &self.admin_url(path),
                body.to_string(),
                headers,
            )
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

/// A policy that sends every request to the one model `served` by the OpenAI-compatible backend
/// at `base_url` (a simulator's, or a scripted peer's).
pub fn one_model(base_url: &str, served: &str) -> String {
    format!(
        r#"
backend gpu {{ url = "{base_url}/v1" }}
model m {{ backend = gpu  serves = "{served}" }}
route default {{ to m }}
"#
    )
}

pub fn user(text: &str) -> Value {
    serde_json::json!({"model": "auto", "messages": [{"role": "user", "content": text}]})
}
