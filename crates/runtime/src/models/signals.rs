//! [`OnnxModels`]: the [`ModelSignals`] implementation the server runs.
//!
//! Loaded models are kept by (directory, role, device) and reused across reloads while their
//! files are unchanged (size and modification time), so a reload costs no model load. Example
//! embeddings are cached by the model's content fingerprint and the example text: a reload, or a
//! second policy, with the same examples embeds nothing again. [`ModelSignals::embed`] runs one
//! text through an encoder's batcher for the response cache, unless a `similarity` signal just
//! embedded the same text with the same encoder: such embeddings are remembered (a few, briefly)
//! so a request pays one encoder call for its prompt, not two. Every model answer goes through
//! the model memo (`recall`): a text already answered by the same model file costs no call.
//!
//! A text longer than its model's window is read in windows ([`super::window`]), at most the
//! declaration's `windows` of them. Past that bound the text was read only in part, and the
//! call's failure mode decides what it answers: where it fails closed (`failure.classifier =
//! closed`, or unset and a `block` uses the signal) a guard, a detector or `similarity` scores
//! 1 — the
//! block refuses — and a classifier fails (the closed failure mode answers 503); where it fails
//! open, the first `windows` windows are the answer.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};
use src_compiler::eval::{ModelCall, ModelKind, ModelResult};
use src_compiler::hir::{CheckedPolicy, DetectorId, EncoderId, LabelId};
use src_compiler::pii::Detected;
use src_dsl::ast::Device;
use src_dsl::{codes, Diagnostic};

use super::batch::{BatchOptions, Batcher};
use super::declared::{
    check_labels, declaration, declarations, load_help, reading_of, similarity_examples,
    unsafe_index,
};
use super::error::ModelError;
use super::library::{self, LIBRARY_HELP};
use super::memo::MemoOptions;
use super::metrics::{FailureLabels, ModelMetrics};
use super::model::{Model, Role};
use super::recall::{Reason, Recall};
use super::window::{Reading, Windows};
use crate::hooks::{BoxFuture, Embedding, ModelSignals, SignalError};

/// How models run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelOptions {
    pub batch: BatchOptions,
    /// Per-signal limit: a call not answered in time is `Failed` (the policy's `failure` mode
    /// applies).
    pub timeout: Duration,
    /// ONNX Runtime intra-op threads per model.
    pub threads: usize,
    /// The model memo's bound and sharing.
    pub memo: MemoOptions,
}

impl Default for ModelOptions {
    fn default() -> Self {
        ModelOptions {
            batch: BatchOptions::default(),
            timeout: Duration::from_secs(2),
            threads: 1,
            memo: MemoOptions::default(),
        }
    }
}

impl ModelOptions {
    /// The defaults, overridden by `SRC_MODEL_BATCH` (most texts per batch),
    /// `SRC_MODEL_BATCH_TOKENS` (most padded tokens per batch), `SRC_MODEL_BATCH_WAIT_MS`,
    /// `SRC_MODEL_TIMEOUT_MS`, `SRC_MODEL_THREADS`, `SRC_MODEL_MEMO_BYTES` (0 turns the memo
    /// off), `SRC_MODEL_MEMO_SHARED` (1: share answers through a Redis session store),
    /// `SRC_MODEL_MEMO_SHARED_TTL_S` and `SRC_SESSION_REDIS_TIMEOUT_MS` when set to a number
    /// (anything else is logged and ignored).
    pub fn from_env() -> ModelOptions {
        let mut options = ModelOptions::default();
        let read = crate::config::env_number;
        if let Some(n) = read("SRC_MODEL_BATCH") {
            options.batch.max = (n as usize).max(1);
        }
        if let Some(n) = read("SRC_MODEL_BATCH_TOKENS") {
            options.batch.max_tokens = Some((n as usize).max(1));
        }
        if let Some(ms) = read("SRC_MODEL_BATCH_WAIT_MS") {
            options.batch.wait = Duration::from_millis(ms);
        }
        if let Some(ms) = read("SRC_MODEL_TIMEOUT_MS") {
            options.timeout = Duration::from_millis(ms);
        }
        if let Some(n) = read("SRC_MODEL_THREADS") {
            options.threads = (n as usize).max(1);
        }
        if let Some(n) = read("SRC_MODEL_MEMO_BYTES") {
            options.memo.bytes = n;
        }
        if let Some(n) = read("SRC_MODEL_MEMO_SHARED") {
            options.memo.shared = n != 0;
        }
        if let Some(s) = read("SRC_MODEL_MEMO_SHARED_TTL_S") {
            options.memo.shared_ttl = Duration::from_secs(s.max(1));
        }
        options.memo.redis_timeout = crate::store::Timeouts::from_lookup(read).session;
        options
    }
}

