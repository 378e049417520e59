//! One served model's simulated worker: its queue of slots, its prefix cache, and the plan of
//! what a request costs and says.
//!
//! Everything a plan contains is decided up front from the seed and the prompt (text, token
//! count, prefill and decode times), so the same request under the same seed always gets the
//! same answer; only the pacing of its delivery depends on the clock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::cache::{block_hashes, count_tokens, fnv1a_fields, PrefixCache};
use super::config::{SimFaults, SimModel};
use super::request::{ForcedCall, GenerateRequest};
use crate::openai::ApiError;

/// How busy a model is right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelLoad {
    /// Requests holding a slot (generating, or stalled by a fault).
    pub running: usize,
    /// Requests queued for a slot.
    pub waiting: usize,
}

#[derive(Debug)]
pub(crate) struct ModelState {
    pub spec: SimModel,
    pub faults: SimFaults,
    slots: Arc<Semaphore>,
    waiting: AtomicUsize,
    cache: Mutex<PrefixCache>,
}

/// A held slot, released when the answer is fully sent or abandoned.
#[derive(Debug)]
pub(crate) struct Admission {
    pub _slot: OwnedSemaphorePermit,
    /// Simulated milliseconds spent waiting for the slot.
    pub queue_ms: f64,
}

/// What one request costs and answers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    /// One output per choice (chat's `n`), decoded side by side as a batch.
    pub outputs: Vec<Output>,
    pub prefill_ms: f64,
    pub decode_ms_per_token: f64,
}

/// One choice's answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Output {
    /// Output tokens: text whose first token is always `[served-id]` so an answer names its
    /// model, or, for a tool call, the pieces of its JSON arguments.
    pub tokens: Vec<String>,
    pub finish_reason: &'static str,
    /// The function the output calls (its arguments are `tokens`), when the request made the
    /// model call one.
    pub call: Option<String>,
}

impl Output {
    pub(crate) fn text(&self) -> String {
        self.tokens.concat()
    }
}

impl Plan {
    pub(crate) fn completion_tokens(&self) -> u64 {
        self.outputs.iter().map(|o| o.tokens.len() as u64).sum()
    }

    /// Decoding steps: the longest output's tokens, as a batch decodes its choices together.
    pub(crate) fn steps(&self) -> usize {
        self.outputs
            .iter()
            .map(|o| o.tokens.len())
            .max()
            .unwrap_or(0)
    }

    pub(crate) fn decode_ms(&self) -> f64 {
        self.decode_ms_per_token * self.steps() as f64
    }
}

/// Keeps the waiting count honest when a queued request is cancelled.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl ModelState {
    pub(crate) fn new(spec: SimModel, default_faults: &SimFaults) -> ModelState {
        let faults = spec
            .faults
            .clone()
            .unwrap_or_else(|| default_faults.clone());
        ModelState {
            slots: Arc::new(Semaphore::new(spec.max_concurrency)),
            waiting: AtomicUsize::new(0),
            cache: Mutex::new(PrefixCache::new(spec.cache_blocks)),
            faults,
            spec,
        }
    }

    pub(crate) fn load(&self) -> ModelLoad {
        ModelLoad {
            running: self
                .spec
                .max_concurrency
                .saturating_sub(self.slots.available_permits()),
            waiting: self.waiting.load(Ordering::Acquire),
        }
    }

    pub(crate) fn cached_blocks(&self) -> usize {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Waits for a slot; 503 when the queue is already at its limit.
    pub(crate) async fn admit(&self, time_scale: f64) -> Result<Admission, ApiError> {
        if let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() {
            return Ok(Admission {
                _slot: slot,
                queue_ms: 0.0,
            });
        }
        let ahead = self.waiting.fetch_add(1, Ordering::AcqRel);
        let _waiting = Waiting(&self.waiting);
        if self.spec.queue_limit.is_some_and(|limit| ahead >= limit) {
            return Err(ApiError::service_unavailable(format!(
                "the model `{}` is overloaded: {ahead} requests already queued",
                self.spec.id
            )));
        }
        let started = Instant::now();
        let slot = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .map_err(|_| ApiError::internal("the simulator is shutting down"))?;
        let waited_ms = started.elapsed().as_secs_f64() * 1000.0;
        let queue_ms = if time_scale > 0.0 {
            waited_ms / time_scale
        } else {
            waited_ms
        };
        Ok(Admission {
            _slot: slot,
            queue_ms,
        })
    }

    /// Looks the prompt up in (and adds it to) the prefix cache and decides the answer.
    pub(crate) fn plan(&self, seed: u64, request: &GenerateRequest) -> Plan {
        let spec = &self.spec;
        let prompt = request.prompt.as_str();
        let prompt_tokens = count_tokens(prompt.as_bytes());
        let blocks = block_hashes(prompt.as_bytes(), spec.block_size);
        let hit_blocks = self
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .lookup_and_insert(&blocks);
        let cached_tokens = (hit_blocks as u64 * u64::from(spec.block_size)).min(prompt_tokens);
        let uncached = prompt_tokens - cached_tokens;
        let outputs = (0..request.n.max(1))
            .map(|choice| output(seed, spec, request, choice))
            .collect();
        Plan {
            prompt_tokens,
            cached_tokens,
            outputs,
            prefill_ms: spec.overhead_ms + uncached as f64 * spec.prefill_ms_per_token,
            decode_ms_per_token: spec.decode_ms_per_token,
        }
    }
}

