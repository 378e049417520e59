//! Byte-preserving edits of a request body's top-level JSON fields.
//!
//! The router changes few fields (`model`, and for some routes `messages`, `tools`,
//! `reasoning_effort`, ...). Re-serialising the whole parsed body would reorder keys, reformat
//! numbers and cost time on large histories; instead the top-level members are located once in the
//! original bytes and only the edited values are spliced in, so everything else reaches the
//! backend exactly as the client sent it.

use std::borrow::Cow;
use std::ops::Range;

/// One `"key": value` member of the top-level object.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Member<'a> {
    key: Cow<'a, str>,
    /// From the key's opening quote to the end of the value.
    whole: Range<usize>,
    value: Range<usize>,
}

/// An edit plan over one JSON object body.
#[derive(Debug)]
pub struct JsonEdit<'a> {
    bytes: &'a [u8],
    members: Vec<Member<'a>>,
    /// Offset just after the opening `{`.
    open_end: usize,
    /// Keys and values borrowed from the caller: a forwarded body's edits are made for each
    /// candidate, and copying them each time would cost more than splicing them.
    edits: Vec<Edit<'a>>,
}

/// A field to set to JSON (`Some`) or to remove (`None`).
type Edit<'a> = (&'a str, Option<Cow<'a, [u8]>>);

/// The body is not a JSON object (callers parse it with serde first, so this means a bug or a
/// body serde accepted that this scanner does not, such as a top-level scalar).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("request body is not a JSON object at byte {0}")]
pub struct NotAnObject(pub usize);

impl<'a> JsonEdit<'a> {
    pub fn new(bytes: &'a [u8]) -> Result<JsonEdit<'a>, NotAnObject> {
        let mut s = Scanner { bytes, pos: 0 };
        s.skip_ws();
        if !s.eat(b'{') {
            return Err(NotAnObject(s.pos));
        }
        let open_end = s.pos;
        let mut members = Vec::new();
        s.skip_ws();
        if s.eat(b'}') {
            return Ok(JsonEdit {
                bytes,
                members,
                open_end,
                edits: Vec::new(),
            });
        }
        loop {
            s.skip_ws();
            let key_start = s.pos;
            let key = s.string().ok_or(NotAnObject(s.pos))?;
            let key = decode_key(&bytes[key.clone()]).ok_or(NotAnObject(key_start))?;
            s.skip_ws();
            if !s.eat(b':') {
                return Err(NotAnObject(s.pos));
            }
            s.skip_ws();
            let value_start = s.pos;
            s.value().ok_or(NotAnObject(s.pos))?;
            members.push(Member {
                key,
                whole: key_start..s.pos,
                value: value_start..s.pos,
            });
            s.skip_ws();
            if s.eat(b',') {
                continue;
            }
            if s.eat(b'}') {
                return Ok(JsonEdit {
                    bytes,
                    members,
                    open_end,
                    edits: Vec::new(),
                });
            }
            return Err(NotAnObject(s.pos));
        }
    }

    /// Sets a top-level field to already-serialised JSON (replacing it, or appending it).
    pub fn set(&mut self, key: &'a str, json: impl Into<Cow<'a, [u8]>>) {
        self.edits.retain(|(k, _)| *k != key);
        self.edits.push((key, Some(json.into())));
    }

    /// Sets a top-level field to a serialisable value.
    pub fn set_value(&mut self, key: &'a str, value: &serde_json::Value) {
        // Serialising a `Value` cannot fail (its map keys are strings).
        let json = serde_json::to_vec(value).unwrap_or_else(|_| b"null".to_vec());
        self.set(key, json);
    }

    /// Removes a top-level field (every occurrence, if the client sent it twice).
    pub fn remove(&mut self, key: &'a str) {
        self.edits.retain(|(k, _)| *k != key);
        self.edits.push((key, None));
    }

    pub fn is_empty(&self) -> bool {
        self.edits.is_empty()
    }

    /// The edited body. Where a key occurs more than once, the last occurrence is the one serde
    /// read, so that one is replaced and the earlier ones removed. Whitespace between members is
    /// kept as the client wrote it.
    pub fn finish(self) -> Vec<u8> {
        let extra: usize = self
            .edits
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, |json| json.len()) + 8)
            .sum();
        let mut out = Vec::with_capacity(self.bytes.len() + extra);
        out.extend_from_slice(&self.bytes[..self.open_end]);
        let mut pending: Vec<&Edit<'a>> = self.edits.iter().collect();
        let mut kept_any = false;
        let mut prev_end = self.open_end;
        for (i, member) in self.members.iter().enumerate() {
            let gap = &self.bytes[prev_end..member.whole.start];
            prev_end = member.whole.end;
            let edit = pending.iter().position(|(k, _)| *k == member.key.as_ref());
            let replacement = match edit {
                None => None,
                Some(at) => {
                    let is_last_of_key = !self.members[i + 1..].iter().any(|m| m.key == member.key);
                    if !is_last_of_key {
                        continue;
                    }
                    let (_, replacement) = pending.remove(at);
                    match replacement {
                        None => continue,
                        Some(json) => Some(json),
                    }
                }
            };
            write_gap(&mut out, gap, kept_any);
            kept_any = true;
            match replacement {
                None => out.extend_from_slice(&self.bytes[member.whole.clone()]),
                Some(json) => {
                    out.extend_from_slice(&self.bytes[member.whole.start..member.value.start]);
                    out.extend_from_slice(json);
                }
            }
        }
        for (key, value) in pending {
            if let Some(json) = value {
                if kept_any {
                    out.push(b',');
                }
                kept_any = true;
                // A key is a plain string; serialising one cannot fail.
                let quoted = serde_json::to_vec(key).unwrap_or_else(|_| b"\"\"".to_vec());
                out.extend_from_slice(&quoted);
                out.push(b':');
                out.extend_from_slice(json);
            }
        }
        out.extend_from_slice(&self.bytes[prev_end..]);
        out
    }
}

