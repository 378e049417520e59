//! The switch protocol (step 5 of docs/language.md, "What happens to a request"): after the route
//! has proposed a model, decide whether the call follows its session's pin, starts one, or moves
//! it.
//!
//! - no identity: `missing = route` forwards the proposal alone, `reject` answers 400;
//! - no pin: the proposal is pinned (`new`), created only if absent so two replicas racing on
//!   a first call agree on one winner — the loser follows the winner's pin;
//! - a pin idle past its ttl (or on a model the policy no longer declares) is replaced
//!   (`expired`);
//! - a live pin on the proposal: `pinned`; on another model: the `protect` holds run in order,
//!   and the first that holds keeps the pinned model (`held`) — the built-in `provider state`
//!   hold first, for a call whose conversation only its backend holds; in observe mode its verdict is
//!   only reported (`observed`) and the switch goes ahead; no hold: `switched`. Moves are
//!   compare-and-set on the version read, so a concurrent writer's pin wins and is followed.
//!
//! A failing store follows `failure.store`: `open` forwards the proposal without affinity
//! (`store-unavailable`, counted), `closed` answers 503. Under `open`, a session whose pin this
//! replica served before a shared store became unreachable is decided on this replica's copy
//! of it instead ([`crate::session::local`]), so its model and holds carry through the outage.

use std::sync::Arc;
use std::time::Duration;

use src_compiler::hir::{CheckedPolicy, ModelId, RouteId, SessionDef, StoreDef};
use src_compiler::request::RequestView;
use src_dsl::ast::{FailMode, Missing};

use crate::headers::session as state;
use crate::hooks::{ModelSignals, PinAhead};
use crate::session::identity::{id_headers, identify, IdSource, Identity};
use crate::session::local::{LocalPins, LOCAL_PINS};
use crate::session::metrics::{
    OutcomeLabels, OwnerLostLabels, RuleLabels, SessionMetrics, StateLabels, StoreLabels,
    SwitchLabels,
};
use crate::session::pin::Pin;
use crate::session::protect::{reads_outcomes, HoldQuery, HoldVerdict, Holds};
use crate::session::store::{
    memory, redis, Cas, MemoryStore, OutcomeKey, OutcomeStats, Put, Recorded, RedisStore,
    SessionStore, StoreError, Verdict,
};
use crate::store::failure::{self, Failed, Site};
use crate::store::{kind_of, Clock, Links, StoreErrorLabels, StoreSet, SystemClock, Timeouts};
use src_compiler::continuity::{self, Switch};

/// Rounds of the protocol before a pin that keeps changing under concurrent writers is given
/// up on (each lost race adopts the winner's pin, so two rounds settle any ordinary race).
const MAX_ROUNDS: usize = 4;

/// What the session layer did with a call; the value of `x-sr-session`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionState {
    New,
    Pinned,
    Switched,
    Held,
    Observed,
    MissingIdentity,
    Expired,
    StoreUnavailable,
}

impl SessionState {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::New => state::NEW,
            SessionState::Pinned => state::PINNED,
            SessionState::Switched => state::SWITCHED,
            SessionState::Held => state::HELD,
            SessionState::Observed => state::OBSERVED,
            SessionState::MissingIdentity => state::MISSING_IDENTITY,
            SessionState::Expired => state::EXPIRED,
            SessionState::StoreUnavailable => state::STORE_UNAVAILABLE,
        }
    }
}

impl std::fmt::Display for SessionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Tunables of the layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionOptions {
    /// Pins a `memory` store keeps.
    pub memory_capacity: usize,
    /// Bound on each Redis call.
    pub redis_timeout: Duration,
    /// Pins of a shared store this replica keeps a copy of, for the store's outages.
    pub local_pins: usize,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            memory_capacity: memory::DEFAULT_CAPACITY,
            redis_timeout: redis::DEFAULT_TIMEOUT,
            local_pins: LOCAL_PINS,
        }
    }
}

