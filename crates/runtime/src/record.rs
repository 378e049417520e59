//! `src serve --record DIR`: every decided request appended as one JSON line, with what decided
//! it, so that `src whatif` can decide the same traffic again under another policy offline.
//!
//! A line holds the API, the request headers (never `authorization`, `proxy-authorization` or
//! API-key headers: a recording is shared more widely than the server's secrets), the body as
//! parsed, the decision (block, route, model, refusal), the session state and hold, the value of
//! every signal the decision computed, and each model-backed signal's result keyed by model and
//! input text (so a what-if run needs no model files to reuse them).
//!
//! Writing happens on one thread behind a bounded queue: a slow disk never delays a request;
//! when the queue is full the line is dropped and counted. Files are `requests-NNNNNN.jsonl`,
//! rotated at a quarter of `--record-max-bytes`, and the oldest are deleted so the directory
//! stays within it.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;

use serde_json::{json, Map, Value};
use src_compiler::eval::{Evaluation, ModelCall, ModelKind, ModelResult};
use src_compiler::hir::{CheckedPolicy, Value as SignalValue};

/// The record format version.
pub const VERSION: u64 = 1;
/// Lines waiting for the writer before new ones are dropped.
const QUEUE: usize = 4096;
/// Default bound on the recording directory.
pub const DEFAULT_MAX_BYTES: u64 = 256 << 20;

/// Headers never written to a recording: credentials, and the outcome token (the admin token
/// when a policy says `outcomes = admin`).
pub fn is_secret_header(name: &str) -> bool {
    [
        "authorization",
        "proxy-authorization",
        "api-key",
        "x-api-key",
        "cookie",
        crate::headers::OUTCOME_TOKEN,
    ]
    .iter()
    .any(|s| name.eq_ignore_ascii_case(s))
}

/// The appending side, shared by every request.
#[derive(Clone)]
pub struct Recorder {
    queue: SyncSender<Value>,
    dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

impl Recorder {
    /// Creates `dir` if needed and starts the writer thread.
    pub fn start(dir: &Path, max_bytes: u64) -> io::Result<Recorder> {
        std::fs::create_dir_all(dir)?;
        let mut files = Files::open(dir.to_path_buf(), max_bytes.max(4096))?;
        let (queue, lines) = sync_channel::<Value>(QUEUE);
        std::thread::Builder::new()
            .name("src-record".into())
            .spawn(move || {
                for line in lines {
                    if let Err(error) = files.append(&line) {
                        tracing::warn!(%error, "cannot write the request recording");
                    }
                }
            })?;
        Ok(Recorder {
            queue,
            dropped: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Queues one line; drops it (counted) when the writer is behind.
    pub fn record(&self, line: Value) {
        match self.queue.try_send(line) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Lines dropped because the writer was behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// The request headers as recorded: names lowercased, secrets left out.
pub fn recorded_headers(headers: &[(String, String)]) -> Value {
    Value::Array(
        headers
            .iter()
            .filter(|(n, _)| !is_secret_header(n))
            .map(|(n, v)| json!([n.to_ascii_lowercase(), v]))
            .collect(),
    )
}

/// A signal value as recorded: labels and models by name.
pub fn value_json(policy: &CheckedPolicy, value: &SignalValue) -> Value {
    match value {
        SignalValue::Bool(b) => json!(b),
        SignalValue::Int(i) => json!(i),
        SignalValue::Float(f) => json!(f),
        SignalValue::Text(t) => json!(t),
        SignalValue::Label(set, label) => {
            json!(policy.labels(*set).get(label.0 as usize).cloned())
        }
        SignalValue::Model(m) => json!(policy.models.get(m.index()).map(|d| d.name.clone())),
    }
}

/// A text signal's recorded value when it reads a credential: never the credential itself.
pub const REDACTED: &str = "<redacted>";

/// Every signal of the decision, by name; `null` for those it did not compute; a text signal
/// that reads a credential (`header("authorization")`, `api_key`) as [`REDACTED`].
pub fn signal_values(policy: &CheckedPolicy, evaluation: &Evaluation<'_>) -> Map<String, Value> {
    evaluation
        .signal_values()
        .into_iter()
        .filter_map(|(id, v)| {
            let signal = policy.signals.get(id.index())?;
            let secret = matches!(v, Some(SignalValue::Text(Some(_))))
                && crate::credentials::reads_credential(policy, &signal.expr, 0);
            let value = match v {
                _ if secret => json!(REDACTED),
                Some(v) => value_json(policy, &v),
                None => Value::Null,
            };
            Some((signal.name.clone(), value))
        })
        .collect()
}

/// The recorded name and kind of a model call's model.
pub fn model_name(policy: &CheckedPolicy, kind: ModelKind) -> Option<(&'static str, String)> {
    match kind {
        ModelKind::Classifier(id) => policy
            .classifiers
            .get(id.index())
            .map(|c| ("classifier", c.name.clone())),
        ModelKind::Guard(id) => policy
            .guards
            .get(id.index())
            .map(|g| ("guard", g.name.clone())),
        ModelKind::Detector(id) => policy
            .detectors
            .get(id.index())
            .map(|d| ("detector", d.name.clone())),
        ModelKind::Similarity(id) => policy
            .encoders
            .get(id.index())
            .map(|e| ("similarity", e.name.clone())),
    }
}

/// One model-backed call and its result: the key a what-if run finds it by (kind, model, text
/// and, for a similarity or a detector, the examples or the entity types asked), then the
/// answer.
pub fn model_call(policy: &CheckedPolicy, call: &ModelCall, result: &ModelResult) -> Value {
    let (kind, name) = model_name(policy, call.model).unwrap_or(("unknown", String::new()));
    let result = match result {
        ModelResult::Class { label, confidence } => {
            let set = match call.model {
                ModelKind::Classifier(id) => {
                    policy.classifiers.get(id.index()).map(|c| c.labels.clone())
                }
                _ => None,
            };
            let label = set.and_then(|l| l.get(label.0 as usize).cloned());
            json!({"label": label, "confidence": confidence})
        }
        ModelResult::Score(score) => json!({"score": score}),
        ModelResult::Failed => json!("failed"),
    };
    json!({
        "kind": kind,
        "model": name,
        "text": call.text,
        "examples": call.examples.as_ref(),
        "result": result,
    })
}

struct Files {
    dir: PathBuf,
    max_bytes: u64,
    current: File,
    index: u64,
    written: u64,
}

fn file_name(index: u64) -> String {
    format!("requests-{index:06}.jsonl")
}

/// The recording files in `dir`, oldest first.
pub fn record_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let index = name
                .strip_prefix("requests-")?
                .strip_suffix(".jsonl")?
                .parse()
                .ok()?;
            Some((index, e.path()))
        })
        .collect();
    files.sort();
    Ok(files.into_iter().map(|(_, p)| p).collect())
}

impl Files {
    fn open(dir: PathBuf, max_bytes: u64) -> io::Result<Files> {
        let next = record_files(&dir)?
            .last()
            .and_then(|p| {
                p.file_name()?
                    .to_str()?
                    .strip_prefix("requests-")?
                    .strip_suffix(".jsonl")?
                    .parse::<u64>()
                    .ok()
            })
            .map_or(1, |i| i + 1);
        let current = new_file(&dir, next)?;
        Ok(Files {
            dir,
            max_bytes,
            current,
            index: next,
            written: 0,
        })
    }

    fn append(&mut self, line: &Value) -> io::Result<()> {
        let mut text = line.to_string();
        text.push('\n');
        if self.written > 0 && self.written + text.len() as u64 > self.max_bytes / 4 {
            self.index += 1;
            self.current = new_file(&self.dir, self.index)?;
            self.written = 0;
            self.prune()?;
        }
        self.current.write_all(text.as_bytes())?;
        self.current.flush()?;
        self.written += text.len() as u64;
        Ok(())
    }

    /// Deletes the oldest files until the directory, with the new current file grown to its
    /// quarter, is within its bound.
    fn prune(&self) -> io::Result<()> {
        let room = self.max_bytes - self.max_bytes / 4;
        let files = record_files(&self.dir)?;
        let sizes: Vec<u64> = files
            .iter()
            .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
            .collect();
        let mut total: u64 = sizes.iter().sum();
        for (path, size) in files.iter().zip(sizes) {
            if total <= room || path.ends_with(file_name(self.index)) {
                break;
            }
            std::fs::remove_file(path)?;
            total -= size;
        }
        Ok(())
    }
}

fn new_file(dir: &Path, index: u64) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(file_name(index)))
}

/// A recording line that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The cause is worded in the message and not also a `source`, which a chain printed whole
    /// would repeat.
    #[error("cannot read `{path}`: {}", src_compiler::load::io_reason(.cause))]
    Io { path: String, cause: io::Error },
    #[error("`{path}` line {line}: {detail}")]
    Line {
        path: String,
        line: usize,
        detail: String,
    },
}