/// Files of a directory as last seen: a change reloads the model.
type Stamp = Vec<Option<(u64, SystemTime)>>;

/// (model fingerprint, example text) → unit embedding.
type ExampleCache = HashMap<(String, String), Arc<[f32]>>;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    dir: PathBuf,
    role: Role,
    device: u8,
}

struct Loaded {
    stamp: Stamp,
    batcher: Arc<Batcher>,
}

/// Texts whose embeddings are remembered for [`ModelSignals::embed`]; the memo is emptied when
/// full (its use is the same request, milliseconds apart, so recency hardly matters).
const RECENT_EMBEDDINGS: usize = 1024;

/// (model fingerprint, sha256 of the tenant and the text) → unit embedding.
type RecentEmbeddings = HashMap<(String, [u8; 32]), Arc<[f32]>>;

/// Runs classifier, guard, detector and similarity atoms on ONNX models.
pub struct OnnxModels {
    options: ModelOptions,
    metrics: ModelMetrics,
    loaded: Mutex<HashMap<Key, Loaded>>,
    examples: Mutex<ExampleCache>,
    recent: Mutex<RecentEmbeddings>,
    recall: Recall,
}

impl Default for OnnxModels {
    fn default() -> Self {
        OnnxModels::new(ModelOptions::default())
    }
}

impl OnnxModels {
    pub fn new(options: ModelOptions) -> OnnxModels {
        OnnxModels::with_links(options, Arc::default())
    }

    /// As [`OnnxModels::new`], sharing model answers through `links`, the server's shared Redis
    /// links.
    pub fn with_links(options: ModelOptions, links: Arc<crate::store::Links>) -> OnnxModels {
        let metrics = ModelMetrics::default();
        OnnxModels {
            options,
            recall: Recall::new(options.memo, metrics.clone(), links),
            metrics,
            loaded: Mutex::new(HashMap::new()),
            examples: Mutex::new(HashMap::new()),
            recent: Mutex::new(HashMap::new()),
        }
    }

    pub fn options(&self) -> ModelOptions {
        self.options
    }

    pub fn metrics(&self) -> &ModelMetrics {
        &self.metrics
    }

    /// Example embeddings held in the cache.
    pub fn cached_examples(&self) -> usize {
        self.examples.lock().map_or(0, |e| e.len())
    }

    /// Model answers held in the memo.
    pub fn remembered(&self) -> usize {
        self.recall.remembered()
    }

    /// The loaded model for a declaration, loading it (or reloading it when its files changed).
    pub fn load(&self, dir: &Path, role: Role, device: Device) -> Result<Arc<Batcher>, ModelError> {
        let key = key(dir, role, device);
        let stamp = stamp(dir);
        if let Some(found) = self.lookup(&key) {
            if found.0 == stamp {
                return Ok(found.1);
            }
        }
        let model = Model::load(dir, role, device, self.options.threads)?;
        let batcher = Arc::new(Batcher::start(
            model,
            self.options.batch,
            self.metrics.clone(),
        )?);
        if let Ok(mut loaded) = self.loaded.lock() {
            let replaced = loaded.insert(
                key,
                Loaded {
                    stamp,
                    batcher: Arc::clone(&batcher),
                },
            );
            // A changed file: the old model's answers are never asked for again.
            if let Some(old) = replaced {
                let old = &old.batcher.fingerprint;
                let still_loaded = loaded.values().any(|l| &l.batcher.fingerprint == old);
                if old != &batcher.fingerprint && !still_loaded {
                    self.recall.forget(old);
                }
            }
        }
        Ok(batcher)
    }

