//! Writing a plan out as an OpenAI answer: one JSON body, or an SSE stream paced by the latency
//! model ([`super::stream`] writes its events), in the chat-completions or the responses
//! dialect: every choice of chat's `n`, text or a forced tool call.

use std::io;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::channel::{Channel, Sender};
use serde_json::{json, Value};
use tokio::time::Instant;

use super::clock;
use super::engine::{real_duration, Admission, Output, Plan};
use super::fault::Fault;
use super::request::Api;
use super::stream::Events;

/// The fixed facts of one answer.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub api: Api,
    pub id: String,
    pub created: u64,
    /// The served id the client asked for, echoed as OpenAI servers do.
    pub model: String,
    pub include_usage: bool,
    pub report_cached_tokens: bool,
}

impl Answer {
    pub(super) fn usage(&self, plan: &Plan) -> Value {
        let total = plan.prompt_tokens + plan.completion_tokens();
        let mut usage = match self.api {
            Api::ChatCompletions => json!({
                "prompt_tokens": plan.prompt_tokens,
                "completion_tokens": plan.completion_tokens(),
                "total_tokens": total,
            }),
            Api::Responses => json!({
                "input_tokens": plan.prompt_tokens,
                "output_tokens": plan.completion_tokens(),
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": total,
            }),
        };
        if self.report_cached_tokens {
            let details = match self.api {
                Api::ChatCompletions => "prompt_tokens_details",
                Api::Responses => "input_tokens_details",
            };
            usage[details] = json!({"cached_tokens": plan.cached_tokens});
        }
        usage
    }

    /// The id's part after its prefix, which the ids of its items and calls share.
    fn tail(&self) -> &str {
        let id = self.id.as_str();
        id.strip_prefix("resp_")
            .or_else(|| id.strip_prefix("chatcmpl-"))
            .unwrap_or(id)
    }

    /// The id of the call choice `index` makes.
    pub(super) fn call_id(&self, index: usize) -> String {
        match index {
            0 => format!("call_{}", self.tail()),
            n => format!("call_{}_{n}", self.tail()),
        }
    }

    /// The id of the Responses output item `output` is.
    pub(super) fn item_id(&self, output: &Output) -> String {
        match output.call {
            Some(_) => format!("fc_{}", self.tail()),
            None => format!("msg_{}", self.tail()),
        }
    }

    /// A Responses answer's status: `incomplete` when the output was cut by
    /// `max_output_tokens`, as OpenAI reports it.
    pub(super) fn response_status(plan: &Plan) -> &'static str {
        match plan.outputs.first() {
            Some(output) if output.finish_reason == "length" => "incomplete",
            _ => "completed",
        }
    }

    /// The Responses output item of `output`: `in_progress` and empty while it streams, whole
    /// once `done`.
    pub(super) fn output_item(&self, output: &Output, done: bool) -> Value {
        let status = match (done, output.finish_reason) {
            (false, _) => "in_progress",
            (true, "length") => "incomplete",
            (true, _) => "completed",
        };
        let text = if done { output.text() } else { String::new() };
        match &output.call {
            Some(name) => json!({
                "type": "function_call", "id": self.item_id(output), "call_id": self.call_id(0),
                "name": name, "arguments": text, "status": status,
            }),
            None => {
                let content = if done {
                    json!([{"type": "output_text", "text": text, "annotations": [], "logprobs": []}])
                } else {
                    json!([])
                };
                json!({"type": "message", "id": self.item_id(output), "status": status,
                       "role": "assistant", "content": content})
            }
        }
    }

    /// The response object: `in_progress` without output while it streams, whole at the end.
    pub(super) fn response_object(&self, plan: &Plan, done: bool) -> Value {
        let status = if done {
            Answer::response_status(plan)
        } else {
            "in_progress"
        };
        let output: Vec<Value> = if done {
            plan.outputs
                .iter()
                .take(1)
                .map(|o| self.output_item(o, true))
                .collect()
        } else {
            Vec::new()
        };
        let incomplete = (status == "incomplete").then(|| json!({"reason": "max_output_tokens"}));
        json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "error": null,
            "incomplete_details": incomplete,
            "model": self.model,
            "output": output,
            "usage": if done { self.usage(plan) } else { Value::Null },
        })
    }

    /// A chat choice's message: its text, or its call.
    fn message(&self, index: usize, output: &Output) -> Value {
        match &output.call {
            Some(name) => json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": self.call_id(index), "type": "function",
                "function": {"name": name, "arguments": output.text()},
            }]}),
            None => json!({"role": "assistant", "content": output.text()}),
        }
    }

    /// The complete non-streaming body.
    pub(crate) fn body(&self, plan: &Plan) -> Bytes {
        let value = match self.api {
            Api::ChatCompletions => {
                let choices: Vec<Value> = plan
                    .outputs
                    .iter()
                    .enumerate()
                    .map(|(index, output)| {
                        json!({"index": index, "message": self.message(index, output),
                               "logprobs": null, "finish_reason": output.finish_reason})
                    })
                    .collect();
                json!({
                    "id": self.id,
                    "object": "chat.completion",
                    "created": self.created,
                    "model": self.model,
                    "choices": choices,
                    "usage": self.usage(plan),
                })
            }
            Api::Responses => self.response_object(plan, true),
        };
        Bytes::from(value.to_string())
    }
}

