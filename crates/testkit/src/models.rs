//! The harness of the model tests: where the repository's model directories, the models venv
//! and the ONNX Runtime library are (`scripts/models.sh` builds all three), and a `src serve` on
//! `127.0.0.1:0` whose model runtime the test configures.
//!
//! Nothing here skips: a missing `models/` directory or library fails the test with the command
//! that provides it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use hyper::Method;
use serde_json::Value;
use src_runtime::hooks::NoSessions;
use src_runtime::log::RequestLog;
use src_runtime::models::{ModelOptions, OnnxModels};
use src_runtime::{Components, ServerHandle};

use crate::{Http, TestResult};

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
    reference_with(model, texts, &[])
}

/// Runs `scripts/models/reference.py --entities` on `texts`: a token classifier's entity spans
/// (UTF-8 byte offsets, no threshold applied), one batch.
pub fn reference_entities(model: &Path, texts: &[&str]) -> TestResult<Value> {
    reference_with(model, texts, &["--entities"])
}

fn reference_with(model: &Path, texts: &[&str], flags: &[&str]) -> TestResult<Value> {
    let python = repo().join(".cache/venv-models/bin/python");
    if !python.is_file() {
        return Err("the models venv is missing: run `scripts/models.sh` first".into());
    }
    let out = Command::new(python)
        .arg(repo().join("scripts/models/reference.py"))
        .arg(model)
        .arg(serde_json::to_string(texts)?)
        .args(flags)
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

/// `policy` with `{models}` replaced by the absolute path of the repository's `models/`.
pub fn with_models(policy: &str) -> TestResult<String> {
    let models = repo().join("models").canonicalize().map_err(|e| {
        format!("the repository's `models/` is missing ({e}): run `scripts/models.sh` first")
    })?;
    Ok(policy.replace("{models}", &models.display().to_string()))
}

/// A running router over a policy whose model paths point at the repository's models.
pub struct Served {
    pub server: ServerHandle,
    pub dir: tempfile::TempDir,
    pub models: Arc<OnnxModels>,
    pub client: Http,
}

/// `{models}` in `policy` becomes the absolute path of the repository's `models/`.
pub async fn serve(policy: &str, options: ModelOptions) -> TestResult<Served> {
    load_library()?;
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("policy.sr"), with_models(policy)?)?;
    let models = Arc::new(OnnxModels::new(options));
    let server = start(dir.path(), Arc::clone(&models)).await?;
    Ok(Served {
        server,
        dir,
        models,
        client: Http::new(),
    })
}

pub async fn start(
    policy: &Path,
    models: Arc<OnnxModels>,
) -> Result<ServerHandle, src_runtime::ServeError> {
    let cfg = crate::config(policy);
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
        let answer = self
            .client
            .send(Method::POST, &url, body.to_string(), &[])
            .await?;
        let route = answer.header("x-sr-route").map(str::to_owned);
        let json = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        Ok((answer.status, route, json))
    }

    pub async fn metrics(&self) -> TestResult<String> {
        let url = format!("http://{}/metrics", self.server.admin_addr);
        Ok(self.client.send(Method::GET, &url, "", &[]).await?.text())
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
