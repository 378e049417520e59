//! W050: a model-backed signal whose text can be longer than its model reads.
//!
//! A classifier, guard, detector or encoder reads a text in windows of its model's `max_length`
//! tokens, at most its declaration's `windows` of them ([`crate::window`]); past that the rest of
//! the text is never read, and the signal answers as its failure mode says (closed: a guard or
//! `similarity` scores 1, a detector finds an entity and a classifier fails; open: the first
//! windows decide). That matters
//! where a `block` reads the signal: closed, every long request is refused; open, an attack past
//! the bound is never seen. Text a client writes (`prompt`, `history`, `system`, `body(..)`) has
//! no length of its own, so a model call a block reads (directly or through signals) over such
//! text is warned about unless a `block` bounds the same text with `tokens(TEXT) > N` (or `>=`)
//! where `N` fits what the declaration reads. The model's `max_length` comes from its
//! `config.json` when the directory can be read.

use std::path::Path;

use super::Checker;
use crate::hir::{CmpOp, TExpr, TExprKind};
use crate::window::{capacity, DEFAULT_MAX_LENGTH, SPECIAL_TOKENS};
use src_dsl::{codes, Diagnostic, Span};

/// One model-backed call: which declaration, over which text, where.
struct Call {
    kind: &'static str,
    name: String,
    windows: usize,
    /// Tokens per window as declared; `None`: the model's `max_length`.
    window: Option<usize>,
    path: std::path::PathBuf,
    text: String,
    span: Span,
}

impl Checker<'_> {
    pub(super) fn check_model_windows(&mut self) {
        let parts = &self.parts;
        let mut exprs: Vec<&TExpr> = parts.blocks.iter().flatten().map(|b| &b.when).collect();
        let mut expanded = vec![false; parts.signals.len()];
        let limits: Vec<(String, i64)> = parts
            .blocks
            .iter()
            .flatten()
            .flat_map(|b| token_limits(&b.when))
            .collect();
        let mut calls: Vec<Call> = Vec::new();
        while let Some(e) = exprs.pop() {
            if let TExprKind::Signal(id) = &e.kind {
                if let Some(false) = expanded.get(id.index()) {
                    expanded[id.index()] = true;
                    exprs.extend(
                        parts
                            .signals
                            .get(id.index())
                            .and_then(Option::as_ref)
                            .map(|s| &s.expr),
                    );
                }
            }
            if let Some(call) = self.call_of(e) {
                let seen = calls
                    .iter()
                    .any(|c| c.kind == call.kind && c.name == call.name && c.text == call.text);
                if !seen {
                    calls.push(call);
                }
            }
            exprs.extend(e.children());
        }
        calls.sort_by_key(|c| c.span.start);
        for call in calls {
            let max_length = max_length(&call.path);
            let window = call.window.unwrap_or(max_length).min(max_length);
            let content = window.saturating_sub(SPECIAL_TOKENS).max(1);
            let reads = capacity(content, call.windows);
            let bounded = limits
                .iter()
                .any(|(t, n)| *t == call.text && *n <= reads as i64);
            if bounded {
                continue;
            }
            self.report(
                Diagnostic::warning(
                    codes::TEXT_PAST_WINDOWS,
                    format!(
                        "`{}` can be longer than {} `{}` reads ({} windows, about {reads} tokens)",
                        call.text, call.kind, call.name, call.windows
                    ),
                    call.span,
                )
                .with_label_message("a `block` reads this; nothing bounds its text")
                .with_note(format!(
                    "the model reads {window} tokens at a time; past {} windows the rest is \
                     never read, so a guard or `similarity` scores 1, a detector finds an entity \
                     and a classifier fails: the \
                     block refuses every longer request (with `failure.classifier = open` the \
                     first windows decide and what follows is never seen)",
                    call.windows
                ))
                .with_help(format!(
                    "bound the text, e.g. `block too_long {{ when tokens({}) > {} }}` (`tokens` \
                     counts with the router's tokenizer: leave a margin), or raise `windows` on \
                     `{}`",
                    call.text,
                    reads * 3 / 4,
                    call.name
                )),
            );
        }
    }

    fn call_of(&self, e: &TExpr) -> Option<Call> {
        let (kind, name, (windows, window), path, text) = match &e.kind {
            TExprKind::Classify(c, text) => {
                let d = self.parts.classifiers.get(c.index())?;
                ("classifier", &d.name, (d.windows, d.window), &d.path, text)
            }
            TExprKind::Guard(g, text) => {
                let d = self.parts.guards.get(g.index())?;
                ("guard", &d.name, (d.windows, d.window), &d.path, text)
            }
            TExprKind::Detect { detector, text, .. } => {
                let d = self.parts.detectors.get(detector.index())?;
                ("detector", &d.name, (d.windows, d.window), &d.path, text)
            }
            TExprKind::Similarity { encoder, text, .. } => {
                let d = self.parts.encoders.get(encoder.index())?;
                ("encoder", &d.name, (d.windows, d.window), &d.path, text)
            }
            _ => return None,
        };
        Some(Call {
            kind,
            name: name.clone(),
            windows,
            window,
            path: path.clone(),
            text: client_text(text)?,
            span: e.span,
        })
    }
}

/// The text as written, when a client writes it (and so it has no length of its own).
fn client_text(e: &TExpr) -> Option<String> {
    match &e.kind {
        TExprKind::Prompt => Some("prompt".into()),
        TExprKind::History => Some("history".into()),
        TExprKind::System => Some("system".into()),
        TExprKind::Body(path) => Some(format!("body(\"{path}\")")),
        TExprKind::Coalesce(a, b) => {
            let (a, b) = (client_text(a), client_text(b));
            (a.is_some() || b.is_some()).then(|| {
                format!(
                    "{} ?? {}",
                    a.as_deref().unwrap_or("…"),
                    b.as_deref().unwrap_or("…")
                )
            })
        }
        _ => None,
    }
}

/// `tokens(TEXT) > N` and `tokens(TEXT) >= N` comparisons a block refuses on, at its top or
/// under `or`: the text is at most `N` tokens past them.
fn token_limits(when: &TExpr) -> Vec<(String, i64)> {
    match &when.kind {
        TExprKind::Or(a, b) => {
            let mut out = token_limits(a);
            out.extend(token_limits(b));
            out
        }
        TExprKind::Cmp(op @ (CmpOp::Gt | CmpOp::Ge), l, r) => match (&l.kind, &r.kind) {
            (TExprKind::Tokens(t), TExprKind::Int(n)) => client_text(t)
                .map(|t| (t, if *op == CmpOp::Gt { *n } else { n - 1 }))
                .into_iter()
                .collect(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// The model's window from its `config.json` (`max_length`, else `max_position_embeddings`),
/// as the runtime reads it; [`DEFAULT_MAX_LENGTH`] when the directory cannot be read.
fn max_length(dir: &Path) -> usize {
    let config = std::fs::read_to_string(dir.join("config.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    config
        .and_then(|c| {
            ["max_length", "max_position_embeddings"]
                .iter()
                .find_map(|k| c.get(k).and_then(serde_json::Value::as_u64))
        })
        .filter(|&n| n > 0)
        .map_or(DEFAULT_MAX_LENGTH, |n| n as usize)
}