/// Sleeps until `simulated_ms` after `start` in scaled time, to within tens of microseconds
/// ([`clock`]). Pacing against one start instant keeps many small per-token waits from adding
/// up their wake-up delays.
async fn pace(start: Instant, simulated_ms: f64, time_scale: f64) {
    match real_duration(simulated_ms, time_scale) {
        Some(offset) => clock::sleep_until(start + offset).await,
        None => tokio::task::yield_now().await,
    }
}

/// Breaks the connection once what was sent has left: hyper drops bytes still in its write
/// buffer when a body fails, so wait until the body has taken every frame and the connection has
/// had a moment to flush. A client that stops reading never drains; after a bounded wait the
/// connection breaks anyway.
async fn break_connection(mut tx: Sender<Bytes, io::Error>) {
    for _ in 0..1000 {
        if tx.capacity() == tx.max_capacity() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_millis(2)).await;
    tx.abort(io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "simulated disconnect",
    ));
}

/// What a non-streaming answer sends once generated.
pub(crate) enum Whole {
    Complete(Bytes),
    /// Headers, then this first half of the body, then a broken connection.
    Truncated(Channel<Bytes, io::Error>),
}

/// Waits the whole simulated generation time (holding the slot), as a real server answers a
/// non-streaming request only when it is done; nothing, not even headers, is sent before.
pub(crate) async fn generate_whole(
    answer: &Answer,
    plan: &Plan,
    admission: Admission,
    fault: Fault,
    time_scale: f64,
) -> Whole {
    let start = Instant::now();
    let bytes = answer.body(plan);
    if let Fault::Disconnect(after) = fault {
        let decoded = plan.decode_ms_per_token * f64::from(after).min(plan.steps() as f64);
        pace(start, plan.prefill_ms + decoded, time_scale).await;
        drop(admission);
        let (mut tx, body) = Channel::new(1);
        tokio::spawn(async move {
            if tx.send_data(bytes.slice(..bytes.len() / 2)).await.is_ok() {
                break_connection(tx).await;
            }
        });
        return Whole::Truncated(body);
    }
    pace(start, plan.prefill_ms + plan.decode_ms(), time_scale).await;
    drop(admission);
    Whole::Complete(bytes)
}

/// Streams the answer: opening events after prefill, one event per token group paced by the
/// decode time, closing events at the end. A disconnect fault breaks the connection after the
/// configured number of tokens, before any closing event.
pub(crate) fn send_stream(
    answer: Answer,
    plan: Plan,
    admission: Admission,
    fault: Fault,
    time_scale: f64,
    tokens_per_chunk: u32,
) -> Channel<Bytes, io::Error> {
    let (tx, body) = Channel::new(16);
    tokio::spawn(async move {
        let _slot = admission;
        let _ = produce(tx, &answer, &plan, fault, time_scale, tokens_per_chunk).await;
    });
    body
}

/// Stops at the first send error: the client is gone.
async fn produce(
    mut tx: Sender<Bytes, io::Error>,
    answer: &Answer,
    plan: &Plan,
    fault: Fault,
    time_scale: f64,
    tokens_per_chunk: u32,
) -> Result<(), http_body_util::channel::SendError> {
    let start = Instant::now();
    let mut at_ms = plan.prefill_ms;
    pace(start, at_ms, time_scale).await;
    let mut events = Events::new(answer, plan);
    for event in events.opening() {
        tx.send_data(event).await?;
    }
    let limit = match fault {
        Fault::Disconnect(after) => plan.steps().min(after as usize),
        _ => plan.steps(),
    };
    let per_chunk = tokens_per_chunk.max(1) as usize;
    for from in (0..limit).step_by(per_chunk) {
        let to = (from + per_chunk).min(limit);
        at_ms += plan.decode_ms_per_token * (to - from) as f64;
        pace(start, at_ms, time_scale).await;
        for event in events.deltas(from..to) {
            tx.send_data(event).await?;
        }
    }
    if matches!(fault, Fault::Disconnect(_)) {
        break_connection(tx).await;
        return Ok(());
    }
    for event in events.closing() {
        tx.send_data(event).await?;
    }
    Ok(())
}
