//! A chat completions event stream rewritten, chunk by chunk, as a Messages event stream:
//! `message_start`, then per content block `content_block_start`, its `content_block_delta`s
//! (`text_delta` for text, `input_json_delta` for a tool call's arguments) and
//! `content_block_stop`, then `message_delta` (the stop reason and the usage) and
//! `message_stop`.
//!
//! Chat streams text and the calls of one choice as interleaved deltas; Messages numbers its
//! blocks, so a block is closed whenever the kind of delta (text, or a call of another index)
//! changes. The usage arrives in chat's last chunk (the translated request asks for it), after
//! the finish reason, so the stop reason waits for the end of the stream. `message_start`
//! reports the router's own count of the input (the backend's is only known at the end) and
//! zero output tokens; `message_delta` carries the backend's counts, or the router's where the
//! backend sent none ([`Counted`]), so a stream and a whole answer report the same usage.
//! An `error` object in the chat stream becomes an Anthropic `error` event.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{json, Value};

use crate::anthropic::from_chat::message_id;
use crate::anthropic::wire;
use crate::relay::counted::Counted;

/// The kind of the block being streamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    /// A tool call, by its chat index.
    Call(u64),
}

/// The translation state of one stream.
#[derive(Debug, Default)]
pub struct StreamTranslator {
    /// Bytes of an event line not yet whole.
    pending: Vec<u8>,
    started: bool,
    /// The index of the next block.
    next_index: u64,
    open: Option<Open>,
    stop_reason: Option<&'static str>,
    usage: Option<Value>,
    finished: bool,
    /// The router's counts, given the answer's text as it streams.
    counted: Arc<Counted>,
}

impl StreamTranslator {
    pub fn new(counted: Arc<Counted>) -> StreamTranslator {
        StreamTranslator {
            counted,
            ..StreamTranslator::default()
        }
    }

    /// Translates the next bytes of the chat stream: the Messages events they complete.
    pub fn feed(&mut self, data: &[u8]) -> Bytes {
        let mut out = BytesMut::new();
        self.pending.extend_from_slice(data);
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            self.line(&line, &mut out);
        }
        out.freeze()
    }

    /// Ends the stream: closes what is open and sends `message_delta` and `message_stop` (once;
    /// a stream that ended with an `error` event gets nothing more).
    pub fn finish(&mut self) -> Bytes {
        let mut out = BytesMut::new();
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.line(&line, &mut out);
        }
        self.end(&mut out);
        out.freeze()
    }

    fn line(&mut self, line: &[u8], out: &mut BytesMut) {
        let line = trim_line(line);
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        let data = data.strip_prefix(b" ").unwrap_or(data);
        if data == b"[DONE]" {
            self.end(out);
            return;
        }
        if self.finished {
            return;
        }
        let Ok(chunk) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        self.chunk(&chunk, out);
    }

    fn chunk(&mut self, chunk: &Value, out: &mut BytesMut) {
        if let Some(error) = chunk.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the backend's stream failed");
            let body = json!({"type": "error", "error": {"type": "api_error", "message": message}});
            event(out, "error", &body);
            self.finished = true;
            return;
        }
        self.start(chunk, out);
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return;
        };
        let delta = choice.get("delta");
        if let Some(text) = delta
            .and_then(|d| d.get("content"))
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            self.counted.add_output(text.len());
            if self.open != Some(Open::Text) {
                self.open_block(Open::Text, json!({"type": "text", "text": ""}), out);
            }
            self.delta(json!({"type": "text_delta", "text": text}), out);
        }
        for call in delta
            .and_then(|d| d.get("tool_calls"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
            let function = call.get("function");
            if self.open != Some(Open::Call(index)) || call.get("id").is_some_and(|i| !i.is_null())
            {
                let block = json!({
                    "type": "tool_use",
                    "id": call.get("id").cloned().unwrap_or(Value::Null),
                    "name": function.and_then(|f| f.get("name")).cloned().unwrap_or(Value::Null),
                    "input": {},
                });
                self.open_block(Open::Call(index), block, out);
            }
            if let Some(arguments) = function
                .and_then(|f| f.get("arguments"))
                .and_then(Value::as_str)
                .filter(|a| !a.is_empty())
            {
                self.counted.add_output(arguments.len());
                self.delta(
                    json!({"type": "input_json_delta", "partial_json": arguments}),
                    out,
                );
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.stop_reason = Some(wire::stop_reason(reason));
        }
    }

    fn start(&mut self, chunk: &Value, out: &mut BytesMut) {
        if self.started {
            return;
        }
        self.started = true;
        let body = json!({"type": "message_start", "message": {
            "id": message_id(chunk.get("id").and_then(Value::as_str)),
            "type": "message",
            "role": "assistant",
            "model": chunk.get("model").cloned().unwrap_or(Value::Null),
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {"input_tokens": self.counted.input_tokens(), "output_tokens": 0},
        }});
        event(out, "message_start", &body);
    }

    fn open_block(&mut self, kind: Open, block: Value, out: &mut BytesMut) {
        self.close_block(out);
        let body = json!({"type": "content_block_start", "index": self.next_index, "content_block": block});
        event(out, "content_block_start", &body);
        self.open = Some(kind);
    }

    fn delta(&self, delta: Value, out: &mut BytesMut) {
        let body = json!({"type": "content_block_delta", "index": self.next_index, "delta": delta});
        event(out, "content_block_delta", &body);
    }

    fn close_block(&mut self, out: &mut BytesMut) {
        if self.open.take().is_some() {
            let body = json!({"type": "content_block_stop", "index": self.next_index});
            event(out, "content_block_stop", &body);
            self.next_index += 1;
        }
    }

    fn end(&mut self, out: &mut BytesMut) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.start(&Value::Null, out);
        self.close_block(out);
        let usage = wire::usage(self.usage.as_ref(), &self.counted);
        let body = json!({
            "type": "message_delta",
            "delta": {"stop_reason": self.stop_reason.unwrap_or("end_turn"), "stop_sequence": null},
            "usage": usage,
        });
        event(out, "message_delta", &body);
        event(out, "message_stop", &json!({"type": "message_stop"}));
    }
}