    fn lookup(&self, key: &Key) -> Option<(Stamp, Arc<Batcher>)> {
        let loaded = self.loaded.lock().ok()?;
        loaded
            .get(key)
            .map(|l| (l.stamp.clone(), Arc::clone(&l.batcher)))
    }

    fn batcher_for(&self, policy: &CheckedPolicy, kind: ModelKind) -> Option<Arc<Batcher>> {
        let (dir, role, device) = declaration(policy, kind)?;
        self.lookup(&key(dir, role, device)).map(|(_, b)| b)
    }

    /// Embeds `texts` under `batcher`'s model, from the cache where it can.
    fn embed_examples(
        &self,
        batcher: &Batcher,
        texts: &[String],
    ) -> Result<Vec<Arc<[f32]>>, ModelError> {
        let cached = |t: &String| {
            self.examples
                .lock()
                .ok()
                .and_then(|c| c.get(&(batcher.fingerprint.clone(), t.clone())).cloned())
        };
        let missing: Vec<String> = texts
            .iter()
            .filter(|t| cached(t).is_none())
            .cloned()
            .collect();
        if !missing.is_empty() {
            let rows = batcher.run_blocking(&missing)?;
            if let Ok(mut cache) = self.examples.lock() {
                for (text, row) in missing.into_iter().zip(rows) {
                    cache.insert((batcher.fingerprint.clone(), text), row.into());
                }
            }
        }
        texts
            .iter()
            .map(|t| {
                cached(t).ok_or_else(|| ModelError::Inference("an example was not embedded".into()))
            })
            .collect()
    }

    /// The key of `text`'s embedding for one tenant (`scope`): the tenant is hashed with the
    /// text, its length first, so no tenant's text can spell another tenant's key.
    fn recent_key(fingerprint: &str, scope: &str, text: &str) -> (String, [u8; 32]) {
        let digest = Sha256::new()
            .chain_update((scope.len() as u64).to_le_bytes())
            .chain_update(scope.as_bytes())
            .chain_update(text.as_bytes())
            .finalize();
        (fingerprint.to_owned(), digest.into())
    }

    /// Remembers the unit embedding of `text` (the mean of its windows') under
    /// `fingerprint`'s model, for one tenant.
    fn remember(&self, fingerprint: &str, scope: &str, text: &str, windows: Windows<'_>) {
        let Some(vector) = unit(windows.mean()) else {
            return;
        };
        if let Ok(mut recent) = self.recent.lock() {
            if recent.len() >= RECENT_EMBEDDINGS {
                recent.clear();
            }
            recent.insert(Self::recent_key(fingerprint, scope, text), vector.into());
        }
    }

    fn recalled(&self, fingerprint: &str, scope: &str, text: &str) -> Option<Arc<[f32]>> {
        self.recent
            .lock()
            .ok()?
            .get(&Self::recent_key(fingerprint, scope, text))
            .cloned()
    }

    fn cached_example(&self, fingerprint: &str, text: &str) -> Option<Arc<[f32]>> {
        self.examples
            .lock()
            .ok()?
            .get(&(fingerprint.to_string(), text.to_string()))
            .cloned()
    }

    fn fail(&self, model: &str, reason: &'static str) -> ModelResult {
        self.metrics
            .failures
            .get_or_create(&FailureLabels {
                model: model.to_string(),
                reason,
            })
            .inc();
        ModelResult::Failed
    }
}

