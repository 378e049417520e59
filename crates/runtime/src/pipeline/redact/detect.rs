//! A `redact` that names a detector's types (`people.PERSON`): before a body is redacted, each
//! detector it names is run over every text redaction reads in that body (one batched model
//! call per detector, remembered per tenant like any model answer), and the vault is given what
//! was found, beside what the built-in recognizers find.
//!
//! A detector that cannot answer (the model fails, times out, or a text is longer than its
//! `windows` read) leaves texts unread, which cannot be redacted: the request is not sent, and
//! the client gets a 503 in its API's error shape.

use std::sync::Arc;

use serde_json::Value;
use src_compiler::hir::{CheckedPolicy, DetectorId};
use src_compiler::pii::{Detections, Redact, Vault};

use super::{splice, CONVERSATION, NOT_TEXT};
use crate::hooks::ModelSignals;
use crate::openai::ApiError;

/// The vault to redact `texts` with under `redact`: empty when `redact` names no detector, else
/// holding what each detector it names found in them (only the types `redact` names).
pub async fn detected_vault(
    texts: Vec<String>,
    redact: &Redact,
    (models, policy): (&dyn ModelSignals, &CheckedPolicy),
    tenant: &str,
) -> Result<Vault, ApiError> {
    if redact.detectors().is_empty() {
        return Ok(Vault::new());
    }
    let mut texts = texts;
    texts.retain(|t| !t.trim().is_empty());
    texts.sort_unstable();
    texts.dedup();
    let mut detections = Detections::default();
    if texts.is_empty() {
        return Ok(Vault::with_detections(Arc::new(detections)));
    }
    for wanted in redact.detectors() {
        let found = models
            .entities(policy, DetectorId(wanted.detector), &texts, tenant)
            .await
            .map_err(|err| {
                ApiError::service_unavailable(format!(
                    "the request is not sent: detector `{}` could not read it for `redact` ({})",
                    wanted.name, err.message
                ))
            })?;
        if found.len() != texts.len() {
            return Err(ApiError::service_unavailable(format!(
                "the request is not sent: detector `{}` answered {} of {} texts",
                wanted.name,
                found.len(),
                texts.len()
            )));
        }
        for (text, entities) in texts.iter().zip(found) {
            detections.add(
                text,
                entities
                    .into_iter()
                    .filter(|e| wanted.types.iter().any(|t| **t == *e.kind)),
            );
        }
    }
    Ok(Vault::with_detections(Arc::new(detections)))
}

/// The texts redaction reads in `body` (see [`super::redact_body`]).
pub fn texts_of_body(body: &[u8]) -> Vec<String> {
    splice::read_texts(body).unwrap_or_else(|splice::Unread| {
        let mut texts = Vec::new();
        if let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(body) {
            for key in CONVERSATION {
                if let Some(value) = fields.get(key) {
                    texts_of_value(value, &mut texts);
                }
            }
        }
        texts
    })
}

/// Pushes every text string of `value` that [`super::redact_value`] reads.
pub fn texts_of_value(value: &Value, texts: &mut Vec<String>) {
    match value {
        Value::String(text) => texts.push(text.clone()),
        Value::Array(items) => items.iter().for_each(|item| texts_of_value(item, texts)),
        Value::Object(fields) => fields
            .iter()
            .filter(|(key, _)| !NOT_TEXT.contains(&key.as_str()))
            .for_each(|(_, item)| texts_of_value(item, texts)),
        _ => {}
    }
}
