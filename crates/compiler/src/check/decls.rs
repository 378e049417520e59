//! Deployment declarations: `backend`, `model`, `classifier`, `guard`, `encoder` (and the
//! value ranges `detector` shares with them; its own checks are in [`super::detectors`]).
//!
//! These carry data rather than logic: the checks are references (a model's backend), value
//! ranges (costs, contexts, timeouts) and uniqueness of the names a client may send in `model`
//! (aliases and router names), which the runtime matches against one flat table, and of what
//! the models are to their backends (two models serving one id on one backend, W013). Whether
//! the referenced files exist and agree with the declarations is [`super::catalog`]'s job.

use super::names::Kind;
use super::Checker;
use crate::hir::{
    BackendDef, BackendId, ClassifierDef, EncoderDef, GuardDef, ModelDef, DEFAULT_WINDOWS,
    DETECTOR_WINDOW, MAX_WINDOWS,
};
use crate::window::MIN_WINDOW;
use src_dsl::ast::{ClientAuth, Device, Ident, Number};
use src_dsl::{codes, Diagnostic, Span, Spanned};
use std::collections::HashMap;

impl Checker<'_> {
    pub(super) fn check_backends(&mut self) {
        for b in self.decls.backends.clone() {
            self.check_backend_url(b);
            if let Some(t) = &b.timeout {
                if t.value.millis == 0 {
                    self.report(out_of_range(
                        format!("timeout of backend `{}` must be positive", b.name.name),
                        t.span,
                        "a zero timeout fails every request",
                    ));
                }
            }
            self.parts.backends.push(BackendDef {
                name: b.name.name.clone(),
                span: b.name.span,
                url: b.url.as_ref().map(|u| u.value.clone()).unwrap_or_default(),
                catalog: b.catalog.as_ref().map(|c| self.resolve_path(&c.value)),
                api_key_env: b.api_key.as_ref().map(|k| k.var.value.clone()),
                timeout_ms: b.timeout.as_ref().map(|t| t.value.millis),
                simulated: b.simulated.as_ref().is_some_and(|s| s.value),
                forward_client_auth: match b.client_auth.as_ref().map(|c| c.value) {
                    Some(ClientAuth::Forward) => true,
                    Some(ClientAuth::Drop) => false,
                    None => b.api_key.is_none(),
                },
                api: b.api.as_ref().map(|a| a.value).unwrap_or_default(),
            });
        }
    }

    pub(super) fn check_models(&mut self) {
        for m in self.decls.models.clone() {
            let backend = m
                .backend
                .as_ref()
                .and_then(|b| self.resolve(b, Kind::Backend));
            let cost = m.cost.as_ref().map_or(0.0, |c| c.value.value);
            if let Some(c) = &m.cost {
                if c.value.value < 0.0 {
                    self.report(out_of_range(
                        format!(
                            "cost of model `{}` must not be negative, found `{}`",
                            m.name.name, c.value.text
                        ),
                        c.span,
                        "costs are relative prices: 0 or more",
                    ));
                }
            }
            let context = m.context.as_ref().and_then(|c| self.context(&m.name, c));
            let served_header = m
                .serves
                .as_ref()
                .and_then(|s| self.served_header(&m.name, s));
            let def = match (backend, &m.serves, served_header) {
                (Some(b), Some(serves), Some(served_header))
                    if m.context.is_none() || context.is_some() =>
                {
                    Some(ModelDef {
                        name: m.name.name.clone(),
                        span: m.name.span,
                        backend: BackendId(b as u32),
                        serves: serves.value.clone(),
                        served_header,
                        aliases: m
                            .aliases
                            .as_ref()
                            .map(|a| a.value.iter().map(|s| s.value.clone()).collect())
                            .unwrap_or_default(),
                        cost,
                        context,
                        tokenizer: m.tokenizer.as_ref().map(|t| self.resolve_path(&t.value)),
                    })
                }
                _ => None,
            };
            self.parts.models.push(def);
        }
        self.check_client_names();
    }

    fn context(&mut self, model: &Ident, c: &Spanned<Number>) -> Option<u64> {
        match c.value.as_int() {
            Some(n) if n > 0 => Some(n as u64),
            _ => {
                self.report(out_of_range(
                    format!(
                        "context of model `{}` must be a positive integer, found `{}`",
                        model.name, c.value.text
                    ),
                    c.span,
                    "write the context window in tokens, e.g. `context = 32k`",
                ));
                None
            }
        }
    }

    /// Model names, aliases and router names share the table of names a client may send in
    /// `model`; each must be unique there (E044).
    fn check_client_names(&mut self) {
        // name -> (where, what it is, the model it names; `None` for a router name)
        let mut seen: HashMap<String, (Span, String, Option<&str>)> = HashMap::new();
        for m in &self.decls.models {
            let what = format!("the name of model `{}`", m.name.name);
            seen.insert(m.name.name.clone(), (m.name.span, what, Some(&m.name.name)));
        }
        let mut written: Vec<(&Spanned<String>, String, Option<&str>)> = Vec::new();
        for m in &self.decls.models {
            for a in m.aliases.iter().flat_map(|a| a.value.iter()) {
                let what = format!("an alias of model `{}`", m.name.name);
                written.push((a, what, Some(&m.name.name)));
            }
        }
        if let Some((router, _)) = self.decls.router {
            for n in router.names.iter().flat_map(|n| n.value.iter()) {
                written.push((n, "a router name".to_string(), None));
            }
        }
        let mut found = Vec::new();
        for (name, what, owner) in written {
            match seen.get(&name.value) {
                // The same name twice for the same model is redundant, not ambiguous.
                Some((_, _, first_owner)) if owner.is_some() && *first_owner == owner => {}
                Some((first, first_what, _)) => found.push(
                    Diagnostic::error(
                        codes::DUPLICATE_ALIAS,
                        format!("`{}` is already {first_what}", name.value),
                        name.span,
                    )
                    .with_label_message(format!("used again as {what}"))
                    .with_secondary(*first, "first used here")
                    .with_help("a client names one model (or asks for routing) with each name; rename one of them"),
                ),
                None => {
                    seen.insert(name.value.clone(), (name.span, what, owner));
                }
            }
        }
        for d in found {
            self.report(d);
        }
        self.check_shadowed_served_ids();
        self.check_same_served_models();
    }

    /// Two models with the same served id on the same backend are one model to the backend,
    /// and a client sending the id as its `model` is answered 400 (it names several): W013.
    fn check_same_served_models(&mut self) {
        let mut first: HashMap<(&str, &str), (&str, Span)> = HashMap::new();
        let mut found = Vec::new();
        for m in &self.decls.models {
            let (Some(backend), Some(serves)) = (&m.backend, &m.serves) else {
                continue;
            };
            let key = (backend.name.as_str(), serves.value.as_str());
            match first.get(&key) {
                Some(&(other, at)) => found.push(
                    Diagnostic::warning(
                        codes::SAME_SERVED_MODEL,
                        format!(
                            "models `{other}` and `{}` both serve `{}` on backend `{}`",
                            m.name.name, serves.value, backend.name
                        ),
                        serves.span,
                    )
                    .with_label_message(format!("served by `{other}` as well"))
                    .with_secondary(at, format!("`{other}` serves it here"))
                    .with_help(format!(
                        "to the backend they are one model, and a client that sends `{}` as its \
                         `model` is answered 400: keep one and give it the other name in `aliases`",
                        serves.value
                    )),
                ),
                None => {
                    first.insert(key, (&m.name.name, serves.span));
                }
            }
        }
        for d in found {
            self.report(d);
        }
    }

    /// A served id bound to one model names that model in `model`
    /// (docs/language.md, "What happens to a request"), unless a name, alias or router name
    /// takes it first: warn of that (W010), since a client moved from the backend means the
    /// served model.
    fn check_shadowed_served_ids(&mut self) {
        let mut served: HashMap<&str, Vec<&str>> = HashMap::new();
        for m in &self.decls.models {
            if let Some(serves) = &m.serves {
                served.entry(&serves.value).or_default().push(&m.name.name);
            }
        }
        let mut written: Vec<(&str, Span, String, Option<&str>)> = Vec::new();
        for m in &self.decls.models {
            let what = format!("model `{}`", m.name.name);
            written.push((&m.name.name, m.name.span, what.clone(), Some(&m.name.name)));
            for a in m.aliases.iter().flat_map(|a| a.value.iter()) {
                written.push((
                    &a.value,
                    a.span,
                    format!("an alias of {what}"),
                    Some(&m.name.name),
                ));
            }
        }
        if let Some((router, _)) = self.decls.router {
            for n in router.names.iter().flat_map(|n| n.value.iter()) {
                written.push((&n.value, n.span, "a router name".into(), None));
            }
        }
        let mut found = Vec::new();
        for (name, span, what, owner) in written {
            let Some(models) = served.get(name) else {
                continue;
            };
            let others: Vec<String> = models
                .iter()
                .filter(|m| Some(**m) != owner)
                .map(|m| format!("`{m}`"))
                .collect();
            if others.is_empty() {
                continue;
            }
            found.push(
                Diagnostic::warning(
                    codes::SHADOWED_SERVED_ID,
                    format!("`{name}` is the served id of {}", others.join(", ")),
                    span,
                )
                .with_label_message(format!("but a client sending it gets {what}"))
                .with_help("clients moved from the backend send its served ids; rename this name so the served id names its model"),
            );
        }
        for d in found {
            self.report(d);
        }
    }

    pub(super) fn check_model_sources(&mut self) {
        for c in self.decls.classifiers.clone() {
            let mut labels: Vec<String> = Vec::new();
            let mut seen: HashMap<&str, Span> = HashMap::new();
            for l in c.labels.iter().flat_map(|l| l.value.iter()) {
                if let Some(first) = seen.get(l.name.as_str()) {
                    let d = Diagnostic::error(
                        codes::DUPLICATE_NAME,
                        format!("label `{}` is listed twice", l.name),
                        l.span,
                    )
                    .with_label_message("listed again here")
                    .with_secondary(*first, "first listed here")
                    .with_help("remove one of them");
                    self.report(d);
                    continue;
                }
                seen.insert(&l.name, l.span);
                labels.push(l.name.clone());
            }
            self.class_labels.push(labels.clone());
            let windows = self.windows(&c.name, &c.windows);
            let window = self.window(&c.name, &c.window);
            self.parts.classifiers.push(ClassifierDef {
                name: c.name.name.clone(),
                span: c.name.span,
                path: self.model_path(&c.path),
                labels,
                device: device(&c.device),
                windows,
                window,
            });
        }
        for g in self.decls.guards.clone() {
            let windows = self.windows(&g.name, &g.windows);
            let window = self.window(&g.name, &g.window).or(Some(DETECTOR_WINDOW));
            self.parts.guards.push(GuardDef {
                name: g.name.name.clone(),
                span: g.name.span,
                path: self.model_path(&g.path),
                positive: g.positive.as_ref().map(|p| p.name.clone()),
                // Resolved against the model's labels, when they can be read, by `catalog`.
                unsafe_label: g.positive.as_ref().map(|p| p.name.clone()),
                device: device(&g.device),
                windows,
                window,
            });
        }
        for e in self.decls.encoders.clone() {
            let windows = self.windows(&e.name, &e.windows);
            let window = self.window(&e.name, &e.window).or(Some(DETECTOR_WINDOW));
            self.parts.encoders.push(EncoderDef {
                name: e.name.name.clone(),
                span: e.name.span,
                path: self.model_path(&e.path),
                device: device(&e.device),
                windows,
                window,
            });
        }
    }

    /// A declaration's `window`: a whole number of tokens from MIN_WINDOW (E045); a window
    /// longer than the model's `max_length` is cut to it when the model loads.
    pub(super) fn window(&mut self, name: &Ident, w: &Option<Spanned<Number>>) -> Option<usize> {
        let w = w.as_ref()?;
        match w.value.as_int() {
            Some(n) if n >= MIN_WINDOW as i64 => Some(n as usize),
            _ => {
                self.report(out_of_range(
                    format!(
                        "window of `{}` must be a whole number of tokens from {MIN_WINDOW}, found `{}`",
                        name.name, w.value.text
                    ),
                    w.span,
                    "write the tokens of one window, special tokens included, e.g. `window = 64`",
                ));
                None
            }
        }
    }

    /// A declaration's `windows`: a whole number in 1..=MAX_WINDOWS (E045), else the default.
    pub(super) fn windows(&mut self, name: &Ident, w: &Option<Spanned<Number>>) -> usize {
        let Some(w) = w else {
            return DEFAULT_WINDOWS;
        };
        match w.value.as_int() {
            Some(n) if n >= 1 && n as u64 <= MAX_WINDOWS as u64 => n as usize,
            _ => {
                self.report(out_of_range(
                    format!(
                        "windows of `{}` must be a whole number from 1 to {MAX_WINDOWS}, found `{}`",
                        name.name, w.value.text
                    ),
                    w.span,
                    "write how many windows of one text the model may read, e.g. `windows = 16`",
                ));
                DEFAULT_WINDOWS
            }
        }
    }

    pub(super) fn model_path(&self, path: &Option<Spanned<String>>) -> std::path::PathBuf {
        path.as_ref()
            .map(|p| self.resolve_path(&p.value))
            .unwrap_or_else(|| self.root.to_path_buf())
    }
}

pub(super) fn device(d: &Option<Spanned<Device>>) -> Device {
    d.as_ref().map_or(Device::Auto, |d| d.value)
}

/// E045 with the range in the help.
pub(super) fn out_of_range(message: String, span: Span, help: &str) -> Diagnostic {
    Diagnostic::error(codes::INVALID_VALUE, message, span)
        .with_label_message("out of range")
        .with_help(help)
}
