//! Header names and content types the runtime reads or writes, in one place so that the
//! simulator, the proxy and their tests cannot drift apart on a spelling.

/// Request header that forces a simulator fault: `none`, `error[=STATUS]`, `stall[=MS]` or
/// `disconnect[=TOKENS]`.
pub const SIM_FAULT: &str = "x-sim-fault";
/// Simulated milliseconds the request waited for a free slot of its model.
pub const SIM_QUEUE_MS: &str = "x-sim-queue-ms";
/// Simulated prefill milliseconds (only uncached prompt tokens cost prefill).
pub const SIM_PREFILL_MS: &str = "x-sim-prefill-ms";
/// Simulated decode milliseconds for the whole answer.
pub const SIM_DECODE_MS: &str = "x-sim-decode-ms";
/// What the simulator's own headers start with.
pub const SIM_PREFIX: &str = "x-sim-";

pub const APPLICATION_JSON: &str = "application/json";
pub const TEXT_EVENT_STREAM: &str = "text/event-stream";

/// Request id the router answers with (the client's `x-request-id` when it sent a usable one).
pub const SR_REQUEST_ID: &str = "x-sr-request-id";
/// The route that decided (a block's name when a block decided; `-` when the client named a
/// model and no route ran).
pub const SR_ROUTE: &str = "x-sr-route";
/// The logical model that answered (`-` when none did).
pub const SR_MODEL: &str = "x-sr-model";
/// Where the answer came from: one of [`path`]'s values.
pub const SR_PATH: &str = "x-sr-path";
/// The block that decided, for refusals and `block ... to MODEL` redirects.
pub const SR_BLOCK: &str = "x-sr-block";
/// Set when the session layer held (or, in observe mode, would have held) a pinned model.
pub const SR_PROTECTION: &str = "x-sr-protection";
/// Why a session call changed models other than by routing: one of [`switch_reason`]'s values.
pub const SR_SWITCH_REASON: &str = "x-sr-switch-reason";
/// Values of [`SR_SWITCH_REASON`] (and of `x-sr-protection` for an observed owner loss).
pub mod switch_reason {
    /// The pinned model failed the call before its first byte and a fallback answered it.
    pub const OWNER_LOST: &str = "owner-lost";
}
/// Models tried before the one that answered, comma-separated (only when a fallback happened).
pub const SR_FALLBACKS: &str = "x-sr-fallbacks";
/// The served id the request was forwarded as (gateways and Inference Extension routes read it).
pub const SELECTED_MODEL: &str = "x-selected-model";
/// The served id again, under the name a Gateway API Inference Extension `HTTPRoute` matches.
pub const GATEWAY_MODEL_NAME: &str = "x-gateway-model-name";
/// The backend's name in the policy, set by the external processor so that a gateway can route
/// when one served id is bound on two backends.
pub const SR_BACKEND: &str = "x-sr-backend";
/// Prefix of the router's own headers; a client's are never trusted on the way upstream.
pub const SR_PREFIX: &str = "x-sr-";
/// Request headers that only the router sets, besides every `x-sr-*` one: a client's are removed
/// on the way upstream, never trusted (they steer gateways and session affinity).
pub const ROUTER_SET: [&str; 4] = [
    SELECTED_MODEL,
    GATEWAY_MODEL_NAME,
    DYNAMO_SESSION_ID,
    SR_BACKEND,
];

/// Whether a request header (named in lower case, as `http` stores names) is the router's to set.
pub fn router_owned(name: &str) -> bool {
    name.starts_with(SR_PREFIX) || ROUTER_SET.contains(&name)
}

/// Request headers that carry a client's credentials. They reach a backend only when it says
/// `client_auth = forward` (the default without an `api_key`); `cookie` never does.
pub const CLIENT_CREDENTIALS: [&str; 3] = ["authorization", "api-key", "x-api-key"];

/// The token an outcome report carries (`server::outcome_access`): with `outcomes = admin`, the
/// admin token itself.
pub const OUTCOME_TOKEN: &str = "x-sr-outcome-token";

