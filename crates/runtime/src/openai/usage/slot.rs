//! A `usage` member read straight into its counts, under the rules of [`Usage::from_value`]: a
//! member that is no object carries no usage, a count that is no unsigned integer is unsaid, and
//! of two names for one count the first that holds one wins. Building the member into a
//! `serde_json::Value` first, only to look four names up in it and free it, was about half of
//! reading a non-streamed answer's usage.

use std::fmt;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::Usage;

/// The usage a `usage` member carries, if any.
pub(super) struct UsageSlot(pub(super) Option<Usage>);

/// One count: `Some` only for an unsigned integer (what `Value::as_u64` accepts).
struct Count(Option<u64>);

/// A `*_tokens_details` member: its `cached_tokens` count.
struct Details(Option<u64>);

/// The names a usage object is read by; others are skipped.
#[derive(Default)]
struct Counts {
    prompt_tokens: Option<u64>,
    input_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    output_tokens: Option<u64>,
    total_tokens: Option<u64>,
    prompt_details: Option<u64>,
    input_details: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

impl Counts {
    fn usage(self) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens.or(self.input_tokens),
            completion_tokens: self.completion_tokens.or(self.output_tokens),
            total_tokens: self.total_tokens,
            cached_tokens: self
                .prompt_details
                .or(self.input_details)
                .or(self.cache_read_input_tokens),
        }
    }
}

/// Consumes a sequence, keeping nothing.
fn drain<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

/// A visitor for which every JSON value but the ones it reads means "nothing here".
macro_rules! nothing_else {
    ($value:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            drain(seq)?;
            Ok($value)
        }
    };
}

struct CountVisitor;

impl<'de> Visitor<'de> for CountVisitor {
    type Value = Count;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a token count")
    }
    fn visit_u64<E>(self, n: u64) -> Result<Count, E> {
        Ok(Count(Some(n)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Count, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Count(None))
    }
    nothing_else!(Count(None));
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Count, D::Error> {
        d.deserialize_any(CountVisitor)
    }
}

/// A key of a usage or details object, matched without being copied.
enum Key {
    PromptTokens,
    InputTokens,
    CompletionTokens,
    OutputTokens,
    TotalTokens,
    PromptDetails,
    InputDetails,
    CacheRead,
    Cached,
    Other,
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }
    fn visit_str<E>(self, name: &str) -> Result<Key, E> {
        Ok(match name {
            "prompt_tokens" => Key::PromptTokens,
            "input_tokens" => Key::InputTokens,
            "completion_tokens" => Key::CompletionTokens,
            "output_tokens" => Key::OutputTokens,
            "total_tokens" => Key::TotalTokens,
            "prompt_tokens_details" => Key::PromptDetails,
            "input_tokens_details" => Key::InputDetails,
            "cache_read_input_tokens" => Key::CacheRead,
            "cached_tokens" => Key::Cached,
            _ => Key::Other,
        })
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}

struct DetailsVisitor;

impl<'de> Visitor<'de> for DetailsVisitor {
    type Value = Details;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a details object")
    }
    fn visit_u64<E>(self, _: u64) -> Result<Details, E> {
        Ok(Details(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Details, A::Error> {
        let mut cached = None;
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                // The last of repeated names counts, as in a parsed object.
                Key::Cached => cached = map.next_value::<Count>()?.0,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Details(cached))
    }
    nothing_else!(Details(None));
}

impl<'de> Deserialize<'de> for Details {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Details, D::Error> {
        d.deserialize_any(DetailsVisitor)
    }
}

struct SlotVisitor;

impl<'de> Visitor<'de> for SlotVisitor {
    type Value = UsageSlot;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a usage object")
    }
    fn visit_u64<E>(self, _: u64) -> Result<UsageSlot, E> {
        Ok(UsageSlot(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UsageSlot, A::Error> {
        let mut c = Counts::default();
        while let Some(key) = map.next_key::<Key>()? {
            let count = |map: &mut A| map.next_value::<Count>().map(|c| c.0);
            match key {
                Key::PromptTokens => c.prompt_tokens = count(&mut map)?,
                Key::InputTokens => c.input_tokens = count(&mut map)?,
                Key::CompletionTokens => c.completion_tokens = count(&mut map)?,
                Key::OutputTokens => c.output_tokens = count(&mut map)?,
                Key::TotalTokens => c.total_tokens = count(&mut map)?,
                Key::CacheRead => c.cache_read_input_tokens = count(&mut map)?,
                Key::PromptDetails => c.prompt_details = map.next_value::<Details>()?.0,
                Key::InputDetails => c.input_details = map.next_value::<Details>()?.0,
                Key::Cached | Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(UsageSlot(Some(c.usage())))
    }
    nothing_else!(UsageSlot(None));
}

impl<'de> Deserialize<'de> for UsageSlot {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<UsageSlot, D::Error> {
        d.deserialize_any(SlotVisitor)
    }
}