impl SessionOptions {
    /// The defaults, overridden by `SRC_SESSION_MEMORY_CAPACITY` (pins a `memory` store keeps),
    /// `SRC_SESSION_LOCAL_PINS` (pins of a Redis store kept here for its outages) and
    /// `SRC_SESSION_REDIS_TIMEOUT_MS` when set to a number (anything else is logged and
    /// ignored).
    pub fn from_env() -> SessionOptions {
        let mut options = SessionOptions::default();
        if let Some(n) = crate::config::env_number("SRC_SESSION_MEMORY_CAPACITY") {
            options.memory_capacity = usize::try_from(n).unwrap_or(usize::MAX).max(1);
        }
        if let Some(n) = crate::config::env_number("SRC_SESSION_LOCAL_PINS") {
            options.local_pins = usize::try_from(n).unwrap_or(usize::MAX).max(1);
        }
        options.redis_timeout = Timeouts::from_lookup(crate::config::env_number).session;
        options
    }
}

/// The call whose continuity is decided.
#[derive(Clone, Copy)]
pub struct ContinuityInput<'a> {
    pub policy: &'a CheckedPolicy,
    pub view: &'a RequestView,
    /// The route that proposed (`None` when the client named the model).
    pub route: Option<RouteId>,
    pub proposed: ModelId,
    /// The pin as the budget reservation read it ([`crate::hooks::Sessions::pin_read`]), when it did: the
    /// protocol starts from it instead of reading the pin again.
    pub ahead: Option<&'a PinAhead>,
}

/// Where a session's upstream outcomes go: handed to the forwarder, which reports failed
/// answers of the model it used.
#[derive(Clone)]
pub struct Ticket {
    pub identity: Identity,
    store: Arc<dyn SessionStore>,
    ttl_ms: u64,
    clock: Arc<dyn Clock>,
    metrics: Arc<SessionMetrics>,
}

impl Ticket {
    /// Records an outcome of `model` in a session; `source` is `client` or `upstream`.
    pub async fn record(
        &self,
        model: &str,
        verdict: Verdict,
        idempotency: Option<&str>,
        source: &'static str,
    ) -> Result<Recorded, StoreError> {
        let key = OutcomeKey {
            session: self.identity.clone(),
            model: model.to_owned(),
        };
        let now = self.clock.now_ms();
        let recorded = self
            .store
            .record_outcome(&key, verdict, idempotency, now, self.ttl_ms)
            .await;
        match &recorded {
            Ok(Recorded::New) => {
                self.metrics
                    .outcomes
                    .get_or_create(&OutcomeLabels {
                        verdict: verdict_word(verdict),
                        source,
                    })
                    .inc();
            }
            Ok(Recorded::Duplicate) => {}
            Err(err) => {
                self.metrics
                    .store_errors
                    .get_or_create(&StoreErrorLabels {
                        store: self.store.kind(),
                        op: "record",
                        kind: err.kind(),
                    })
                    .inc();
            }
        }
        recorded
    }
}

impl Ticket {
    /// Counts a call whose pinned model `model` failed it, under what `owner_lost` did.
    pub fn count_owner_lost(&self, model: &str, action: &'static str) {
        self.metrics
            .owner_lost
            .get_or_create(&OwnerLostLabels {
                model: model.to_owned(),
                action,
            })
            .inc();
    }

    /// Moves the session's pin from `from` to `to` (`owner_lost = move`): a compare-and-set on
    /// the pin as read, so a pin some other call moved meanwhile is left as that call left it.
    /// Answers whether the pin moved.
    pub async fn move_pin(&self, from: &str, to: &str) -> Result<bool, StoreError> {
        let now = self.clock.now_ms();
        let Some(pin) = self.store.get(&self.identity, now).await? else {
            return Ok(false);
        };
        if pin.model != from {
            return Ok(false);
        }
        let moved = pin.switched(to, pin.route.as_deref(), now, None);
        match self
            .store
            .compare_and_set(&self.identity, &pin, &moved, self.ttl_ms)
            .await?
        {
            Cas::Stored => {
                self.metrics
                    .switches
                    .get_or_create(&SwitchLabels {
                        from: from.to_owned(),
                        to: to.to_owned(),
                    })
                    .inc();
                Ok(true)
            }
            Cas::Conflict(_) => Ok(false),
        }
    }
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("identity", &self.identity)
            .field("store", &self.store.kind())
            .finish_non_exhaustive()
    }
}