impl ModelSignals for OnnxModels {
    fn prepare(&self, policy: &CheckedPolicy) -> Vec<Diagnostic> {
        let declared = declarations(policy);
        let Some(first) = declared.first() else {
            return Vec::new();
        };
        if let Err(err) = library::ensure_library() {
            let names: Vec<String> = declared.iter().map(|d| format!("`{}`", d.name)).collect();
            return vec![
                Diagnostic::error(codes::MODEL_UNAVAILABLE, err.to_string(), first.span)
                    .with_label_message("needs ONNX Runtime")
                    .with_note(format!("the policy declares {}", names.join(", ")))
                    .with_help(LIBRARY_HELP),
            ];
        }
        let mut diagnostics = Vec::new();
        for d in &declared {
            match self.load(&d.dir, d.role, d.device) {
                Ok(batcher) => {
                    if let Some(problem) = check_labels(policy, d, &batcher) {
                        diagnostics.push(problem);
                    }
                }
                Err(err) => diagnostics.push(
                    Diagnostic::error(
                        codes::MODEL_UNAVAILABLE,
                        format!("{} `{}` cannot run: {err}", d.role.word(), d.name),
                        d.span,
                    )
                    .with_label_message("declared here")
                    .with_help(load_help(&err)),
                ),
            }
        }
        if !diagnostics.is_empty() {
            return diagnostics;
        }
        for (encoder, examples) in similarity_examples(policy) {
            let Some(def) = policy.encoders.get(encoder.index()) else {
                continue;
            };
            let embedded = self
                .load(&def.path, Role::Encoder, def.device)
                .and_then(|b| self.embed_examples(&b, &examples));
            if let Err(err) = embedded {
                diagnostics.push(
                    Diagnostic::error(
                        codes::MODEL_UNAVAILABLE,
                        format!(
                            "cannot embed the `similarity` examples of encoder `{}`: {err}",
                            def.name
                        ),
                        def.span,
                    )
                    .with_label_message("declared here"),
                );
            }
        }
        diagnostics
    }