const FILLER: [&str; 32] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    "uniform", "victor", "whiskey", "xray", "yankee", "zulu", "amber", "basalt", "cobalt", "dune",
    "ember", "fjord",
];

/// One choice's output: a call of the function the request forces, or text.
fn output(seed: u64, spec: &SimModel, request: &GenerateRequest, choice: u32) -> Output {
    let (seed, prompt) = (seed.to_le_bytes(), request.prompt.as_bytes());
    // The first choice is the answer a request of one choice gets.
    let key = if choice == 0 {
        fnv1a_fields(&[&seed, spec.id.as_bytes(), prompt])
    } else {
        fnv1a_fields(&[&seed, spec.id.as_bytes(), prompt, &choice.to_le_bytes()])
    };
    let mut rng = StdRng::seed_from_u64(key);
    match &request.call {
        Some(call) => called(&mut rng, call, request.max_tokens),
        None => text(&mut rng, spec, request),
    }
}

/// The answer's text: `[id]` then filler words, the length drawn from the model's range and
/// capped by `max_tokens` (a capped answer finishes with `length`, as OpenAI's do), and cut
/// before the first `stop` sequence it contains (finishing with `stop`).
fn text(rng: &mut StdRng, spec: &SimModel, request: &GenerateRequest) -> Output {
    let wanted = rng.random_range(spec.min_output_tokens..=spec.max_output_tokens);
    let count = request.max_tokens.map_or(wanted, |cap| wanted.min(cap));
    let mut tokens = Vec::with_capacity(count as usize);
    tokens.push(format!("[{}]", spec.id));
    while tokens.len() < count as usize {
        let word = FILLER[rng.random_range(0..FILLER.len())];
        tokens.push(format!(" {word}"));
    }
    let mut finish_reason = if count < wanted { "length" } else { "stop" };
    if stop_at(&mut tokens, &request.stop) {
        finish_reason = "stop";
    }
    Output {
        tokens,
        finish_reason,
        call: None,
    }
}

/// Cuts `tokens` just before the earliest of `stop` in their text (a stop sequence is never
/// sent, as OpenAI's servers do not send it); whether one was found.
fn stop_at(tokens: &mut Vec<String>, stop: &[String]) -> bool {
    let text = tokens.concat();
    let Some(cut) = stop
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()))
        .min()
    else {
        return false;
    };
    let mut at = 0;
    let mut kept = Vec::new();
    for token in tokens.drain(..) {
        if at + token.len() <= cut {
            at += token.len();
            kept.push(token);
            continue;
        }
        let head = &token[..cut - at];
        if !head.is_empty() {
            kept.push(head.to_owned());
        }
        break;
    }
    *tokens = kept;
    true
}

