//! Token usage as upstreams report it, and an incremental SSE reader that finds it in a stream.
//!
//! The proxy forwards stream bytes as they arrive and must not delay or rewrite them, yet it
//! wants the usage the final chunk carries (with `cached_tokens`, the only KV-cache evidence a
//! backend gives). [`UsageScanner`] therefore takes the bytes by reference, in whatever pieces the
//! network delivers, and keeps only the partial line it has not seen the end of.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

mod slot;

use slot::UsageSlot;

/// Token counts from an answer. Every field is `None` when the upstream did not say: unknown is
/// never reported as zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Usage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub total_tokens: Option<u64>,
    /// `prompt_tokens_details.cached_tokens` (chat) or `input_tokens_details.cached_tokens`
    /// (responses): prompt tokens the backend served from its prefix cache.
    pub cached_tokens: Option<u64>,
}

impl Usage {
    /// Reads a `usage` object of either the chat (`prompt_tokens`) or the responses
    /// (`input_tokens`) dialect, or Anthropic's (`cache_read_input_tokens`); `None` when `value`
    /// is not an object.
    pub fn from_value(value: &Value) -> Option<Usage> {
        let object = value.as_object()?;
        let count = |names: &[&str]| names.iter().find_map(|n| object.get(*n)?.as_u64());
        let cached = ["prompt_tokens_details", "input_tokens_details"]
            .iter()
            .find_map(|n| object.get(*n)?.get("cached_tokens")?.as_u64())
            .or_else(|| count(&["cache_read_input_tokens"]));
        Some(Usage {
            prompt_tokens: count(&["prompt_tokens", "input_tokens"]),
            completion_tokens: count(&["completion_tokens", "output_tokens"]),
            total_tokens: count(&["total_tokens"]),
            cached_tokens: cached,
        })
    }

    /// Finds the usage of one JSON answer or stream event: top-level `usage` (chat completions,
    /// chat chunks, Messages answers and `message_delta` events), `response.usage` (responses
    /// API objects and `response.completed` events) or `message.usage` (Messages'
    /// `message_start` event).
    pub fn from_answer(answer: &Value) -> Option<Usage> {
        answer.get("usage").and_then(Usage::from_value).or_else(|| {
            ["response", "message"]
                .iter()
                .find_map(|outer| answer.get(*outer)?.get("usage").and_then(Usage::from_value))
        })
    }

    /// These counts over `earlier` ones: what a stream reported by the time of this event. A
    /// Messages stream reports its input tokens in `message_start` and only its output tokens
    /// in the `message_delta` that ends it.
    pub fn over(self, earlier: Usage) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens.or(earlier.prompt_tokens),
            completion_tokens: self.completion_tokens.or(earlier.completion_tokens),
            total_tokens: self.total_tokens.or(earlier.total_tokens),
            cached_tokens: self.cached_tokens.or(earlier.cached_tokens),
        }
    }

    /// [`Usage::from_answer`] over the raw bytes of a non-streaming answer.
    ///
    /// Only the `usage` objects become values; everything else of the answer (its text, its
    /// choices) is skipped by the parser, not built into a tree and freed again.
    pub fn from_body(body: &[u8]) -> Option<Usage> {
        // A struct would also be read from an array of its members, which carries no usage.
        let is_object = |json: &[u8]| json.trim_ascii_start().starts_with(b"{");
        if !is_object(body) {
            return None;
        }
        let answer: Carriers = serde_json::from_slice(body).ok()?;
        let nested = |outer: Option<&RawValue>| {
            let outer = outer.filter(|o| is_object(o.get().as_bytes()))?;
            let outer: Nested = serde_json::from_str(outer.get()).ok()?;
            outer.usage.and_then(|slot| slot.0)
        };
        answer
            .usage
            .and_then(|slot| slot.0)
            .or_else(|| nested(answer.response))
            .or_else(|| nested(answer.message))
    }
}

