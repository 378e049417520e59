//! One model directory (`model.onnx`, `tokenizer.json`, `config.json`) loaded for inference.
//!
//! Preprocessing follows `scripts/models/reference.py` exactly, because that is what the models
//! were trained and evaluated with: windows of `config.json` `max_length` tokens (then
//! `max_position_embeddings`, then 512; the first window is the reference's truncation, the
//! others its overflowing windows, see [`super::window`]), padding with `[PAD]` to the batch's
//! longest, int64 inputs matched by name. A classifier answers its `logits`; a detector the
//! entities its per-token `logits` tag ([`super::entities`]); an encoder answers one
//! L2-normalised embedding per text (mean-pooled `last_hidden_state`, or a pooled
//! `sentence_embedding` output when the graph has one).

use std::path::{Path, PathBuf};

use ort::session::{Session, SessionInputValue};
use ort::value::{Tensor, ValueType};
use sha2::{Digest, Sha256};
use src_dsl::ast::Device;
use tokenizers::{
    Encoding, PaddingParams, PaddingStrategy, PostProcessor, Tokenizer, TruncationParams,
};

use super::entities::{self, Entity, Tags};
use super::error::ModelError;
use super::library;
use super::window::{self, Cut, Reading};

const DEFAULT_MAX_LENGTH: usize = 512;
const MASK_COUNT_FLOOR: f32 = 1e-9;
const NORM_FLOOR: f32 = 1e-12;
const INPUT_IDS: &str = "input_ids";
const ATTENTION_MASK: &str = "attention_mask";
const TOKEN_TYPE_IDS: &str = "token_type_ids";

/// What a declaration needs from its directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// `classifier`: `logits` and `id2label`.
    Classifier,
    /// `guard`: as a classifier, with two labels.
    Guard,
    /// `encoder`: `last_hidden_state` or `sentence_embedding`.
    Encoder,
    /// `detector`: per-token `logits` `[batch, seq, labels]` and BIO `id2label`.
    Detector,
}

impl Role {
    pub fn word(self) -> &'static str {
        match self {
            Role::Classifier => "classifier",
            Role::Guard => "guard",
            Role::Encoder => "encoder",
            Role::Detector => "detector",
        }
    }
}

/// Which graph output a model answers from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Output {
    Logits,
    /// `[batch, seq, labels]`: one row of logits per token, read into entities.
    TokenLogits(Tags),
    /// `[batch, seq, dim]`, mean-pooled over the mask.
    Hidden,
    /// `[batch, dim]`, already pooled.
    Pooled(String),
}

/// A loaded model directory. `infer` needs `&mut self` (an `ort` session runs one batch at a
/// time): the batcher owns each model on its own thread.
pub struct Model {
    pub dir: PathBuf,
    pub role: Role,
    /// `id2label` in id order (empty for encoders).
    pub labels: Vec<String>,
    pub max_length: usize,
    /// sha256 over the three files: the identity of the model across reloads.
    pub fingerprint: String,
    /// `cpu` or `cuda`: where the session runs.
    pub device: &'static str,
    session: Session,
    /// Truncating to `max_length`, as the reference does.
    tokenizer: Tokenizer,
    /// Neither truncating nor padding: windows are cut from its tokens.
    plain: Tokenizer,
    /// Tokens of a window less the special tokens.
    content: usize,
    /// `[PAD]`'s id, for rows shorter than their batch's longest.
    pad_id: u32,
    inputs: Vec<String>,
    output: Output,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("dir", &self.dir)
            .field("role", &self.role)
            .field("labels", &self.labels)
            .field("device", &self.device)
            .finish()
    }
}

/// Tokenized texts, padded to the longest.
struct Batch {
    rows: usize,
    cols: usize,
    ids: Vec<i64>,
    mask: Vec<i64>,
    types: Vec<i64>,
}

