//! Warnings for declarations that can never matter: signals nothing reads (W001), classifiers,
//! guards and encoders nothing calls (W002), models nothing selects (W003) and backends no model
//! is bound to (W007).
//!
//! Uses are direct: a signal read only by another unused signal counts as used, so removing the
//! unused one may reveal the next, but no warning is ever a consequence of another. Stubbing a
//! signal in a test's `given` is not a use. A model with `aliases` is meant to be asked for by
//! name, so it is never reported as unselected.

use super::names::Kind;
use super::Checker;
use src_dsl::{codes, Diagnostic};

impl Checker<'_> {
    pub(super) fn check_unused(&mut self) {
        for (i, s) in self.decls.signals.clone().into_iter().enumerate() {
            if !self.uses.signals[i] {
                self.report(
                    Diagnostic::warning(
                        codes::UNUSED_SIGNAL,
                        format!("signal `{}` is never used", s.name.name),
                        s.name.span,
                    )
                    .with_label_message("no condition or signal reads it")
                    .with_help(
                        "use it in a condition or another signal, or remove it (a test's `given` is not a use)",
                    ),
                );
            }
        }
        let sources = [
            (Kind::Classifier, self.uses.classifiers.clone()),
            (Kind::Guard, self.uses.guards.clone()),
            (Kind::Encoder, self.uses.encoders.clone()),
            (Kind::Detector, self.uses.detectors.clone()),
        ];
        for (kind, used) in sources {
            let names = self.decls.names_of(kind);
            for (i, used) in used.into_iter().enumerate() {
                if used {
                    continue;
                }
                let Some(index) = self.decls.get(kind, names[i]) else {
                    continue;
                };
                let name = self.decls.name_of(super::names::Sym { kind, index });
                let how = match kind {
                    Kind::Encoder => "no `similarity` or `cache` uses it",
                    _ => "no signal or condition calls it",
                };
                self.report(
                    Diagnostic::warning(
                        codes::UNUSED_MODEL_SOURCE,
                        format!("{} `{}` is never used", kind.noun(), name.name),
                        name.span,
                    )
                    .with_label_message(how)
                    .with_help(format!(
                        "remove it, or use it: `signal x = {}`",
                        match kind {
                            Kind::Encoder =>
                                format!("similarity({}, prompt, [\"...\"])", name.name),
                            _ => format!("{}(prompt)", name.name),
                        }
                    )),
                );
            }
        }
        let mut bound = vec![false; self.decls.backends.len()];
        for (i, m) in self.decls.models.clone().into_iter().enumerate() {
            if let Some(b) = m
                .backend
                .as_ref()
                .and_then(|b| self.decls.get(Kind::Backend, &b.name))
            {
                bound[b] = true;
            }
            if !self.uses.models[i] && m.aliases.is_none() {
                self.report(
                    Diagnostic::warning(
                        codes::UNUSED_MODEL,
                        format!("model `{}` is never selected", m.name.name),
                        m.name.span,
                    )
                    .with_label_message("no route, fallback, block or test selects it")
                    .with_help("route to it, or remove it; a client can still name it in `model`, so give it `aliases` if that is its purpose"),
                );
            }
        }
        for (i, b) in self.decls.backends.clone().into_iter().enumerate() {
            if !bound[i] {
                self.report(
                    Diagnostic::warning(
                        codes::UNUSED_BACKEND,
                        format!("backend `{}` serves no declared model", b.name.name),
                        b.name.span,
                    )
                    .with_label_message("no model is bound to it")
                    .with_help(format!(
                        "bind a model to it (`model m {{ backend = {}  serves = \"...\" }}`) or remove it",
                        b.name.name
                    )),
                );
            }
        }
    }
}
