//! The JSON the request readers walk, behind one small interface: a `serde_json::Value` tree,
//! or a [`Borrowed`] tree whose strings point into the body's bytes.
//!
//! The readers (`from_chat`, `from_responses`, `from_messages`) are written once over [`Json`],
//! so both trees give the same facts and the same errors by construction. The borrowed tree is
//! what a proxy reads a chat body into: it allocates one vector per array and per object and no
//! string that has no escape, where a `Value` allocates every key and every string and builds a
//! B-tree per object; and nothing is left to re-parse, since a [`Borrowed`] tree holds exactly
//! what a `Value` would (its objects are kept in key order, a repeated key once with its last
//! value, as serde_json's map keeps them).

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Number, Value};
use std::borrow::Cow;
use std::fmt;

/// A JSON value the readers can walk.
pub trait Json: Sized {
    type Object: Object<Item = Self>;

    /// The value's kind, with what it holds.
    fn node(&self) -> Node<'_, Self>;
}

/// A JSON object the readers can walk.
pub trait Object {
    type Item: Json;

    /// The value of `key` (the last one given, when the body repeats it).
    fn get(&self, key: &str) -> Option<&Self::Item>;

    /// Each key once, in key order, with its value.
    fn entries(&self) -> impl Iterator<Item = (&str, &Self::Item)>;
}

/// One value, seen through [`Json::node`].
pub enum Node<'v, J: Json> {
    Null,
    Bool(bool),
    Number(&'v Number),
    String(&'v str),
    Array(&'v [J]),
    Object(&'v J::Object),
}

impl Json for Value {
    type Object = Map<String, Value>;

    fn node(&self) -> Node<'_, Value> {
        match self {
            Value::Null => Node::Null,
            Value::Bool(b) => Node::Bool(*b),
            Value::Number(n) => Node::Number(n),
            Value::String(s) => Node::String(s),
            Value::Array(items) => Node::Array(items),
            Value::Object(obj) => Node::Object(obj),
        }
    }
}

impl Object for Map<String, Value> {
    type Item = Value;

    fn get(&self, key: &str) -> Option<&Value> {
        Map::get(self, key)
    }

    fn entries(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.iter().map(|(k, v)| (k.as_str(), v))
    }
}

/// A JSON value whose strings borrow the text it was read from where they have no escape.
#[derive(Debug, Clone, PartialEq)]
pub enum Borrowed<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Array(Vec<Borrowed<'a>>),
    Object(Members<'a>),
}

/// An object's members in key order, each key once (its last value in the text).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Members<'a>(Vec<(Cow<'a, str>, Borrowed<'a>)>);

impl<'a> Borrowed<'a> {
    /// Reads `bytes` as one JSON value, as strictly as `serde_json::from_slice::<Value>` does
    /// (the same syntax, UTF-8, number range and nesting limit). `None` is a body a `Value`
    /// must read instead: one it refuses (so that its error is the one given), or one whose
    /// keys serde_json reads as its own private markers.
    pub fn parse(bytes: &'a [u8]) -> Option<Borrowed<'a>> {
        serde_json::from_slice(bytes).ok()
    }
}

impl<'a> Json for Borrowed<'a> {
    type Object = Members<'a>;

    fn node(&self) -> Node<'_, Borrowed<'a>> {
        match self {
            Borrowed::Null => Node::Null,
            Borrowed::Bool(b) => Node::Bool(*b),
            Borrowed::Number(n) => Node::Number(n),
            Borrowed::String(s) => Node::String(s),
            Borrowed::Array(items) => Node::Array(items),
            Borrowed::Object(obj) => Node::Object(obj),
        }
    }
}

impl<'a> Object for Members<'a> {
    type Item = Borrowed<'a>;

    fn get(&self, key: &str) -> Option<&Borrowed<'a>> {
        // A request's objects are small (a message has two or three members): a scan that
        // compares lengths first beats a binary search's string comparisons.
        if self.0.len() <= 8 {
            return self
                .0
                .iter()
                .find(|(k, _)| k.len() == key.len() && k.as_ref() == key)
                .map(|(_, v)| v);
        }
        let at = self.0.binary_search_by(|(k, _)| k.as_ref().cmp(key)).ok()?;
        self.0.get(at).map(|(_, v)| v)
    }

    fn entries(&self) -> impl Iterator<Item = (&str, &Borrowed<'a>)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v))
    }
}

/// Written as a `Value` holding the same would be: a body translated from the borrowed tree is
/// the same bytes as one translated from a `Value`.
impl Serialize for Borrowed<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Borrowed::Null => serializer.serialize_unit(),
            Borrowed::Bool(b) => serializer.serialize_bool(*b),
            Borrowed::Number(n) => n.serialize(serializer),
            Borrowed::String(s) => serializer.serialize_str(s),
            Borrowed::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Borrowed::Object(Members(members)) => {
                let mut map = serializer.serialize_map(Some(members.len()))?;
                for (key, value) in members {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
        }
    }
}

/// serde_json's maps with a first key of this prefix are its own markers (a raw value, an
/// arbitrary-precision number), which `Value` reads as what they stand for: such a body is left
/// to `Value`.
const PRIVATE_KEY: &str = "$serde_json::private::";

impl<'de> Deserialize<'de> for Borrowed<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(BorrowedVisitor)
    }
}