/// The members of an answer [`Usage::from_answer`] reads; the others are skipped.
#[derive(Deserialize)]
struct Carriers<'a> {
    #[serde(default)]
    usage: Option<UsageSlot>,
    /// Kept as their JSON tokens: a member that is no object carries no usage, and does not
    /// make the answer unreadable.
    #[serde(default, borrow)]
    response: Option<&'a RawValue>,
    #[serde(default, borrow)]
    message: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Nested {
    #[serde(default)]
    usage: Option<UsageSlot>,
}

/// A line longer than this is not an OpenAI event; it is skipped instead of buffered without
/// bound.
const MAX_LINE_BYTES: usize = 8 << 20;

/// Incremental reader of a server-sent-events body that remembers the last `usage` it saw (each
/// count as last reported).
///
/// Lines may end in LF, CRLF or CR and may be split anywhere across [`UsageScanner::feed`] calls;
/// multi-line `data:` fields are joined as the SSE specification says.
#[derive(Debug, Default)]
pub struct UsageScanner {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    skipping_line: bool,
    after_cr: bool,
    usage: Option<Usage>,
    done: bool,
    events: u64,
    malformed: u64,
}

impl UsageScanner {
    pub fn new() -> UsageScanner {
        UsageScanner::default()
    }

    /// Reads the next piece of the stream.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if bytes[0] == b'\n' {
                    bytes = &bytes[1..];
                    continue;
                }
            }
            match bytes.iter().position(|b| *b == b'\n' || *b == b'\r') {
                Some(end) => {
                    self.extend_line(&bytes[..end]);
                    self.after_cr = bytes[end] == b'\r';
                    self.end_line();
                    bytes = &bytes[end + 1..];
                }
                None => {
                    self.extend_line(bytes);
                    bytes = &[];
                }
            }
        }
    }

    /// Ends the stream: an unterminated last line and event still count, because a server that
    /// omits the final blank line has still said what it said.
    pub fn finish(&mut self) {
        if !self.line.is_empty() || self.skipping_line {
            self.end_line();
        }
        self.dispatch();
    }

    /// The last usage any event carried.
    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// Whether the `data: [DONE]` terminator arrived.
    pub fn saw_done(&self) -> bool {
        self.done
    }

    /// Events dispatched so far, `[DONE]` included.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Events whose data was neither JSON nor `[DONE]`: a stream with any is malformed.
    pub fn malformed_events(&self) -> u64 {
        self.malformed
    }

    fn extend_line(&mut self, part: &[u8]) {
        if self.skipping_line {
            return;
        }
        if self.line.len() + part.len() > MAX_LINE_BYTES {
            self.skipping_line = true;
            self.line.clear();
            return;
        }
        self.line.extend_from_slice(part);
    }

    fn end_line(&mut self) {
        if std::mem::take(&mut self.skipping_line) {
            self.malformed += 1;
            return;
        }
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.dispatch();
        } else if let Some(value) = line.strip_prefix(b"data") {
            // Only the field named exactly `data` counts; `dataset: x` is another field.
            let value = match value {
                [] => Some(value),
                [b':', b' ', rest @ ..] => Some(rest),
                [b':', rest @ ..] => Some(rest),
                _ => None,
            };
            if let Some(value) = value {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
        }
        // Keep the allocation of the line buffer for the next line.
        self.line = line;
        self.line.clear();
    }

    fn dispatch(&mut self) {
        if !std::mem::take(&mut self.has_data) {
            return;
        }
        self.events += 1;
        let data = std::mem::take(&mut self.data);
        if data.trim_ascii() == b"[DONE]" {
            self.done = true;
        } else if contains(&data, b"\"usage\"") {
            match serde_json::from_slice::<Value>(&data) {
                Ok(event) => {
                    if let Some(usage) = Usage::from_answer(&event) {
                        self.usage = Some(match self.usage {
                            Some(earlier) => usage.over(earlier),
                            None => usage,
                        });
                    }
                }
                Err(_) => self.malformed += 1,
            }
        } else if serde_json::from_slice::<serde::de::IgnoredAny>(&data).is_err() {
            self.malformed += 1;
        }
        self.data = data;
        self.data.clear();
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const STREAM: &str = concat!(
        "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}],\"usage\":null}\n\n",
        ": keep-alive comment\n\n",
        "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"h\\u00e9llo\"}}]}\r\n\r\n",
        "data: {\"id\":\"c1\",\"choices\":[],\r\n",
        "data: \"usage\":{\"prompt_tokens\":40,\"completion_tokens\":7,\"total_tokens\":47,",
        "\"prompt_tokens_details\":{\"cached_tokens\":32}}}\n\n",
        "data: [DONE]\n\n",
    );

    fn expected() -> Usage {
        Usage {
            prompt_tokens: Some(40),
            completion_tokens: Some(7),
            total_tokens: Some(47),
            cached_tokens: Some(32),
        }
    }

    fn scan(pieces: &[&[u8]]) -> UsageScanner {
        let mut scanner = UsageScanner::new();
        for piece in pieces {
            scanner.feed(piece);
        }
        scanner.finish();
        scanner
    }

    #[test]
    fn a_messages_stream_counts_input_from_its_start_and_output_from_its_end() {
        let stream = concat!(
            "event: message_start\n",
            "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",",
            "\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":25,",
            "\"cache_read_input_tokens\":16,\"output_tokens\":1}}}\n\n",
            "event: content_block_delta\n",
            "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
            "event: message_delta\n",
            "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n",
            "event: message_stop\n",
            "data: {\"type\":\"message_stop\"}\n\n",
        );
        let scanner = scan(&[stream.as_bytes()]);
        assert_eq!(
            scanner.usage(),
            Some(Usage {
                prompt_tokens: Some(25),
                completion_tokens: Some(15),
                total_tokens: None,
                cached_tokens: Some(16),
            })
        );
        assert_eq!(scanner.malformed_events(), 0);
    }

    #[test]
    fn whole_stream_yields_usage_and_done() {
        let scanner = scan(&[STREAM.as_bytes()]);
        assert_eq!(scanner.usage(), Some(expected()));
        assert!(scanner.saw_done());
        assert_eq!(scanner.events(), 4);
        assert_eq!(scanner.malformed_events(), 0);
    }

    #[test]
    fn byte_by_byte_gives_the_same_answer() {
        let pieces: Vec<&[u8]> = STREAM.as_bytes().chunks(1).collect();
        let scanner = scan(&pieces);
        assert_eq!(scanner.usage(), Some(expected()));
        assert!(scanner.saw_done());
    }

    #[test]
    fn stream_without_usage_is_none_not_zero() {
        let stream = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n";
        let scanner = scan(&[stream.as_bytes()]);
        assert_eq!(scanner.usage(), None);
        assert!(scanner.saw_done());
    }

    #[test]
    fn an_anthropic_message_s_usage_is_read_too() {
        let body = br#"{"type":"message","usage":{"input_tokens":40,"output_tokens":7,"cache_read_input_tokens":32}}"#;
        let usage = Usage::from_body(body);
        assert_eq!(
            usage,
            Some(Usage {
                prompt_tokens: Some(40),
                completion_tokens: Some(7),
                total_tokens: None,
                cached_tokens: Some(32),
            })
        );
    }

    #[test]
    fn usage_without_cached_details_keeps_cached_unknown() {
        let stream = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n";
        let usage = scan(&[stream.as_bytes()]).usage();
        assert_eq!(
            usage,
            Some(Usage {
                prompt_tokens: Some(3),
                completion_tokens: Some(1),
                total_tokens: Some(4),
                cached_tokens: None,
            })
        );
    }

    #[test]
    fn null_usage_does_not_erase_an_earlier_one() {
        let stream = concat!(
            "data: {\"usage\":{\"prompt_tokens\":5}}\n\n",
            "data: {\"usage\":null}\n\n",
        );
        let usage = scan(&[stream.as_bytes()]).usage();
        assert_eq!(usage.and_then(|u| u.prompt_tokens), Some(5));
    }

    #[test]
    fn responses_completed_event_is_read() {
        let stream = concat!(
            "event: response.output_text.delta\n",
            "data: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n",
            "event: response.completed\n",
            "data: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":20,",
            "\"input_tokens_details\":{\"cached_tokens\":16},\"output_tokens\":2,\"total_tokens\":22}}}\n\n",
        );
        let scanner = scan(&[stream.as_bytes()]);
        assert_eq!(
            scanner.usage(),
            Some(Usage {
                prompt_tokens: Some(20),
                completion_tokens: Some(2),
                total_tokens: Some(22),
                cached_tokens: Some(16),
            })
        );
        assert!(!scanner.saw_done());
    }

    #[test]
    fn garbage_is_counted_as_malformed() {
        let scanner = scan(&[b"data: {not json\n\ndata: {\"usage\": oops}\n\n"]);
        assert_eq!(scanner.malformed_events(), 2);
        assert_eq!(scanner.usage(), None);
    }

    #[test]
    fn other_fields_are_not_data() {
        let scanner = scan(&[b"dataset: [DONE]\nid: 1\n\n"]);
        assert!(!scanner.saw_done());
        assert_eq!(scanner.events(), 0);
    }

    #[test]
    fn unterminated_final_event_still_counts() {
        let scanner = scan(&[b"data: {\"usage\":{\"prompt_tokens\":9}}"]);
        assert_eq!(scanner.usage().and_then(|u| u.prompt_tokens), Some(9));
    }

    #[test]
    fn non_stream_body_usage() {
        let body = br#"{"id":"x","usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":0}}}"#;
        let usage = Usage::from_body(body);
        assert_eq!(usage.and_then(|u| u.cached_tokens), Some(0));
        assert_eq!(Usage::from_body(b"{\"id\":\"x\"}"), None);
        assert_eq!(Usage::from_body(b"not json"), None);
    }

    #[test]
    fn the_body_reader_agrees_with_the_tree_reader() {
        use serde_json::json;
        let usage = json!({"prompt_tokens": 9, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 4}});
        let answers = [
            json!({"id": "c", "choices": [{"message": {"content": "hi"}}], "usage": usage}),
            json!({"usage": null, "response": {"usage": {"input_tokens": 3, "output_tokens": 1}}}),
            json!({"usage": "odd", "message": {"id": "m", "usage": {"input_tokens": 5}}}),
            json!({"response": "no object", "message": [1, 2]}),
            json!({"message": [{"input_tokens": 5}]}),
            json!({"response": {"usage": 7}, "message": {"usage": {"output_tokens": 8}}}),
            json!({"usage": {"prompt_tokens": -1, "total_tokens": 1.5}}),
            json!([{"usage": usage}]),
            json!("text"),
        ];
        for answer in answers {
            let bytes = answer.to_string();
            assert_eq!(
                Usage::from_body(bytes.as_bytes()),
                Usage::from_answer(&answer),
                "{answer}"
            );
        }
    }

    fn odd_value() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::json;
        prop_oneof![
            (0u64..1_000_000).prop_map(|n| json!(n)),
            Just(json!(u64::MAX)),
            (-5i64..0).prop_map(|n| json!(n)),
            Just(json!(1.5)),
            Just(json!(3.0)),
            Just(json!("12")),
            Just(json!(null)),
            Just(json!(true)),
            Just(json!([1, {"cached_tokens": 2}])),
            (0u64..100).prop_map(|n| json!({"cached_tokens": n, "audio_tokens": 1})),
            Just(json!({"cached_tokens": "4"})),
            Just(json!({"other": {"cached_tokens": 5}})),
        ]
    }

    proptest! {
        // Cheap cases, and a name pair that decides precedence must meet often enough.
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Any mix of the names a usage object is read by, holding any kind of value, reads the
        /// same from the body as from its parsed tree.
        #[test]
        fn usage_read_from_the_body_is_the_tree_s(
            members in proptest::collection::vec(
                (prop_oneof![
                    Just("prompt_tokens"), Just("input_tokens"), Just("completion_tokens"),
                    Just("output_tokens"), Just("total_tokens"), Just("prompt_tokens_details"),
                    Just("input_tokens_details"), Just("cache_read_input_tokens"),
                    Just("cached_tokens"), Just("reasoning"),
                ], odd_value()),
                0..8,
            ),
            carrier in 0usize..4,
        ) {
            let object: serde_json::Map<String, serde_json::Value> = members
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
            let usage = serde_json::Value::Object(object);
            let answer = match carrier {
                0 => serde_json::json!({"id": "c", "usage": usage, "choices": []}),
                1 => serde_json::json!({"response": {"usage": usage}}),
                2 => serde_json::json!({"type": "message", "message": {"usage": usage}}),
                _ => serde_json::json!({"usage": usage["prompt_tokens"], "message": {"usage": usage}}),
            };
            let bytes = answer.to_string();
            prop_assert_eq!(Usage::from_body(bytes.as_bytes()), Usage::from_answer(&answer), "{}", bytes);
        }
    }

    /// A chat stream with the given usage (cached tokens optional), lines ended by `eol`.
    fn generated_stream(usage: Usage, eol: &str, words: &[String]) -> String {
        let mut stream = String::new();
        for word in words {
            let chunk =
                serde_json::json!({"choices": [{"delta": {"content": word}}], "usage": null});
            stream.push_str(&format!("data: {chunk}{eol}{eol}"));
        }
        let mut usage_json = serde_json::json!({
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
        });
        if let Some(cached) = usage.cached_tokens {
            usage_json["prompt_tokens_details"] = serde_json::json!({"cached_tokens": cached});
        }
        let last = serde_json::json!({"choices": [], "usage": usage_json});
        stream.push_str(&format!("data: {last}{eol}{eol}data: [DONE]{eol}{eol}"));
        stream
    }

    fn split_at(bytes: &[u8], mut cuts: Vec<usize>) -> Vec<&[u8]> {
        cuts.iter_mut().for_each(|c| *c %= bytes.len() + 1);
        cuts.sort_unstable();
        let mut pieces = Vec::new();
        let mut start = 0;
        for cut in cuts {
            pieces.push(&bytes[start..cut]);
            start = cut;
        }
        pieces.push(&bytes[start..]);
        pieces
    }

    proptest! {
        #[test]
        fn any_split_of_a_fixed_stream_gives_the_same_usage(
            cuts in proptest::collection::vec(0..STREAM.len(), 0..12)
        ) {
            let scanner = scan(&split_at(STREAM.as_bytes(), cuts));
            prop_assert_eq!(scanner.usage(), Some(expected()));
            prop_assert!(scanner.saw_done());
            prop_assert_eq!(scanner.events(), 4);
            prop_assert_eq!(scanner.malformed_events(), 0);
        }

        #[test]
        fn any_split_of_any_stream_gives_its_usage(
            prompt in 0u64..1_000_000,
            completion in 0u64..100_000,
            cached in proptest::option::of(0u64..1_000_000),
            eol in proptest::sample::select(vec!["\n", "\r\n", "\r"]),
            words in proptest::collection::vec("[ -~\u{e9}\u{4e2d}]{0,8}", 0..6),
            cuts in proptest::collection::vec(0usize..10_000, 0..16),
        ) {
            let usage = Usage {
                prompt_tokens: Some(prompt),
                completion_tokens: Some(completion),
                total_tokens: Some(prompt + completion),
                cached_tokens: cached,
            };
            let stream = generated_stream(usage, eol, &words);
            let scanner = scan(&split_at(stream.as_bytes(), cuts));
            prop_assert_eq!(scanner.usage(), Some(usage));
            prop_assert!(scanner.saw_done());
            prop_assert_eq!(scanner.events(), words.len() as u64 + 2);
            prop_assert_eq!(scanner.malformed_events(), 0);
        }

        #[test]
        fn a_stream_without_usage_is_none_under_any_split(
            words in proptest::collection::vec("[a-z]{1,6}", 1..6),
            cuts in proptest::collection::vec(0usize..10_000, 0..16),
        ) {
            let mut stream = String::new();
            for word in &words {
                let chunk = serde_json::json!({"choices": [{"delta": {"content": word}}]});
                stream.push_str(&format!("data: {chunk}\n\n"));
            }
            stream.push_str("data: [DONE]\n\n");
            let scanner = scan(&split_at(stream.as_bytes(), cuts));
            prop_assert_eq!(scanner.usage(), None);
            prop_assert!(scanner.saw_done());
        }
    }
}