/// A call of the forced function: arguments that fit its `parameters` schema, in pieces of
/// about a token each, capped by `max_tokens` like text.
fn called(rng: &mut StdRng, call: &ForcedCall, cap: Option<u32>) -> Output {
    let arguments = example(rng, &call.parameters, 0).to_string();
    let mut tokens: Vec<String> = Vec::new();
    let mut piece = String::new();
    for c in arguments.chars() {
        piece.push(c);
        if piece.len() >= TOKEN_BYTES {
            tokens.push(std::mem::take(&mut piece));
        }
    }
    if !piece.is_empty() {
        tokens.push(piece);
    }
    let mut finish_reason = "tool_calls";
    if let Some(cap) = cap.filter(|cap| (*cap as usize) < tokens.len()) {
        tokens.truncate(cap as usize);
        finish_reason = "length";
    }
    Output {
        tokens,
        finish_reason,
        call: Some(call.name.clone()),
    }
}

/// Bytes per piece of a call's arguments: a token as the simulator counts them (`count_tokens`).
const TOKEN_BYTES: usize = 4;

/// A value of JSON Schema `schema`: an object's required properties (all of them when none
/// is marked required), each by its type; an `enum`'s first value.
fn example(rng: &mut StdRng, schema: &Value, depth: usize) -> Value {
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    let kind = match schema.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|k| *k != "null")
            .unwrap_or("null"),
        _ if schema.get("properties").is_some() => "object",
        _ => "string",
    };
    match kind {
        "object" if depth < 4 => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut out = serde_json::Map::new();
            for (name, property) in properties.into_iter().flatten() {
                if required.is_empty() || required.contains(&name.as_str()) {
                    out.insert(name.clone(), example(rng, property, depth + 1));
                }
            }
            Value::Object(out)
        }
        "object" => Value::Object(serde_json::Map::new()),
        "array" => Value::Array(Vec::new()),
        "integer" => rng.random_range(0..100_u32).into(),
        "number" => (f64::from(rng.random_range(0..1000_u32)) / 10.0).into(),
        "boolean" => Value::Bool(true),
        "null" => Value::Null,
        _ => FILLER[rng.random_range(0..FILLER.len())].into(),
    }
}