impl Model {
    /// Loads `dir` for `role` on `device` with `threads` intra-op threads.
    pub fn load(
        dir: &Path,
        role: Role,
        device: Device,
        threads: usize,
    ) -> Result<Model, ModelError> {
        let config = read_config(dir)?;
        let max_length = max_length_of(&config);
        let labels = match role {
            Role::Encoder => Vec::new(),
            Role::Classifier | Role::Guard | Role::Detector => labels_of(dir, &config)?,
        };
        let (tokenizer, pad_id) = load_tokenizer(dir, max_length)?;
        let mut plain = tokenizer.clone();
        plain.with_padding(None);
        let special = plain
            .get_post_processor()
            .map_or(0, |p| p.added_tokens(false));
        let content = max_length.saturating_sub(special).max(1);
        let (session, device_used) = open_session(dir, device, threads)?;
        let inputs = match_inputs(dir, &session)?;
        let output = match_output(dir, &session, role, &labels)?;
        if role == Role::Guard && labels.len() != 2 {
            return Err(ModelError::Shape {
                dir: dir.to_path_buf(),
                why: format!("a guard needs two labels; `id2label` has {}", labels.len()),
            });
        }
        Ok(Model {
            dir: dir.to_path_buf(),
            role,
            labels,
            max_length,
            fingerprint: fingerprint(dir)?,
            device: device_used,
            session,
            tokenizer,
            plain,
            content,
            pad_id,
            inputs,
            output,
        })
    }

    /// Runs `texts` as one batch: `logits` per text for a classifier, a unit-length embedding
    /// per text for an encoder.
    pub fn infer(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        let encodings = texts
            .iter()
            .map(|t| self.encode(t))
            .collect::<Result<Vec<_>, _>>()?;
        self.infer_encoded(&encodings)
    }

    /// A detector's entities in `text`, read in windows as `reading` says: what the batcher
    /// answers for one text.
    pub fn detect(&mut self, text: &str, reading: Reading) -> Result<Vec<Entity>, ModelError> {
        let cut = self.windows(text, reading)?;
        let rows = self.infer_encoded(&cut.encodings)?;
        entities::merge_rows(&rows)
            .as_deref()
            .and_then(entities::unpack)
            .ok_or_else(|| ModelError::Inference("a detector answered no entities".into()))
    }

    /// A detector's entity types, in the order its answers number them (empty for other roles).
    pub fn entity_types(&self) -> &[String] {
        match &self.output {
            Output::TokenLogits(tags) => &tags.types,
            _ => &[],
        }
    }

    /// Tokenizes one text as [`Model::infer`] would (truncated, not padded).
    pub fn encode(&self, text: &str) -> Result<Encoding, ModelError> {
        self.tokenizer
            .encode(text, true)
            .map_err(|e| ModelError::Inference(format!("cannot tokenize: {e}")))
    }

    /// Cuts one text into windows as `reading` says: the batcher measures them before deciding
    /// which texts run together.
    pub fn windows(&mut self, text: &str, reading: Reading) -> Result<Cut, ModelError> {
        let content = self.content_of(reading);
        window::cut(&mut self.plain, text, content, reading.limit)
    }

    /// Tokens of content (special tokens aside) of a window as `reading` asks, never more than
    /// the model reads at once.
    pub fn content_of(&self, reading: Reading) -> usize {
        match reading.window {
            Some(w) => {
                let special = self.max_length.saturating_sub(self.content);
                w.saturating_sub(special).clamp(1, self.content)
            }
            None => self.content,
        }
    }