fn trim_line(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn event(out: &mut BytesMut, name: &str, body: &Value) {
    out.put_slice(b"event: ");
    out.put_slice(name.as_bytes());
    out.put_slice(b"\ndata: ");
    out.put_slice(body.to_string().as_bytes());
    out.put_slice(b"\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(text: &[u8]) -> Vec<(String, Value)> {
        String::from_utf8_lossy(text)
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .filter_map(|e| {
                let (name, data) = e.split_once('\n')?;
                let name = name.strip_prefix("event: ")?.to_owned();
                let data = serde_json::from_str(data.strip_prefix("data: ")?).ok()?;
                Some((name, data))
            })
            .collect()
    }

    fn chunk(delta: Value, finish: Value) -> String {
        let chunk = json!({"id": "chatcmpl-9", "model": "m", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {chunk}\n\n")
    }

    #[test]
    fn text_then_a_tool_call_streams_as_two_blocks() {
        let stream = [
            chunk(json!({"role": "assistant", "content": ""}), Value::Null),
            chunk(json!({"content": "Hel"}), Value::Null),
            chunk(json!({"content": "lo"}), Value::Null),
            chunk(json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "weather", "arguments": ""}}]}), Value::Null),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":"}}]}), Value::Null),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"Paris\"}"}}]}), Value::Null),
            chunk(json!({}), json!("tool_calls")),
            "data: {\"id\":\"chatcmpl-9\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4}}\n\n".to_owned(),
            "data: [DONE]\n\n".to_owned(),
        ]
        .concat();
        let mut translator = StreamTranslator::new(Arc::default());
        // Split the bytes at an awkward place: events may straddle frames.
        let (a, b) = stream.as_bytes().split_at(37);
        let mut out = translator.feed(a).to_vec();
        out.extend_from_slice(&translator.feed(b));
        out.extend_from_slice(&translator.finish());
        let events = events(&out);
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(events[0].1["message"]["id"], "msg_9");
        assert_eq!(
            events[2].1["delta"],
            json!({"type": "text_delta", "text": "Hel"})
        );
        assert_eq!(events[5].1["index"], 1);
        assert_eq!(
            events[5].1["content_block"],
            json!({"type": "tool_use", "id": "call_1", "name": "weather", "input": {}})
        );
        assert_eq!(
            events[7].1["delta"],
            json!({"type": "input_json_delta", "partial_json": "\"Paris\"}"})
        );
        assert_eq!(events[9].1["delta"]["stop_reason"], "tool_use");
        assert_eq!(
            events[9].1["usage"],
            json!({"input_tokens": 9, "output_tokens": 4})
        );
    }

    #[test]
    fn an_error_chunk_ends_the_stream_with_an_error_event() {
        let mut translator = StreamTranslator::new(Arc::default());
        let mut out = translator
            .feed(b"data: {\"error\":{\"message\":\"worker lost\"}}\n\n")
            .to_vec();
        out.extend_from_slice(&translator.finish());
        let events = events(&out);
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].0, "error");
        assert_eq!(events[0].1["error"]["message"], "worker lost");
    }

    #[test]
    fn a_stream_cut_before_done_still_ends_its_message() {
        let mut translator = StreamTranslator::new(Arc::default());
        let mut out = translator
            .feed(chunk(json!({"content": "hi"}), json!("length")).as_bytes())
            .to_vec();
        out.extend_from_slice(&translator.finish());
        let events = events(&out);
        let last: Vec<&str> = events
            .iter()
            .rev()
            .take(2)
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(last, ["message_stop", "message_delta"]);
        assert_eq!(
            events[events.len() - 2].1["delta"]["stop_reason"],
            "max_tokens"
        );
        // The backend sent no usage: the counts are the router's, of its text.
        assert_eq!(
            events[events.len() - 2].1["usage"],
            json!({"input_tokens": 0, "output_tokens": 1})
        );
    }
}