/// The layer's answer.
#[derive(Debug, Clone)]
pub enum Continuity {
    /// The policy declares no `session`: the proposal stands and nothing is reported.
    Unmanaged,
    Forward {
        model: ModelId,
        state: SessionState,
        /// The hold that kept the pin (or would have, in observe mode).
        protection: Option<String>,
        /// Set when the call had an identity and the store worked.
        ticket: Option<Ticket>,
    },
    Reject {
        status: u16,
        message: String,
    },
}

/// What one run of the protocol decided, and the pin the store holds after it.
struct Decided {
    model: ModelId,
    state: SessionState,
    protection: Option<String>,
    pin: Pin,
}

fn decided(model: ModelId, state: SessionState, protection: Option<String>, pin: Pin) -> Decided {
    Decided {
        model,
        state,
        protection,
        pin,
    }
}

/// Why a protocol run stopped early.
enum Stop {
    Store(&'static str, StoreError),
    Holds(String),
}

/// Session pinning and `protect` over pluggable stores.
pub struct SessionLayer {
    clock: Arc<dyn Clock>,
    models: Option<Arc<dyn ModelSignals>>,
    options: SessionOptions,
    stores: StoreSet<dyn SessionStore>,
    /// Copies of the pins served on shared stores, for their outages.
    local: LocalPins,
    links: Arc<Links>,
    metrics: Arc<SessionMetrics>,
}

impl Default for SessionLayer {
    fn default() -> Self {
        SessionLayer::new(Arc::new(SystemClock), SessionOptions::default())
    }
}

impl SessionLayer {
    pub fn new(clock: Arc<dyn Clock>, options: SessionOptions) -> SessionLayer {
        SessionLayer {
            clock,
            models: None,
            options,
            stores: StoreSet::new(),
            local: LocalPins::new(options.local_pins),
            links: Arc::default(),
            metrics: Arc::default(),
        }
    }

    /// Answers model-backed `protect` atoms with the server's model runtime.
    pub fn with_models(mut self, models: Arc<dyn ModelSignals>) -> SessionLayer {
        self.models = Some(models);
        self
    }

    pub(crate) fn models(&self) -> Option<&dyn ModelSignals> {
        self.models.as_deref()
    }

    /// Serves `def` from `store` instead of building one (tests, embedding).
    pub fn with_store(self, def: StoreDef, store: Arc<dyn SessionStore>) -> SessionLayer {
        self.stores.insert(def, store);
        self
    }

    /// Builds Redis stores on `links`, the server's shared Redis links.
    pub fn with_links(mut self, links: Arc<Links>) -> SessionLayer {
        self.links = links;
        self
    }

    pub fn metrics(&self) -> &SessionMetrics {
        &self.metrics
    }

    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// The store a policy names, built on first use and kept across reloads that name it again.
    pub fn store(&self, def: &StoreDef) -> Result<Arc<dyn SessionStore>, StoreError> {
        self.stores.get_or_build(def, |def| {
            Ok(match def {
                StoreDef::Memory => Arc::new(MemoryStore::new(self.options.memory_capacity)),
                StoreDef::Redis(target) => Arc::new(RedisStore::on(
                    self.links.redis(target, self.options.redis_timeout)?,
                )),
                StoreDef::Milvus(_) => return Err(StoreError::cache_only()),
            })
        })
    }

