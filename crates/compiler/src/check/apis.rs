//! Which API's requests a route can answer (W011).
//!
//! Every front door (`/v1/chat/completions`, `/v1/responses`, `/v1/messages`) runs the same
//! routes. A Messages request reaches any backend (an OpenAI one through translation), but a
//! chat completions or Responses request cannot be sent to an `api = anthropic` backend: the
//! runtime skips such a candidate like one whose context is too small. A route (or a
//! redirecting block) whose every candidate is on such a backend therefore answers those
//! requests with 400, which is worth a warning rather than an error: a deployment may send the
//! router Messages traffic only.

use super::Checker;
use crate::hir::{BackendDef, ModelDef, ModelId};
use src_dsl::ast::BackendApi;
use src_dsl::{codes, Diagnostic, Span};

impl Checker<'_> {
    pub(super) fn check_apis(&mut self) {
        let mut found = Vec::new();
        for route in self.parts.routes.iter().flatten() {
            let candidates: Vec<ModelId> = std::iter::once(route.to)
                .chain(route.fallbacks.iter().copied())
                .collect();
            if let Some(names) = self.messages_only(&candidates) {
                found.push((format!("route `{}`", route.name), route.span, names));
            }
        }
        for block in self.parts.blocks.iter().flatten() {
            if let crate::hir::BlockActionDef::Redirect(model) = block.action {
                if let Some(names) = self.messages_only(&[model]) {
                    found.push((format!("block `{}`", block.name), block.span, names));
                }
            }
        }
        for (what, span, names) in found {
            self.report(messages_only(&what, span, &names));
        }
    }

    /// The candidates' names when every one is on an Anthropic backend.
    fn messages_only(&self, candidates: &[ModelId]) -> Option<Vec<String>> {
        let mut names = Vec::new();
        for id in candidates {
            let model: &ModelDef = self.parts.models.get(id.index())?.as_ref()?;
            let backend: &BackendDef = self.parts.backends.get(model.backend.index())?;
            // A simulated backend is the built-in simulator, which speaks OpenAI's API.
            if backend.api != BackendApi::Anthropic || backend.simulated {
                return None;
            }
            names.push(model.name.clone());
        }
        (!names.is_empty()).then_some(names)
    }
}

fn messages_only(what: &str, span: Span, names: &[String]) -> Diagnostic {
    Diagnostic::warning(
        codes::MESSAGES_ONLY_ROUTE,
        format!("{what} answers only `/v1/messages` requests"),
        span,
    )
    .with_label_message(format!(
        "{} {} on `api = anthropic` backends",
        super::list_names(names),
        if names.len() == 1 { "is" } else { "are" }
    ))
    .with_help(
        "chat completions and Responses requests skip Anthropic backends and get 400 here: add a fallback on an OpenAI backend (`else MODEL`) if they can arrive",
    )
}
