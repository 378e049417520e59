//! `redact = [types]` on the way back: the answer to a redacted request with the placeholders
//! replaced by the values they stand for, before the client sees it (a [`Rewriter`]).
//!
//! A JSON answer is read whole (it is parsed to be rewritten anyway) and every string in it is
//! restored. An event stream is restored event by event, as it comes: text that streams in
//! deltas — a chat choice's `content` and tool-call `arguments`, a Responses `*.delta`, a
//! Messages `content_block_delta` — is a channel of its own, restored by a [`Restoring`] that
//! holds back only a tail that may still grow into a placeholder; everything else is restored in
//! place. A tail still held when its channel moves on (the next event carries no delta of it)
//! goes out first, as one more delta event shaped like that channel's last. Values put back into
//! text that is itself JSON (tool-call arguments) are escaped for it.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use serde_json::Value;
use src_compiler::pii::{Restoring, Vault};

use crate::relay::rewriting::{Events, Rewriter};

/// A JSON answer is restored whole up to this size; past it the rest passes as it came (the
/// router reads a JSON answer's usage up to the same bound).
const MAX_JSON: usize = 16 << 20;

/// Puts a request's values back into its answer.
pub struct Restore {
    vault: Arc<Vault>,
    form: Form,
}

enum Form {
    Json {
        held: Vec<u8>,
        through: bool,
    },
    Sse {
        events: Events,
        channels: Vec<Channel>,
    },
}

/// One streamed text and the last event that carried it.
struct Channel {
    key: String,
    pointer: String,
    restoring: Restoring,
    /// The event's lines other than `data:` (`event: ...`) and its data, for a flush.
    head: Vec<String>,
    last: Value,
    newline: &'static str,
}

impl Restore {
    /// `sse`: the answer is an event stream.
    pub fn new(vault: Arc<Vault>, sse: bool) -> Restore {
        let form = if sse {
            Form::Sse {
                events: Events::default(),
                channels: Vec::new(),
            }
        } else {
            Form::Json {
                held: Vec::new(),
                through: false,
            }
        };
        Restore { vault, form }
    }
}

impl Rewriter for Restore {
    fn feed(&mut self, data: &Bytes) -> Bytes {
        let vault = &self.vault;
        match &mut self.form {
            Form::Json { held, through } => {
                if *through {
                    return restore_text(vault, data);
                }
                held.extend_from_slice(data);
                if held.len() > MAX_JSON {
                    *through = true;
                    return restore_text(vault, &std::mem::take(held));
                }
                Bytes::new()
            }
            Form::Sse { events, channels } => {
                events.push(data);
                let mut out = BytesMut::new();
                while let Some(event) = events.next_event() {
                    restore_event(vault, channels, &event, &mut out);
                }
                out.freeze()
            }
        }
    }

    fn finish(&mut self) -> Bytes {
        let vault = &self.vault;
        match &mut self.form {
            Form::Json { held, .. } => {
                let held = std::mem::take(held);
                if !may_quote(&held) {
                    return Bytes::from(held);
                }
                match serde_json::from_slice::<Value>(&held) {
                    Ok(mut answer) => {
                        if restore_value(vault, &mut answer, false) {
                            serde_json::to_vec(&answer)
                                .map_or_else(|_| Bytes::from(held), Bytes::from)
                        } else {
                            Bytes::from(held)
                        }
                    }
                    Err(_) => restore_text(vault, &held),
                }
            }
            Form::Sse { events, channels } => {
                let mut out = BytesMut::new();
                for channel in channels.iter_mut() {
                    flush(vault, channel, &mut out);
                }
                out.extend_from_slice(&events.rest());
                out.freeze()
            }
        }
    }
}

/// Whether `bytes` may hold a placeholder: every placeholder starts with `<`, which JSON writes
/// as it is or escaped as `\u003c`. Most answers hold neither and pass without being parsed.
fn may_quote(bytes: &[u8]) -> bool {
    memchr::memchr(b'<', bytes).is_some()
        || memchr::memmem::find_iter(bytes, b"\\u003").any(|at| {
            bytes
                .get(at + 5)
                .is_some_and(|&c| c.eq_ignore_ascii_case(&b'c'))
        })
}