    /// Runs texts already tokenized by [`Model::encode`] as one batch, padded to the longest.
    pub fn infer_encoded(&mut self, encodings: &[Encoding]) -> Result<Vec<Vec<f32>>, ModelError> {
        if encodings.is_empty() {
            return Ok(Vec::new());
        }
        let batch = self.pad(encodings);
        let shape = [batch.rows as i64, batch.cols as i64];
        let mut feeds: Vec<(std::borrow::Cow<'static, str>, SessionInputValue<'static>)> =
            Vec::with_capacity(self.inputs.len());
        for name in &self.inputs {
            let data = match name.as_str() {
                INPUT_IDS => batch.ids.clone(),
                ATTENTION_MASK => batch.mask.clone(),
                _ => batch.types.clone(),
            };
            let tensor = Tensor::from_array((shape, data)).map_err(infer_err)?;
            feeds.push((name.clone().into(), tensor.into()));
        }
        let outputs = self.session.run(feeds).map_err(infer_err)?;
        let name = match &self.output {
            Output::Logits | Output::TokenLogits(_) => "logits",
            Output::Hidden => "last_hidden_state",
            Output::Pooled(name) => name.as_str(),
        };
        let value = outputs
            .get(name)
            .ok_or_else(|| ModelError::Inference(format!("the graph answered no `{name}`")))?;
        let (dims, data) = value.try_extract_tensor::<f32>().map_err(infer_err)?;
        let dims: Vec<usize> = dims.iter().map(|&d| d.max(0) as usize).collect();
        match &self.output {
            Output::TokenLogits(tags) => {
                let [rows, seq, width] = dims[..] else {
                    return Err(bad_rank(name, &dims));
                };
                check_rows(rows, batch.rows, data.len(), rows * seq * width)?;
                if seq != batch.cols || width != tags.width() {
                    return Err(ModelError::Inference(format!(
                        "`{name}` has the shape {dims:?} for {} tokens of {} labels",
                        batch.cols,
                        tags.width()
                    )));
                }
                Ok(encodings
                    .iter()
                    .enumerate()
                    .map(|(r, e)| {
                        let logits = &data[r * seq * width..(r + 1) * seq * width];
                        entities::pack(&entities::read(&entities::tokens(e), logits, tags))
                    })
                    .collect())
            }
            Output::Logits | Output::Pooled(_) => {
                let [rows, width] = dims[..] else {
                    return Err(bad_rank(name, &dims));
                };
                check_rows(rows, batch.rows, data.len(), rows * width)?;
                let mut out: Vec<Vec<f32>> =
                    data.chunks(width.max(1)).map(<[f32]>::to_vec).collect();
                if matches!(&self.output, Output::Pooled(_)) {
                    out.iter_mut().for_each(|v| normalize(v));
                }
                Ok(out)
            }
            Output::Hidden => {
                let [rows, seq, width] = dims[..] else {
                    return Err(bad_rank(name, &dims));
                };
                check_rows(rows, batch.rows, data.len(), rows * seq * width)?;
                if seq != batch.cols {
                    return Err(ModelError::Inference(format!(
                        "`{name}` has {seq} positions for {} tokens",
                        batch.cols
                    )));
                }
                Ok((0..rows)
                    .map(|r| {
                        let hidden = &data[r * seq * width..(r + 1) * seq * width];
                        let mask = &batch.mask[r * seq..(r + 1) * seq];
                        mean_pool(hidden, mask, width)
                    })
                    .collect())
            }
        }
    }

    /// The number of real tokens (special tokens included, after truncation) of `text`.
    pub fn token_count(&self, text: &str) -> Result<usize, ModelError> {
        Ok(self
            .tokenizer
            .encode(text, true)
            .map_err(|e| ModelError::Inference(format!("cannot tokenize: {e}")))?
            .get_attention_mask()
            .iter()
            .filter(|&&m| m != 0)
            .count())
    }

    fn pad(&self, encodings: &[Encoding]) -> Batch {
        let cols = encodings.iter().map(|e| e.len()).max().unwrap_or(0);
        let rows = encodings.len();
        let mut batch = Batch {
            rows,
            cols,
            ids: Vec::with_capacity(rows * cols),
            mask: Vec::with_capacity(rows * cols),
            types: Vec::with_capacity(rows * cols),
        };
        for e in encodings {
            let pad = cols - e.len().min(cols);
            batch.ids.extend(e.get_ids().iter().map(|&v| i64::from(v)));
            batch
                .ids
                .extend(std::iter::repeat_n(i64::from(self.pad_id), pad));
            batch
                .mask
                .extend(e.get_attention_mask().iter().map(|&v| i64::from(v)));
            batch.mask.extend(std::iter::repeat_n(0, pad));
            batch
                .types
                .extend(e.get_type_ids().iter().map(|&v| i64::from(v)));
            batch.types.extend(std::iter::repeat_n(0, pad));
        }
        batch
    }
}

