//! Every metric name the runtime exports, so dashboards and tests have one list to read.
//!
//! Names follow Prometheus conventions without the `_total` suffix, which `prometheus-client`
//! appends to counters itself.

/// Requests the simulator received, labelled by `model` and `outcome`.
pub const SIM_REQUESTS: &str = "src_sim_requests";
/// Prompt tokens the simulator processed, labelled by `model`.
pub const SIM_PROMPT_TOKENS: &str = "src_sim_prompt_tokens";
/// Prompt tokens the simulator served from its prefix cache, labelled by `model`.
pub const SIM_CACHED_TOKENS: &str = "src_sim_cached_tokens";
/// Output tokens the simulator generated, labelled by `model`.
pub const SIM_COMPLETION_TOKENS: &str = "src_sim_completion_tokens";

/// Label values of [`SIM_REQUESTS`]'s `outcome`.
pub mod outcome {
    pub const OK: &str = "ok";
    pub const ERROR_FAULT: &str = "error_fault";
    pub const STALL_FAULT: &str = "stall_fault";
    pub const DISCONNECT_FAULT: &str = "disconnect_fault";
    pub const REJECTED: &str = "rejected";
}

/// Requests the router answered, labelled by `route`, `model`, `status`, `path` and `door`.
pub const REQUESTS: &str = "src_requests";
/// Values of the `door` label of [`REQUESTS`] and the upstream histograms: the front door
/// (the `door` module) a request came through.
pub mod door {
    /// `POST /v1/chat/completions` on the HTTP proxy.
    pub const CHAT: &str = "chat";
    /// `POST /v1/responses` on the HTTP proxy.
    pub const RESPONSES: &str = "responses";
    /// `POST /v1/messages` on the HTTP proxy.
    pub const MESSAGES: &str = "messages";
    /// Envoy's external processing stream (`--extproc`), whatever the API.
    pub const EXTPROC: &str = "extproc";
    /// A request no door took (an unknown path, a listing, a refused method).
    pub const NONE: &str = "-";
}
/// Prompt tokens of answered requests (as the backend reported them, or the router's estimate
/// where the log line says `usage_estimated`), labelled by `model`, `route` and `door`.
pub const PROMPT_TOKENS: &str = "src_prompt_tokens";
/// Completion tokens of answered requests, labelled by `model`, `route` and `door`.
pub const COMPLETION_TOKENS: &str = "src_completion_tokens";
/// A request's whole time, from its first byte read to its last byte written (the log line's
/// `latency_ms`), labelled by `route`, `model`, `status` and `door`.
pub const REQUEST_DURATION_SECONDS: &str = "src_request_duration_seconds";
/// Time from a parsed request to its routing decision (blocks, model resolution, routes).
pub const ROUTING_SECONDS: &str = "src_routing_seconds";
/// Time spent computing one model-backed signal, labelled by `signal`.
pub const SIGNAL_SECONDS: &str = "src_signal_seconds";
/// Time from sending a request upstream to its first body byte, labelled by `model` and `door`
/// (proxy doors only: the external processor sees no body).
pub const UPSTREAM_TTFT_SECONDS: &str = "src_upstream_ttft_seconds";
/// Time from sending a request upstream to the end of its answer, labelled by `model` and
/// `door` (proxy doors only: the external processor does not see where an answer ends).
pub const UPSTREAM_SECONDS: &str = "src_upstream_seconds";
/// Time from sending a request upstream to its answer's headers, labelled by `model` and
/// `door`: on every door, and the only upstream time the external processor can see (from its
/// answer to the request to Envoy's response headers).
pub const UPSTREAM_HEADERS_SECONDS: &str = "src_upstream_headers_seconds";
/// Policy reloads, labelled by `result` (`ok`, `error`, `unchanged`).
pub const RELOADS: &str = "src_reloads";
/// Requests a `block` decided, labelled by `block` and `action` (`refuse`, `redirect`).
pub const BLOCKS: &str = "src_blocks";
/// Moves to the next model after a backend failure, labelled by `from` model and `reason`
/// (`connect`, `timeout`, `exchange`, `status`, `context`, `cooldown`).
pub const FALLBACKS: &str = "src_fallbacks";
/// Lookups of a redacted Responses chain's vault, labelled by `outcome`: `found`, `missing`
/// (expired, never kept, another tenant's), `unopened` (sealed under another key) or `failed`
/// (the store did not answer).
pub const RESPONSE_VAULTS: &str = "src_response_vaults";
/// Cooldowns models entered (`failure.cooldown_after` failures in a row), labelled by `model`.
pub const MODEL_COOLDOWNS: &str = "src_model_cooldowns";
/// 1 while a model cools down (and routes skip it), else 0; labelled by `model`.
pub const MODEL_COOLING: &str = "src_model_cooling";
/// 1 when a backend answered its last readiness probe, 0 when it did not; labelled by
/// `backend` (simulated backends are always 1).
pub const BACKEND_UP: &str = "src_backend_up";
/// Generation of the policy being served (increments on every successful reload).
pub const POLICY_GENERATION: &str = "src_policy_generation";