    /// Decides the call's continuity; `holds` answers `protect` for it.
    pub async fn decide(&self, input: ContinuityInput<'_>, holds: &dyn Holds) -> Continuity {
        let Some(def) = &input.policy.session else {
            return Continuity::Unmanaged;
        };
        let Some(identity) = identify(input.policy, def, input.view) else {
            return self.missing(input, def);
        };
        let store = match self.store(&def.store) {
            Ok(store) => store,
            Err(err) => return self.store_failed(input, "connect", kind_of(&def.store), err),
        };
        match self
            .run(input, def, &identity, store.as_ref(), holds, input.ahead)
            .await
        {
            Ok(Decided {
                model,
                state,
                protection,
                pin,
            }) => {
                self.count(state);
                self.local.remember(&def.store, &identity, &pin, def.ttl_ms);
                Continuity::Forward {
                    model,
                    state,
                    protection,
                    ticket: Some(self.new_ticket(def, identity, store)),
                }
            }
            Err(Stop::Store(op, err)) => {
                let kind = store.kind();
                let local = if err.is_outage() && input.policy.failure.store == FailMode::Open {
                    self.on_local_copy(input, def, &identity, holds).await
                } else {
                    None
                };
                match local {
                    Some(forward) => {
                        self.count_store_error(op, kind, &err);
                        let site = Site {
                            store: "session",
                            kind,
                            op,
                        };
                        // Logged (and judged `open`) as any failure is; only the model differs.
                        let _ = failure::judge(input.policy.failure.store, site, err);
                        self.count(SessionState::StoreUnavailable);
                        forward
                    }
                    None => self.store_failed(input, op, kind, err),
                }
            }
            Err(Stop::Holds(message)) => Continuity::Reject {
                status: 503,
                message: format!("cannot decide whether the session's pin holds: {message}"),
            },
        }
    }

    fn count(&self, s: SessionState) {
        self.metrics
            .calls
            .get_or_create(&StateLabels { state: s.as_str() })
            .inc();
    }

    fn missing(&self, input: ContinuityInput<'_>, def: &SessionDef) -> Continuity {
        match def.missing {
            Missing::Route => {
                self.count(SessionState::MissingIdentity);
                Continuity::Forward {
                    model: input.proposed,
                    state: SessionState::MissingIdentity,
                    protection: None,
                    ticket: None,
                }
            }
            Missing::Reject => {
                let headers = id_headers(&def.id);
                let hint = if headers.is_empty() {
                    String::new()
                } else {
                    let names: Vec<String> = headers
                        .iter()
                        .map(|h| match h {
                            IdSource::Header(h) => format!("`{h}`"),
                            IdSource::Body(p) => format!("the body field `{p}`"),
                        })
                        .collect();
                    format!(": send {}", names.join(" or "))
                };
                Continuity::Reject {
                    status: 400,
                    message: format!("this router requires a session identity{hint}"),
                }
            }
        }
    }

    fn count_store_error(&self, op: &'static str, kind: &'static str, err: &StoreError) {
        self.metrics
            .store_errors
            .get_or_create(&StoreErrorLabels {
                store: kind,
                op,
                kind: err.kind(),
            })
            .inc();
    }

    /// The call decided on this replica's copy of its pin, while the shared store cannot be
    /// reached: `None` when the copy holds no pin for it (it then goes on without affinity).
    /// The answer says `store-unavailable` whatever the copy decided, since the store did not
    /// take part; the model (and a hold that kept it) are the copy's.
    async fn on_local_copy(
        &self,
        input: ContinuityInput<'_>,
        def: &SessionDef,
        id: &Identity,
        holds: &dyn Holds,
    ) -> Option<Continuity> {
        let copy = self
            .local
            .holding(&def.store, id, self.clock.now_ms())
            .await?;
        let decided = self
            .run(input, def, id, copy.as_ref(), holds, None)
            .await
            .ok()?;
        self.metrics
            .local_pins
            .get_or_create(&StateLabels {
                state: decided.state.as_str(),
            })
            .inc();
        Some(Continuity::Forward {
            model: decided.model,
            state: SessionState::StoreUnavailable,
            protection: decided.protection,
            ticket: None,
        })
    }