/// Writes the text between two members: whitespace and one comma, except before the first kept
/// member, which must not be preceded by a comma.
fn write_gap(out: &mut Vec<u8>, gap: &[u8], kept_any: bool) {
    let has_comma = gap.contains(&b',');
    match (kept_any, has_comma) {
        (true, true) | (false, false) => out.extend_from_slice(gap),
        (true, false) => {
            out.push(b',');
            out.extend_from_slice(gap);
        }
        (false, true) => out.extend(gap.iter().filter(|b| **b != b',')),
    }
}

/// Keys are nearly always plain; only keys with escapes go through serde.
fn decode_key(raw: &[u8]) -> Option<Cow<'_, str>> {
    if raw.contains(&b'\\') {
        serde_json::from_slice::<String>(raw).ok().map(Cow::Owned)
    } else {
        std::str::from_utf8(raw.get(1..raw.len().checked_sub(1)?)?)
            .ok()
            .map(Cow::Borrowed)
    }
}

/// A reader of JSON's tokens over a body's bytes (also what redaction finds a body's strings
/// with, [`super::redact`]).
pub(crate) struct Scanner<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Scanner<'a> {
    /// A reader of `bytes` from byte `pos`.
    pub(crate) fn at(bytes: &'a [u8], pos: usize) -> Scanner<'a> {
        Scanner { bytes, pos }
    }

    /// Where the reader is.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    pub(crate) fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    pub(crate) fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// A string with its quotes; returns its byte range.
    pub(crate) fn string(&mut self) -> Option<Range<usize>> {
        let start = self.pos;
        if !self.eat(b'"') {
            return None;
        }
        loop {
            // Strings are most of a request's bytes: jump to the next quote or escape.
            self.pos += memchr::memchr2(b'"', b'\\', self.bytes.get(self.pos..)?)?;
            match self.peek()? {
                b'"' => {
                    self.pos += 1;
                    return Some(start..self.pos);
                }
                _ => self.pos += 2,
            }
        }
    }

    /// Skips any value. Nesting is tracked with a counter, not recursion, so a deeply nested
    /// body cannot overflow the stack.
    pub(crate) fn value(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            self.skip_ws();
            match self.peek()? {
                b'"' => {
                    self.string()?;
                }
                b'{' | b'[' => {
                    depth += 1;
                    self.pos += 1;
                    continue;
                }
                b'}' | b']' => {
                    depth = depth.checked_sub(1)?;
                    self.pos += 1;
                }
                b',' | b':' if depth > 0 => {
                    self.pos += 1;
                    continue;
                }
                _ => {
                    let start = self.pos;
                    while matches!(
                        self.peek(),
                        Some(b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z' | b'-' | b'+' | b'.')
                    ) {
                        self.pos += 1;
                    }
                    if self.pos == start {
                        return None;
                    }
                }
            }
            if depth == 0 {
                return Some(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    fn edit(body: &str, f: impl FnOnce(&mut JsonEdit)) -> String {
        let mut e = match JsonEdit::new(body.as_bytes()) {
            Ok(e) => e,
            Err(err) => panic!("{err}"),
        };
        f(&mut e);
        String::from_utf8_lossy(&e.finish()).into_owned()
    }

    #[test]
    fn replaces_only_the_model_bytes() {
        let body =
            r#"{ "model" : "auto",  "messages":[{"role":"user","content":"hi"}], "x": 1.50 }"#;
        let out = edit(body, |e| e.set_value("model", &json!("Qwen/Qwen3-8B")));
        assert_eq!(
            out,
            r#"{ "model" : "Qwen/Qwen3-8B",  "messages":[{"role":"user","content":"hi"}], "x": 1.50 }"#
        );
    }

    #[test]
    fn appends_and_removes_fields() -> Result<(), serde_json::Error> {
        let body = r#"{"model":"auto","tools":[{"type":"function"}],"tool_choice":"auto","n":1}"#;
        let out = edit(body, |e| {
            e.remove("tools");
            e.remove("tool_choice");
            e.set_value("reasoning_effort", &json!("high"));
        });
        let v: Value = serde_json::from_str(&out)?;
        assert_eq!(v, json!({"model":"auto","n":1,"reasoning_effort":"high"}));
        Ok(())
    }

    #[test]
    fn removing_the_first_member_keeps_valid_json() -> Result<(), serde_json::Error> {
        let out = edit(r#"{"a":1,"b":2}"#, |e| e.remove("a"));
        assert_eq!(serde_json::from_str::<Value>(&out)?, json!({"b":2}));
        let out = edit(r#"{"a":1}"#, |e| e.remove("a"));
        assert_eq!(serde_json::from_str::<Value>(&out)?, json!({}));
        Ok(())
    }

    #[test]
    fn appends_into_an_empty_object() -> Result<(), serde_json::Error> {
        let out = edit(" { } ", |e| e.set_value("model", &json!("m")));
        assert_eq!(serde_json::from_str::<Value>(&out)?, json!({"model":"m"}));
        Ok(())
    }

    #[test]
    fn duplicate_keys_keep_the_last_one_edited() -> Result<(), serde_json::Error> {
        let out = edit(r#"{"model":"a","x":[1,{"y":"}"}],"model":"b"}"#, |e| {
            e.set_value("model", &json!("c"))
        });
        assert_eq!(
            serde_json::from_str::<Value>(&out)?,
            json!({"x":[1,{"y":"}"}],"model":"c"})
        );
        assert_eq!(out.matches("model").count(), 1);
        Ok(())
    }

    #[test]
    fn escaped_keys_are_recognised() -> Result<(), serde_json::Error> {
        let out = edit(r#"{"mod\u0065l":"a"}"#, |e| {
            e.set_value("model", &json!("b"))
        });
        assert_eq!(serde_json::from_str::<Value>(&out)?, json!({"model":"b"}));
        Ok(())
    }

    #[test]
    fn non_objects_are_rejected() {
        for body in ["[1]", "\"s\"", "", "{\"a\" 1}", "{\"a\":}"] {
            assert!(JsonEdit::new(body.as_bytes()).is_err(), "{body}");
        }
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "[a-z\"\\\\{}\\[\\],: é]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{1,3}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Any edit gives the JSON that editing the parsed value would give.
        #[test]
        fn edits_agree_with_serde(
            fields in prop::collection::btree_map("[a-e]", arb_json(), 0..5),
            set in prop::collection::btree_map("[a-g]", arb_json(), 0..3),
            remove in prop::collection::btree_set("[a-g]", 0..3),
            pretty in any::<bool>(),
        ) {
            let original = Value::Object(fields.into_iter().collect());
            let text = if pretty {
                serde_json::to_string_pretty(&original)
            } else {
                serde_json::to_string(&original)
            }.map_err(|e| TestCaseError::fail(e.to_string()))?;
            let mut expected = original.clone();
            let mut e = JsonEdit::new(text.as_bytes())
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            for key in &remove {
                e.remove(key);
                if let Some(o) = expected.as_object_mut() { o.remove(key); }
            }
            for (key, value) in &set {
                e.set_value(key, value);
                if let Some(o) = expected.as_object_mut() { o.insert(key.clone(), value.clone()); }
            }
            let out = e.finish();
            let got: Value = serde_json::from_slice(&out)
                .map_err(|err| TestCaseError::fail(format!("{err}: {}", String::from_utf8_lossy(&out))))?;
            prop_assert_eq!(got, expected);
        }
    }
}