    fn compute<'a>(
        &'a self,
        policy: &'a CheckedPolicy,
        calls: &'a [ModelCall],
    ) -> BoxFuture<'a, Result<Vec<ModelResult>, SignalError>> {
        self.compute_scoped(policy, calls, "")
    }

    fn compute_scoped<'a>(
        &'a self,
        policy: &'a CheckedPolicy,
        calls: &'a [ModelCall],
        scope: &'a str,
    ) -> BoxFuture<'a, Result<Vec<ModelResult>, SignalError>> {
        Box::pin(async move {
            let deadline = tokio::time::Instant::now() + self.options.timeout;
            let store = self.recall.store_of(policy);
            // One text per (model, text, bound): two atoms over the same model and text share a
            // run.
            let mut pending: HashMap<(usize, &str, Reading), usize> = HashMap::new();
            let mut texts: Vec<(usize, &str, Reading)> = Vec::new();
            let mut batchers: Vec<Arc<Batcher>> = Vec::new();
            let mut slots: Vec<Option<usize>> = Vec::with_capacity(calls.len());
            for call in calls {
                let Some(batcher) = self.batcher_for(policy, call.model) else {
                    slots.push(None);
                    continue;
                };
                let b = match batchers.iter().position(|x| Arc::ptr_eq(x, &batcher)) {
                    Some(i) => i,
                    None => {
                        batchers.push(batcher);
                        batchers.len() - 1
                    }
                };
                let text = (b, call.text.as_str(), reading_of(policy, call.model));
                let slot = *pending.entry(text).or_insert_with(|| {
                    texts.push(text);
                    texts.len() - 1
                });
                slots.push(Some(slot));
            }
            // Polled together, the texts missing from the memo reach their batchers together.
            let answers: Vec<Result<Arc<[f32]>, Reason>> =
                futures_util::future::join_all(texts.iter().map(|&(b, text, reading)| {
                    self.recall
                        .row(&batchers[b], (text, scope, reading), deadline, store)
                }))
                .await;
            let results = calls
                .iter()
                .zip(slots)
                .map(|(call, slot)| {
                    let Some(slot) = slot else {
                        return self.fail("unprepared", "error");
                    };
                    let Some((b, ..)) = texts.get(slot) else {
                        return ModelResult::Failed;
                    };
                    let batcher = &batchers[*b];
                    match &answers[slot] {
                        Ok(row) => {
                            let Some(windows) = Windows::unpack(row) else {
                                return self.fail(&batcher.name, "error");
                            };
                            if matches!(call.model, ModelKind::Similarity(_)) {
                                self.remember(&batcher.fingerprint, scope, &call.text, windows);
                            }
                            self.answer(policy, call, batcher, windows)
                        }
                        Err(reason) => self.fail(&batcher.name, reason),
                    }
                })
                .collect();
            Ok(results)
        })
    }

    fn embed<'a>(
        &'a self,
        policy: &'a CheckedPolicy,
        encoder: EncoderId,
        text: &'a str,
        scope: &'a str,
    ) -> BoxFuture<'a, Result<Embedding, SignalError>> {
        Box::pin(async move {
            let name = policy
                .encoders
                .get(encoder.index())
                .map_or_else(|| format!("encoder #{}", encoder.0), |e| e.name.clone());
            let failed = |message: String| SignalError {
                signal: name.clone(),
                message,
            };
            let Some(batcher) = self.batcher_for(policy, ModelKind::Similarity(encoder)) else {
                self.fail("unprepared", "error");
                return Err(failed("the encoder is not loaded".into()));
            };
            if let Some(vector) = self.recalled(&batcher.fingerprint, scope, text) {
                return Ok(Embedding {
                    vector: vector.to_vec(),
                    model: batcher.fingerprint.clone(),
                });
            }
            let deadline = tokio::time::Instant::now() + self.options.timeout;
            let store = self.recall.store_of(policy);
            let reading = reading_of(policy, ModelKind::Similarity(encoder));
            let row = self
                .recall
                .row(&batcher, (text, scope, reading), deadline, store)
                .await;
            match row {
                Ok(row) => match Windows::unpack(&row).and_then(|w| unit(w.mean())) {
                    Some(vector) => Ok(Embedding {
                        vector,
                        model: batcher.fingerprint.clone(),
                    }),
                    None => {
                        self.fail(&batcher.name, "error");
                        Err(failed("the encoder answered a zero vector".into()))
                    }
                },
                Err(reason) => {
                    self.fail(&batcher.name, reason);
                    Err(failed(format!("the encoder call failed ({reason})")))
                }
            }
        })
    }

    fn entities<'a>(
        &'a self,
        policy: &'a CheckedPolicy,
        detector: DetectorId,
        texts: &'a [String],
        scope: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Vec<Detected>>, SignalError>> {
        Box::pin(async move {
            let def = policy.detectors.get(detector.index());
            let failed = |message: String| SignalError {
                signal: def.map_or_else(|| format!("detector #{}", detector.0), |d| d.name.clone()),
                message,
            };
            let kind = ModelKind::Detector(detector);
            let (Some(def), Some(batcher)) = (def, self.batcher_for(policy, kind)) else {
                self.fail("unprepared", "error");
                return Err(failed("the detector is not loaded".into()));
            };
            let deadline = tokio::time::Instant::now() + self.options.timeout;
            let store = self.recall.store_of(policy);
            let reading = reading_of(policy, kind);
            // Polled together, the texts missing from the memo reach the batcher together.
            let rows = futures_util::future::join_all(texts.iter().map(|text| {
                self.recall
                    .row(&batcher, (text, scope, reading), deadline, store)
            }))
            .await;
            let types = src_compiler::bio::entity_types(&batcher.labels);
            let mut found = Vec::with_capacity(texts.len());
            for row in rows {
                let row = row.map_err(|reason| {
                    self.fail(&batcher.name, reason);
                    failed(format!("the detector call failed ({reason})"))
                })?;
                let Some(windows) = Windows::unpack(&row) else {
                    self.fail(&batcher.name, "error");
                    return Err(failed("the detector answered no entities".into()));
                };
                if windows.past(reading.limit) {
                    self.metrics
                        .past_bound
                        .get_or_create(&super::metrics::ModelLabel {
                            model: batcher.name.clone(),
                        })
                        .inc();
                    return Err(failed(format!(
                        "a text is longer than the {} windows the detector reads",
                        reading.limit
                    )));
                }
                let Some(entities) = windows.rows().next().and_then(super::entities::unpack) else {
                    self.fail(&batcher.name, "error");
                    return Err(failed("the detector answered no entities".into()));
                };
                found.push(
                    entities
                        .iter()
                        .filter(|e| f64::from(e.score) >= def.threshold)
                        .filter_map(|e| {
                            Some(Detected {
                                span: e.start..e.end,
                                kind: types.get(e.kind)?.as_str().into(),
                            })
                        })
                        .collect(),
                );
            }
            Ok(found)
        })
    }

    fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.metrics.register(registry);
    }
}

