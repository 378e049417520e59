//! A `/v1/responses` body's top level read as raw JSON: what the stored-conversation step needs
//! of a turn (`previous_response_id`, `store`, the `input` items) without building a tree, each
//! member and each input item kept as the body's own bytes.
//!
//! A turn is kept and a continued turn expanded by splicing those bytes: the items of the
//! conversation go into the response store as the client (or the backend) wrote them, and an
//! expanded body is the turn's own members with `input` replaced, never a re-serialised tree.
//! A repeated key counts once, with its last value, as it does for a `serde_json::Value` and for
//! the request's facts.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use src_compiler::request::Key;

/// One conversation item (an input item, or an output item given back as one), as JSON bytes.
pub type Item = Box<RawValue>;

/// A JSON value that is a list of raw items, a string, null, or something else.
#[derive(Debug, Clone)]
pub enum Listed<'a> {
    Items(Vec<&'a RawValue>),
    Text(Cow<'a, str>),
    Null,
    Other,
}

/// A Responses body's top level.
#[derive(Debug)]
pub struct TurnBody<'a> {
    /// Every member but `input`, in the order of the text, a repeated key once (where it first
    /// stood, with its last value).
    members: Vec<(Cow<'a, str>, &'a RawValue)>,
    /// `input`, its last value; `None` when the body has none.
    input: Option<Listed<'a>>,
}

impl<'a> TurnBody<'a> {
    /// Reads `bytes`, a JSON object; `None` for anything else.
    pub fn parse(bytes: &'a [u8]) -> Option<TurnBody<'a>> {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let body = de.deserialize_map(BodyVisitor).ok()?;
        de.end().ok()?;
        Some(body)
    }

    fn member(&self, key: &str) -> Option<&'a RawValue> {
        self.members
            .iter()
            .find(|(k, _)| k.as_ref() == key)
            .map(|(_, v)| *v)
    }

    /// `previous_response_id` when it is a string, trimmed; `None` when absent, blank or not a
    /// string.
    pub fn previous_response_id(&self) -> Option<Cow<'a, str>> {
        let raw = self.member("previous_response_id")?;
        let id = match text(raw)? {
            Cow::Borrowed(id) => Cow::Borrowed(id.trim()),
            Cow::Owned(id) => Cow::Owned(id.trim().to_owned()),
        };
        (!id.is_empty()).then_some(id)
    }

    /// `store` when it is a boolean.
    pub fn store(&self) -> Option<bool> {
        let raw = self.member("store")?;
        match raw.get() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }

    /// The turn's `input` as input items: a string is one user message; anything but a string
    /// or an array is none.
    pub fn input_items(&self) -> Vec<Item> {
        match &self.input {
            Some(Listed::Items(items)) => items.iter().map(|&item| item.to_owned()).collect(),
            Some(Listed::Text(text)) => user_message(text).into_iter().collect(),
            _ => Vec::new(),
        }
    }

    /// The body for a model that never saw the conversation: the turn's members but
    /// `previous_response_id`, in their order, and `input` the whole `history`.
    pub fn expanded(&self, history: &[Item]) -> Vec<u8> {
        let items: usize = history.iter().map(|i| i.get().len() + 1).sum();
        let rest: usize = self
            .members
            .iter()
            .map(|(k, v)| k.len() + v.get().len() + 4)
            .sum();
        let mut out = Vec::with_capacity(items + rest + 16);
        out.push(b'{');
        for (key, value) in &self.members {
            if key.as_ref() == "previous_response_id" {
                continue;
            }
            if out.len() > 1 {
                out.push(b',');
            }
            write_key(&mut out, key);
            out.extend_from_slice(value.get().as_bytes());
        }
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(b"\"input\":[");
        for (i, item) in history.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(item.get().as_bytes());
        }
        out.extend_from_slice(b"]}");
        out
    }
}

/// A string as one user message item.
fn user_message(text: &str) -> Option<Item> {
    // Keys in the order a `serde_json::Value` writes them.
    serde_json::value::to_raw_value(&serde_json::json!({"content": text, "role": "user"})).ok()
}

fn write_key(out: &mut Vec<u8>, key: &str) {
    // A key is a string: serde_json writes it with the escapes JSON needs.
    if serde_json::to_writer(&mut *out, key).is_err() {
        out.extend_from_slice(b"\"\"");
    }
    out.push(b':');
}

