//! `redact = [types]`: values swapped for typed placeholders on the way to a model, and put back
//! in its answer.
//!
//! A [`Redact`] is a route's or block's set of types with its recognizers, built once at policy
//! load. A [`Vault`] lives for one request: [`Vault::redact`] replaces every entity of the set in
//! a text by `<TYPE_N>` (`<EMAIL_1>`, `<CREDIT_CARD_2>`), the same value by the same placeholder
//! wherever it appears in the request, and remembers the pair; [`Vault::restore`] puts the values
//! back into a whole text. An answer that streams comes in pieces that may cut a placeholder
//! anywhere, so a [`Restoring`] channel holds back only a tail that can still grow into one of
//! the vault's placeholders (never more than the longest of them) and lets the rest through.

use std::collections::HashMap;
use std::sync::Arc;

use super::{BuildError, EntityType, Recognizers};

/// The types a route or block redacts, with their recognizers.
#[derive(Clone)]
pub struct Redact {
    recognizers: Arc<Recognizers>,
}

impl Redact {
    /// The redaction of `types` (duplicates are ignored).
    pub fn new(types: &[EntityType]) -> Result<Redact, BuildError> {
        Ok(Redact {
            recognizers: Arc::new(Recognizers::new(types)?),
        })
    }

    /// The types redacted, in the documented order.
    pub fn types(&self) -> &[EntityType] {
        self.recognizers.types()
    }
}

impl PartialEq for Redact {
    fn eq(&self, other: &Redact) -> bool {
        self.types() == other.types()
    }
}

impl std::fmt::Debug for Redact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Redact").field(&self.types()).finish()
    }
}

/// The values one request's texts carried and the placeholders that stand for them.
#[derive(Debug, Clone, Default)]
pub struct Vault {
    /// Placeholder → value.
    values: HashMap<String, String>,
    /// (type, value) → placeholder.
    placeholders: HashMap<(EntityType, String), String>,
    /// How many distinct values of each type were replaced.
    counts: Vec<(EntityType, usize)>,
    /// How many spans were replaced in all (a value seen twice counts twice).
    replaced: usize,
    /// The longest placeholder, in bytes: the most a stream ever holds back.
    longest: usize,
}

impl Vault {
    pub fn new() -> Vault {
        Vault::default()
    }