/// Every recorded line in `dir`, oldest first.
pub fn read_recording(dir: &Path) -> Result<Vec<Value>, ReadError> {
    let io_error = |path: &Path| {
        let path = path.display().to_string();
        move |cause| ReadError::Io { path, cause }
    };
    let mut lines = Vec::new();
    for path in record_files(dir).map_err(io_error(dir))? {
        let file = File::open(&path).map_err(io_error(&path))?;
        for (n, line) in BufReader::new(file).lines().enumerate() {
            let line = line.map_err(io_error(&path))?;
            if line.trim().is_empty() {
                continue;
            }
            let value: Value = serde_json::from_str(&line).map_err(|e| ReadError::Line {
                path: path.display().to_string(),
                line: n + 1,
                detail: e.to_string(),
            })?;
            if value["v"].as_u64() != Some(VERSION) {
                return Err(ReadError::Line {
                    path: path.display().to_string(),
                    line: n + 1,
                    detail: format!("not a version {VERSION} record"),
                });
            }
            lines.push(value);
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_never_recorded() {
        let headers = vec![
            ("Authorization".to_string(), "Bearer sk-1".to_string()),
            ("x-api-key".to_string(), "k".to_string()),
            ("X-Tenant".to_string(), "acme".to_string()),
            ("x-sr-outcome-token".to_string(), "admin-secret".to_string()),
        ];
        assert_eq!(recorded_headers(&headers), json!([["x-tenant", "acme"]]));
    }

    #[test]
    fn files_rotate_and_stay_within_their_bound() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut files = Files::open(dir.path().to_path_buf(), 8192)?;
        let line = json!({"v": VERSION, "pad": "x".repeat(500)});
        for _ in 0..100 {
            files.append(&line)?;
        }
        let paths = record_files(dir.path())?;
        assert!(paths.len() > 1);
        let total: u64 = paths
            .iter()
            .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
            .sum();
        assert!(total <= 8192, "{total}");
        let read = read_recording(dir.path()).map_err(io::Error::other)?;
        assert!(!read.is_empty() && read.len() < 100);
        Ok(())
    }
}