/// Probabilities from logits.
pub fn softmax(logits: &[f32]) -> Vec<f32> {
    let top = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let exp: Vec<f32> = logits.iter().map(|&l| (l - top).exp()).collect();
    let sum: f32 = exp.iter().sum();
    exp.iter()
        .map(|&e| e / sum.max(f32::MIN_POSITIVE))
        .collect()
}

/// Checks that `dir` can serve `role`: the files exist, the tokenizer loads, the graph has the
/// inputs and the output the role needs, and a classifier's `logits` width equals `id2label`.
/// Answers the model's labels (empty for an encoder). Loads the ONNX Runtime library.
pub fn verify(dir: &Path, role: Role) -> Result<Vec<String>, ModelError> {
    Model::load(dir, role, Device::Cpu, 1).map(|m| m.labels)
}

fn infer_err(e: impl std::fmt::Display) -> ModelError {
    ModelError::Inference(e.to_string())
}

fn bad_rank(name: &str, dims: &[usize]) -> ModelError {
    ModelError::Inference(format!("`{name}` has the unexpected shape {dims:?}"))
}

fn check_rows(rows: usize, want: usize, have: usize, need: usize) -> Result<(), ModelError> {
    if rows != want || have < need {
        return Err(ModelError::Inference(format!(
            "the graph answered {rows} rows for {want} texts"
        )));
    }
    Ok(())
}

fn mean_pool(hidden: &[f32], mask: &[i64], width: usize) -> Vec<f32> {
    let mut sum = vec![0f32; width];
    let mut count = 0f32;
    for (row, &m) in hidden.chunks(width).zip(mask) {
        if m != 0 {
            let m = m as f32;
            count += m;
            sum.iter_mut().zip(row).for_each(|(s, &h)| *s += h * m);
        }
    }
    let count = count.max(MASK_COUNT_FLOOR);
    sum.iter_mut().for_each(|s| *s /= count);
    normalize(&mut sum);
    sum
}

fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(NORM_FLOOR);
    v.iter_mut().for_each(|x| *x /= norm);
}

fn read_config(dir: &Path) -> Result<serde_json::Value, ModelError> {
    if !dir.is_dir() {
        return Err(ModelError::File {
            path: dir.to_path_buf(),
            why: "no such directory".into(),
        });
    }
    let path = dir.join("config.json");
    let text = std::fs::read_to_string(&path).map_err(|e| ModelError::File {
        path: path.clone(),
        why: e.to_string(),
    })?;
    serde_json::from_str(&text).map_err(|e| ModelError::File {
        path,
        why: format!("not JSON: {e}"),
    })
}

fn max_length_of(config: &serde_json::Value) -> usize {
    ["max_length", "max_position_embeddings"]
        .iter()
        .find_map(|k| config.get(k).and_then(serde_json::Value::as_u64))
        .filter(|&n| n > 0)
        .map_or(DEFAULT_MAX_LENGTH, |n| n as usize)
}

fn labels_of(dir: &Path, config: &serde_json::Value) -> Result<Vec<String>, ModelError> {
    let bad = |why: String| ModelError::File {
        path: dir.join("config.json"),
        why,
    };
    let map = config
        .get("id2label")
        .and_then(serde_json::Value::as_object)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| bad("has no `id2label` map".into()))?;
    let mut labels: Vec<Option<String>> = vec![None; map.len()];
    for (k, v) in map {
        let id: usize = k
            .parse()
            .map_err(|_| bad(format!("has an `id2label` key `{k}` that is not a number")))?;
        let name = v.as_str().ok_or_else(|| {
            bad(format!(
                "has an `id2label` value for `{k}` that is not a string"
            ))
        })?;
        match labels.get_mut(id) {
            Some(slot) => *slot = Some(name.to_string()),
            None => return Err(bad("has `id2label` keys that are not 0..n-1".into())),
        }
    }
    labels
        .into_iter()
        .collect::<Option<Vec<String>>>()
        .ok_or_else(|| bad("has `id2label` keys that are not 0..n-1".into()))
}

