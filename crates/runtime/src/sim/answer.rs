//! Writing a plan out as an OpenAI answer: one JSON body, or an SSE stream paced by the latency
//! model, in the chat-completions or the responses dialect.

use std::io;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::channel::{Channel, Sender};
use serde_json::{json, Value};
use tokio::time::Instant;

use super::clock;
use super::engine::{real_duration, Admission, Plan};
use super::fault::Fault;
use super::request::Api;

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
    fn usage(&self, plan: &Plan) -> Value {
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

    fn response_object(&self, plan: &Plan, status: &str, text: Option<String>) -> Value {
        let output = match text {
            Some(text) => json!([{
                "type": "message",
                "id": format!("msg_{}", self.id.trim_start_matches("resp_")),
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }]),
            None => json!([]),
        };
        json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.model,
            "output": output,
            "usage": if status == "completed" { self.usage(plan) } else { Value::Null },
        })
    }

    /// The complete non-streaming body.
    pub(crate) fn body(&self, plan: &Plan) -> Bytes {
        let value = match self.api {
            Api::ChatCompletions => json!({
                "id": self.id,
                "object": "chat.completion",
                "created": self.created,
                "model": self.model,
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": plan.text()},
                    "logprobs": null,
                    "finish_reason": plan.finish_reason,
                }],
                "usage": self.usage(plan),
            }),
            Api::Responses => self.response_object(plan, "completed", Some(plan.text())),
        };
        Bytes::from(value.to_string())
    }

    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Bytes {
        let mut chunk = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
        });
        // OpenAI marks every chunk but the last with `usage: null` when usage was asked for.
        if self.include_usage {
            chunk["usage"] = Value::Null;
        }
        data_event(&chunk)
    }

    /// Events before the first token.
    fn opening(&self, plan: &Plan) -> Vec<Bytes> {
        match self.api {
            Api::ChatCompletions => {
                vec![self.chunk(json!({"role": "assistant", "content": ""}), None)]
            }
            Api::Responses => vec![named_event(
                "response.created",
                &json!({"type": "response.created", "response": self.response_object(plan, "in_progress", None)}),
            )],
        }
    }

    fn delta(&self, text: &str) -> Bytes {
        match self.api {
            Api::ChatCompletions => self.chunk(json!({"content": text}), None),
            Api::Responses => named_event(
                "response.output_text.delta",
                &json!({"type": "response.output_text.delta", "output_index": 0,
                        "content_index": 0, "delta": text}),
            ),
        }
    }

    /// Events after the last token.
    fn closing(&self, plan: &Plan) -> Vec<Bytes> {
        match self.api {
            Api::ChatCompletions => {
                let mut events = vec![self.chunk(json!({}), Some(plan.finish_reason))];
                if self.include_usage {
                    let usage_chunk = json!({
                        "id": self.id,
                        "object": "chat.completion.chunk",
                        "created": self.created,
                        "model": self.model,
                        "choices": [],
                        "usage": self.usage(plan),
                    });
                    events.push(data_event(&usage_chunk));
                }
                events.push(Bytes::from_static(b"data: [DONE]\n\n"));
                events
            }
            Api::Responses => vec![named_event(
                "response.completed",
                &json!({"type": "response.completed",
                        "response": self.response_object(plan, "completed", Some(plan.text()))}),
            )],
        }
    }
}

fn data_event(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

fn named_event(name: &str, value: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {value}\n\n"))
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
        let decoded = plan.decode_ms_per_token * f64::from(after).min(plan.tokens.len() as f64);
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
    for event in answer.opening(plan) {
        tx.send_data(event).await?;
    }
    let limit = match fault {
        Fault::Disconnect(after) => plan.tokens.len().min(after as usize),
        _ => plan.tokens.len(),
    };
    for group in plan.tokens[..limit].chunks(tokens_per_chunk.max(1) as usize) {
        at_ms += plan.decode_ms_per_token * group.len() as f64;
        pace(start, at_ms, time_scale).await;
        tx.send_data(answer.delta(&group.concat())).await?;
    }
    if matches!(fault, Fault::Disconnect(_)) {
        break_connection(tx).await;
        return Ok(());
    }
    for event in answer.closing(plan) {
        tx.send_data(event).await?;
    }
    Ok(())
}
