//! Deployment data on disk: backend catalogs and model directories.
//!
//! A policy must only ever select models its backends actually serve, under the exact id they
//! expect, so each model's `serves` is looked up in its backend's catalog (the backend's
//! `GET /v1/models` answer saved as JSON; E040, E041), and catalog entries nothing can reach are
//! pointed out (W005). Model directories are checked when present: a classifier's `labels`
//! must be its `config.json` `id2label` set (E042, E043), a guard's `positive` one of its
//! labels, and the guard's unsafe label is resolved here, the one place that knows the rule for
//! it (the runtime reads `GuardDef::unsafe_label`). A missing directory is only a warning (W006) here, since `check` often runs where the
//! model files are not (CI); `serve` refuses it.

use super::{list_names, list_some, quote, Checker};
use crate::load::io_reason;
use src_dsl::ast::Ident;
use src_dsl::{codes, Diagnostic, Spanned};
use std::path::Path;

/// How many served ids an E040 lists before "and N more".
const LISTED_IDS: usize = 12;

/// Labels a guard's unsafe label is told apart from when `positive` is not declared: without
/// `positive`, a guard's model has two labels and the unsafe one is the one not listed here.
const SAFE_LABELS: &[&str] = &["benign", "safe", "LABEL_0"];

impl Checker<'_> {
    pub(super) fn check_deployment_files(&mut self) {
        self.check_catalogs();
        self.check_model_dirs();
    }

    fn check_catalogs(&mut self) {
        for (b, backend) in self.decls.backends.clone().into_iter().enumerate() {
            let live = self.options.live_catalogs.get(&backend.name.name);
            let (read, shown, span) =
                match (live, self.options.catalog_overrides.get(&backend.name.name)) {
                    (Some(live), _) => (
                        live.answer
                            .as_ref()
                            .map_err(|why| format!("cannot be fetched: {why}"))
                            .and_then(|text| parse_catalog(text)),
                        live.url.clone(),
                        backend.name.span,
                    ),
                    (None, Some(p)) => {
                        (read_catalog(p), p.display().to_string(), backend.name.span)
                    }
                    (None, None) => match &backend.catalog {
                        Some(c) => (
                            read_catalog(&self.resolve_path(&c.value)),
                            c.value.clone(),
                            c.span,
                        ),
                        None => continue,
                    },
                };
            let ids = match read {
                Ok(ids) => ids,
                Err(why) => {
                    let help = if live.is_some() {
                        "check that the backend is up and that its `url` ends where `/models` is served (usually `.../v1`)"
                    } else {
                        "save the backend's `GET /v1/models` answer there (`{\"data\": [{\"id\": \"...\"}]}`), or check against the live backend with `src check --live`"
                    };
                    self.report(
                        Diagnostic::error(
                            codes::CATALOG_UNREADABLE,
                            format!("catalog `{shown}` of backend `{}` {why}", backend.name.name),
                            span,
                        )
                        .with_label_message("catalog of this backend")
                        .with_help(help),
                    );
                    continue;
                }
            };
            let mut reachable = Vec::new();
            let mut misses = 0;
            for (m, model) in self.decls.models.clone().into_iter().enumerate() {
                let bound = model.backend.as_ref().is_some_and(|n| {
                    self.decls.get(super::names::Kind::Backend, &n.name) == Some(b)
                });
                let Some(serves) = model.serves.as_ref().filter(|_| bound) else {
                    continue;
                };
                if ids.contains(&serves.value) {
                    if self.uses.models[m] || model.aliases.is_some() {
                        reachable.push(serves.value.clone());
                    }
                    continue;
                }
                misses += 1;
                self.report(missing_from_catalog(
                    &model.name,
                    serves,
                    &backend.name,
                    &ids,
                    &shown,
                ));
            }
            let unreachable: Vec<&String> =
                ids.iter().filter(|id| !reachable.contains(id)).collect();
            // With a `serves` id missing, the id it was meant to be would be listed here too.
            if !unreachable.is_empty() && misses == 0 {
                self.report(
                    Diagnostic::warning(
                        codes::UNREACHABLE_CATALOG_MODEL,
                        format!(
                            "backend `{}` serves {} that no route can reach: {}",
                            backend.name.name,
                            if unreachable.len() == 1 { "a model" } else { "models" },
                            list_some(&unreachable, LISTED_IDS)
                        ),
                        span,
                    )
                    .with_label_message("listed in this catalog")
                    .with_help("bind a `model` to each id you mean to use and route to it; ids left out are never selected"),
                );
            }
        }
    }

    fn check_model_dirs(&mut self) {
        for c in self.decls.classifiers.clone() {
            let Some(labels) = self.model_labels("classifier", &c.name, &c.path) else {
                continue;
            };
            let Some(declared) = &c.labels else { continue };
            let mut want: Vec<&str> = declared.value.iter().map(|l| l.name.as_str()).collect();
            let mut have: Vec<&str> = labels.iter().map(String::as_str).collect();
            want.sort_unstable();
            want.dedup();
            have.sort_unstable();
            have.dedup();
            if want == have {
                continue;
            }
            let config = self.config_shown(&c.path);
            let fix = format!("[{}]", labels.join(", "));
            let d = Diagnostic::error(
                codes::LABELS_MISMATCH,
                format!(
                    "labels of classifier `{}` differ from the model's `id2label` in `{config}`",
                    c.name.name
                ),
                declared.span,
            )
            .with_label_message(format!("declared: {}", list_names(&want)))
            .with_note(format!("the model's labels: {}", list_names(&labels)))
            .with_help(format!("write the model's labels: `labels = {fix}`"));
            let d = if labels.iter().all(|l| is_identifier(l)) {
                d.with_fix(declared.span, fix)
            } else {
                d
            };
            self.report(d);
        }
        for (i, g) in self.decls.guards.clone().into_iter().enumerate() {
            let Some(labels) = self.model_labels("guard", &g.name, &g.path) else {
                continue;
            };
            let resolved = self.unsafe_label(&g.name, &g.positive, &labels, &g.path);
            if let Some(def) = self.parts.guards.get_mut(i) {
                def.unsafe_label = resolved;
            }
        }
        for e in self.decls.encoders.clone() {
            if let Some(p) = &e.path {
                self.model_dir("encoder", &e.name, p);
            }
        }
        self.check_detector_dirs();
    }

    /// The label of `labels` (the guard model's) whose probability is the guard's score: E042
    /// when `positive` is not one of them, or, without `positive`, when the rule cannot tell.
    fn unsafe_label(
        &mut self,
        guard: &Ident,
        positive: &Option<Ident>,
        labels: &[String],
        path: &Option<Spanned<String>>,
    ) -> Option<String> {
        let config = self.config_shown(path);
        match positive {
            Some(p) if labels.contains(&p.name) => Some(p.name.clone()),
            Some(p) => {
                let candidates: Vec<&str> = labels.iter().map(String::as_str).collect();
                let d = Diagnostic::error(
                    codes::LABELS_MISMATCH,
                    format!(
                        "`{}` is not a label of guard `{}`'s model in `{config}`",
                        p.name, guard.name
                    ),
                    p.span,
                )
                .with_label_message("not in `id2label`")
                .with_note(format!("the model's labels: {}", list_names(labels)));
                let d = match super::names::nearest(&p.name, candidates.iter().copied()) {
                    Some(s) => d
                        .with_help(format!("did you mean `{s}`?"))
                        .with_fix(p.span, s),
                    None => d.with_help("name the model's unsafe label"),
                };
                self.report(d);
                None
            }
            None => {
                let unsafe_labels: Vec<&String> = labels
                    .iter()
                    .filter(|l| !SAFE_LABELS.contains(&l.as_str()))
                    .collect();
                match unsafe_labels[..] {
                    [one] if labels.len() == 2 => Some(one.clone()),
                    _ => {
                        self.report(
                        Diagnostic::error(
                            codes::LABELS_MISMATCH,
                            format!(
                                "cannot tell the unsafe label of guard `{}` from `{config}`",
                                guard.name
                            ),
                            guard.span,
                        )
                        .with_label_message("no `positive` label")
                        .with_note(format!("the model's labels: {}", list_names(labels)))
                        .with_help(format!(
                            "declare it: `positive = LABEL` (the default is the one label of two that is not {})",
                            list_names(SAFE_LABELS).replace(" and ", " or ")
                        )),
                    );
                        None
                    }
                }
            }
        }
    }

    /// Whether a model directory exists, warning (W006) when it does not.
    fn model_dir(&mut self, what: &str, name: &Ident, path: &Spanned<String>) -> bool {
        let dir = self.resolve_path(&path.value);
        if dir.is_dir() {
            return true;
        }
        self.report(
            Diagnostic::warning(
                codes::MISSING_MODEL_DIR,
                format!(
                    "model directory `{}` of {what} `{}` does not exist",
                    path.value, name.name
                ),
                path.span,
            )
            .with_label_message("no such directory")
            .with_help("`src serve` refuses a policy whose model files are missing; tests stub model-backed signals with `given`"),
        );
        false
    }

    /// The labels of a model directory's `config.json` in id order; `None` when the directory
    /// is missing (W006) or the config cannot be read (E043).
    pub(super) fn model_labels(
        &mut self,
        what: &str,
        name: &Ident,
        path: &Option<Spanned<String>>,
    ) -> Option<Vec<String>> {
        let path = path.as_ref()?;
        if !self.model_dir(what, name, path) {
            return None;
        }
        let config = self.resolve_path(&path.value).join("config.json");
        match read_id2label(&config) {
            Ok(labels) => Some(labels),
            Err(why) => {
                let shown = Path::new(&path.value).join("config.json");
                self.report(
                    Diagnostic::error(
                        codes::MODEL_CONFIG_UNREADABLE,
                        format!("`{}` of {what} `{}` {why}", shown.display(), name.name),
                        path.span,
                    )
                    .with_label_message("model directory")
                    .with_help("a classifier, guard or detector directory holds a Hugging Face `config.json` with an `id2label` map"),
                );
                None
            }
        }
    }

    pub(super) fn config_shown(&self, path: &Option<Spanned<String>>) -> String {
        path.as_ref()
            .map(|p| {
                Path::new(&p.value)
                    .join("config.json")
                    .display()
                    .to_string()
            })
            .unwrap_or_else(|| "config.json".to_string())
    }
}

