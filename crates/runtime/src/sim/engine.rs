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
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::cache::{block_hashes, count_tokens, fnv1a_fields, PrefixCache};
use super::config::{SimFaults, SimModel};
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
    /// Output tokens; the first is always `[served-id]` so an answer names its model.
    pub tokens: Vec<String>,
    pub finish_reason: &'static str,
    pub prefill_ms: f64,
    pub decode_ms_per_token: f64,
}

impl Plan {
    pub(crate) fn completion_tokens(&self) -> u64 {
        self.tokens.len() as u64
    }

    pub(crate) fn text(&self) -> String {
        self.tokens.concat()
    }

    pub(crate) fn decode_ms(&self) -> f64 {
        self.decode_ms_per_token * self.tokens.len() as f64
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
    pub(crate) fn plan(&self, seed: u64, prompt: &str, max_tokens: Option<u32>) -> Plan {
        let spec = &self.spec;
        let prompt_tokens = count_tokens(prompt.as_bytes());
        let blocks = block_hashes(prompt.as_bytes(), spec.block_size);
        let hit_blocks = self
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .lookup_and_insert(&blocks);
        let cached_tokens = (hit_blocks as u64 * u64::from(spec.block_size)).min(prompt_tokens);
        let uncached = prompt_tokens - cached_tokens;
        let (tokens, finish_reason) = generate(seed, spec, prompt, max_tokens);
        Plan {
            prompt_tokens,
            cached_tokens,
            tokens,
            finish_reason,
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

/// The answer's tokens: `[id]` then filler words, the length drawn from the model's range and
/// capped by `max_tokens` (a capped answer finishes with `length`, as OpenAI's do).
fn generate(
    seed: u64,
    spec: &SimModel,
    prompt: &str,
    max_tokens: Option<u32>,
) -> (Vec<String>, &'static str) {
    let key = fnv1a_fields(&[&seed.to_le_bytes(), spec.id.as_bytes(), prompt.as_bytes()]);
    let mut rng = StdRng::seed_from_u64(key);
    let wanted = rng.random_range(spec.min_output_tokens..=spec.max_output_tokens);
    let count = max_tokens.map_or(wanted, |cap| wanted.min(cap));
    let mut tokens = Vec::with_capacity(count as usize);
    tokens.push(format!("[{}]", spec.id));
    while tokens.len() < count as usize {
        let word = FILLER[rng.random_range(0..FILLER.len())];
        tokens.push(format!(" {word}"));
    }
    let finish_reason = if count < wanted { "length" } else { "stop" };
    (tokens, finish_reason)
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

    #[test]
    fn plans_are_deterministic_per_seed() {
        let a = state(SimModel::new("m"));
        let b = state(SimModel::new("m"));
        let prompt = "a prompt long enough to matter";
        let (pa, pb) = (a.plan(7, prompt, None), b.plan(7, prompt, None));
        assert_eq!(pa.tokens, pb.tokens);
        assert_eq!(pa.tokens[0], "[m]");
        // Different seeds give different answers for this prompt.
        let texts: std::collections::HashSet<String> = (0..8)
            .map(|seed| state(SimModel::new("m")).plan(seed, prompt, None).text())
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
        let plan = state(spec.clone()).plan(1, "p", Some(3));
        assert_eq!(
            (plan.completion_tokens(), plan.finish_reason),
            (3, "length")
        );
        let plan = state(spec).plan(1, "p", Some(50));
        assert_eq!((plan.completion_tokens(), plan.finish_reason), (10, "stop"));
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
        let cold = model.plan(0, &prompt, None);
        let warm = model.plan(0, &prompt, None);
        assert_eq!((cold.prompt_tokens, cold.cached_tokens), (25, 0));
        assert_eq!(warm.cached_tokens, 24);
        assert_eq!(cold.prefill_ms, 1.0 + 25.0 * 0.5);
        assert_eq!(warm.prefill_ms, 1.0 + 1.0 * 0.5);
        assert_eq!(cold.tokens, warm.tokens);
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