/// The string `raw` holds, unescaped; `None` when it is no string.
pub fn text(raw: &RawValue) -> Option<Cow<'_, str>> {
    let mut de = serde_json::Deserializer::from_str(raw.get());
    de.deserialize_any(TextVisitor).ok().flatten()
}

/// The list `raw` holds, as raw items.
pub fn listed(raw: &RawValue) -> Listed<'_> {
    let mut de = serde_json::Deserializer::from_str(raw.get());
    de.deserialize_any(ListedVisitor).unwrap_or(Listed::Other)
}

/// The value of `key` in the object `raw` holds (the last one given); `None` when `raw` is no
/// object or has no such member.
pub fn member<'a>(raw: &'a RawValue, key: &str) -> Option<&'a RawValue> {
    let [found] = members(raw, [key]);
    found
}

/// The values of `keys` in the object `raw` holds, in one walk (each the last one given); all
/// `None` when `raw` is no object.
pub fn members<'a, const N: usize>(
    raw: &'a RawValue,
    keys: [&str; N],
) -> [Option<&'a RawValue>; N] {
    let mut de = serde_json::Deserializer::from_str(raw.get());
    de.deserialize_any(MemberVisitor { keys })
        .ok()
        .unwrap_or([None; N])
}

struct BodyVisitor;

impl<'de> Visitor<'de> for BodyVisitor {
    type Value = TurnBody<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TurnBody<'de>, A::Error> {
        let mut members: Vec<(Cow<'de, str>, &'de RawValue)> = Vec::new();
        let mut input = None;
        while let Some(Key(key)) = map.next_key()? {
            if key == "input" {
                input = Some(map.next_value_seed(ListedSeed)?);
                continue;
            }
            let value: &'de RawValue = map.next_value()?;
            match members.iter_mut().find(|(k, _)| *k == key) {
                Some(member) => member.1 = value,
                None => members.push((key, value)),
            }
        }
        Ok(TurnBody { members, input })
    }
}

struct ListedSeed;

impl<'de> DeserializeSeed<'de> for ListedSeed {
    type Value = Listed<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Listed<'de>, D::Error> {
        d.deserialize_any(ListedVisitor)
    }
}

struct ListedVisitor;

