//! The exact-match part of a cache key: which stored answers a request may be compared with.
//!
//! A scope is a sha256 over the tenant, the API, the proposed model (its name, its served id and
//! the deciding route's plugins, which all shape the answer), the encoder's fingerprint, and the
//! request body with `model`, `stream`, `stream_options` and `user` removed and the text of the
//! final user message replaced by a placeholder. So the system prompt, every earlier message,
//! the tools, the sampling parameters (`temperature`, `max_tokens`, `n`, `seed`, `stop`,
//! `response_format`, ...) and any non-text part of the final message (an image) must all be
//! identical; only the wording of the final user turn is left to the encoder.
//!
//! The body is hashed canonically (object keys sorted, every value tagged and length-prefixed),
//! so key order and whitespace do not matter and no two bodies can spell the same stream.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use src_compiler::hir::{CheckedPolicy, RouteDef};
use src_compiler::request::RequestView;

pub(crate) use crate::hex::lower as hex;
use crate::openai::Api;
use crate::session::identity;

/// Body fields that never change an answer's content (or only its framing).
const IGNORED: [&str; 4] = ["model", "stream", "stream_options", "user"];

/// Content part types whose `text` is message text (both APIs').
const TEXT_PARTS: [&str; 3] = ["text", "input_text", "output_text"];

/// Stands in for the final user message's text in the hashed body.
const PLACEHOLDER: &str = "\u{0}sr:final-user-text\u{0}";

/// Version of the key layout: a change starts every scope afresh.
const VERSION: &[u8] = b"sr-cache-v1";

/// A cache scope: 32 bytes of sha256.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Scope(pub [u8; 32]);

impl Scope {
    /// Lowercase hex, for store keys.
    pub fn hex(&self) -> String {
        hex(&self.0)
    }
}

impl std::fmt::Debug for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Scope({})", self.hex())
    }
}

/// Everything a scope is made of besides the body.
#[derive(Debug, Clone, Copy)]
pub struct ScopeParts<'a> {
    /// The API key's hash (and the session tenant, when the policy declares one).
    pub tenant: &'a str,
    pub api: Api,
    /// The proposed logical model.
    pub model: &'a str,
    /// Its served id.
    pub serves: &'a str,
    /// The deciding route's plugins, written canonically (empty without a route).
    pub plugins: &'a str,
    /// The fingerprint of the encoder that embeds the final user message.
    pub encoder: &'a str,
}

/// The digest of a request body with the final user message's text left out.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct BodyDigest([u8; 32]);

impl std::fmt::Debug for BodyDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BodyDigest({})", hex(&self.0))
    }
}

/// The scope of a request.
pub fn scope(parts: &ScopeParts<'_>, body: BodyDigest) -> Scope {
    let mut h = Sha256::new();
    h.update(VERSION);
    for part in [
        parts.tenant,
        parts.api.endpoint(),
        parts.model,
        parts.serves,
        parts.plugins,
        parts.encoder,
    ] {
        string(&mut h, part);
    }
    h.update(body.0);
    Scope(h.finalize().into())
}

/// The body's digest, or `None` when the body has no final user message whose text is `prompt`
/// (the text the router extracted and the encoder embeds): such a request is not cached.
pub fn body_digest(api: Api, body: &Value, prompt: &str) -> Option<BodyDigest> {
    let Value::Object(obj) = body else {
        return None;
    };
    if prompt.is_empty() {
        return None;
    }
    let (field, replacement) = match api {
        // A Messages conversation is read like chat's: its user turns hold text blocks.
        Api::Chat | Api::Messages => {
            let messages = obj.get("messages")?.as_array()?;
            let index = messages.iter().rposition(|m| is_user_message(m, false))?;
            let message = replace_text(messages.get(index)?, prompt)?;
            ("messages", Replacement::Item(index, message))
        }
        Api::Responses => match obj.get("input")? {
            Value::String(text) if text == prompt => (
                "input",
                Replacement::Whole(Value::String(PLACEHOLDER.into())),
            ),
            Value::Array(items) => {
                let index = items.iter().rposition(|m| is_user_message(m, true))?;
                let item = replace_text(items.get(index)?, prompt)?;
                ("input", Replacement::Item(index, item))
            }
            _ => return None,
        },
    };
    let mut h = Sha256::new();
    let kept: Vec<(&String, &Value)> = sorted(obj)
        .into_iter()
        .filter(|(k, _)| !IGNORED.contains(&k.as_str()))
        .collect();
    h.update(b"{");
    h.update((kept.len() as u64).to_le_bytes());
    for (key, value) in kept {
        string(&mut h, key);
        if key == field {
            match (&replacement, value) {
                (Replacement::Whole(v), _) => canonical(&mut h, v),
                (Replacement::Item(index, item), Value::Array(items)) => {
                    h.update(b"[");
                    h.update((items.len() as u64).to_le_bytes());
                    for (i, v) in items.iter().enumerate() {
                        canonical(&mut h, if i == *index { item } else { v });
                    }
                }
                (Replacement::Item(..), other) => canonical(&mut h, other),
            }
        } else {
            canonical(&mut h, value);
        }
    }
    Some(BodyDigest(h.finalize().into()))
}

