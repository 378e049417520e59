//! What every line `src serve` writes to its log must be: one JSON object whose objects never
//! repeat a key. A JSON reader keeps one of two equal keys and drops the other without a word
//! (serde_json keeps the last), so a repeated key is information lost in every log pipeline.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// `Ok` when `line` is one JSON object with no key repeated in any object inside it; otherwise
/// what is wrong, quoting the line.
pub fn check(line: &str) -> Result<(), String> {
    if !line.trim_start().starts_with('{') {
        return Err(format!("not a JSON object: {line}"));
    }
    let mut reader = serde_json::Deserializer::from_str(line);
    Unique
        .deserialize(&mut reader)
        .and_then(|()| reader.end())
        .map_err(|e| format!("{e}: {line}"))
}

/// Reads any JSON value, failing on an object that repeats a key.
struct Unique;

impl<'de> DeserializeSeed<'de> for Unique {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unique {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Unique)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format!("the key `{key}` appears twice")));
            }
            map.next_value_seed(Unique)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn a_repeated_key_at_any_depth_is_refused() {
        assert_eq!(check(r#"{"a":1,"b":{"c":[{"d":null}]}}"#), Ok(()));
        let twice = check(r#"{"fields":{"message":"x","message":"y"}}"#).unwrap_err();
        assert!(twice.contains("`message` appears twice"), "{twice}");
        assert!(check(r#"{"a":[{"k":1,"k":2}]}"#).is_err());
        assert!(check("policy reloaded").is_err(), "plain text");
        assert!(
            check(r#"{"a":1} {"b":2}"#).is_err(),
            "two objects on one line"
        );
        assert!(check("[1]").is_err(), "an array is not a log line");
    }
}
