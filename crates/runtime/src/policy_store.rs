//! The policy being served: compiled once per (re)load into an immutable [`Snapshot`] together
//! with every lookup table the request path needs, and swapped whole with `ArcSwap`.
//!
//! A request takes the current `Arc<Snapshot>` once and uses it to the end, so a reload never
//! changes the policy under a running request (docs/language.md, "What happens to a request"), and
//! the request path never clones a policy, compiles a regex or parses a URL: all of that happens
//! here, off the request path, on the reload's blocking thread.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use bytes::Bytes;
use hyper::header::HeaderValue;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use src_compiler::hir::CheckedPolicy;
use src_compiler::{CheckOptions, CompiledPolicy, EngineKind};
use src_dsl::{render, Diagnostic, SourceMap};

use crate::backends::{Endpoint, SimPool};
use crate::hooks::ModelSignals;

/// Why a policy could not be (re)loaded.
#[derive(Debug, Clone)]
pub struct LoadFailure {
    /// One line for logs and the admin endpoint.
    pub message: String,
    pub diagnostics: Vec<Diagnostic>,
    pub sources: SourceMap,
}

impl LoadFailure {
    pub fn from_message(message: impl Into<String>) -> LoadFailure {
        LoadFailure {
            message: message.into(),
            diagnostics: Vec::new(),
            sources: SourceMap::new(),
        }
    }

    /// Diagnostics rendered for people (no color: this goes to logs).
    pub fn human(&self) -> String {
        if self.diagnostics.is_empty() {
            self.message.clone()
        } else {
            render::human(&self.diagnostics, &self.sources, false)
        }
    }

    /// The `src check --format json` report of the diagnostics.
    pub fn json(&self) -> Value {
        render::json_report(&self.diagnostics, &self.sources)
    }
}

impl std::fmt::Display for LoadFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.human())
    }
}

/// A policy that compiled, before its backends are attached.
pub struct Compiled {
    pub policy: CompiledPolicy,
    pub content_hash: String,
    pub warnings: Vec<Diagnostic>,
    pub sources: SourceMap,
}

/// Loads, checks and compiles the policy at `path` (blocking: run it off the async threads).
pub fn compile_policy(
    path: &Path,
    engine: EngineKind,
    models: &dyn ModelSignals,
) -> Result<Compiled, LoadFailure> {
    let source = src_compiler::load(path).map_err(|err| {
        LoadFailure::from_message(format!(
            "cannot load the policy at `{}`: {err}",
            path.display()
        ))
    })?;
    let sources = source.sources.clone();
    let outcome = src_compiler::check(source, &CheckOptions::default());
    let (errors, warnings): (Vec<Diagnostic>, Vec<Diagnostic>) = outcome
        .diagnostics
        .into_iter()
        .partition(Diagnostic::is_error);
    let checked = match outcome.policy {
        Some(checked) if errors.is_empty() => checked,
        _ => {
            return Err(LoadFailure {
                message: format!("the policy has {} error(s)", errors.len().max(1)),
                diagnostics: errors,
                sources,
            })
        }
    };
    let refused = models.prepare(&checked);
    if !refused.is_empty() {
        return Err(LoadFailure {
            message: format!(
                "the policy needs {} model(s) this server cannot run",
                refused.len()
            ),
            diagnostics: refused,
            sources,
        });
    }
    let content_hash = content_hash(&sources);
    let policy = src_compiler::compile(checked, engine)
        .map_err(|err| LoadFailure::from_message(format!("cannot compile the policy: {err}")))?;
    Ok(Compiled {
        policy,
        content_hash,
        warnings,
        sources,
    })
}

