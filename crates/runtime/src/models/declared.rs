//! The model declarations of a checked policy, as the model runtime reads them: which
//! directory each loads in which role and on which device, how it reads a long text, the
//! labels (or entity types) its model must have, and the `similarity` examples to embed once.

use std::path::{Path, PathBuf};

use src_compiler::eval::ModelKind;
use src_compiler::hir::{CheckedPolicy, EncoderId, TExpr, TExprKind};
use src_dsl::ast::Device;
use src_dsl::{codes, Diagnostic, Span};

use super::batch::Batcher;
use super::error::ModelError;
use super::library::LIBRARY_HELP;
use super::model::Role;
use super::window::Reading;

/// How a declaration reads one text (`window = N`, `windows = N`).
pub(super) fn reading_of(policy: &CheckedPolicy, kind: ModelKind) -> Reading {
    let declared = match kind {
        ModelKind::Classifier(c) => policy
            .classifiers
            .get(c.index())
            .map(|d| (d.window, d.windows)),
        ModelKind::Guard(g) => policy.guards.get(g.index()).map(|d| (d.window, d.windows)),
        ModelKind::Detector(d) => policy
            .detectors
            .get(d.index())
            .map(|d| (d.window, d.windows)),
        ModelKind::Similarity(e) => policy
            .encoders
            .get(e.index())
            .map(|d| (d.window, d.windows)),
    };
    let (window, limit) = declared.unwrap_or((None, super::window::DEFAULT_WINDOWS));
    Reading {
        window,
        limit: limit.max(1),
    }
}

/// One model declaration of a policy.
pub(super) struct Declaration {
    pub(super) name: String,
    pub(super) span: Span,
    pub(super) dir: PathBuf,
    pub(super) role: Role,
    pub(super) device: Device,
    /// The declaring classifier's labels, or the guard's unsafe label as the checker resolved it.
    pub(super) labels: Option<Vec<String>>,
    /// A detector's declared entity types.
    pub(super) entities: Option<Vec<String>>,
    pub(super) unsafe_label: Option<String>,
}

pub(super) fn declarations(policy: &CheckedPolicy) -> Vec<Declaration> {
    let classifiers = policy.classifiers.iter().map(|c| Declaration {
        name: c.name.clone(),
        span: c.span,
        dir: c.path.clone(),
        role: Role::Classifier,
        device: c.device,
        labels: Some(c.labels.clone()),
        entities: None,
        unsafe_label: None,
    });
    let guards = policy.guards.iter().map(|g| Declaration {
        name: g.name.clone(),
        span: g.span,
        dir: g.path.clone(),
        role: Role::Guard,
        device: g.device,
        labels: None,
        entities: None,
        unsafe_label: g.unsafe_label.clone(),
    });
    let encoders = policy.encoders.iter().map(|e| Declaration {
        name: e.name.clone(),
        span: e.span,
        dir: e.path.clone(),
        role: Role::Encoder,
        device: e.device,
        labels: None,
        entities: None,
        unsafe_label: None,
    });
    let detectors = policy.detectors.iter().map(|d| Declaration {
        name: d.name.clone(),
        span: d.span,
        dir: d.path.clone(),
        role: Role::Detector,
        device: d.device,
        labels: None,
        entities: Some(d.entities.clone()),
        unsafe_label: None,
    });
    classifiers
        .chain(guards)
        .chain(encoders)
        .chain(detectors)
        .collect()
}

pub(super) fn declaration(
    policy: &CheckedPolicy,
    kind: ModelKind,
) -> Option<(&Path, Role, Device)> {
    match kind {
        ModelKind::Classifier(c) => policy
            .classifiers
            .get(c.index())
            .map(|d| (d.path.as_path(), Role::Classifier, d.device)),
        ModelKind::Guard(g) => policy
            .guards
            .get(g.index())
            .map(|d| (d.path.as_path(), Role::Guard, d.device)),
        ModelKind::Detector(d) => policy
            .detectors
            .get(d.index())
            .map(|d| (d.path.as_path(), Role::Detector, d.device)),
        ModelKind::Similarity(e) => policy
            .encoders
            .get(e.index())
            .map(|d| (d.path.as_path(), Role::Encoder, d.device)),
    }
}