    /// `failure.store`: open forwards the proposal without affinity, closed answers 503.
    fn store_failed(
        &self,
        input: ContinuityInput<'_>,
        op: &'static str,
        kind: &'static str,
        err: StoreError,
    ) -> Continuity {
        self.count_store_error(op, kind, &err);
        let site = Site {
            store: "session",
            kind,
            op,
        };
        match failure::judge(input.policy.failure.store, site, err) {
            Failed::Refuse(refusal) => Continuity::Reject {
                status: refusal.status(),
                message: refusal.message(),
            },
            Failed::Skip(_) => {
                self.count(SessionState::StoreUnavailable);
                Continuity::Forward {
                    model: input.proposed,
                    state: SessionState::StoreUnavailable,
                    protection: None,
                    ticket: None,
                }
            }
        }
    }

    /// One call of the switch protocol against the store, from `ahead` when the pin was read
    /// already.
    async fn run(
        &self,
        input: ContinuityInput<'_>,
        def: &SessionDef,
        id: &Identity,
        store: &dyn SessionStore,
        holds: &dyn Holds,
        ahead: Option<&PinAhead>,
    ) -> Result<Decided, Stop> {
        let policy = input.policy;
        let ttl = def.ttl_ms;
        let now = self.clock.now_ms();
        let proposed_name = model_name(policy, input.proposed);
        let route_name = input
            .route
            .and_then(|r| policy.routes.get(r.index()))
            .map(|r| r.name.as_str());
        let store_err = |op| move |e| Stop::Store(op, e);
        let ahead = ahead.filter(|a| a.read.key == redis::pin_key(id) && a.read.ttl_ms == ttl);
        let mut found = match ahead {
            Some(a) => redis::read_touched(a.fields.clone(), a.read.now_ms, ttl),
            None => store.get_and_touch(id, now, ttl).await,
        }
        .map_err(store_err("get"))?;
        // Set once this call lost a race: it then follows whatever pin won.
        let mut raced = false;
        for _ in 0..MAX_ROUNDS {
            let Some(pin) = found.take() else {
                let pin = Pin::first(proposed_name, route_name, now);
                match store
                    .put_if_absent(id, &pin, ttl)
                    .await
                    .map_err(store_err("put"))?
                {
                    Put::Stored => {
                        self.pinned(store);
                        return Ok(decided(input.proposed, SessionState::New, None, pin));
                    }
                    Put::Exists(winner) => {
                        raced = true;
                        found = Some(winner);
                        continue;
                    }
                }
            };
            let live = policy
                .model_by_name(&pin.model)
                .filter(|_| !pin.is_stale(now, ttl));
            let Some(pinned) = live else {
                let renewed = pin.renewed(proposed_name, route_name, now);
                match store
                    .compare_and_set(id, &pin, &renewed, ttl)
                    .await
                    .map_err(store_err("cas"))?
                {
                    Cas::Stored => {
                        self.pinned(store);
                        return Ok(decided(
                            input.proposed,
                            SessionState::Expired,
                            None,
                            renewed,
                        ));
                    }
                    Cas::Conflict(current) => {
                        raced = true;
                        found = current;
                        continue;
                    }
                }
            };
            if raced {
                store
                    .touch(id, now, ttl)
                    .await
                    .map_err(store_err("touch"))?;
                return Ok(decided(pinned, SessionState::Pinned, None, pin));
            }
            if pinned == input.proposed {
                return Ok(decided(pinned, SessionState::Pinned, None, pin));
            }
            let policy_hold = if continuity::asks_holds(policy, input.view) {
                self.holds(input, id, store, &pin, pinned, holds)
                    .await
                    .map_err(Stop::Holds)?
            } else {
                None
            };
            let held = match continuity::settle(policy, input.view, policy_hold) {
                Switch::Held(rule) => {
                    self.metrics
                        .holds
                        .get_or_create(&RuleLabels { rule: rule.clone() })
                        .inc();
                    return Ok(decided(pinned, SessionState::Held, Some(rule), pin));
                }
                Switch::Observed(rule) => Some(rule),
                Switch::Switched => None,
            };
            let moved = pin.switched(proposed_name, route_name, now, held.as_deref());
            match store
                .compare_and_set(id, &pin, &moved, ttl)
                .await
                .map_err(store_err("cas"))?
            {
                Cas::Stored => {
                    self.metrics
                        .switches
                        .get_or_create(&SwitchLabels {
                            from: pin.model.clone(),
                            to: proposed_name.to_owned(),
                        })
                        .inc();
                    let Some(rule) = held else {
                        return Ok(decided(input.proposed, SessionState::Switched, None, moved));
                    };
                    self.metrics
                        .observed
                        .get_or_create(&RuleLabels { rule: rule.clone() })
                        .inc();
                    return Ok(decided(
                        input.proposed,
                        SessionState::Observed,
                        Some(rule),
                        moved,
                    ));
                }
                Cas::Conflict(current) => {
                    raced = true;
                    found = current;
                }
            }
        }
        Err(Stop::Store(
            "cas",
            StoreError::Contended("the pin kept changing under concurrent writers".into()),
        ))
    }