/// Bytes that are not JSON (or too large to parse) restored as text.
fn restore_text(vault: &Vault, data: &[u8]) -> Bytes {
    match std::str::from_utf8(data)
        .ok()
        .and_then(|t| vault.restore(t, false))
    {
        Some(text) => Bytes::from(text),
        None => Bytes::copy_from_slice(data),
    }
}

/// Restores every string of `value`; whether any changed. Strings under `arguments` and
/// `partial_json` are JSON text, so values go in escaped.
fn restore_value(vault: &Vault, value: &mut Value, escape: bool) -> bool {
    match value {
        Value::String(text) => match vault.restore(text, escape) {
            Some(restored) => {
                *text = restored;
                true
            }
            None => false,
        },
        Value::Array(items) => items.iter_mut().fold(false, |changed, v| {
            restore_value(vault, v, escape) | changed
        }),
        Value::Object(fields) => fields.iter_mut().fold(false, |changed, (key, v)| {
            restore_value(vault, v, json_text(key)) | changed
        }),
        _ => false,
    }
}

fn json_text(key: &str) -> bool {
    matches!(key, "arguments" | "partial_json")
}

/// One event of the stream, parsed: its other lines, its data, its line ending.
struct Event {
    head: Vec<String>,
    data: Value,
    newline: &'static str,
}

fn parse_event(event: &[u8]) -> Option<Event> {
    let text = std::str::from_utf8(event).ok()?;
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let mut head = Vec::new();
    let mut data = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        match line.strip_prefix("data:") {
            Some(d) => data.push(d.strip_prefix(' ').unwrap_or(d)),
            None => head.push(line.to_owned()),
        }
    }
    let data = serde_json::from_str(&data.join("\n")).ok()?;
    Some(Event {
        head,
        data,
        newline,
    })
}

