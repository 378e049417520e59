//! What every line `src serve` writes to its log must be: one JSON object whose objects never
//! repeat a key. A JSON reader keeps one of two equal keys and drops the other without a word
//! (serde_json keeps the last), so a repeated key is information lost in every log pipeline.
//! [`Written`] is a log's writer whose lines a test reads back.

use std::collections::HashSet;
use std::fmt;
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

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

/// A writer whose bytes a test reads back: every clone writes to one buffer, so a log (a
/// tracing subscriber, a request log) takes a clone and the test keeps one.
#[derive(Clone, Default)]
pub struct Written(Arc<Mutex<Vec<u8>>>);

impl Written {
    /// Everything written so far.
    pub fn bytes(&self) -> Vec<u8> {
        self.lock().clone()
    }

    /// Everything written so far as text (bytes that are not UTF-8 read as U+FFFD).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.lock()).into_owned()
    }

    // A test that panicked while writing left whole lines behind; the rest still reads them.
    fn lock(&self) -> MutexGuard<'_, Vec<u8>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Write for Written {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.lock().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
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
    use super::{check, Written};
    use std::io::Write;

    #[test]
    fn every_clone_writes_to_the_one_buffer() {
        let written = Written::default();
        let mut sink = written.clone();
        sink.write_all(b"{\"a\":1}\n").unwrap();
        written.clone().write_all(b"\xff\n").unwrap();
        assert_eq!(written.bytes(), b"{\"a\":1}\n\xff\n");
        assert_eq!(written.text(), "{\"a\":1}\n\u{fffd}\n");
    }

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