    fn pinned(&self, store: &dyn SessionStore) {
        self.metrics
            .pins
            .get_or_create(&StoreLabels {
                store: store.kind(),
            })
            .inc();
    }

    /// The name of the first hold that holds for moving `pin` to the proposal.
    async fn holds(
        &self,
        input: ContinuityInput<'_>,
        id: &Identity,
        store: &dyn SessionStore,
        pin: &Pin,
        pinned: ModelId,
        holds: &dyn Holds,
    ) -> Result<Option<String>, String> {
        let Some(protect) = input
            .policy
            .protect
            .as_ref()
            .filter(|p| !p.holds.is_empty())
        else {
            return Ok(None);
        };
        let outcomes = if reads_outcomes(input.policy, protect) {
            let key = OutcomeKey {
                session: id.clone(),
                model: pin.model.clone(),
            };
            match store.outcomes(&key, self.clock.now_ms()).await {
                Ok(stats) => stats,
                Err(err) => {
                    // Holds on outcomes then see "unknown", which does not hold.
                    self.metrics
                        .store_errors
                        .get_or_create(&StoreErrorLabels {
                            store: store.kind(),
                            op: "outcomes",
                            kind: err.kind(),
                        })
                        .inc();
                    OutcomeStats::default()
                }
            }
        } else {
            OutcomeStats::default()
        };
        let query = HoldQuery {
            pinned,
            proposed: input.proposed,
            outcomes,
        };
        match holds.first_hold(query).await {
            HoldVerdict::NoHold => Ok(None),
            HoldVerdict::Held(i) => Ok(protect.holds.get(i).map(|h| h.name.clone())),
            HoldVerdict::Failed(message) => Err(message),
        }
    }

    /// A ticket for a session named outside a chat call (the outcomes endpoint).
    pub fn ticket(&self, def: &SessionDef, identity: Identity) -> Result<Ticket, StoreError> {
        Ok(self.new_ticket(def, identity, self.store(&def.store)?))
    }

    fn new_ticket(
        &self,
        def: &SessionDef,
        identity: Identity,
        store: Arc<dyn SessionStore>,
    ) -> Ticket {
        Ticket {
            identity,
            store,
            ttl_ms: def.ttl_ms,
            clock: Arc::clone(&self.clock),
            metrics: Arc::clone(&self.metrics),
        }
    }

    /// The session's pin as stored (live or stale), and a model's recent outcomes in it.
    pub async fn pin_of(&self, ticket: &Ticket) -> Result<Option<Pin>, StoreError> {
        ticket
            .store
            .get(&ticket.identity, self.clock.now_ms())
            .await
    }

    pub async fn outcomes_of(
        &self,
        ticket: &Ticket,
        model: &str,
    ) -> Result<OutcomeStats, StoreError> {
        let key = OutcomeKey {
            session: ticket.identity.clone(),
            model: model.to_owned(),
        };
        ticket.store.outcomes(&key, self.clock.now_ms()).await
    }
}

pub(crate) fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "pass",
        Verdict::Fail => "fail",
    }
}

fn model_name(policy: &CheckedPolicy, id: ModelId) -> &str {
    policy
        .models
        .get(id.index())
        .map_or("", |m| m.name.as_str())
}
