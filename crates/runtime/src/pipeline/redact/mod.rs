//! `redact = [types]` on the way out: the body a candidate is sent, with every entity of those
//! types replaced by its placeholder in every text the model reads — system and developer
//! prompts, every turn of the history, content parts, tool results and tool-call arguments — in
//! whichever API the body is (chat completions, Responses, Messages).
//!
//! Only the fields that carry conversation are read (`messages`, `input`, `instructions`,
//! `system`, `prompt`); within them, strings that name or identify rather than say (`role`,
//! `type`, ids, tool names, media and URLs) are left alone, so an image's base64 or a call id
//! is never mistaken for a number. The [`Vault`] remembers each value for the answer's way back
//! ([`crate::relay::restore`]).
//!
//! The body is redacted in place (`splice`): only the strings that held an entity are written
//! again. Parsing the body into a tree and serialising it again ([`redact_reparsed`]) is the
//! reference that path is held to, and what a body it does not read falls back to.

mod detect;
mod splice;

pub use detect::{detected_vault, texts_of_body, texts_of_value};

use serde_json::Value;
use src_compiler::hir::CheckedPolicy;
use src_compiler::pii::{Redact, Vault};
use src_compiler::request::RequestView;

/// The top-level fields that hold what the model reads.
pub(crate) const CONVERSATION: [&str; 5] =
    ["messages", "input", "instructions", "system", "prompt"];

/// Keys whose string values are structure, not text.
const NOT_TEXT: [&str; 17] = [
    "role",
    "type",
    "id",
    "name",
    "model",
    "tool_call_id",
    "call_id",
    "tool_use_id",
    "status",
    "media_type",
    "data",
    "url",
    "image_url",
    "file_data",
    "file_id",
    "signature",
    "encrypted_content",
];

/// `body` with the entities of `redact` replaced, noting each in `vault`; `None` when the body
/// holds none (it is sent as it is) or is not a JSON object. Everything but the redacted
/// strings keeps the bytes it was sent with.
pub fn redact_body(body: &[u8], redact: &Redact, vault: &mut Vault) -> Option<Vec<u8>> {
    splice::redact(body, redact, vault)
        .unwrap_or_else(|splice::Unread| redact_reparsed(body, redact, vault))
}

/// What [`redact_body`] sends, made by parsing `body` into a tree, redacting its texts and
/// serialising it again (its keys then come sorted and its numbers rewritten).
pub fn redact_reparsed(body: &[u8], redact: &Redact, vault: &mut Vault) -> Option<Vec<u8>> {
    let mut parsed: Value = serde_json::from_slice(body).ok()?;
    let object = parsed.as_object_mut()?;
    let mut changed = false;
    for key in CONVERSATION {
        if let Some(value) = object.get_mut(key) {
            changed |= redact_value(value, redact, vault);
        }
    }
    if !changed {
        return None;
    }
    serde_json::to_vec(&parsed).ok()
}

/// The vault of a redacted request: the tenant's, whose texts seen before are not searched
/// again; a call the policy keeps apart (no credential) searches every text, so no other call
/// can tell from its timing what it sent. Without a `tenant` expression a tenant is its
/// credential's hash, so the credential itself names the tenant's memo entries (hashed there
/// under the memo's secret, never kept), and the request does not pay for a sha256.
pub fn tenant_vault(policy: &CheckedPolicy, view: &RequestView) -> Vault {
    if crate::session::identity::isolated(policy, view) {
        return Vault::new();
    }
    let claims = policy
        .session
        .as_ref()
        .is_some_and(|def| def.tenant.is_some());
    match view.api_key.as_deref() {
        // A NUL first: no tenant's name starts with one, so a key never names a tenant's entries.
        Some(key) if !claims && !key.trim().is_empty() => Vault::for_tenant(&format!("\0{key}")),
        _ => Vault::for_tenant(&crate::session::identity::tenant(policy, view)),
    }
}

/// What a log line, trace or record says of `vault`: each type with its count of distinct
/// values (`email=2,phone=1`), `None` when nothing was replaced.
pub fn summary(vault: &Vault) -> Option<String> {
    let counts = vault.counts();
    if counts.is_empty() {
        return None;
    }
    // Written without the formatting machinery: every redacted request logs one.
    let mut out = String::with_capacity(counts.len() * 16);
    for (i, (kind, n)) in counts.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(kind.name());
        out.push('=');
        let mut digits = [0u8; 20];
        let mut len = 0;
        let mut rest = *n;
        loop {
            digits[len] = b'0' + (rest % 10) as u8;
            len += 1;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        out.extend(digits[..len].iter().rev().map(|&d| char::from(d)));
    }
    Some(out)
}