impl<'de> Visitor<'de> for ListedVisitor {
    type Value = Listed<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Listed<'de>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element::<&'de RawValue>()? {
            items.push(item);
        }
        Ok(Listed::Items(items))
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Listed<'de>, E> {
        Ok(Listed::Text(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Listed<'de>, E> {
        Ok(Listed::Text(Cow::Owned(s.to_owned())))
    }

    fn visit_unit<E>(self) -> Result<Listed<'de>, E> {
        Ok(Listed::Null)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Listed<'de>, E> {
        Ok(Listed::Other)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Listed<'de>, E> {
        Ok(Listed::Other)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Listed<'de>, E> {
        Ok(Listed::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Listed<'de>, E> {
        Ok(Listed::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Listed<'de>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Listed::Other)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Option<Cow<'de, str>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Owned(s.to_owned())))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

struct MemberVisitor<'k, const N: usize> {
    keys: [&'k str; N],
}

impl<'de, const N: usize> Visitor<'de> for MemberVisitor<'_, N> {
    type Value = [Option<&'de RawValue>; N];

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = [None; N];
        while let Some(Key(key)) = map.next_key()? {
            match self.keys.iter().position(|k| *k == key) {
                Some(at) => found[at] = Some(map.next_value::<&'de RawValue>()?),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok([None; N])
    }

    fn visit_borrowed_str<E>(self, _: &'de str) -> Result<Self::Value, E> {
        Ok([None; N])
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok([None; N])
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok([None; N])
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok([None; N])
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok([None; N])
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok([None; N])
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok([None; N])
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn value(raw: &[u8]) -> Value {
        serde_json::from_slice(raw).unwrap_or(Value::Null)
    }

    #[test]
    fn reads_the_members_a_turn_needs() {
        let text = br#"{"model":"auto","store":false,"previous_response_id":" resp_1 ",
            "input":[{"role":"user","content":"a"}, {"type":"function_call_output","call_id":"c","output":"ok"}]}"#;
        let body = TurnBody::parse(text).expect("an object");
        assert_eq!(body.previous_response_id().as_deref(), Some("resp_1"));
        assert_eq!(body.store(), Some(false));
        let items: Vec<Value> = body
            .input_items()
            .iter()
            .map(|i| value(i.get().as_bytes()))
            .collect();
        assert_eq!(
            items,
            [
                json!({"role": "user", "content": "a"}),
                json!({"type": "function_call_output", "call_id": "c", "output": "ok"})
            ]
        );
    }

    #[test]
    fn a_string_input_is_one_user_message_and_other_shapes_none() {
        let body = TurnBody::parse(br#"{"input":"hi \u00e9"}"#).expect("an object");
        let items = body.input_items();
        assert_eq!(items.len(), 1);
        assert_eq!(
            value(items[0].get().as_bytes()),
            json!({"role": "user", "content": "hi é"})
        );
        for text in [&br#"{"input":null}"#[..], br#"{"input":{"a":[1]}}"#, b"{}"] {
            let body = TurnBody::parse(text).expect("an object");
            assert!(body.input_items().is_empty());
        }
        assert!(TurnBody::parse(b"[1]").is_none());
        assert!(TurnBody::parse(b"{} x").is_none());
    }

    #[test]
    fn a_repeated_key_counts_once_with_its_last_value() {
        let text = br#"{"store":true,"input":"one","store":false,"input":[{"role":"user","content":"two"}],
            "previous_response_id":"r1","previous_response_id":7}"#;
        let body = TurnBody::parse(text).expect("an object");
        assert_eq!(body.store(), Some(false));
        assert_eq!(body.previous_response_id(), None);
        assert_eq!(body.input_items().len(), 1);
        let expanded = body.expanded(&body.input_items());
        assert_eq!(
            value(&expanded),
            json!({"store": false, "input": [{"role": "user", "content": "two"}]})
        );
    }

    #[test]
    fn an_expanded_body_is_the_turn_with_the_whole_history() {
        let text =
            br#"{ "model" : "auto", "previous_response_id":"resp_1", "instructions":"be brief",
            "a\"b": {"n": 1.50}, "input": "three" }"#;
        let body = TurnBody::parse(text).expect("an object");
        let mut history: Vec<Item> = [
            "{\"role\":\"user\",\"content\":\"one\"}",
            "{ \"x\" : [1, 2] }",
        ]
        .iter()
        .filter_map(|t| serde_json::from_str(t).ok())
        .collect();
        history.extend(body.input_items());
        let expanded = body.expanded(&history);
        assert_eq!(
            value(&expanded),
            json!({"model": "auto", "instructions": "be brief", "a\"b": {"n": 1.50},
                   "input": [{"role": "user", "content": "one"}, {"x": [1, 2]},
                             {"role": "user", "content": "three"}]})
        );
        // Values are spliced as written, number notation included.
        assert!(String::from_utf8_lossy(&expanded).contains("1.50"));
        let alone = TurnBody::parse(br#"{"previous_response_id":"r"}"#).expect("an object");
        assert_eq!(value(&alone.expanded(&[])), json!({"input": []}));
    }

    #[test]
    fn items_and_members_are_read_from_raw_values() {
        let raw: Box<RawValue> =
            serde_json::from_str(r#"{"type":"x","type":"reasoning","id":"rs"}"#).expect("json");
        assert_eq!(
            member(&raw, "type").and_then(text).as_deref(),
            Some("reasoning")
        );
        assert_eq!(member(&raw, "absent").map(RawValue::get), None);
        let [kind, id, absent] = members(&raw, ["type", "id", "absent"]);
        assert_eq!(kind.map(RawValue::get), Some("\"reasoning\""));
        assert_eq!(id.map(RawValue::get), Some("\"rs\""));
        assert!(absent.is_none());
        let list: Box<RawValue> = serde_json::from_str(r#"[{"a":1}, "b"]"#).expect("json");
        assert!(members(&list, ["a"])[0].is_none());
        assert!(matches!(listed(&list), Listed::Items(items) if items.len() == 2));
        let number: Box<RawValue> = serde_json::from_str("3").expect("json");
        assert!(matches!(listed(&number), Listed::Other));
        assert_eq!(text(&number), None);
    }
}
