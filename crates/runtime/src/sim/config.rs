//! What a simulated backend serves and how it behaves: models, latency model, cache size and
//! faults. Deserialisable so `src sim` and policies can describe it as data; validated once
//! before serving so handlers can trust every number.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::quality::SimQuality;

/// The whole simulator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimConfig {
    /// The served models; a request for any other id gets 404.
    pub models: Vec<SimModel>,
    /// Seeds the generated text, token counts and fault draws.
    pub seed: u64,
    /// Real time per simulated time: 1.0 is real time, 0.001 runs a thousand times faster,
    /// 0.0 never sleeps. Fault stalls are real milliseconds and are not scaled.
    pub time_scale: f64,
    /// Faults for every model that does not set its own.
    pub faults: SimFaults,
    /// Larger request bodies get 413.
    pub max_body_bytes: usize,
    /// Received requests kept for [`crate::sim::SimHandle::received`]; the oldest go first.
    pub request_log_limit: usize,
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig {
            models: Vec::new(),
            seed: 0,
            time_scale: 1.0,
            faults: SimFaults::default(),
            max_body_bytes: 16 << 20,
            request_log_limit: 10_000,
        }
    }
}

impl SimConfig {
    /// A configuration serving these ids with default behaviour.
    pub fn serving<I, S>(ids: I) -> SimConfig
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        SimConfig {
            models: ids.into_iter().map(SimModel::new).collect(),
            ..SimConfig::default()
        }
    }

    /// Checks every number a handler relies on.
    pub fn validate(&self) -> Result<(), SimConfigError> {
        if self.models.is_empty() {
            return Err(SimConfigError::NoModels);
        }
        if !(self.time_scale.is_finite() && self.time_scale >= 0.0) {
            return Err(SimConfigError::TimeScale(self.time_scale));
        }
        self.faults.validate("the simulator")?;
        let mut seen = HashSet::new();
        for model in &self.models {
            model.validate()?;
            if !seen.insert(model.id.as_str()) {
                return Err(SimConfigError::DuplicateModel(model.id.clone()));
            }
        }
        Ok(())
    }
}

/// One served model id and its latency model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimModel {
    /// The served identifier, exactly as clients send it in `model`.
    pub id: String,
    /// Requests generating at once; more wait in the queue.
    pub max_concurrency: usize,
    /// Requests allowed to wait; one more gets 503. `None` is unbounded.
    pub queue_limit: Option<usize>,
    /// Fixed simulated cost before the first token.
    pub overhead_ms: f64,
    /// Simulated prefill cost of each prompt token not found in the prefix cache.
    pub prefill_ms_per_token: f64,
    /// Simulated cost of each output token.
    pub decode_ms_per_token: f64,
    /// Answers draw their length from this range (inclusive), capped by `max_tokens`.
    pub min_output_tokens: u32,
    pub max_output_tokens: u32,
    /// Output tokens per stream chunk.
    pub tokens_per_chunk: u32,
    /// Tokens per prefix-cache block; only whole blocks are cached.
    pub block_size: u32,
    /// Prefix-cache capacity in blocks (least recently used go first); 0 disables the cache.
    pub cache_blocks: usize,
    /// When false, `usage` omits `prompt_tokens_details`, like backends that do not report
    /// cached tokens.
    pub report_cached_tokens: bool,
    /// Overrides the simulator-wide faults for this model.
    pub faults: Option<SimFaults>,
    /// The declared quality model `src eval` judges this model's turns by (simulation).
    pub quality: SimQuality,
}

impl Default for SimModel {
    fn default() -> SimModel {
        SimModel {
            id: String::new(),
            max_concurrency: 8,
            queue_limit: None,
            overhead_ms: 5.0,
            prefill_ms_per_token: 0.2,
            decode_ms_per_token: 15.0,
            min_output_tokens: 8,
            max_output_tokens: 32,
            tokens_per_chunk: 1,
            block_size: 16,
            cache_blocks: 4096,
            report_cached_tokens: true,
            faults: None,
            quality: SimQuality::default(),
        }
    }
}

impl SimModel {
    pub fn new(id: impl Into<String>) -> SimModel {
        SimModel {
            id: id.into(),
            ..SimModel::default()
        }
    }

    fn validate(&self) -> Result<(), SimConfigError> {
        let invalid = |field: &'static str, reason: &'static str| SimConfigError::Model {
            model: self.id.clone(),
            field,
            reason,
        };
        if self.id.is_empty() {
            return Err(SimConfigError::EmptyModelId);
        }
        if self.max_concurrency == 0 {
            return Err(invalid("max_concurrency", "must be at least 1"));
        }
        for (field, value) in [
            ("overhead_ms", self.overhead_ms),
            ("prefill_ms_per_token", self.prefill_ms_per_token),
            ("decode_ms_per_token", self.decode_ms_per_token),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(invalid(field, "must be a finite number of at least 0"));
            }
        }
        if self.min_output_tokens == 0 {
            return Err(invalid("min_output_tokens", "must be at least 1"));
        }
        if self.max_output_tokens < self.min_output_tokens {
            return Err(invalid(
                "max_output_tokens",
                "must be at least `min_output_tokens`",
            ));
        }
        if self.tokens_per_chunk == 0 {
            return Err(invalid("tokens_per_chunk", "must be at least 1"));
        }
        if self.block_size == 0 {
            return Err(invalid("block_size", "must be at least 1"));
        }
        if let Some(faults) = &self.faults {
            faults.validate(&self.id)?;
        }
        self.quality.validate(&self.id)
    }
}