fn write_event(out: &mut BytesMut, head: &[String], data: &Value, newline: &str) {
    for line in head {
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(newline.as_bytes());
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(data.to_string().as_bytes());
    out.extend_from_slice(newline.as_bytes());
    out.extend_from_slice(newline.as_bytes());
}

/// The streamed texts an event carries: (channel key, JSON pointer, escaped).
fn deltas(data: &Value) -> Vec<(String, String, bool)> {
    let mut found = Vec::new();
    let index = |v: &Value, key: &str| v.get(key).and_then(Value::as_i64).unwrap_or(0);
    // Chat completions: choices[i].delta.{content, reasoning_content, tool_calls[j]...}.
    if let Some(choices) = data.get("choices").and_then(Value::as_array) {
        for (i, choice) in choices.iter().enumerate() {
            let Some(delta) = choice.get("delta") else {
                continue;
            };
            let c = index(choice, "index");
            for field in ["content", "reasoning_content", "reasoning"] {
                if delta.get(field).is_some_and(Value::is_string) {
                    found.push((
                        format!("c{c}/{field}"),
                        format!("/choices/{i}/delta/{field}"),
                        false,
                    ));
                }
            }
            let calls = delta.get("tool_calls").and_then(Value::as_array);
            for (j, call) in calls.into_iter().flatten().enumerate() {
                if call
                    .pointer("/function/arguments")
                    .is_some_and(Value::is_string)
                {
                    found.push((
                        format!("c{c}/t{}", index(call, "index")),
                        format!("/choices/{i}/delta/tool_calls/{j}/function/arguments"),
                        true,
                    ));
                }
            }
        }
        return found;
    }
    let kind = data.get("type").and_then(Value::as_str).unwrap_or("");
    // Responses: `response.output_text.delta`, `response.function_call_arguments.delta`, ...
    if kind.ends_with(".delta") && data.get("delta").is_some_and(Value::is_string) {
        let key = format!(
            "{kind}/{}/{}",
            index(data, "output_index"),
            index(data, "content_index")
        );
        found.push((key, "/delta".to_owned(), kind.contains("arguments")));
    }
    // Messages: `content_block_delta` with `text`, `thinking` or `partial_json`.
    if kind == "content_block_delta" {
        for field in ["text", "thinking", "partial_json"] {
            if data
                .pointer(&format!("/delta/{field}"))
                .is_some_and(Value::is_string)
            {
                let key = format!("b{}/{field}", index(data, "index"));
                found.push((key, format!("/delta/{field}"), field == "partial_json"));
            }
        }
    }
    found
}

/// A held tail sent as one more delta event of its channel.
fn flush(vault: &Vault, channel: &mut Channel, out: &mut BytesMut) {
    if !channel.restoring.holds() {
        return;
    }
    let tail = channel.restoring.flush(vault);
    let mut event = channel.last.clone();
    if let Some(slot) = event.pointer_mut(&channel.pointer) {
        *slot = Value::String(tail);
        write_event(out, &channel.head, &event, channel.newline);
    }
}

fn restore_event(vault: &Vault, channels: &mut Vec<Channel>, raw: &Bytes, out: &mut BytesMut) {
    // Nothing held and no placeholder can start here: the event goes as it came, unparsed. A
    // channel's bookkeeping only serves a tail it holds, which begins at a `<`.
    if !may_quote(raw) && !channels.iter().any(|c| c.restoring.holds()) {
        out.extend_from_slice(raw);
        return;
    }
    let Some(mut event) = parse_event(raw) else {
        // `[DONE]`, a comment, a heartbeat: the held tails go before it.
        for channel in channels.iter_mut() {
            flush(vault, channel, out);
        }
        out.extend_from_slice(raw);
        return;
    };
    let found = deltas(&event.data);
    for channel in channels
        .iter_mut()
        .filter(|c| !found.iter().any(|(key, ..)| *key == c.key))
    {
        flush(vault, channel, out);
    }
    let mut changed = false;
    for (key, pointer, escape) in found {
        let position = match channels.iter().position(|c| c.key == key) {
            Some(p) => p,
            None => {
                channels.push(Channel {
                    key,
                    pointer: pointer.clone(),
                    restoring: Restoring::new(escape),
                    head: Vec::new(),
                    last: Value::Null,
                    newline: "\n",
                });
                channels.len() - 1
            }
        };
        let channel = &mut channels[position];
        let Some(slot) = event.data.pointer_mut(&pointer) else {
            continue;
        };
        let piece = slot.as_str().unwrap_or_default().to_owned();
        let ready = channel.restoring.push(vault, &piece);
        if ready != piece {
            *slot = Value::String(ready);
            changed = true;
        }
        channel.pointer = pointer;
        channel.head.clone_from(&event.head);
        channel.last = event.data.clone();
        channel.newline = event.newline;
    }
    changed |= restore_value(vault, &mut event.data, false);
    if changed {
        write_event(out, &event.head, &event.data, event.newline);
    } else {
        out.extend_from_slice(raw);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use src_compiler::pii::{EntityType, Redact};

    fn vault() -> Arc<Vault> {
        let redact =
            Redact::new(&[EntityType::Email, EntityType::Phone]).unwrap_or_else(|e| panic!("{e}"));
        let mut vault = Vault::new();
        vault.redact(&redact, "ann@example.com +1 415 555 0132");
        Arc::new(vault)
    }

    /// The data of each event of a stream, `[DONE]` as a string.
    fn datas(stream: &[u8]) -> Vec<Value> {
        let text = String::from_utf8_lossy(stream).replace("\r\n", "\n");
        text.split("\n\n")
            .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
            .map(|d| serde_json::from_str(d).unwrap_or_else(|_| Value::String(d.to_owned())))
            .collect()
    }

    /// Runs `stream` through a restore cut into pieces at every `step` bytes.
    fn run(stream: &str, step: usize) -> Vec<u8> {
        let mut restore = Restore::new(vault(), true);
        let mut out = Vec::new();
        for piece in stream.as_bytes().chunks(step) {
            out.extend_from_slice(&restore.feed(&Bytes::copy_from_slice(piece)));
        }
        out.extend_from_slice(&restore.finish());
        out
    }

    fn chat_chunk(content: &str) -> String {
        format!(
            "data: {}\n\n",
            json!({"id": "c", "choices": [{"index": 0, "delta": {"content": content}}]})
        )
    }

    #[test]
    fn a_placeholder_written_with_escapes_is_restored_and_an_answer_without_one_passes_as_sent() {
        // Some servers write `<` and `>` as `\u003c` and `\u003e`.
        for open in ["\\u003c", "\\u003C"] {
            let answer = format!(
                r#"{{"choices":[{{"message":{{"content":"mail {open}EMAIL_1\u003e"}}}}]}}"#
            );
            let mut restore = Restore::new(vault(), false);
            assert!(restore.feed(&Bytes::from(answer)).is_empty());
            let out: Value = serde_json::from_slice(&restore.finish()).unwrap_or_default();
            assert_eq!(
                out["choices"][0]["message"]["content"],
                "mail ann@example.com"
            );
        }
        let plain = "{ \"content\" : \"nothing \\u0041 to put back\" }";
        let mut restore = Restore::new(vault(), false);
        restore.feed(&Bytes::from(plain));
        assert_eq!(restore.finish(), plain.as_bytes());
        let stream = format!("{}{}", chat_chunk("no placeholder"), chat_chunk("\u{e9}"));
        assert_eq!(run(&stream, 5), stream.as_bytes());
    }

    #[test]
    fn a_chat_stream_gets_its_values_back_whatever_the_cuts() {
        let pieces = ["Mail <EM", "AIL_1> or call <", "PHONE_1", ">. a<b"];
        let mut stream: String = pieces.iter().map(|p| chat_chunk(p)).collect();
        stream.push_str(&format!(
            "data: {}\n\ndata: [DONE]\n\n",
            json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        ));
        for step in [1, 7, 64, stream.len()] {
            let out = run(&stream, step);
            let events = datas(&out);
            let text: String = events
                .iter()
                .filter_map(|e| {
                    e.pointer("/choices/0/delta/content")
                        .and_then(Value::as_str)
                })
                .collect();
            assert_eq!(text, "Mail ann@example.com or call +1 415 555 0132. a<b");
            // No event carries a piece of a placeholder.
            for e in &events {
                let content = e
                    .pointer("/choices/0/delta/content")
                    .and_then(Value::as_str);
                assert!(!content.unwrap_or("").contains("<EM"), "{e}");
                assert!(!content.unwrap_or("").contains("<P"), "{e}");
            }
            assert_eq!(events.last(), Some(&Value::String("[DONE]".into())));
        }
    }

    #[test]
    fn tool_call_arguments_and_messages_deltas_are_restored_as_json_text() {
        let stream = format!(
            "event: content_block_delta\ndata: {}\n\nevent: content_block_delta\ndata: {}\n\n\
             event: content_block_stop\ndata: {}\n\n",
            json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": "{\"to\": \"<EMA"}}),
            json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": "IL_1>\"}"}}),
            json!({"type": "content_block_stop", "index": 1}),
        );
        let out = run(&stream, 5);
        let args: String = datas(&out)
            .iter()
            .filter_map(|e| e.pointer("/delta/partial_json").and_then(Value::as_str))
            .collect();
        assert_eq!(args, "{\"to\": \"ann@example.com\"}");
        assert!(String::from_utf8_lossy(&out).contains("event: content_block_stop"));
    }

    #[test]
    fn a_tail_that_never_completes_goes_out_before_the_next_event() {
        let stream = format!(
            "{}data: {}\n\n",
            chat_chunk("see <EMAIL_"),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        );
        let events = datas(&run(&stream, 3));
        let content: Vec<&str> = events
            .iter()
            .filter_map(|e| {
                e.pointer("/choices/0/delta/content")
                    .and_then(Value::as_str)
            })
            .collect();
        assert_eq!(content, ["see ", "<EMAIL_"]);
        assert_eq!(events[2]["choices"][0]["finish_reason"], "stop");
    }

    #[test]
    fn a_json_answer_is_restored_whole() {
        let answer = json!({"choices": [{"message": {"content": "to <EMAIL_1>",
            "tool_calls": [{"function": {"arguments": "{\"phone\":\"<PHONE_1>\"}"}}]}}]});
        let bytes = serde_json::to_vec(&answer).unwrap_or_default();
        let mut restore = Restore::new(vault(), false);
        let (a, b) = bytes.split_at(20);
        let mut out = restore.feed(&Bytes::copy_from_slice(a)).to_vec();
        out.extend_from_slice(&restore.feed(&Bytes::copy_from_slice(b)));
        out.extend_from_slice(&restore.finish());
        let out: Value = serde_json::from_slice(&out).unwrap_or_default();
        assert_eq!(
            out["choices"][0]["message"]["content"],
            "to ann@example.com"
        );
        assert_eq!(
            out["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
            "{\"phone\":\"+1 415 555 0132\"}"
        );
    }
}