enum Replacement {
    /// The field's whole value.
    Whole(Value),
    /// One item of the field's array.
    Item(usize, Value),
}

/// A chat message (or, for responses, a message input item) from the user.
fn is_user_message(v: &Value, responses: bool) -> bool {
    let Value::Object(m) = v else {
        return false;
    };
    let is_message = !responses
        || match m.get("type") {
            None | Some(Value::Null) => true,
            Some(Value::String(t)) => t == "message",
            Some(_) => false,
        };
    is_message && m.get("role").and_then(Value::as_str) == Some("user")
}

/// A copy of `message` whose text is the placeholder, if its text is `prompt` (joined like the
/// router joins content parts: non-empty texts, one per line). Other parts stay as they are.
fn replace_text(message: &Value, prompt: &str) -> Option<Value> {
    let mut message = message.clone();
    let content = message.as_object_mut()?.get_mut("content")?;
    match content {
        Value::String(text) if text == prompt => {
            *content = Value::String(PLACEHOLDER.into());
            Some(message)
        }
        Value::Array(parts) => {
            let mut joined = String::new();
            for part in parts.iter_mut() {
                let Value::Object(part) = part else { continue };
                let is_text = part
                    .get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| TEXT_PARTS.contains(&t));
                if !is_text {
                    continue;
                }
                let Some(Value::String(text)) = part.get_mut("text") else {
                    continue;
                };
                if !text.is_empty() {
                    if !joined.is_empty() {
                        joined.push('\n');
                    }
                    joined.push_str(text);
                }
                *text = PLACEHOLDER.into();
            }
            (joined == prompt).then_some(message)
        }
        _ => None,
    }
}

fn sorted(obj: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<(&String, &Value)> = obj.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries
}

fn string(h: &mut Sha256, s: &str) {
    h.update(b"s");
    h.update((s.len() as u64).to_le_bytes());
    h.update(s.as_bytes());
}

/// Feeds `v` to the hash: tagged, length-prefixed, object keys sorted.
fn canonical(h: &mut Sha256, v: &Value) {
    match v {
        Value::Null => h.update(b"n"),
        Value::Bool(true) => h.update(b"t"),
        Value::Bool(false) => h.update(b"f"),
        Value::Number(n) => {
            let text = n.to_string();
            h.update(b"#");
            h.update((text.len() as u64).to_le_bytes());
            h.update(text.as_bytes());
        }
        Value::String(s) => string(h, s),
        Value::Array(items) => {
            h.update(b"[");
            h.update((items.len() as u64).to_le_bytes());
            for item in items {
                canonical(h, item);
            }
        }
        Value::Object(obj) => {
            h.update(b"{");
            h.update((obj.len() as u64).to_le_bytes());
            for (key, value) in sorted(obj) {
                string(h, key);
                canonical(h, value);
            }
        }
    }
}

/// Whose answers a request may see: its tenant as every store has it (`identity::tenant`). A
/// credential's answers never reach another credential.
pub fn tenant(policy: &CheckedPolicy, view: &RequestView) -> String {
    identity::tenant(policy, view)
}