/// Replaces entities in every text string of `value`; whether any was replaced.
pub fn redact_value(value: &mut Value, redact: &Redact, vault: &mut Vault) -> bool {
    match value {
        Value::String(text) => match vault.redact(redact, text) {
            Some(redacted) => {
                *text = redacted;
                true
            }
            None => false,
        },
        Value::Array(items) => items.iter_mut().fold(false, |changed, item| {
            redact_value(item, redact, vault) | changed
        }),
        Value::Object(fields) => fields
            .iter_mut()
            .filter(|(key, _)| !NOT_TEXT.contains(&key.as_str()))
            .fold(false, |changed, (_, item)| {
                redact_value(item, redact, vault) | changed
            }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use src_compiler::pii::EntityType;

    fn redact() -> Redact {
        Redact::new(&[EntityType::Email, EntityType::Phone]).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn every_text_the_model_reads_is_redacted_and_nothing_else() {
        let body = json!({
            "model": "ann@example.com",
            "messages": [
                {"role": "system", "content": "The user is ann@example.com."},
                {"role": "user", "content": [
                    {"type": "text", "text": "Call me at +1 415 555 0132"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,ann@example.com"}}
                ]},
                {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "mail", "arguments": "{\"to\":\"ann@example.com\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sent to ann@example.com"}
            ]
        });
        let mut vault = Vault::new();
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        let out = redact_body(&bytes, &redact(), &mut vault).unwrap_or_default();
        let out: Value = serde_json::from_slice(&out).unwrap_or_default();
        assert_eq!(out["model"], "ann@example.com");
        assert_eq!(out["messages"][0]["content"], "The user is <EMAIL_1>.");
        assert_eq!(
            out["messages"][1]["content"][0]["text"],
            "Call me at <PHONE_1>"
        );
        assert_eq!(
            out["messages"][1]["content"][1]["image_url"]["url"],
            "data:image/png;base64,ann@example.com"
        );
        assert_eq!(
            out["messages"][2]["tool_calls"][0]["function"]["arguments"],
            "{\"to\":\"<EMAIL_1>\"}"
        );
        assert_eq!(out["messages"][3]["content"], "sent to <EMAIL_1>");
        assert_eq!(
            vault.counts(),
            vec![(EntityType::Email.into(), 1), (EntityType::Phone.into(), 1)]
        );
    }

    #[test]
    fn the_summary_counts_each_type_s_values() {
        let mut vault = Vault::new();
        assert_eq!(summary(&vault), None);
        let text: String = (0..12).map(|i| format!("u{i}@example.com ")).collect();
        vault.redact(&redact(), &format!("{text} +1 415 555 0132"));
        assert_eq!(summary(&vault).as_deref(), Some("email=12,phone=1"));
    }

    #[test]
    fn responses_and_messages_bodies_are_read_too() {
        let mut vault = Vault::new();
        let responses =
            json!({"instructions": "reply to ann@example.com", "input": "hi ann@example.com"});
        let out = redact_body(
            &serde_json::to_vec(&responses).unwrap_or_default(),
            &redact(),
            &mut vault,
        );
        let out: Value = serde_json::from_slice(&out.unwrap_or_default()).unwrap_or_default();
        assert_eq!(out["instructions"], "reply to <EMAIL_1>");
        assert_eq!(out["input"], "hi <EMAIL_1>");
        let messages = json!({"system": [{"type": "text", "text": "ann@example.com"}],
            "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                "content": "bob@example.org"}]}]});
        let out = redact_body(
            &serde_json::to_vec(&messages).unwrap_or_default(),
            &redact(),
            &mut vault,
        );
        let out: Value = serde_json::from_slice(&out.unwrap_or_default()).unwrap_or_default();
        assert_eq!(out["system"][0]["text"], "<EMAIL_1>");
        assert_eq!(out["messages"][0]["content"][0]["content"], "<EMAIL_2>");
        let clean = json!({"messages": [{"role": "user", "content": "nothing"}]});
        assert_eq!(
            redact_body(
                &serde_json::to_vec(&clean).unwrap_or_default(),
                &redact(),
                &mut vault
            ),
            None
        );
    }
}
