//! Stateful `/v1/responses` (docs/responses.md): the responses the router answered, kept so a
//! conversation that continues with `previous_response_id` can move to another model.
//!
//! A response id only means something to the backend that stored it. The router keeps its own
//! copy of every response it relays (unless the client sent `store: false`): the whole input
//! the conversation had reached (earlier turns expanded) and the response itself, with the
//! backend and served model that produced it, in the policy's session store (memory or Redis),
//! scoped by the session tenant exactly like pins. A later turn then goes one of three ways:
//!
//! - to the backend and served model that produced the response: forwarded as is, so the
//!   backend's own state and its KV cache stay useful (`x-sr-previous: continued`);
//! - elsewhere: the router expands the chain into a full `input` and drops
//!   `previous_response_id` (`expanded`);
//! - an id the router never stored is the provider's own state (`request.provider_state`): the
//!   session layer's built-in `provider state` hold keeps it on its pinned owner (`provider`);
//!   with no pin to name an owner it is forwarded as is (`unowned`).
//!
//! - [`record`]: what one stored response is; [`store`]: where it lives (memory, Redis);
//! - [`turn`]: a turn's body read as raw JSON (its `previous_response_id`, `store` and input
//!   items as the body's own bytes);
//! - [`chain`]: a stored conversation expanded into the next turn's input, by splicing bytes;
//! - [`capture`]: a relayed answer (JSON or event stream) turned into a stored response;
//! - [`endpoints`]: `GET`/`DELETE /v1/responses/{id}` and its `input_items`;
//! - [`vault`]: on a redacting route, the values a chain's turns were sent placeholders for,
//!   kept under each answer's id (sealed with [`seal`]'s key) so that a turn continuing state
//!   only the backend holds numbers its values after them.
//!
//! The request path of `POST /v1/responses` is the door `door::responses`, above this module.

pub mod capture;
pub mod chain;
pub mod endpoints;
pub mod record;
pub mod seal;
pub mod store;
pub mod turn;
pub mod vault;

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use src_compiler::hir::{CheckedPolicy, StoreDef};
use src_compiler::request::RequestView;

use crate::session::identity;
use crate::store::{Clock, Links, StoreError, StoreSet, SystemClock, Timeouts};

pub use record::StoredResponse;
pub use seal::VaultKey;
pub use store::{MemoryResponses, RedisResponses, ResponseStore};

/// How long a stored response is kept by default.
pub const DEFAULT_TTL_MS: u64 = 24 * 60 * 60 * 1000;
/// Responses a `memory` store keeps by default.
pub const DEFAULT_MEMORY_ENTRIES: usize = 10_000;
/// Bytes a `memory` store keeps by default (all stored responses together).
pub const DEFAULT_MEMORY_BYTES: usize = 256 << 20;
/// The largest stored response by default (its expanded input included); larger ones are
/// relayed but not kept.
pub const DEFAULT_MAX_ENTRY_BYTES: usize = 8 << 20;

/// The bounds of the response store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseOptions {
    pub ttl_ms: u64,
    pub memory_entries: usize,
    pub memory_bytes: usize,
    pub max_entry_bytes: usize,
    /// Bound on each Redis call (the session store's).
    pub redis_timeout: Duration,
}

impl Default for ResponseOptions {
    fn default() -> Self {
        ResponseOptions {
            ttl_ms: DEFAULT_TTL_MS,
            memory_entries: DEFAULT_MEMORY_ENTRIES,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            max_entry_bytes: DEFAULT_MAX_ENTRY_BYTES,
            redis_timeout: Timeouts::default().session,
        }
    }
}

impl ResponseOptions {
    /// The defaults, overridden by `SRC_RESPONSES_TTL_MS`, `SRC_RESPONSES_MEMORY_ENTRIES`,
    /// `SRC_RESPONSES_MEMORY_BYTES`, `SRC_RESPONSES_MAX_BYTES` and the session store's
    /// `SRC_SESSION_REDIS_TIMEOUT_MS`.
    pub fn from_env() -> ResponseOptions {
        let env = crate::config::env_number;
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX).max(1);
        let mut options = ResponseOptions {
            redis_timeout: Timeouts::from_lookup(env).session,
            ..ResponseOptions::default()
        };
        if let Some(ms) = env("SRC_RESPONSES_TTL_MS") {
            options.ttl_ms = ms.max(1);
        }
        if let Some(n) = env("SRC_RESPONSES_MEMORY_ENTRIES") {
            options.memory_entries = size(n);
        }
        if let Some(n) = env("SRC_RESPONSES_MEMORY_BYTES") {
            options.memory_bytes = size(n);
        }
        if let Some(n) = env("SRC_RESPONSES_MAX_BYTES") {
            options.max_entry_bytes = size(n);
        }
        options
    }
}