fn missing_from_catalog(
    model: &Ident,
    serves: &Spanned<String>,
    backend: &Ident,
    ids: &[String],
    shown: &str,
) -> Diagnostic {
    let d = Diagnostic::error(
        codes::CATALOG_MISSING_MODEL,
        format!(
            "model `{}` serves `{}`, which backend `{}` does not list",
            model.name, serves.value, backend.name
        ),
        serves.span,
    )
    .with_label_message(format!("not in `{shown}`"))
    .with_note(if ids.is_empty() {
        format!("backend `{}` lists no models", backend.name)
    } else {
        format!(
            "backend `{}` serves {}",
            backend.name,
            list_some(ids, LISTED_IDS)
        )
    });
    match super::names::most_similar(&serves.value, ids.iter().map(String::as_str)) {
        Some(s) => d
            .with_help(format!("did you mean `{s}`?"))
            .with_fix(serves.span, quote(s)),
        None => d.with_help("use one of the ids the backend serves"),
    }
}

/// The ids of a `GET /v1/models` answer, or why the file is not one.
fn read_catalog(path: &Path) -> Result<Vec<String>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot be read: {}", io_reason(&e)))?;
    parse_catalog(&text)
}

/// The ids of a `GET /v1/models` answer's text (`{"data": [{"id": ..}]}`); the error says what
/// the text is instead, to follow "the answer of `URL`" or "catalog `FILE`".
pub fn parse_catalog(text: &str) -> Result<Vec<String>, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("is not JSON: {e}"))?;
    let data = value
        .get("data")
        .and_then(serde_json::Value::as_array)
        .ok_or("is not a `/v1/models` answer: it has no `data` list")?;
    let mut ids = Vec::with_capacity(data.len());
    for (i, entry) in data.iter().enumerate() {
        match entry.get("id").and_then(serde_json::Value::as_str) {
            Some(id) => ids.push(id.to_string()),
            None => {
                return Err(format!(
                    "is not a `/v1/models` answer: entry {} of `data` has no string `id`",
                    i + 1
                ))
            }
        }
    }
    Ok(ids)
}

/// The labels of a `config.json`'s `id2label`, in id order.
fn read_id2label(path: &Path) -> Result<Vec<String>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot be read: {}", io_reason(&e)))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("is not JSON: {e}"))?;
    let map = value
        .get("id2label")
        .and_then(serde_json::Value::as_object)
        .ok_or("has no `id2label` map")?;
    let mut labels: Vec<(u64, String)> = Vec::with_capacity(map.len());
    for (k, v) in map {
        let id = k
            .parse::<u64>()
            .map_err(|_| format!("has an `id2label` key `{k}` that is not a number"))?;
        let label = v
            .as_str()
            .ok_or_else(|| format!("has an `id2label` value for `{k}` that is not a string"))?;
        labels.push((id, label.to_string()));
    }
    if labels.is_empty() {
        return Err("has an empty `id2label` map".into());
    }
    labels.sort_by_key(|(id, _)| *id);
    Ok(labels.into_iter().map(|(_, l)| l).collect())
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