/// Injected failures. Rates are probabilities per request, drawn in arrival order from the
/// seeded generator; the `x-sim-fault` header overrides them per request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimFaults {
    /// Answer with `error_status` before any byte of an answer.
    pub error_rate: f64,
    pub error_status: u16,
    /// Hold the request (and its slot) before answering.
    pub stall_rate: f64,
    /// Real milliseconds a stall lasts; `None` never answers.
    pub stall_ms: Option<u64>,
    /// Drop the connection in the middle of the answer.
    pub disconnect_rate: f64,
    /// Output tokens sent before the drop.
    pub disconnect_after_tokens: u32,
}

impl Default for SimFaults {
    fn default() -> SimFaults {
        SimFaults {
            error_rate: 0.0,
            error_status: 500,
            stall_rate: 0.0,
            stall_ms: None,
            disconnect_rate: 0.0,
            disconnect_after_tokens: 2,
        }
    }
}

impl SimFaults {
    fn validate(&self, owner: &str) -> Result<(), SimConfigError> {
        for (field, rate) in [
            ("error_rate", self.error_rate),
            ("stall_rate", self.stall_rate),
            ("disconnect_rate", self.disconnect_rate),
        ] {
            if !(0.0..=1.0).contains(&rate) {
                return Err(SimConfigError::Model {
                    model: owner.to_owned(),
                    field,
                    reason: "must be a probability between 0 and 1",
                });
            }
        }
        if !(400..=599).contains(&self.error_status) {
            return Err(SimConfigError::Model {
                model: owner.to_owned(),
                field: "error_status",
                reason: "must be an HTTP error status (400-599)",
            });
        }
        Ok(())
    }
}

/// Why a [`SimConfig`] cannot be served.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimConfigError {
    #[error("the simulator serves no models")]
    NoModels,
    #[error("a simulated model has an empty id")]
    EmptyModelId,
    #[error("the model `{0}` is listed twice")]
    DuplicateModel(String),
    #[error("`time_scale` must be a finite number of at least 0, not {0}")]
    TimeScale(f64),
    #[error("`{field}` of `{model}` {reason}")]
    Model {
        model: String,
        field: &'static str,
        reason: &'static str,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        assert_eq!(SimConfig::serving(["a", "b"]).validate(), Ok(()));
    }

    #[test]
    fn invalid_configs_are_named() {
        assert_eq!(
            SimConfig::default().validate(),
            Err(SimConfigError::NoModels)
        );
        assert_eq!(
            SimConfig::serving(["a", "a"]).validate(),
            Err(SimConfigError::DuplicateModel("a".into()))
        );
        let mut cfg = SimConfig::serving(["a"]);
        cfg.models[0].max_output_tokens = 1;
        let message = cfg.validate().err().map(|e| e.to_string());
        assert_eq!(
            message.as_deref(),
            Some("`max_output_tokens` of `a` must be at least `min_output_tokens`")
        );
        let mut cfg = SimConfig::serving(["a"]);
        cfg.time_scale = f64::NAN;
        assert!(matches!(cfg.validate(), Err(SimConfigError::TimeScale(_))));
        let mut cfg = SimConfig::serving(["a"]);
        cfg.models[0].faults = Some(SimFaults {
            error_rate: 1.5,
            ..SimFaults::default()
        });
        assert!(matches!(
            cfg.validate(),
            Err(SimConfigError::Model {
                field: "error_rate",
                ..
            })
        ));
    }

    #[test]
    fn deserialises_with_defaults_and_rejects_unknown_fields() -> Result<(), serde_json::Error> {
        let cfg: SimConfig = serde_json::from_str(
            r#"{"seed": 7, "time_scale": 0.5,
                "models": [{"id": "Qwen/Qwen3-8B", "max_concurrency": 2}]}"#,
        )?;
        assert_eq!(cfg.seed, 7);
        assert_eq!(cfg.models[0].max_concurrency, 2);
        assert_eq!(cfg.models[0].block_size, SimModel::default().block_size);
        assert_eq!(cfg.validate(), Ok(()));
        let unknown = serde_json::from_str::<SimConfig>(r#"{"models": [{"id": "a", "speed": 1}]}"#);
        assert!(unknown.is_err());
        Ok(())
    }
}