/// Real time for `simulated_ms` under `time_scale`; `None` when there is nothing to wait.
pub(crate) fn real_duration(simulated_ms: f64, time_scale: f64) -> Option<Duration> {
    let real_ms = simulated_ms * time_scale;
    (real_ms > 0.0 && real_ms.is_finite()).then(|| Duration::from_secs_f64(real_ms / 1000.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(spec: SimModel) -> ModelState {
        ModelState::new(spec, &SimFaults::default())
    }

    fn ask(prompt: &str, max_tokens: Option<u32>) -> GenerateRequest {
        GenerateRequest::of_prompt("m", prompt, max_tokens)
    }

    #[test]
    fn choices_differ_and_the_first_is_the_single_answer() {
        let model = state(SimModel::new("m"));
        let one = model.plan(3, &ask("p", None));
        let three = model.plan(
            3,
            &GenerateRequest {
                n: 3,
                ..ask("p", None)
            },
        );
        assert_eq!(three.outputs.len(), 3);
        assert_eq!(three.outputs[0], one.outputs[0]);
        assert!(three.outputs.iter().all(|o| o.tokens[0] == "[m]"));
        assert_ne!(three.outputs[1].tokens, three.outputs[2].tokens);
        assert_eq!(
            three.completion_tokens(),
            three
                .outputs
                .iter()
                .map(|o| o.tokens.len() as u64)
                .sum::<u64>()
        );
    }

    #[test]
    fn a_stop_sequence_ends_the_text_before_it() {
        let model = state(SimModel {
            min_output_tokens: 30,
            max_output_tokens: 30,
            ..SimModel::new("m")
        });
        let full = model.plan(1, &ask("p", None)).outputs[0].text();
        // A word in the middle of the answer, found from its second letter on.
        let word = full.split(' ').nth(5).unwrap_or("x");
        let stop = word[1..].to_owned();
        let stopped = model.plan(
            1,
            &GenerateRequest {
                stop: vec![stop.clone()],
                ..ask("p", None)
            },
        );
        let text = stopped.outputs[0].text();
        assert_eq!(stopped.outputs[0].finish_reason, "stop");
        assert!(
            full.starts_with(&text) && !text.contains(&stop),
            "{text:?} of {full:?}"
        );
        assert_eq!(&full[text.len()..text.len() + stop.len()], stop);
    }

    #[test]
    fn a_forced_call_has_arguments_of_its_schema() -> Result<(), serde_json::Error> {
        let call = ForcedCall {
            name: "weather".into(),
            parameters: serde_json::json!({"type": "object", "required": ["city", "days"],
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                               "unit": {"enum": ["c", "f"]}}}),
        };
        let plan = state(SimModel::new("m")).plan(
            1,
            &GenerateRequest {
                call: Some(call),
                ..ask("p", None)
            },
        );
        let output = &plan.outputs[0];
        assert_eq!(
            (output.call.as_deref(), output.finish_reason),
            (Some("weather"), "tool_calls")
        );
        let arguments: Value = serde_json::from_str(&output.text())?;
        assert!(
            arguments["city"].is_string() && arguments["days"].is_u64(),
            "{arguments}"
        );
        assert!(arguments.get("unit").is_none());
        assert!(output.tokens.iter().all(|t| t.len() <= TOKEN_BYTES));
        Ok(())
    }

    #[test]
    fn plans_are_deterministic_per_seed() {
        let a = state(SimModel::new("m"));
        let b = state(SimModel::new("m"));
        let prompt = "a prompt long enough to matter";
        let (pa, pb) = (a.plan(7, &ask(prompt, None)), b.plan(7, &ask(prompt, None)));
        assert_eq!(pa.outputs, pb.outputs);
        assert_eq!(pa.outputs[0].tokens[0], "[m]");
        // Different seeds give different answers for this prompt.
        let texts: std::collections::HashSet<String> = (0..8)
            .map(|seed| {
                state(SimModel::new("m"))
                    .plan(seed, &ask(prompt, None))
                    .outputs[0]
                    .text()
            })
            .collect();
        assert!(texts.len() > 1);
    }

    #[test]
    fn max_tokens_caps_and_finishes_with_length() {
        let spec = SimModel {
            min_output_tokens: 10,
            max_output_tokens: 10,
            ..SimModel::new("m")
        };
        let plan = state(spec.clone()).plan(1, &ask("p", Some(3)));
        assert_eq!(
            (plan.completion_tokens(), plan.outputs[0].finish_reason),
            (3, "length")
        );
        let plan = state(spec).plan(1, &ask("p", Some(50)));
        assert_eq!(
            (plan.completion_tokens(), plan.outputs[0].finish_reason),
            (10, "stop")
        );
    }

    #[test]
    fn cached_prefix_shortens_prefill() {
        let spec = SimModel {
            overhead_ms: 1.0,
            prefill_ms_per_token: 0.5,
            block_size: 4,
            ..SimModel::new("m")
        };
        let model = state(spec);
        let prompt = "x".repeat(100); // 25 tokens, 6 whole blocks of 4
        let cold = model.plan(0, &ask(&prompt, None));
        let warm = model.plan(0, &ask(&prompt, None));
        assert_eq!((cold.prompt_tokens, cold.cached_tokens), (25, 0));
        assert_eq!(warm.cached_tokens, 24);
        assert_eq!(cold.prefill_ms, 1.0 + 25.0 * 0.5);
        assert_eq!(warm.prefill_ms, 1.0 + 1.0 * 0.5);
        assert_eq!(cold.outputs, warm.outputs);
    }

    #[tokio::test]
    async fn queue_limit_rejects_beyond_waiting_room() -> Result<(), ApiError> {
        let model = Arc::new(state(SimModel {
            max_concurrency: 1,
            queue_limit: Some(0),
            ..SimModel::new("m")
        }));
        let held = model.admit(1.0).await?;
        assert_eq!(
            model.load(),
            ModelLoad {
                running: 1,
                waiting: 0
            }
        );
        let rejected = model.admit(1.0).await.err().map(|e| e.status.as_u16());
        assert_eq!(rejected, Some(503));
        assert_eq!(model.load().waiting, 0);
        drop(held);
        assert_eq!(model.load().running, 0);
        Ok(())
    }

    #[test]
    fn durations_scale_and_zero_means_no_wait() {
        assert_eq!(real_duration(100.0, 0.0), None);
        assert_eq!(real_duration(0.0, 1.0), None);
        assert_eq!(real_duration(100.0, 0.5), Some(Duration::from_millis(50)));
    }
}