    /// `text` with each entity of `redact`'s types replaced by its placeholder; `None` when it
    /// holds none (the text stays as it is).
    pub fn redact(&mut self, redact: &Redact, text: &str) -> Option<String> {
        let found = redact.recognizers.find(text);
        if found.is_empty() {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for entity in found {
            // Spans of two types may overlap: the first (by start) wins.
            if entity.span.start < at {
                continue;
            }
            out.push_str(&text[at..entity.span.start]);
            let placeholder = self.placeholder(entity.kind, &text[entity.span.clone()]);
            out.push_str(&placeholder);
            at = entity.span.end;
            self.replaced += 1;
        }
        out.push_str(&text[at..]);
        Some(out)
    }

    /// The placeholder of `value`, made on its first sight.
    fn placeholder(&mut self, kind: EntityType, value: &str) -> String {
        let key = (kind, value.to_owned());
        if let Some(p) = self.placeholders.get(&key) {
            return p.clone();
        }
        let n = match self.counts.iter_mut().find(|(t, _)| *t == kind) {
            Some((_, n)) => {
                *n += 1;
                *n
            }
            None => {
                self.counts.push((kind, 1));
                1
            }
        };
        let placeholder = format!("<{}_{n}>", kind.name().to_ascii_uppercase());
        self.longest = self.longest.max(placeholder.len());
        self.values.insert(placeholder.clone(), value.to_owned());
        self.placeholders.insert(key, placeholder.clone());
        placeholder
    }

    /// Whether nothing was replaced.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The types replaced with how many distinct values of each, in the documented order.
    pub fn counts(&self) -> Vec<(EntityType, usize)> {
        let mut counts = self.counts.clone();
        counts.sort();
        counts
    }

    /// How many spans were replaced in all.
    pub fn replaced(&self) -> usize {
        self.replaced
    }

    /// `text` with every placeholder of this vault replaced by its value; `escape` writes each
    /// value as it goes inside a JSON string (for text that is itself JSON, such as a tool
    /// call's arguments). `None` when there was nothing to restore.
    pub fn restore(&self, text: &str, escape: bool) -> Option<String> {
        if self.values.is_empty() || !text.contains('<') {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        let mut changed = false;
        while let Some(open) = rest.find('<') {
            out.push_str(&rest[..open]);
            let tail = &rest[open..];
            let value = tail
                .find('>')
                .filter(|&close| close < self.longest)
                .and_then(|close| Some((close, self.values.get(&tail[..=close])?)));
            match value {
                Some((close, value)) => {
                    push_value(&mut out, value, escape);
                    rest = &tail[close + 1..];
                    changed = true;
                }
                None => {
                    out.push('<');
                    rest = &tail[1..];
                }
            }
        }
        out.push_str(rest);
        changed.then_some(out)
    }

    /// Whether `tail` (which starts with `<`) can still grow into one of the placeholders.
    fn may_grow(&self, tail: &str) -> bool {
        tail.len() < self.longest && self.values.keys().any(|p| p.starts_with(tail))
    }
}

fn push_value(out: &mut String, value: &str, escape: bool) {
    if !escape {
        out.push_str(value);
        return;
    }
    // A JSON string's inside: its quotes taken off.
    let quoted = serde_json::Value::String(value.to_owned()).to_string();
    out.push_str(&quoted[1..quoted.len() - 1]);
}

/// One streamed text (a choice's content, a tool call's arguments, a content block's text),
/// restored piece by piece.
#[derive(Debug, Clone, Default)]
pub struct Restoring {
    held: String,
    escape: bool,
}

impl Restoring {
    /// `escape`: the text is JSON (see [`Vault::restore`]).
    pub fn new(escape: bool) -> Restoring {
        Restoring {
            held: String::new(),
            escape,
        }
    }

    /// What the client gets for the stream's next piece: restored up to any tail that may still
    /// become a placeholder, which is held for the next piece.
    pub fn push(&mut self, vault: &Vault, piece: &str) -> String {
        self.held.push_str(piece);
        let text = std::mem::take(&mut self.held);
        let keep = text
            .rfind('<')
            .filter(|&at| vault.may_grow(&text[at..]))
            .unwrap_or(text.len());
        self.held = text[keep..].to_owned();
        let ready = &text[..keep];
        vault
            .restore(ready, self.escape)
            .unwrap_or_else(|| ready.to_owned())
    }

    /// Whether a tail is held.
    pub fn holds(&self) -> bool {
        !self.held.is_empty()
    }

    /// The tail held, restored as it is (the stream ended without completing a placeholder).
    pub fn flush(&mut self, vault: &Vault) -> String {
        let held = std::mem::take(&mut self.held);
        vault.restore(&held, self.escape).unwrap_or(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redact(types: &[EntityType]) -> Redact {
        match Redact::new(types) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn the_same_value_gets_the_same_placeholder_and_comes_back() {
        let r = redact(&[EntityType::Email, EntityType::CreditCard]);
        let mut vault = Vault::new();
        let a = vault.redact(&r, "mail ann@example.com or bob@example.org");
        let b = vault.redact(&r, "card 4111 1111 1111 1111, again ann@example.com");
        assert_eq!(a.as_deref(), Some("mail <EMAIL_1> or <EMAIL_2>"));
        assert_eq!(b.as_deref(), Some("card <CREDIT_CARD_1>, again <EMAIL_1>"));
        assert_eq!(vault.redact(&r, "nothing here"), None);
        assert_eq!(
            vault.counts(),
            vec![(EntityType::Email, 2), (EntityType::CreditCard, 1)]
        );
        assert_eq!(vault.replaced(), 4);
        assert_eq!(
            vault.restore("to <EMAIL_2> and <EMAIL_1>, <EMAIL_9> <b>", false),
            Some("to bob@example.org and ann@example.com, <EMAIL_9> <b>".to_owned())
        );
        assert_eq!(vault.restore("no placeholder <here>", false), None);
    }

    #[test]
    fn a_value_restored_into_json_text_is_escaped() {
        let r = redact(&[EntityType::PrivateKey]);
        let mut vault = Vault::new();
        let key = "-----BEGIN PRIVATE KEY-----\nMIIBVQIBADANBgkqhkiG9w0BAQEFAASCAT8wggE7AgEAAkEA\n-----END PRIVATE KEY-----";
        let redacted = vault.redact(&r, key);
        assert_eq!(redacted.as_deref(), Some("<PRIVATE_KEY_1>"));
        let restored = vault.restore(r#"{"key":"<PRIVATE_KEY_1>"}"#, true);
        let parsed: serde_json::Value =
            serde_json::from_str(&restored.unwrap_or_default()).unwrap_or_default();
        assert_eq!(parsed["key"], key);
    }

    #[test]
    fn a_placeholder_cut_anywhere_is_restored_whole_and_only_its_tail_waits() {
        let r = redact(&[EntityType::Email]);
        let mut vault = Vault::new();
        vault.redact(&r, "ann@example.com");
        let answer = "Write to <EMAIL_1> today <b>, a < b.";
        for cut in 0..answer.len() {
            for cut2 in cut..answer.len() {
                let mut stream = Restoring::new(false);
                let mut out = stream.push(&vault, &answer[..cut]);
                // Nothing held is longer than a placeholder, and no half placeholder leaks.
                assert!(!out.contains("<EM") || out.contains("<EMAIL_1>"));
                out += &stream.push(&vault, &answer[cut..cut2]);
                out += &stream.push(&vault, &answer[cut2..]);
                out += &stream.flush(&vault);
                assert_eq!(out, "Write to ann@example.com today <b>, a < b.");
            }
        }
        let mut stream = Restoring::new(false);
        assert_eq!(stream.push(&vault, "mail <EMA"), "mail ");
        assert!(stream.holds());
        assert_eq!(stream.push(&vault, "X>"), "<EMAX>");
        assert!(!stream.holds());
    }
}
