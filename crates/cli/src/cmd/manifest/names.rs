//! Kubernetes object names derived from policy names and served ids, so a manifest and the
//! policy cannot disagree: DNS-1123 labels (lowercase letters, digits and `-`, at most 63
//! characters, starting with a letter so they are valid Service names too), the same for the
//! same input on every run, and distinct for distinct inputs.

use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// The longest DNS-1123 label.
pub const MAX_LABEL: usize = 63;

/// `raw` as a DNS-1123 label. When spelling it so loses information (case, `/`, `.`, `_`, a
/// leading digit, length), eight hex digits of its SHA-256 are appended, so two inputs that
/// spell the same (`Qwen/Qwen3-8B`, `qwen-qwen3-8b`) still get different names.
pub fn dns_label(raw: &str) -> String {
    let mut spelled = String::with_capacity(raw.len());
    for c in raw.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            spelled.push(c);
        } else if !spelled.ends_with('-') {
            spelled.push('-');
        }
    }
    let mut spelled = spelled.trim_matches('-').to_string();
    if !spelled.starts_with(|c: char| c.is_ascii_lowercase()) {
        spelled.insert_str(0, "x-");
    }
    if spelled == raw && spelled.len() <= MAX_LABEL {
        return spelled;
    }
    let digest = Sha256::digest(raw.as_bytes());
    let hash: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    spelled.truncate(MAX_LABEL - hash.len() - 1);
    format!("{}-{hash}", spelled.trim_end_matches('-'))
}

/// Names handed out for one manifest: [`dns_label`] of each input, refusing a second input that
/// would get a name already given (which the hash makes practically impossible, but a manifest
/// with two objects of one name would silently drop one).
#[derive(Debug, Default)]
pub struct Names {
    given: HashMap<String, String>,
}

impl Names {
    /// The name of `raw`; the same `raw` always gets the same name.
    pub fn name(&mut self, raw: &str) -> Result<String, String> {
        let name = dns_label(raw);
        match self.given.get(&name) {
            Some(other) if other != raw => Err(format!(
                "`{raw}` and `{other}` would both be named `{name}`"
            )),
            _ => {
                self.given.insert(name.clone(), raw.to_string());
                Ok(name)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(label: &str) -> bool {
        !label.is_empty()
            && label.len() <= MAX_LABEL
            && label.starts_with(|c: char| c.is_ascii_lowercase())
            && !label.ends_with('-')
            && label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    }

    #[test]
    fn clean_names_are_kept() {
        assert_eq!(dns_label("src-production"), "src-production");
        assert_eq!(dns_label("tiny-a"), "tiny-a");
    }

    #[test]
    fn lossy_names_get_a_stable_hash() {
        let a = dns_label("Qwen/Qwen3-8B");
        assert!(a.starts_with("qwen-qwen3-8b-"), "{a}");
        assert_eq!(a, dns_label("Qwen/Qwen3-8B"));
        assert_ne!(a, dns_label("qwen-qwen3-8b"));
        assert_ne!(a, dns_label("Qwen/Qwen3_8B"));
        for raw in [
            "Qwen/Qwen3-8B",
            "8b",
            "---",
            "",
            "vllm_code",
            "ünïcode",
            &"x".repeat(200),
        ] {
            let label = dns_label(raw);
            assert!(valid(&label), "`{raw}` → `{label}`");
        }
    }

    #[test]
    fn long_names_are_cut_but_stay_distinct() {
        let a = dns_label(&format!("{}a", "m".repeat(80)));
        let b = dns_label(&format!("{}b", "m".repeat(80)));
        assert_eq!(a.len(), MAX_LABEL);
        assert_ne!(a, b);
    }

    #[test]
    fn names_repeat_for_the_same_input_only() {
        let mut names = Names::default();
        assert_eq!(names.name("tiny-a"), names.name("tiny-a"));
        assert!(names.name("tiny-b").is_ok());
    }
}