fn load_tokenizer(dir: &Path, max_length: usize) -> Result<(Tokenizer, u32), ModelError> {
    let path = dir.join("tokenizer.json");
    let file_err = |why: String| ModelError::File {
        path: path.clone(),
        why,
    };
    if !path.is_file() {
        return Err(file_err("no such file".into()));
    }
    let mut tokenizer = Tokenizer::from_file(&path).map_err(|e| file_err(e.to_string()))?;
    let pad_id = tokenizer.token_to_id("[PAD]").unwrap_or(0);
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length,
            ..TruncationParams::default()
        }))
        .map_err(|e| file_err(e.to_string()))?;
    tokenizer.with_padding(Some(PaddingParams {
        strategy: PaddingStrategy::BatchLongest,
        pad_id,
        pad_token: "[PAD]".into(),
        ..PaddingParams::default()
    }));
    Ok((tokenizer, pad_id))
}

fn open_session(
    dir: &Path,
    device: Device,
    threads: usize,
) -> Result<(Session, &'static str), ModelError> {
    let path = dir.join("model.onnx");
    if !path.is_file() {
        return Err(ModelError::File {
            path,
            why: "no such file".into(),
        });
    }
    let environment = library::environment()?;
    let want_cuda = match device {
        Device::Cpu => false,
        Device::Cuda => true,
        Device::Auto => cuda_available(),
    };
    if want_cuda {
        match build_session(&environment, &path, threads, true) {
            Ok(session) => return Ok((session, "cuda")),
            Err(why) if device == Device::Cuda => {
                return Err(ModelError::Device(format!(
                    "`{}` asks for `device = cuda`, which is not available: {why}",
                    dir.display()
                )))
            }
            Err(why) => tracing::info!(
                model = %dir.display(),
                %why,
                "device auto: CUDA did not start, running on the CPU"
            ),
        }
    } else if device == Device::Auto {
        tracing::info!(
            model = %dir.display(),
            "device auto: this ONNX Runtime has no CUDA provider, running on the CPU"
        );
    }
    build_session(&environment, &path, threads, false)
        .map(|s| (s, "cpu"))
        .map_err(|why| ModelError::File { path, why })
}

fn cuda_available() -> bool {
    use ort::ep::ExecutionProvider;
    ort::ep::CUDA::is_available().unwrap_or(false)
}

/// `ort`'s builder errors are not `Send`: they become strings here.
fn build_session(
    environment: &ort::environment::Environment,
    path: &Path,
    threads: usize,
    cuda: bool,
) -> Result<Session, String> {
    let mut builder = Session::builder(environment)
        .map_err(|e| e.to_string())?
        .with_intra_threads(threads.max(1))
        .map_err(|e| e.to_string())?
        .with_inter_threads(1)
        .map_err(|e| e.to_string())?;
    if cuda {
        builder = builder
            .with_execution_providers([ort::ep::CUDA::default().build().error_on_failure()])
            .map_err(|e| e.to_string())?;
    }
    builder.commit_from_file(path).map_err(|e| e.to_string())
}

fn match_inputs(dir: &Path, session: &Session) -> Result<Vec<String>, ModelError> {
    let mut names = Vec::new();
    for input in session.inputs() {
        let name = input.name();
        if ![INPUT_IDS, ATTENTION_MASK, TOKEN_TYPE_IDS].contains(&name) {
            return Err(ModelError::Shape {
                dir: dir.to_path_buf(),
                why: format!(
                    "`model.onnx` has the input `{name}`; a model takes `input_ids`, \
                     `attention_mask` and optionally `token_type_ids`"
                ),
            });
        }
        if let Some(ty) = input.dtype().tensor_type() {
            if ty != ort::value::TensorElementType::Int64 {
                return Err(ModelError::Shape {
                    dir: dir.to_path_buf(),
                    why: format!("`model.onnx` input `{name}` is {ty:?}, not int64"),
                });
            }
        }
        names.push(name.to_string());
    }
    for required in [INPUT_IDS, ATTENTION_MASK] {
        if !names.iter().any(|n| n == required) {
            return Err(ModelError::Shape {
                dir: dir.to_path_buf(),
                why: format!("`model.onnx` has no `{required}` input"),
            });
        }
    }
    Ok(names)
}