/// sha256 over every file's name and text, in load order.
pub fn content_hash(sources: &SourceMap) -> String {
    let mut hasher = Sha256::new();
    for (_, file) in sources.files() {
        let name = file
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        hasher.update(name.as_bytes());
        hasher.update([0]);
        hasher.update(file.text.as_bytes());
        hasher.update([0]);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Per-model data the forwarder needs, prepared once.
#[derive(Debug, Clone)]
pub struct ModelWire {
    /// The served id as a JSON string (spliced into bodies).
    pub served_json: Vec<u8>,
    /// The served id as the `x-selected-model` value.
    pub served_header: HeaderValue,
    /// Its upstream-time metrics, resolved once per door.
    pub upstream_times: Arc<crate::telemetry::UpstreamHandles>,
}

/// The policy being served, with everything the request path looks up.
pub struct Snapshot {
    pub compiled: CompiledPolicy,
    pub generation: u64,
    pub content_hash: String,
    pub loaded_at: SystemTime,
    pub warnings: usize,
    /// The warnings themselves (`src check` would print them), spans into the policy's sources.
    pub warning_list: Vec<Diagnostic>,
    /// Indexed by `BackendId`.
    pub endpoints: Vec<Endpoint>,
    /// Indexed by `ModelId`.
    pub wire: Vec<ModelWire>,
    /// The `GET /v1/models` answer.
    pub models_list: Bytes,
    /// Each of its entries by id: the `GET /v1/models/{id}` answers.
    pub model_entries: HashMap<String, Bytes>,
}

impl Snapshot {
    pub fn policy(&self) -> &CheckedPolicy {
        &self.compiled.checked
    }

    /// Attaches backends to a compiled policy: simulated ones are started (or reused) from
    /// `sims`; API keys are read from the environment now, so a missing one fails the load
    /// instead of every request.
    pub async fn build(
        compiled: Compiled,
        generation: u64,
        sims: &SimPool,
        default_timeout: Duration,
        sim_time_scale: f64,
    ) -> Result<Snapshot, LoadFailure> {
        let checked = &compiled.policy.checked;
        let mut endpoints = Vec::with_capacity(checked.backends.len());
        for (index, backend) in checked.backends.iter().enumerate() {
            let served: Vec<String> = checked
                .models
                .iter()
                .filter(|m| m.backend.index() == index)
                .map(|m| m.serves.clone())
                .collect();
            let endpoint =
                Endpoint::resolve(backend, served, sims, default_timeout, sim_time_scale)
                    .await
                    .map_err(|err| LoadFailure::from_message(err.to_string()))?;
            endpoints.push(endpoint);
        }
        let mut wire = Vec::with_capacity(checked.models.len());
        for model in &checked.models {
            let served_json = serde_json::to_vec(&model.serves)
                .map_err(|err| LoadFailure::from_message(err.to_string()))?;
            wire.push(ModelWire {
                served_json,
                served_header: model.served_header.clone(),
                upstream_times: Arc::default(),
            });
        }
        let created = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let (models_list, model_entries) = models_list(checked, created);
        Ok(Snapshot {
            generation,
            content_hash: compiled.content_hash,
            loaded_at: SystemTime::now(),
            warnings: compiled.warnings.len(),
            warning_list: compiled.warnings,
            endpoints,
            wire,
            models_list,
            model_entries,
            compiled: compiled.policy,
        })
    }
}

/// The OpenAI list: router names (routed), then logical models and their aliases, then the
/// served ids a client may send instead (those bound to exactly one model and not already
/// listed under another meaning), marked `owned_by: "src-served"`; and each entry by its id.
fn models_list(policy: &CheckedPolicy, created: u64) -> (Bytes, HashMap<String, Bytes>) {
    let mut data = Vec::new();
    let mut listed: HashSet<&str> = HashSet::new();
    for name in &policy.router.names {
        listed.insert(name);
        data.push(
            json!({"id": name, "object": "model", "created": created, "owned_by": "src-router"}),
        );
    }
    for model in &policy.models {
        listed.insert(&model.name);
        data.push(json!({
            "id": model.name, "object": "model", "created": created, "owned_by": "src",
            "served_as": model.serves,
        }));
        for alias in &model.aliases {
            listed.insert(alias);
            data.push(json!({
                "id": alias, "object": "model", "created": created, "owned_by": "src",
                "served_as": model.serves, "alias_of": model.name,
            }));
        }
    }
    for model in &policy.models {
        let serving = src_compiler::compiled::target::models_serving(policy, &model.serves);
        if serving.len() == 1 && listed.insert(&model.serves) {
            data.push(json!({
                "id": model.serves, "object": "model", "created": created,
                "owned_by": "src-served", "served_id_of": model.name,
            }));
        }
    }
    let entries = data
        .iter()
        .filter_map(|entry| {
            let id = entry.get("id")?.as_str()?.to_owned();
            Some((id, Bytes::from(entry.to_string())))
        })
        .collect();
    let list = Bytes::from(json!({"object": "list", "data": data}).to_string());
    (list, entries)
}

/// A failed reload, as the admin endpoint shows it.
#[derive(Debug, Clone)]
pub struct ReloadError {
    pub at: SystemTime,
    pub failure: LoadFailure,
}

/// What a (re)load did, as the reload metric's `result` label says it.
pub const RELOAD_OK: &str = "ok";
pub const RELOAD_UNCHANGED: &str = "unchanged";
pub const RELOAD_ERROR: &str = "error";

/// Reloads remembered for the console, newest last.
pub const HISTORY: usize = 50;

/// One load or reload, as the console's health view lists it.
#[derive(Debug, Clone)]
pub struct ReloadEvent {
    pub at: SystemTime,
    /// The generation serving after it.
    pub generation: u64,
    /// `ok` (the first load too), `unchanged` or `error`: the reload metric's words.
    pub result: &'static str,
    /// Why it failed, when it did.
    pub failure: Option<LoadFailure>,
}

/// The current snapshot and the reload history the admin endpoint reports.
pub struct PolicyStore {
    current: ArcSwap<Snapshot>,
    last_error: Mutex<Option<ReloadError>>,
    next_generation: AtomicU64,
    history: Mutex<VecDeque<ReloadEvent>>,
}

impl PolicyStore {
    pub fn new(first: Snapshot) -> PolicyStore {
        let next = first.generation + 1;
        let store = PolicyStore {
            history: Mutex::default(),
            current: ArcSwap::from_pointee(first),
            last_error: Mutex::new(None),
            next_generation: AtomicU64::new(next),
        };
        store.note(RELOAD_OK, None);
        store
    }

    fn note(&self, result: &'static str, failure: Option<LoadFailure>) {
        let mut history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
        if history.len() == HISTORY {
            history.pop_front();
        }
        history.push_back(ReloadEvent {
            at: SystemTime::now(),
            generation: self.current.load().generation,
            result,
            failure,
        });
    }

    /// The last [`HISTORY`] loads and reloads, oldest first.
    pub fn history(&self) -> Vec<ReloadEvent> {
        self.history
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    /// The snapshot a request uses from start to end.
    pub fn current(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    pub fn next_generation(&self) -> u64 {
        self.next_generation.fetch_add(1, Ordering::Relaxed)
    }

    /// Makes `snapshot` current and clears the last error (the policy on disk is good again).
    pub fn swap(&self, snapshot: Snapshot) {
        self.current.store(Arc::new(snapshot));
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        self.note(RELOAD_OK, None);
    }

    /// The files on disk are what is being served again: an earlier failure no longer applies.
    pub fn clear_error(&self) {
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        self.note(RELOAD_UNCHANGED, None);
    }

    pub fn record_error(&self, failure: LoadFailure) {
        self.note(RELOAD_ERROR, Some(failure.clone()));
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(ReloadError {
            at: SystemTime::now(),
            failure,
        });
    }

    pub fn last_error(&self) -> Option<ReloadError> {
        self.last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