/// The labels a declaration says must match the model's (`check` compares them too; a model
/// directory can change between `check` and `serve`).
pub(super) fn check_labels(
    policy: &CheckedPolicy,
    d: &Declaration,
    batcher: &Batcher,
) -> Option<Diagnostic> {
    let _ = policy;
    let model = &batcher.labels;
    let shown = |l: &[String]| {
        l.iter()
            .map(|x| format!("`{x}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(declared) = &d.labels {
        let mut want = declared.clone();
        let mut have = model.clone();
        want.sort();
        have.sort();
        if want != have {
            return Some(
                Diagnostic::error(
                    codes::LABELS_MISMATCH,
                    format!(
                        "labels of classifier `{}` differ from the model's `id2label` in `{}`",
                        d.name,
                        d.dir.join("config.json").display()
                    ),
                    d.span,
                )
                .with_label_message(format!("declared: {}", shown(declared)))
                .with_note(format!("the model's labels: {}", shown(model)))
                .with_help(format!(
                    "write the model's labels: `labels = [{}]`",
                    model.join(", ")
                )),
            );
        }
    }
    if let Some(declared) = &d.entities {
        let types = src_compiler::bio::entity_types(model);
        let missing: Vec<&String> = declared.iter().filter(|e| !types.contains(e)).collect();
        if !missing.is_empty() {
            return Some(
                Diagnostic::error(
                    codes::UNKNOWN_ENTITY_TYPE,
                    format!(
                        "detector `{}` declares entity types its model in `{}` does not tag: {}",
                        d.name,
                        d.dir.display(),
                        missing
                            .iter()
                            .map(|x| format!("`{x}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    d.span,
                )
                .with_note(format!("the model's entity types: {}", shown(&types)))
                .with_help("declare only types the model tags in `entities`"),
            );
        }
    }
    // The checker resolved the unsafe label from the same `config.json`; it is missing from
    // the loaded model only when the directory changed in between.
    if d.role == Role::Guard && unsafe_index(model, d.unsafe_label.as_deref()).is_none() {
        return Some(
            Diagnostic::error(
                codes::LABELS_MISMATCH,
                format!("cannot tell the unsafe label of guard `{}`", d.name),
                d.span,
            )
            .with_note(format!("the model's labels: {}", shown(model)))
            .with_help("declare it: `positive = LABEL`"),
        );
    }
    None
}

/// Where a guard's unsafe label (`GuardDef::unsafe_label`) is among its model's labels.
pub(super) fn unsafe_index(labels: &[String], unsafe_label: Option<&str>) -> Option<usize> {
    let wanted = unsafe_label?;
    labels.iter().position(|l| l == wanted)
}

pub(super) fn load_help(err: &ModelError) -> String {
    match err {
        ModelError::Library(_) => LIBRARY_HELP.to_string(),
        ModelError::Device(_) => "use `device = auto` to fall back to the CPU, or run where \
             ONNX Runtime has the CUDA provider (`onnxruntime-gpu`)"
            .to_string(),
        _ => "a model directory holds `model.onnx`, `tokenizer.json` and `config.json`; \
              `scripts/models.sh` builds the project's models under `models/`"
            .to_string(),
    }
}

/// Every `similarity` call's examples, by encoder.
pub(super) fn similarity_examples(policy: &CheckedPolicy) -> Vec<(EncoderId, Vec<String>)> {
    let mut found = Vec::new();
    let mut exprs: Vec<&TExpr> = Vec::new();
    exprs.extend(policy.signals.iter().map(|s| &s.expr));
    exprs.extend(policy.blocks.iter().map(|b| &b.when));
    exprs.extend(policy.routes.iter().filter_map(|r| r.when.as_ref()));
    exprs.extend(policy.cache.iter().filter_map(|c| c.skip_when.as_ref()));
    if let Some(p) = &policy.protect {
        exprs.extend(p.holds.iter().map(|h| &h.when));
    }
    while let Some(e) = exprs.pop() {
        if let TExprKind::Similarity {
            encoder, examples, ..
        } = &e.kind
        {
            found.push((*encoder, examples.clone()));
        }
        exprs.extend(e.children());
    }
    found
}