fn match_output(
    dir: &Path,
    session: &Session,
    role: Role,
    labels: &[String],
) -> Result<Output, ModelError> {
    let shape_of = |name: &str| {
        session
            .outputs()
            .iter()
            .find(|o| o.name() == name)
            .map(|o| match o.dtype() {
                ValueType::Tensor { shape, .. } => shape.to_vec(),
                _ => Vec::new(),
            })
    };
    let bad = |why: String| ModelError::Shape {
        dir: dir.to_path_buf(),
        why,
    };
    let outputs: Vec<&str> = session.outputs().iter().map(|o| o.name()).collect();
    match role {
        Role::Classifier | Role::Guard => {
            let Some(shape) = shape_of("logits") else {
                return Err(bad(format!(
                    "`model.onnx` of a {} has no `logits` output (it has {})",
                    role.word(),
                    names(&outputs)
                )));
            };
            match shape[..] {
                [_, width] if width < 0 || width as usize == labels.len() => Ok(Output::Logits),
                [_, width] => Err(bad(format!(
                    "`logits` has {width} columns but `config.json` `id2label` has {} labels",
                    labels.len()
                ))),
                _ => Err(bad(format!(
                    "`logits` has the shape {shape:?}; a classifier answers [batch, labels]"
                ))),
            }
        }
        Role::Detector => {
            let Some(shape) = shape_of("logits") else {
                return Err(bad(format!(
                    "`model.onnx` of a detector has no `logits` output (it has {})",
                    names(&outputs)
                )));
            };
            let tags = Tags::new(labels);
            if tags.types.is_empty() {
                return Err(bad(format!(
                    "`config.json` `id2label` ({}) has no BIO label (`B-TYPE`, `I-TYPE`)",
                    labels.join(", ")
                )));
            }
            match shape[..] {
                [_, _, width] if width < 0 || width as usize == labels.len() => {
                    Ok(Output::TokenLogits(tags))
                }
                [_, _, width] => Err(bad(format!(
                    "`logits` has {width} labels per token but `config.json` `id2label` has {}",
                    labels.len()
                ))),
                _ => Err(bad(format!(
                    "`logits` has the shape {shape:?}; a detector answers [batch, tokens, labels]"
                ))),
            }
        }
        Role::Encoder => {
            if let Some(shape) = shape_of("sentence_embedding") {
                return match shape.len() {
                    2 => Ok(Output::Pooled("sentence_embedding".into())),
                    _ => Err(bad(format!(
                        "`sentence_embedding` has the shape {shape:?}; expected [batch, dim]"
                    ))),
                };
            }
            match shape_of("last_hidden_state") {
                Some(shape) if shape.len() == 3 => Ok(Output::Hidden),
                Some(shape) => Err(bad(format!(
                    "`last_hidden_state` has the shape {shape:?}; expected [batch, seq, dim]"
                ))),
                None => Err(bad(format!(
                    "`model.onnx` of an encoder has neither `last_hidden_state` nor \
                     `sentence_embedding` (it has {})",
                    names(&outputs)
                ))),
            }
        }
    }
}

fn names(list: &[&str]) -> String {
    if list.is_empty() {
        return "no outputs".into();
    }
    list.iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn fingerprint(dir: &Path) -> Result<String, ModelError> {
    let mut hasher = Sha256::new();
    for name in ["model.onnx", "tokenizer.json", "config.json"] {
        let path = dir.join(name);
        let bytes = std::fs::read(&path).map_err(|e| ModelError::File {
            path: path.clone(),
            why: e.to_string(),
        })?;
        hasher.update(name.as_bytes());
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(format!("{:x}", hasher.finalize()))
}