/// Request id forwarded upstream and read from clients.
pub const REQUEST_ID: &str = "x-request-id";
/// W3C trace context.
pub const TRACEPARENT: &str = "traceparent";

/// How a `/v1/responses` turn with `previous_response_id` was sent: one of [`previous`]'s values.
pub const SR_PREVIOUS: &str = "x-sr-previous";

/// Values of [`SR_PREVIOUS`] (docs/responses.md).
pub mod previous {
    /// The router stored the response and this model produced it: forwarded as is.
    pub const CONTINUED: &str = "continued";
    /// The router stored the response and another model answers: the chain was expanded.
    pub const EXPANDED: &str = "expanded";
    /// Not stored by the router: forwarded as is to the session's pinned model, its owner.
    pub const PROVIDER: &str = "provider";
    /// Not stored by the router and no pin names its owner: forwarded as is to the route's model.
    pub const UNOWNED: &str = "unowned";
}

/// Values of [`SR_PATH`].
pub mod path {
    pub const UPSTREAM: &str = "upstream";
    pub const CACHE: &str = "cache";
    pub const BLOCKED: &str = "blocked";
    pub const ERROR: &str = "error";
}

/// The value of [`SR_ROUTE`] or [`SR_MODEL`] when there is nothing to name.
pub const NONE_VALUE: &str = "-";

/// What the session layer did with the call: one of [`session`]'s values.
pub const SR_SESSION: &str = "x-sr-session";
/// The session identity, forwarded upstream so the frontend keeps the session on one worker.
pub const DYNAMO_SESSION_ID: &str = "x-dynamo-session-id";

/// Values of [`SR_SESSION`].
pub mod session {
    /// First call of a session id: the proposal was pinned.
    pub const NEW: &str = "new";
    /// The proposal was the pinned model.
    pub const PINNED: &str = "pinned";
    /// The pin moved to the proposal.
    pub const SWITCHED: &str = "switched";
    /// A `protect` hold kept the pinned model.
    pub const HELD: &str = "held";
    /// A hold would have kept the pin, but `protect` observes: the switch happened.
    pub const OBSERVED: &str = "observed";
    /// The call carried no session identity and was routed on its own.
    pub const MISSING_IDENTITY: &str = "missing-identity";
    /// The pin had been idle past its ttl: the call was routed afresh and pinned anew.
    pub const EXPIRED: &str = "expired";
    /// The session store failed and `failure.store = open` routed the call without affinity.
    pub const STORE_UNAVAILABLE: &str = "store-unavailable";
}

/// The budgets a request counted against: `NAME; used=U; limit=L` each (usage before the
/// request, in the budget's unit), comma separated, with `; exceeded=reject|to|observe` on the
/// one that acted.
pub const SR_BUDGET: &str = "x-sr-budget";

/// What the response cache did with the request: one of [`cache`]'s values (only when the
/// policy declares `cache`).
pub const SR_CACHE: &str = "x-sr-cache";
/// The similarity of the entry that answered a cache hit, with three decimals.
pub const SR_CACHE_SCORE: &str = "x-sr-cache-score";

/// Values of [`SR_CACHE`].
pub mod cache {
    /// A stored answer of the proposed model answered.
    pub const HIT: &str = "hit";
    /// No stored answer was close enough: the backend answered.
    pub const MISS: &str = "miss";
    /// A stored answer was close enough by the encoder, but its question differs from the
    /// request's (a number, a unit, a direction, a date, a negation or a name): the backend
    /// answered.
    pub const MISS_VERIFIED: &str = "miss-verified";
    /// The policy's `skip when` held.
    pub const SKIP: &str = "skip";
    /// The cache does not apply: the route says `cache = off`, a streaming `/v1/responses`
    /// request, or a body without a final user message.
    pub const BYPASS: &str = "bypass";
    /// The encoder or the cache store failed; the request went on without the cache.
    pub const ERROR: &str = "error";
}