/// The server's response stores, one per store the policies name, built on first use and kept
/// across reloads that name it again (as the session layer keeps its pin stores).
pub struct ResponseStates {
    options: ResponseOptions,
    clock: Arc<dyn Clock>,
    stores: StoreSet<dyn ResponseStore>,
    /// The sealed vaults of redacted chains, beside the responses of the same store.
    vaults: StoreSet<dyn ResponseStore>,
    /// The key vaults are sealed with; `None` only when the system's random source failed and
    /// the operator gave none (vaults are then not kept).
    vault_key: Option<Arc<VaultKey>>,
    /// Lookups of chains' vaults, by outcome.
    vault_lookups: Family<VaultLabels, Counter>,
    links: Arc<Links>,
}

/// The outcome of a chain's vault lookup (see [`crate::metrics::RESPONSE_VAULTS`]).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VaultLabels {
    pub outcome: &'static str,
}

impl Default for ResponseStates {
    fn default() -> Self {
        ResponseStates::new(Arc::new(SystemClock), ResponseOptions::default())
    }
}

/// Where one tenant's responses are, under one policy.
#[derive(Clone)]
pub struct Scope {
    pub tenant: String,
    pub store: Arc<dyn ResponseStore>,
    /// Where the tenant's sealed vaults are (the same store's, under their own keys).
    pub vaults: Arc<dyn ResponseStore>,
}

impl ResponseStates {
    pub fn new(clock: Arc<dyn Clock>, options: ResponseOptions) -> ResponseStates {
        ResponseStates {
            options,
            clock,
            stores: StoreSet::new(),
            vaults: StoreSet::new(),
            vault_key: match VaultKey::generate() {
                Ok(key) => Some(Arc::new(key)),
                Err(err) => {
                    tracing::error!(%err, "redacted Responses chains cannot be continued");
                    None
                }
            },
            vault_lookups: Family::default(),
            links: Arc::default(),
        }
    }

    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            crate::metrics::RESPONSE_VAULTS,
            "Lookups of a redacted Responses chain's vault, by outcome (found, missing, unopened, failed)",
            self.vault_lookups.clone(),
        );
    }

    /// Counts a chain's vault lookup that ended as `outcome`.
    pub fn count_vault(&self, outcome: &'static str) {
        self.vault_lookups
            .get_or_create(&VaultLabels { outcome })
            .inc();
    }

    /// Seals vaults with `key`, the operator's (`SRC_VAULT_KEY_FILE`), rather than one made at
    /// start.
    pub fn with_vault_key(mut self, key: VaultKey) -> ResponseStates {
        self.vault_key = Some(Arc::new(key));
        self
    }

    /// The key vaults are sealed with.
    pub fn vault_key(&self) -> Option<&Arc<VaultKey>> {
        self.vault_key.as_ref()
    }

    /// Builds Redis stores on `links`, the server's shared Redis links.
    pub fn with_links(mut self, links: Arc<Links>) -> ResponseStates {
        self.links = links;
        self
    }

    pub fn options(&self) -> &ResponseOptions {
        &self.options
    }

    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    /// The store and tenant of a request under `policy`: the store of its `session` (an
    /// in-process one without a `session`), the tenant as pins have it.
    pub fn scope(&self, policy: &CheckedPolicy, view: &RequestView) -> Result<Scope, StoreError> {
        let def = match &policy.session {
            Some(session) => session.store.clone(),
            None => StoreDef::Memory,
        };
        let tenant = identity::tenant(policy, view);
        Ok(Scope {
            tenant,
            store: self.store(&def)?,
            vaults: self.vault_store(&def)?,
        })
    }

    fn vault_store(&self, def: &StoreDef) -> Result<Arc<dyn ResponseStore>, StoreError> {
        self.vaults.get_or_build(def, |def| {
            Ok(match def {
                StoreDef::Memory => Arc::new(MemoryResponses::new(
                    self.options.memory_entries,
                    self.options.memory_bytes,
                )),
                StoreDef::Redis(target) => Arc::new(RedisResponses::vaults_on(
                    self.links.redis(target, self.options.redis_timeout)?,
                )),
                StoreDef::Milvus(_) => return Err(StoreError::cache_only()),
            })
        })
    }

    fn store(&self, def: &StoreDef) -> Result<Arc<dyn ResponseStore>, StoreError> {
        self.stores.get_or_build(def, |def| {
            Ok(match def {
                StoreDef::Memory => Arc::new(MemoryResponses::new(
                    self.options.memory_entries,
                    self.options.memory_bytes,
                )),
                StoreDef::Redis(target) => Arc::new(RedisResponses::on(
                    self.links.redis(target, self.options.redis_timeout)?,
                )),
                StoreDef::Milvus(_) => return Err(StoreError::cache_only()),
            })
        })
    }
}
