//! Shared harness of the model tests: where the repository's model directories, the models venv
//! and the ONNX Runtime library are (`scripts/models.sh` builds all three), and a `src serve` on
//! `127.0.0.1:0` whose model runtime the test configures.
//!
//! Nothing here skips: a missing `models/` directory or library fails the test with the command
//! that provides it.

#![allow(
    dead_code,
    reason = "each test binary uses a different subset of the helpers"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use src_runtime::hooks::NoSessions;
use src_runtime::log::RequestLog;
use src_runtime::models::{ModelOptions, OnnxModels};
use src_runtime::{Components, ServeConfig, ServerHandle};

pub type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn model_dir(name: &str) -> TestResult<PathBuf> {
    let dir = repo().join("models").join(name);
    if !dir.join("model.onnx").is_file() {
        return Err(format!(
            "`{}` is missing: run `scripts/models.sh` first",
            dir.display()
        )
        .into());
    }
    Ok(dir.canonicalize()?)
}

/// Loads ONNX Runtime from `ORT_DYLIB_PATH`, or from where `scripts/models.sh` puts it.
pub fn load_library() -> TestResult {
    let path = std::env::var_os("ORT_DYLIB_PATH")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".cache/ort/lib/libonnxruntime.so.1.31.1"));
    src_runtime::models::load_from(&path).map_err(|e| {
        format!("{e}: run `scripts/models.sh` and export the ORT_DYLIB_PATH it prints").into()
    })
}

/// Runs `scripts/models/reference.py` on `texts`, one batch.
pub fn reference(model: &Path, texts: &[&str]) -> TestResult<Value> {
    let python = repo().join(".cache/venv-models/bin/python");
    if !python.is_file() {
        return Err("the models venv is missing: run `scripts/models.sh` first".into());
    }
    let out = Command::new(python)
        .arg(repo().join("scripts/models/reference.py"))
        .arg(model)
        .arg(serde_json::to_string(texts)?)
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "reference.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

pub fn floats(v: &Value) -> TestResult<Vec<f32>> {
    v.as_array()
        .ok_or("not a list")?
        .iter()
        .map(|x| {
            x.as_f64()
                .map(|f| f as f32)
                .ok_or_else(|| "not a number".into())
        })
        .collect()
}

/// A running router over a policy whose model paths point at the repository's models.
pub struct Served {
    pub server: ServerHandle,
    pub dir: tempfile::TempDir,
    pub models: Arc<OnnxModels>,
    pub client: reqwest_lite::Client,
}

/// `{models}` in `policy` becomes the absolute path of the repository's `models/`.
pub async fn serve(policy: &str, options: ModelOptions) -> TestResult<Served> {
    load_library()?;
    let models_root = repo().join("models").canonicalize()?;
    let dir = tempfile::tempdir()?;
    let text = policy.replace("{models}", &models_root.display().to_string());
    std::fs::write(dir.path().join("policy.sr"), text)?;
    let models = Arc::new(OnnxModels::new(options));
    let server = start(dir.path(), Arc::clone(&models)).await?;
    Ok(Served {
        server,
        dir,
        models,
        client: reqwest_lite::Client::new(),
    })
}

pub async fn start(
    policy: &Path,
    models: Arc<OnnxModels>,
) -> Result<ServerHandle, src_runtime::ServeError> {
    let mut cfg = ServeConfig::ephemeral(policy);
    cfg.sim_time_scale = 0.0;
    cfg.watch = false;
    cfg.probe_interval = Duration::from_millis(100);
    let components = Components {
        models,
        sessions: Arc::new(NoSessions),
        log: RequestLog::Off,
        links: Default::default(),
    };
    src_runtime::spawn(cfg, components).await
}

impl Served {
    pub async fn chat(&self, prompt: &str) -> TestResult<(u16, Option<String>, Value)> {
        let body = serde_json::json!({
            "model": "auto",
            "messages": [{"role": "user", "content": prompt}],
        });
        let url = format!("http://{}/v1/chat/completions", self.server.addr);
        let (status, headers, body) = self.client.post(&url, body.to_string()).await?;
        let route = headers
            .get("x-sr-route")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Ok((status, route, json))
    }

    pub async fn metrics(&self) -> TestResult<String> {
        let url = format!("http://{}/metrics", self.server.addr);
        let (_, _, body) = self.client.get(&url).await?;
        Ok(String::from_utf8_lossy(&body).into_owned())
    }
}

/// The value of the sample `name{labels}` in a Prometheus exposition (0 when absent).
pub fn sample(metrics: &str, name: &str, labels: &str) -> f64 {
    let want = format!("{name}{{{labels}}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&want))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A minimal HTTP/1 client on hyper.
pub mod reqwest_lite {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper::header::HeaderMap;
    use hyper::{Method, Request};
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::rt::TokioExecutor;

    use super::TestResult;

    #[derive(Clone)]
    pub struct Client(hyper_util::client::legacy::Client<HttpConnector, Full<Bytes>>);

    impl Client {
        pub fn new() -> Client {
            Client(
                hyper_util::client::legacy::Client::builder(TokioExecutor::new())
                    .build(HttpConnector::new()),
            )
        }

        pub async fn post(&self, url: &str, body: String) -> TestResult<(u16, HeaderMap, Bytes)> {
            self.send(Method::POST, url, body).await
        }

        pub async fn get(&self, url: &str) -> TestResult<(u16, HeaderMap, Bytes)> {
            self.send(Method::GET, url, String::new()).await
        }

        async fn send(
            &self,
            method: Method,
            url: &str,
            body: String,
        ) -> TestResult<(u16, HeaderMap, Bytes)> {
            let request = Request::builder()
                .method(method)
                .uri(url)
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(body)))?;
            let response = self.0.request(request).await?;
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            let body = response.into_body().collect().await?.to_bytes();
            Ok((status, headers, body))
        }
    }
}