/// Spans lost on their way to the trace collector, labelled by `reason` (`queue_full`,
/// `export_failed`).
pub const TRACE_SPANS_DROPPED: &str = "src_trace_spans_dropped";

/// Calls with a session layer verdict, labelled by `state` (the values of `x-sr-session`).
pub const SESSION_CALLS: &str = "src_session_calls";
/// Pins written for a new or expired session, labelled by `store` (`memory`, `redis`).
pub const SESSION_PINS: &str = "src_session_pins";
/// Pins moved to another model, labelled by `from` and `to` model.
pub const SESSION_SWITCHES: &str = "src_session_switches";
/// Switches a `protect` hold kept from happening (enforce mode), labelled by `rule`.
pub const SESSION_HOLDS: &str = "src_session_holds";
/// Switches a hold would have kept but observe mode let through, labelled by `rule`.
pub const SESSION_OBSERVED: &str = "src_session_observed";
/// Calls whose pinned model failed them, by what the `owner_lost` rule did.
pub const SESSION_OWNER_LOST: &str = "src_session_owner_lost";
/// Session store failures, labelled by `store`, `op` and `kind` (`timeout`, `unavailable`, ...).
pub const SESSION_STORE_ERRORS: &str = "src_session_store_errors";
/// Outcomes recorded, labelled by `verdict` (`pass`, `fail`) and `source` (`client`, `upstream`).
pub const SESSION_OUTCOMES: &str = "src_session_outcomes";

/// Calls decided on this replica's own copy of their pin because the session store could not be
/// reached (`failure.store = open`), labelled by `state` (what the copy decided: `pinned`,
/// `held`, `switched`, ...).
pub const SESSION_LOCAL_PINS: &str = "src_session_local_pins";

/// 1 while a store's calls are skipped because it failed (its circuit breaker is open), else
/// 0; labelled by `store` (the store's URL without its password).
pub const STORE_BREAKER_STATE: &str = "src_store_breaker_state";
/// Store calls answered "unavailable" at once, without being sent, because the store had failed
/// and no probe had reached it since; labelled by `store`.
pub const STORE_SKIPPED: &str = "src_store_skipped";
/// Store calls sent a second time on a fresh connection because the pooled one had died
/// (a restarted Redis), labelled by `store`.
pub const STORE_RETRIED: &str = "src_store_retried";

/// Texts sent to a model (one per model-backed signal computed), labelled by `model`.
pub const MODEL_CALLS: &str = "src_model_calls";
/// Rows (texts' windows) per inference batch, labelled by `model`.
pub const MODEL_BATCH_SIZE: &str = "src_model_batch_size";
/// Model-backed signals whose text had more windows than the declaration reads, labelled by
/// `model`.
pub const MODEL_PAST_BOUND: &str = "src_model_past_bound";
/// Time of one inference batch (tokenize + run + pool), labelled by `model`.
pub const MODEL_INFERENCE_SECONDS: &str = "src_model_inference_seconds";
/// Model calls that failed or timed out, labelled by `model` and `reason` (`timeout`, `error`,
/// `too_long`: a classifier's text past its window bound under a closed failure mode).
pub const MODEL_FAILURES: &str = "src_model_failures";
/// Texts answered from the model memo instead of a model call, labelled by `model`.
pub const MODEL_MEMO_HITS: &str = "src_model_memo_hits";
/// Memo hits that another replica answered through Redis, labelled by `model`.
pub const MODEL_MEMO_SHARED_HITS: &str = "src_model_memo_shared_hits";
/// Texts the model memo did not hold (the model ran), labelled by `model`.
pub const MODEL_MEMO_MISSES: &str = "src_model_memo_misses";
/// Answers held in the model memo.
pub const MODEL_MEMO_ENTRIES: &str = "src_model_memo_entries";
/// Bytes held in the model memo.
pub const MODEL_MEMO_BYTES: &str = "src_model_memo_bytes";

/// Response cache lookups, labelled by `result` (`hit`, `miss`, `skip`, `bypass`, `error`).
pub const CACHE_LOOKUPS: &str = "src_cache_lookups";
/// Entries held by the in-process (`memory`) cache store.
pub const CACHE_ENTRIES: &str = "src_cache_entries";
/// Answers offered to the cache after being relayed, labelled by `result` (`stored`,
/// `too_large`, `invalid`, `error`).
pub const CACHE_STORES: &str = "src_cache_stores";
/// Cache store failures, labelled by `store` (`memory`, `redis`), `op` (`connect`, `lookup`,
/// `store`) and `kind` (`timeout`, `unavailable`, `corrupt`, `config`).
pub const CACHE_STORE_ERRORS: &str = "src_cache_store_errors";

/// Requests that found a budget exceeded, by budget and what it did (`reject`, `to`,
/// `observe`); a counter (`_total`).
pub const BUDGET_EXCEEDED: &str = "src_budget_exceeded";
/// Units counted against each budget (requests reserved, tokens and cost charged); a counter.
pub const BUDGET_USED: &str = "src_budget_used";
/// Share of its budget the last request that touched it found used (0–1), per budget: a gauge,
/// never per tenant, so its cardinality is the policy's.
pub const BUDGET_SHARE: &str = "src_budget_share";