struct BorrowedVisitor;

impl<'de> Visitor<'de> for BorrowedVisitor {
    type Value = Borrowed<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Borrowed<'de>, E> {
        Ok(Borrowed::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Borrowed<'de>, E> {
        Ok(Borrowed::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Borrowed<'de>, E> {
        Ok(Borrowed::Number(n.into()))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Borrowed<'de>, E> {
        // As `Value` reads one: a float JSON cannot hold is null.
        Ok(Number::from_f64(n).map_or(Borrowed::Null, Borrowed::Number))
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Borrowed<'de>, E> {
        Ok(Borrowed::String(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Borrowed<'de>, E> {
        Ok(Borrowed::String(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<Borrowed<'de>, E> {
        Ok(Borrowed::String(Cow::Owned(s)))
    }

    fn visit_none<E>(self) -> Result<Borrowed<'de>, E> {
        Ok(Borrowed::Null)
    }

    fn visit_unit<E>(self) -> Result<Borrowed<'de>, E> {
        Ok(Borrowed::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Borrowed<'de>, D::Error> {
        Deserialize::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Borrowed<'de>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(16));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Borrowed::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Borrowed<'de>, A::Error> {
        let mut members: Vec<(Cow<'de, str>, Borrowed<'de>)> = Vec::new();
        while let Some(Key(key)) = map.next_key()? {
            if key.starts_with(PRIVATE_KEY) {
                return Err(de::Error::custom("a serde_json marker key"));
            }
            let value = map.next_value()?;
            members.push((key, value));
        }
        // Key order, equal keys in text order (the sort is stable); of a repeated key the last
        // value stays, in the first one's place, as a `Value` map's insert does.
        members.sort_by(|a, b| a.0.cmp(&b.0));
        members.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                std::mem::swap(&mut later.1, &mut earlier.1);
            }
            same
        });
        Ok(Borrowed::Object(Members(members)))
    }
}

/// An object key, borrowed when it has no escape: what a reader of a body's raw members (the
/// runtime's Responses turn reader too) reads keys with.
pub struct Key<'a>(pub Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object key")
            }

            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }

            fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_owned())))
            }

            fn visit_string<E>(self, s: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The borrowed tree as a `Value`, to compare with serde_json's own.
    fn to_value(b: &Borrowed<'_>) -> Value {
        match b {
            Borrowed::Null => Value::Null,
            Borrowed::Bool(x) => Value::Bool(*x),
            Borrowed::Number(n) => Value::Number(n.clone()),
            Borrowed::String(s) => Value::String(s.to_string()),
            Borrowed::Array(items) => Value::Array(items.iter().map(to_value).collect()),
            Borrowed::Object(obj) => Value::Object(
                obj.entries()
                    .map(|(k, v)| (k.to_owned(), to_value(v)))
                    .collect(),
            ),
        }
    }

    #[test]
    fn reads_what_a_value_reads() {
        for text in [
            r#"{"b":1,"a":[true,null,-2,3.5,"x\"y"],"c":{"d":"e"}}"#,
            r#"{"k":1,"k":2,"a":0,"k":{"z":3}}"#,
            r#"[1e5, 18446744073709551615, -9223372036854775808, 0.1]"#,
            r#""\u00e9\ud83d\ude00""#,
            r#"{"\u0061":1,"a ":2,"a":3}"#,
            "  {}  ",
        ] {
            let ours = Borrowed::parse(text.as_bytes()).map(|b| to_value(&b));
            let theirs: Value = serde_json::from_str(text).unwrap();
            assert_eq!(ours, Some(theirs), "{text}");
        }
    }

    #[test]
    fn writes_what_a_value_writes() {
        for text in [
            r#"{"b":1,"a":[true,null,-2,3.5,"x\"y"],"c":{"d":"e"}}"#,
            r#"{"k":1,"k":2,"a":0,"k":{"z":3}}"#,
            r#"[1e5, 18446744073709551615, -9223372036854775808, 0.1, 1E-7]"#,
            r#""\u00e9\ud83d\ude00 \n\t\u0001""#,
            "  {}  ",
        ] {
            let ours = Borrowed::parse(text.as_bytes()).map(|b| serde_json::to_string(&b).ok());
            let theirs: Value = serde_json::from_str(text).unwrap();
            assert_eq!(ours, Some(serde_json::to_string(&theirs).ok()), "{text}");
        }
    }

    #[test]
    fn finds_each_key_in_small_and_large_objects() {
        for n in [1, 3, 8, 9, 20] {
            let mut text = String::from("{");
            for i in 0..n {
                // Every third key repeats an earlier one, whose last value must win.
                let key = if i % 3 == 2 { i - 1 } else { i };
                text.push_str(&format!("\"k{key}\":{i},"));
            }
            text.push_str("\"z\":null}");
            let value: Value = serde_json::from_str(&text).unwrap();
            let Some(Borrowed::Object(obj)) = Borrowed::parse(text.as_bytes()) else {
                panic!("an object: {text}")
            };
            let Value::Object(map) = &value else {
                panic!("an object")
            };
            for key in map.keys().map(String::as_str).chain(["absent", "k"]) {
                assert_eq!(
                    obj.get(key).map(to_value),
                    map.get(key).cloned(),
                    "{key} in {text}"
                );
            }
        }
    }

    #[test]
    fn refuses_what_a_value_refuses() {
        for text in [
            "{",
            r#"{"a":1,}"#,
            "1e999",
            "\"\\ud800\"",
            "{\"a\":\"\u{0}\"}",
            "[1] [2]",
            &format!("{}{}", "[".repeat(200), "]".repeat(200)),
        ] {
            assert!(serde_json::from_str::<Value>(text).is_err(), "{text}");
            assert!(Borrowed::parse(text.as_bytes()).is_none(), "{text}");
        }
        // Invalid UTF-8 inside a string.
        assert!(Borrowed::parse(b"{\"a\":\"\xff\"}").is_none());
    }

    #[test]
    fn leaves_serde_json_markers_to_a_value() {
        let text = r#"{"$serde_json::private::RawValue":"[1]"}"#;
        assert!(Borrowed::parse(text.as_bytes()).is_none());
    }

    #[test]
    fn strings_without_escapes_are_borrowed() {
        let text = r#"{"plain":"yes","escaped":"a\nb"}"#;
        let Some(Borrowed::Object(obj)) = Borrowed::parse(text.as_bytes()) else {
            panic!("an object")
        };
        assert!(matches!(
            obj.get("plain"),
            Some(Borrowed::String(Cow::Borrowed("yes")))
        ));
        assert!(matches!(
            obj.get("escaped"),
            Some(Borrowed::String(Cow::Owned(s))) if s == "a\nb"
        ));
    }
}
