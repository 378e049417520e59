//! The events of a streamed answer, in the order OpenAI's servers send them and their clients'
//! stream accumulators (`client.chat.completions.stream()`, `client.responses.stream()`)
//! expect.
//!
//! Chat completions: per choice a first chunk with the role (and a call's id and name), the
//! deltas of every choice interleaved as they decode, per choice a last chunk with its
//! `finish_reason`, the usage chunk when asked for (`stream_options.include_usage`), `[DONE]`.
//!
//! Responses: `response.created`, `response.in_progress`, `response.output_item.added`, for a
//! message `response.content_part.added`, then `response.output_text.delta`s (a call's
//! `response.function_call_arguments.delta`s), their `.done`, `response.content_part.done`,
//! `response.output_item.done`, and `response.completed` (`response.incomplete` when
//! `max_output_tokens` cut the output), every event numbered by `sequence_number`.

use std::ops::Range;

use bytes::Bytes;
use serde_json::{json, Value};

use super::answer::Answer;
use super::engine::{Output, Plan};
use super::request::Api;

/// The events of one streamed answer, numbered as they are written.
pub(crate) struct Events<'a> {
    answer: &'a Answer,
    plan: &'a Plan,
    sequence: u64,
}

impl<'a> Events<'a> {
    pub(crate) fn new(answer: &'a Answer, plan: &'a Plan) -> Events<'a> {
        Events {
            answer,
            plan,
            sequence: 0,
        }
    }

    /// Events before the first token.
    pub(crate) fn opening(&mut self) -> Vec<Bytes> {
        match self.answer.api {
            Api::ChatCompletions => (0..self.plan.outputs.len())
                .map(|index| self.opening_chunk(index))
                .collect(),
            Api::Responses => {
                let response = self.answer.response_object(self.plan, false);
                let mut events = vec![
                    self.event("response.created", json!({"response": response.clone()})),
                    self.event("response.in_progress", json!({"response": response})),
                ];
                if let Some(output) = self.plan.outputs.first() {
                    let item = self.answer.output_item(output, false);
                    events.push(self.event(
                        "response.output_item.added",
                        json!({"output_index": 0, "item": item}),
                    ));
                    if output.call.is_none() {
                        events.push(self.event(
                            "response.content_part.added",
                            json!({"item_id": self.answer.item_id(output), "output_index": 0,
                                   "content_index": 0, "part": text_part("")}),
                        ));
                    }
                }
                events
            }
        }
    }

    /// The events of decoding steps `steps`: each output's tokens among them.
    pub(crate) fn deltas(&mut self, steps: Range<usize>) -> Vec<Bytes> {
        let mut events = Vec::new();
        for (index, output) in self.plan.outputs.iter().enumerate() {
            let end = steps.end.min(output.tokens.len());
            let Some(tokens) = output
                .tokens
                .get(steps.start..end)
                .filter(|t| !t.is_empty())
            else {
                continue;
            };
            let piece = tokens.concat();
            events.push(match self.answer.api {
                Api::ChatCompletions => {
                    let delta = match output.call {
                        Some(_) => {
                            json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
                        }
                        None => json!({"content": piece}),
                    };
                    self.chunk(index, delta, None)
                }
                Api::Responses => {
                    let item_id = self.answer.item_id(output);
                    match output.call {
                        Some(_) => self.event(
                            "response.function_call_arguments.delta",
                            json!({"item_id": item_id, "output_index": 0, "delta": piece}),
                        ),
                        None => self.event(
                            "response.output_text.delta",
                            json!({"item_id": item_id, "output_index": 0, "content_index": 0,
                                   "delta": piece, "logprobs": []}),
                        ),
                    }
                }
            });
            // Responses streams one output item.
            if self.answer.api == Api::Responses {
                break;
            }
        }
        events
    }

    /// Events after the last token.
    pub(crate) fn closing(&mut self) -> Vec<Bytes> {
        match self.answer.api {
            Api::ChatCompletions => {
                let mut events: Vec<Bytes> = self
                    .plan
                    .outputs
                    .iter()
                    .enumerate()
                    .map(|(index, output)| self.chunk(index, json!({}), Some(output.finish_reason)))
                    .collect();
                if self.answer.include_usage {
                    let usage_chunk = json!({
                        "id": self.answer.id,
                        "object": "chat.completion.chunk",
                        "created": self.answer.created,
                        "model": self.answer.model,
                        "choices": [],
                        "usage": self.answer.usage(self.plan),
                    });
                    events.push(data_event(&usage_chunk));
                }
                events.push(Bytes::from_static(b"data: [DONE]\n\n"));
                events
            }
            Api::Responses => {
                let mut events = Vec::new();
                if let Some(output) = self.plan.outputs.first() {
                    events.extend(self.item_closing(output));
                }
                let name = match Answer::response_status(self.plan) {
                    "incomplete" => "response.incomplete",
                    _ => "response.completed",
                };
                let response = self.answer.response_object(self.plan, true);
                events.push(self.event(name, json!({"response": response})));
                events
            }
        }
    }

    /// The `.done` events of the one Responses output item.
    fn item_closing(&mut self, output: &Output) -> Vec<Bytes> {
        let item_id = self.answer.item_id(output);
        let text = output.text();
        let mut events = Vec::new();
        match &output.call {
            Some(name) => events.push(self.event(
                "response.function_call_arguments.done",
                json!({"item_id": item_id, "output_index": 0, "name": name, "arguments": text}),
            )),
            None => {
                events.push(self.event(
                    "response.output_text.done",
                    json!({"item_id": item_id, "output_index": 0, "content_index": 0,
                           "text": text, "logprobs": []}),
                ));
                events.push(self.event(
                    "response.content_part.done",
                    json!({"item_id": item_id, "output_index": 0, "content_index": 0,
                           "part": text_part(&text)}),
                ));
            }
        }
        let item = self.answer.output_item(output, true);
        events.push(self.event(
            "response.output_item.done",
            json!({"output_index": 0, "item": item}),
        ));
        events
    }

    /// Choice `index`'s first chunk: its role, and a call's id and name.
    fn opening_chunk(&self, index: usize) -> Bytes {
        let delta = match self.plan.outputs.get(index).and_then(|o| o.call.as_ref()) {
            Some(name) => json!({"role": "assistant", "content": null, "tool_calls": [{
                "index": 0, "id": self.answer.call_id(index), "type": "function",
                "function": {"name": name, "arguments": ""},
            }]}),
            None => json!({"role": "assistant", "content": ""}),
        };
        self.chunk(index, delta, None)
    }

    fn chunk(&self, index: usize, delta: Value, finish_reason: Option<&str>) -> Bytes {
        let mut chunk = json!({
            "id": self.answer.id,
            "object": "chat.completion.chunk",
            "created": self.answer.created,
            "model": self.answer.model,
            "choices": [{"index": index, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
        });
        // OpenAI marks every chunk but the last with `usage: null` when usage was asked for.
        if self.answer.include_usage {
            chunk["usage"] = Value::Null;
        }
        data_event(&chunk)
    }

    /// A Responses event: its name as `type`, then its `sequence_number`.
    fn event(&mut self, name: &str, mut body: Value) -> Bytes {
        body["type"] = name.into();
        body["sequence_number"] = self.sequence.into();
        self.sequence += 1;
        Bytes::from(format!("event: {name}\ndata: {body}\n\n"))
    }
}

/// An `output_text` content part.
fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

fn data_event(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}
