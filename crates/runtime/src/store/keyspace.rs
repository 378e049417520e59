//! Every Redis key the runtime writes, in one place, so a layout change (or a new store kind)
//! touches one file and the hash-slot rule of Redis Cluster is kept by construction.
//!
//! All keys live under one versioned prefix, `sr:v1:`, so a future layout can live beside this
//! one. Key parts that come from clients or policies (tenants, session ids, idempotency keys,
//! model names) are escaped — `%` → `%25`, `:` → `%3A`, `{` → `%7B`, `}` → `%7D` — so no
//! part can spell another's key or smuggle in a hash tag of its own.
//!
//! | key | holds (written by) |
//! |---|---|
//! | `sr:v1:{TENANT:SESSION}:pin` | a session's pin, a hash (session store) |
//! | `sr:v1:{TENANT:SESSION}:out:MODEL` | a model's recent `pass`/`fail` list (session store) |
//! | `sr:v1:{TENANT:SESSION}:idem:KEY` | an outcome's idempotency key, ten minutes (session store) |
//! | `sr:v1:cache:{SCOPE}` | a scope's entries, newest first; hex sha256 scope (cache store) |
//! | `sr:v1:cache:{SCOPE}:body:ID` | one cached answer body; hex id (cache store) |
//! | `sr:v1:resp:TENANT:ID` | one stored `/v1/responses` answer (response store) |
//! | `sr:v1:vault:TENANT:ID` | the sealed values a redacted Responses chain was sent placeholders for (response store) |
//! | `sr:v1:memo:DIGEST` | one model answer; hex sha256 of the memo key (model memo) |
//! | `sr:v1:{cooldown}:MODEL` | a cooldown in force, expiring with it (cooldowns) |
//! | `sr:v1:{budget:PER}:NAME:START` | a budget's use in the window from START ms (budgets) |
//!
//! The part in braces is the key's Redis Cluster hash tag: only it is hashed, so every key one
//! atomic step touches lands in one slot. A session's pin, outcome windows and idempotency keys
//! share `{TENANT:SESSION}` (recording an outcome checks its idempotency key and appends to its
//! window in one script); a cache scope's list and bodies share `{SCOPE}` (storing an answer is
//! one `MULTI` over both); the cooldowns share `{cooldown}` (a replica reads them all in one
//! pipeline); a budget's counters share `{budget:PER}`, the value its `per` counts (`t/TENANT`
//! or `v/TEXT`), so the budgets of one tenant are reserved from in one script. That script also
//! reads the request's pin, under another tag, where slots do not bind (one server, a Sentinel
//! primary); on a cluster the pin's read is a call of its own. Single-key steps (stored responses, the memo) need no tag and spread over the
//! cluster. Because idempotency keys are tagged by session, a key is remembered per session.

/// The prefix of every key.
pub const PREFIX: &str = "sr:v1:";

/// Names of every key the runtime writes.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeySpace;

/// The `SCAN` pattern of every pin key.
const PIN_PATTERN: &str = "sr:v1:{*}:pin";

impl KeySpace {
    /// A session's pin.
    pub fn pin(tenant: &str, session: &str) -> String {
        let mut key = session_tag(tenant, session, 4);
        key.push_str(":pin");
        key
    }

    /// One model's outcome window in a session.
    pub fn outcomes(tenant: &str, session: &str, model: &str) -> String {
        let mut key = session_tag(tenant, session, 5 + model.len());
        key.push_str(":out:");
        push_escaped(&mut key, model);
        key
    }

    /// An outcome's idempotency key, remembered per session.
    pub fn idempotency(tenant: &str, session: &str, idempotency: &str) -> String {
        let mut key = session_tag(tenant, session, 6 + idempotency.len());
        key.push_str(":idem:");
        push_escaped(&mut key, idempotency);
        key
    }

    /// The `SCAN … MATCH` pattern of every pin key.
    pub fn pin_pattern() -> &'static str {
        PIN_PATTERN
    }

    /// The (tenant, session) a pin key names; `None` for any other key.
    pub fn pin_identity(key: &str) -> Option<(String, String)> {
        let tag = key.strip_prefix("sr:v1:{")?.strip_suffix("}:pin")?;
        let (tenant, session) = tag.split_once(':')?;
        if session.contains(':') {
            return None;
        }
        Some((unescape(tenant), unescape(session)))
    }

    /// A cache scope's list of entries (`scope` is the scope's sha256).
    pub fn cache_list(scope: &[u8]) -> String {
        let mut key = String::with_capacity(PREFIX.len() + 8 + scope.len() * 2);
        key.push_str(PREFIX);
        key.push_str("cache:{");
        push_hex(&mut key, scope);
        key.push('}');
        key
    }

    /// One cached answer body of a scope.
    pub fn cache_body(scope: &[u8], id: &[u8]) -> String {
        let mut key = KeySpace::cache_list(scope);
        key.push_str(":body:");
        push_hex(&mut key, id);
        key
    }

    /// One stored response of a tenant.
    pub fn response(tenant: &str, id: &str) -> String {
        let mut key = String::with_capacity(PREFIX.len() + 6 + tenant.len() + id.len());
        key.push_str(PREFIX);
        key.push_str("resp:");
        push_escaped(&mut key, tenant);
        key.push(':');
        push_escaped(&mut key, id);
        key
    }

    /// The sealed vault of a tenant's response (a redacting route's values along its chain).
    pub fn vault(tenant: &str, id: &str) -> String {
        let mut key = String::with_capacity(PREFIX.len() + 7 + tenant.len() + id.len());
        key.push_str(PREFIX);
        key.push_str("vault:");
        push_escaped(&mut key, tenant);
        key.push(':');
        push_escaped(&mut key, id);
        key
    }

    /// One shared model answer (`digest` is the memo key's sha256).
    pub fn memo(digest: &[u8]) -> String {
        let mut key = String::with_capacity(PREFIX.len() + 5 + digest.len() * 2);
        key.push_str(PREFIX);
        key.push_str("memo:");
        push_hex(&mut key, digest);
        key
    }

    /// A budget's counter for one `per` value (`t/TENANT`, `v/TEXT`) in the window that
    /// starts at `start_ms`.
    pub fn budget(per: &str, name: &str, start_ms: u64) -> String {
        let mut key = String::with_capacity(PREFIX.len() + 32 + per.len() + name.len());
        key.push_str(PREFIX);
        key.push_str("{budget:");
        push_escaped(&mut key, per);
        key.push_str("}:");
        push_escaped(&mut key, name);
        key.push(':');
        key.push_str(&start_ms.to_string());
        key
    }

    /// A model's shared cooldown.
    pub fn cooldown(model: &str) -> String {
        let mut key = String::with_capacity(PREFIX.len() + 11 + model.len());
        key.push_str(PREFIX);
        key.push_str("{cooldown}:");
        push_escaped(&mut key, model);
        key
    }
}