/// `row` scaled to length 1 (encoders already answer unit vectors; this guards the dot product
/// against one that does not); `None` for a zero or non-finite row.
fn unit(mut row: Vec<f32>) -> Option<Vec<f32>> {
    let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
    if !norm.is_finite() || norm <= f32::EPSILON {
        return None;
    }
    for x in &mut row {
        *x /= norm;
    }
    Some(row)
}

impl OnnxModels {
    /// Turns a model's output rows (one per window read) into the atom's value.
    fn answer(
        &self,
        policy: &CheckedPolicy,
        call: &ModelCall,
        batcher: &Batcher,
        windows: Windows<'_>,
    ) -> ModelResult {
        if windows.past(reading_of(policy, call.model).limit) {
            self.metrics
                .past_bound
                .get_or_create(&super::metrics::ModelLabel {
                    model: batcher.name.clone(),
                })
                .inc();
            if call.closed {
                // The unread rest could hold anything: a score is its worst, a label unknown.
                return match call.model {
                    ModelKind::Classifier(_) => self.fail(&batcher.name, "too_long"),
                    ModelKind::Guard(_) | ModelKind::Detector(_) | ModelKind::Similarity(_) => {
                        ModelResult::Score(1.0)
                    }
                };
            }
        }
        match call.model {
            ModelKind::Classifier(c) => {
                let probs = windows.class();
                let best = (0..probs.len()).max_by(|&a, &b| probs[a].total_cmp(&probs[b]));
                let declared = policy.classifiers.get(c.index()).map(|d| &d.labels);
                let label = best.and_then(|i| {
                    let name = batcher.labels.get(i)?;
                    declared?.iter().position(|l| l == name)
                });
                match (label, best) {
                    (Some(label), Some(i)) => ModelResult::Class {
                        label: LabelId(label as u32),
                        confidence: f64::from(probs[i]),
                    },
                    _ => self.fail(&batcher.name, "error"),
                }
            }
            ModelKind::Guard(g) => {
                let positive = policy
                    .guards
                    .get(g.index())
                    .and_then(|def| unsafe_index(&batcher.labels, def.unsafe_label.as_deref()));
                match positive {
                    Some(i) => windows
                        .guard(i)
                        .map_or(ModelResult::Failed, |p| ModelResult::Score(f64::from(p))),
                    None => self.fail(&batcher.name, "error"),
                }
            }
            ModelKind::Detector(_) => {
                let found = windows.rows().next().and_then(super::entities::unpack);
                let types = src_compiler::bio::entity_types(&batcher.labels);
                // The asked types, as indices in the model's entity types.
                let asked: Vec<usize> = call
                    .examples
                    .iter()
                    .filter_map(|t| types.iter().position(|x| x == t))
                    .collect();
                match found {
                    Some(found) => ModelResult::Score(
                        found
                            .iter()
                            .filter(|e| asked.contains(&e.kind))
                            .map(|e| f64::from(e.score))
                            .fold(0.0, f64::max),
                    ),
                    None => self.fail(&batcher.name, "error"),
                }
            }
            ModelKind::Similarity(_) => {
                let mut examples = Vec::with_capacity(call.examples.len());
                for example in call.examples.iter() {
                    let Some(e) = self.cached_example(&batcher.fingerprint, example) else {
                        // `prepare` embeds every example of the policy; a miss means the policy
                        // changed under us: answer failed rather than run the encoder here.
                        return self.fail(&batcher.name, "error");
                    };
                    examples.push(e);
                }
                // A score is in [0, 1]: opposite directions count as no similarity.
                windows
                    .similarity(examples.iter().map(|e| &e[..]))
                    .map_or(ModelResult::Failed, |s| {
                        ModelResult::Score(f64::from(s.clamp(0.0, 1.0)))
                    })
            }
        }
    }
}

fn key(dir: &Path, role: Role, device: Device) -> Key {
    Key {
        dir: dir.to_path_buf(),
        role,
        device: match device {
            Device::Auto => 0,
            Device::Cpu => 1,
            Device::Cuda => 2,
        },
    }
}

fn stamp(dir: &Path) -> Stamp {
    ["model.onnx", "tokenizer.json", "config.json"]
        .iter()
        .map(|name| {
            let meta = std::fs::metadata(dir.join(name)).ok()?;
            Some((meta.len(), meta.modified().ok()?))
        })
        .collect()
}