/// The route plugins that shape the upstream request, written canonically.
pub fn plugins(route: &RouteDef) -> String {
    format!(
        "{:?}\u{0}{:?}\u{0}{:?}\u{0}{:?}\u{0}{:?}",
        route.system_prompt, route.headers, route.reasoning, route.tools, route.redact
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parts(tenant: &str) -> ScopeParts<'_> {
        ScopeParts {
            tenant,
            api: Api::Chat,
            model: "small",
            serves: "Qwen/Qwen3-0.6B",
            plugins: "",
            encoder: "minilm-fingerprint",
        }
    }

    fn chat(system: &str, earlier: &str, prompt: &str, extra: Value) -> Value {
        let mut body = json!({
            "model": "auto",
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": earlier},
                {"role": "assistant", "content": "an earlier answer"},
                {"role": "user", "content": prompt},
            ],
        });
        if let (Some(obj), Value::Object(extra)) = (body.as_object_mut(), extra) {
            obj.extend(extra);
        }
        body
    }

    fn digest(body: &Value, prompt: &str) -> BodyDigest {
        body_digest(Api::Chat, body, prompt).unwrap_or(BodyDigest([0; 32]))
    }

    #[test]
    fn only_the_final_user_text_is_left_out() {
        let a = chat("sys", "hi", "reset my password", json!({}));
        let b = chat("sys", "hi", "how do I reset my password?", json!({}));
        assert_ne!(digest(&a, "reset my password"), BodyDigest([0; 32]));
        assert_eq!(
            digest(&a, "reset my password"),
            digest(&b, "how do I reset my password?")
        );
        // The system prompt, an earlier turn and the sampling parameters all count.
        let other_system = chat("other", "hi", "reset my password", json!({}));
        let other_history = chat("sys", "hello", "reset my password", json!({}));
        let other_params = chat(
            "sys",
            "hi",
            "reset my password",
            json!({"temperature": 0.2}),
        );
        let other_tools = chat(
            "sys",
            "hi",
            "reset my password",
            json!({"tools": [{"type": "function", "function": {"name": "f"}}]}),
        );
        for other in [other_system, other_history, other_params, other_tools] {
            assert_ne!(
                digest(&a, "reset my password"),
                digest(&other, "reset my password")
            );
        }
    }

    #[test]
    fn framing_fields_and_key_order_do_not_count() {
        let a = chat(
            "sys",
            "hi",
            "p",
            json!({"temperature": 0.5, "max_tokens": 10}),
        );
        let b = chat(
            "sys",
            "hi",
            "p",
            json!({"max_tokens": 10, "temperature": 0.5, "stream": true,
                   "stream_options": {"include_usage": true}, "user": "u-1", "model": "small"}),
        );
        assert_eq!(digest(&a, "p"), digest(&b, "p"));
        let c = chat(
            "sys",
            "hi",
            "p",
            json!({"temperature": 0.5, "max_tokens": 11}),
        );
        assert_ne!(digest(&a, "p"), digest(&c, "p"));
    }

    #[test]
    fn a_body_whose_prompt_is_not_its_final_user_text_is_not_cached() {
        let a = chat("sys", "hi", "p", json!({}));
        assert_eq!(body_digest(Api::Chat, &a, "something else"), None);
        assert_eq!(body_digest(Api::Chat, &a, ""), None);
        let none = json!({"messages": [{"role": "system", "content": "s"}]});
        assert_eq!(body_digest(Api::Chat, &none, "s"), None);
    }

    #[test]
    fn non_text_parts_of_the_final_message_count() {
        let with_image = |url: &str| {
            json!({"messages": [{"role": "user", "content": [
                {"type": "text", "text": "what is in this picture?"},
                {"type": "image_url", "image_url": {"url": url}},
            ]}]})
        };
        let a = with_image("http://x/1.png");
        let b = with_image("http://x/2.png");
        let prompt = "what is in this picture?";
        assert!(body_digest(Api::Chat, &a, prompt).is_some());
        assert_ne!(digest(&a, prompt), digest(&b, prompt));
    }

    #[test]
    fn responses_bodies_leave_out_their_final_user_text() {
        let a = json!({"model": "auto", "instructions": "be brief", "input": "reset my password"});
        let b = json!({"model": "x", "instructions": "be brief", "input": "password reset?"});
        let c = json!({"instructions": "be long", "input": "password reset?"});
        let da = body_digest(Api::Responses, &a, "reset my password");
        assert!(da.is_some());
        assert_eq!(da, body_digest(Api::Responses, &b, "password reset?"));
        assert_ne!(da, body_digest(Api::Responses, &c, "password reset?"));
        let items = json!({"input": [
            {"role": "user", "content": "first"},
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": "second"}]},
        ]});
        assert!(body_digest(Api::Responses, &items, "second").is_some());
        assert_eq!(body_digest(Api::Responses, &items, "first"), None);
    }

    #[test]
    fn every_part_of_the_scope_counts() {
        let body = digest(&chat("s", "h", "p", json!({})), "p");
        let base = scope(&parts("tenant-a"), body);
        assert_eq!(base, scope(&parts("tenant-a"), body));
        assert_ne!(base, scope(&parts("tenant-b"), body));
        let variants = [
            ScopeParts {
                api: Api::Responses,
                ..parts("tenant-a")
            },
            ScopeParts {
                model: "strong",
                ..parts("tenant-a")
            },
            ScopeParts {
                serves: "Qwen/Qwen3-8B",
                ..parts("tenant-a")
            },
            ScopeParts {
                plugins: "system_prompt=x",
                ..parts("tenant-a")
            },
            ScopeParts {
                encoder: "another-encoder",
                ..parts("tenant-a")
            },
        ];
        for variant in variants {
            assert_ne!(base, scope(&variant, body), "{variant:?}");
        }
        // Parts are length-prefixed: moving a boundary between two of them changes the scope.
        let left = ScopeParts {
            model: "ab",
            serves: "c",
            ..parts("t")
        };
        let right = ScopeParts {
            model: "a",
            serves: "bc",
            ..parts("t")
        };
        assert_ne!(scope(&left, body), scope(&right, body));
    }
}