/// `sr:v1:{TENANT:SESSION}` with room for `more` bytes.
fn session_tag(tenant: &str, session: &str, more: usize) -> String {
    let mut key = String::with_capacity(PREFIX.len() + 3 + tenant.len() + session.len() + more);
    key.push_str(PREFIX);
    key.push('{');
    push_escaped(&mut key, tenant);
    key.push(':');
    push_escaped(&mut key, session);
    key.push('}');
    key
}

/// Appends `bytes` as lowercase hexadecimal.
fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
}

/// Whether `c` is escaped inside a key part.
fn special(c: char) -> bool {
    matches!(c, '%' | ':' | '{' | '}')
}

/// Appends `part` escaped.
fn push_escaped(out: &mut String, part: &str) {
    if !part.contains(special) {
        out.push_str(part);
        return;
    }
    for c in part.chars() {
        match c {
            '%' => out.push_str("%25"),
            ':' => out.push_str("%3A"),
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            c => out.push(c),
        }
    }
}

/// A key part as it was before [`push_escaped`].
fn unescape(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    let mut rest = part;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let code = rest.get(at..at + 3);
        let plain = match code {
            Some("%25") => Some('%'),
            Some("%3A") => Some(':'),
            Some("%7B") => Some('{'),
            Some("%7D") => Some('}'),
            _ => None,
        };
        match plain {
            Some(c) => {
                out.push(c);
                rest = &rest[at + 3..];
            }
            None => {
                out.push('%');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_documented_layout() {
        assert_eq!(KeySpace::pin("t", "s-1"), "sr:v1:{t:s-1}:pin");
        assert_eq!(KeySpace::outcomes("t", "s", "m"), "sr:v1:{t:s}:out:m");
        assert_eq!(KeySpace::idempotency("t", "s", "k"), "sr:v1:{t:s}:idem:k");
        let scope = [0xab; 32];
        assert_eq!(
            KeySpace::cache_list(&scope),
            format!("sr:v1:cache:{{{}}}", "ab".repeat(32))
        );
        assert_eq!(
            KeySpace::cache_body(&[1], &[1, 2]),
            "sr:v1:cache:{01}:body:0102"
        );
        assert_eq!(KeySpace::response("t", "resp_1"), "sr:v1:resp:t:resp_1");
        assert_eq!(KeySpace::memo(&[0xff, 0]), "sr:v1:memo:ff00");
        assert_eq!(KeySpace::cooldown("gpt"), "sr:v1:{cooldown}:gpt");
        for key in [
            KeySpace::pin("t", "s"),
            KeySpace::cache_list(&scope),
            KeySpace::response("t", "i"),
            KeySpace::memo(&[1]),
            KeySpace::cooldown("m"),
        ] {
            assert!(key.starts_with(PREFIX), "{key}");
        }
    }

    #[test]
    fn key_parts_cannot_spell_another_key_or_a_hash_tag() {
        assert_ne!(KeySpace::pin("a:b", "c"), KeySpace::pin("a", "b:c"));
        assert_ne!(KeySpace::pin("a%3Ab", "c"), KeySpace::pin("a:b", "c"));
        assert_eq!(KeySpace::response("a%3Ab", "c"), "sr:v1:resp:a%253Ab:c");
        assert_eq!(KeySpace::vault("a%3Ab", "c"), "sr:v1:vault:a%253Ab:c");
        assert_ne!(
            KeySpace::response("a:b", "c"),
            KeySpace::response("a", "b:c")
        );
        // A brace in a part is escaped, so the tag is always the whole (tenant, session).
        assert_eq!(KeySpace::pin("}", "{x}"), "sr:v1:{%7D:%7Bx%7D}:pin");
        assert_eq!(KeySpace::cooldown("{m}"), "sr:v1:{cooldown}:%7Bm%7D");
        assert_ne!(
            KeySpace::outcomes("t", "s", "a:b"),
            KeySpace::idempotency("t", "s", "b")
        );
    }

    #[test]
    fn pin_keys_name_their_identity_back() {
        for (tenant, session) in [("t", "s"), ("a:b", "c%d"), ("}{", "::"), ("%7B", "x")] {
            let key = KeySpace::pin(tenant, session);
            assert_eq!(
                KeySpace::pin_identity(&key),
                Some((tenant.to_owned(), session.to_owned())),
                "{key}"
            );
        }
        assert_eq!(
            KeySpace::pin_identity(&KeySpace::outcomes("t", "s", "pin")),
            None
        );
        assert_eq!(KeySpace::pin_identity("sr:v1:pin:t:s"), None);
        assert_eq!(unescape("100%"), "100%");
    }
}
