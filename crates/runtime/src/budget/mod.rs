//! Budgets at run time: the store that counts them ([`BudgetStore`]: in process, or in the
//! session's Redis for every replica, where a reservation carries the session's pin read), the
//! layer that answers the procedure's
//! `Next::Budgets` with it ([`BudgetLayer`]), and the charge of tokens and cost once an answer
//! ends ([`Charge`]).
//!
//! Windows are fixed: a budget's window is the span of `window` milliseconds since the Unix
//! epoch that holds the request, counted by one counter per (budget, `per` value, window). A
//! fixed window is one number read and added to atomically, the same in memory and in one Redis
//! script, so admission is exact under any concurrency; a sliding log would keep one entry per
//! request (unbounded for token budgets) and an approximated sliding counter is not exact.
//! `Retry-After` is the time left in the window.
//!
//! Which budget acts, and what is reserved, is the compiler's rule
//! ([`src_compiler::procedure::budget::settle`]); every store applies it atomically.

pub mod memory;
pub mod metrics;
pub mod redis;

use std::sync::Arc;

use src_compiler::hir::{BudgetUnit, CheckedPolicy, ModelId, StoreDef};
use src_compiler::procedure::budget::{BudgetAsk, BudgetKey, BudgetUse};

pub use self::memory::MemoryBudgets;
pub use self::metrics::BudgetMetrics;
pub use self::redis::RedisBudgets;
use crate::hooks::{BoxFuture, PinRead};
use crate::store::{Clock, Links, StoreError, StoreSet, SystemClock, Timeouts};

/// One budget counter: which budget, for which `per` value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Counter {
    pub budget: String,
    /// `t/TENANT` or `v/TEXT`.
    pub per: String,
    pub window_ms: u64,
}

impl Counter {
    /// The counter of `ask` for a request of `tenant`.
    pub fn of(policy: &CheckedPolicy, ask: &BudgetAsk, tenant: &str) -> Counter {
        let per = match &ask.key {
            BudgetKey::Tenant => format!("t/{tenant}"),
            BudgetKey::Text(text) => format!("v/{}", bounded(text)),
        };
        Counter {
            budget: policy
                .budgets
                .get(ask.budget.index())
                .map_or_else(String::new, |b| b.name.clone()),
            per,
            window_ms: ask.window_ms.max(1),
        }
    }

    /// The start of the window holding `now_ms`.
    pub fn window_start(&self, now_ms: u64) -> u64 {
        now_ms - now_ms % self.window_ms
    }

    /// Whole seconds until the window holding `now_ms` ends, at least 1.
    pub fn retry_after_s(&self, now_ms: u64) -> u64 {
        let end = self.window_start(now_ms) + self.window_ms;
        end.saturating_sub(now_ms).div_ceil(1000).max(1)
    }
}

/// Per values longer than this are kept as their hash, so store keys stay bounded.
const MAX_PER_BYTES: usize = 256;

fn bounded(text: &str) -> String {
    use sha2::{Digest, Sha256};
    if text.len() <= MAX_PER_BYTES {
        text.to_owned()
    } else {
        format!(
            "sha256:{}",
            crate::hex::lower(&Sha256::digest(text.as_bytes()))
        )
    }
}

/// What a reservation that carried a session's pin read answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Carried {
    /// As [`BudgetStore::reserve`] answers.
    pub uses: Vec<BudgetUse>,
    /// The pin's hash as read (see [`PinAhead`](crate::hooks::PinAhead)); `None` when the store
    /// did not carry the read (a store in memory, a refused request, a read that failed beside
    /// the reservation): the session layer then reads the pin itself.
    pub pin: Option<Vec<String>>,
}

/// Where budgets are counted.
pub trait BudgetStore: Send + Sync {
    /// Reads each ask's counter in the window holding `now_ms` and applies
    /// [`settle`](src_compiler::procedure::budget::settle) to them in one atomic step: the
    /// answer has one [`BudgetUse`] per ask, its usage before this request.
    fn reserve<'a>(
        &'a self,
        asks: &'a [(BudgetAsk, Counter)],
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Vec<BudgetUse>, StoreError>>;

    /// [`reserve`](Self::reserve), carrying `pin`, the read of the request's session pin on the
    /// same store, in the same round trip where the store can (one script on one server or a
    /// Sentinel primary; beside it on a Cluster). The default carries nothing.
    fn reserve_carrying<'a>(
        &'a self,
        asks: &'a [(BudgetAsk, Counter)],
        now_ms: u64,
        _pin: &'a PinRead,
    ) -> BoxFuture<'a, Result<Carried, StoreError>> {
        Box::pin(async move {
            Ok(Carried {
                uses: self.reserve(asks, now_ms).await?,
                pin: None,
            })
        })
    }

    /// Adds `amount` to a counter's window holding `now_ms` (tokens and cost, when the answer
    /// ends; a window that ended meanwhile is charged to the new one).
    fn charge<'a>(
        &'a self,
        counter: &'a Counter,
        amount: f64,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// A counter's usage in the window holding `now_ms` (the admin listing).
    fn used<'a>(
        &'a self,
        counter: &'a Counter,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<f64, StoreError>>;
}

/// The budget stores of a server, one per store declaration, and its clock and metrics.
pub struct BudgetLayer {
    stores: StoreSet<dyn BudgetStore>,
    links: Arc<Links>,
    timeouts: Timeouts,
    clock: Arc<dyn Clock>,
    metrics: BudgetMetrics,
}

impl Default for BudgetLayer {
    fn default() -> Self {
        BudgetLayer::new(Arc::default(), Timeouts::default())
    }
}

impl BudgetLayer {
    /// Builds Redis stores on `links`, bounding each call by the session store's timeout.
    pub fn new(links: Arc<Links>, timeouts: Timeouts) -> BudgetLayer {
        BudgetLayer {
            stores: StoreSet::new(),
            links,
            timeouts,
            clock: Arc::new(SystemClock),
            metrics: BudgetMetrics::default(),
        }
    }

    /// Reads time from `clock` (tests).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> BudgetLayer {
        self.clock = clock;
        self
    }

    pub fn metrics(&self) -> &BudgetMetrics {
        &self.metrics
    }

    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Budgets are counted where the session's pins are (so replicas that share pins share
    /// budgets), in memory without a session.
    pub fn store_def(policy: &CheckedPolicy) -> StoreDef {
        policy
            .session
            .as_ref()
            .map_or(StoreDef::Memory, |s| s.store.clone())
    }

    /// The store for `policy`, built on first use.
    pub fn store(&self, policy: &CheckedPolicy) -> Result<Arc<dyn BudgetStore>, StoreError> {
        self.stores.get_or_build(
            &Self::store_def(policy),
            |def| -> Result<Arc<dyn BudgetStore>, StoreError> {
                Ok(match def {
                    StoreDef::Memory => Arc::new(MemoryBudgets::default()),
                    StoreDef::Redis(target) => Arc::new(RedisBudgets::on(
                        self.links.redis(target, self.timeouts.session)?,
                    )),
                    StoreDef::Milvus(_) => return Err(crate::store::StoreError::cache_only()),
                })
            },
        )
    }
}

/// What an answer charges to the budgets of its request once it ends: its tokens to `tokens`
/// budgets, their cost (Σ tokens / 1000 × the model's `cost`) to `cost` budgets.
#[derive(Clone)]
pub struct Charge {
    pub store: Arc<dyn BudgetStore>,
    pub clock: Arc<dyn Clock>,
    /// Each counter with its unit.
    pub counters: Vec<(Counter, BudgetUnit)>,
    /// The answering model's declared cost.
    pub model_cost: f64,
    /// The router's token estimate of the request, charged when the answer reports no usage.
    pub estimate: u64,
    pub metrics: BudgetMetrics,
}

impl std::fmt::Debug for Charge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Charge")
            .field("counters", &self.counters)
            .field("model_cost", &self.model_cost)
            .field("estimate", &self.estimate)
            .finish()
    }
}

impl Charge {
    /// The charge for a request's token and cost budgets (`None` when it has none).
    pub fn of(
        layer: &BudgetLayer,
        store: &Arc<dyn BudgetStore>,
        counters: &[(Counter, BudgetUnit)],
    ) -> Option<Charge> {
        let counters: Vec<(Counter, BudgetUnit)> = counters
            .iter()
            .filter(|(_, u)| *u != BudgetUnit::Requests)
            .cloned()
            .collect();
        (!counters.is_empty()).then(|| Charge {
            store: Arc::clone(store),
            clock: Arc::clone(&layer.clock),
            counters,
            model_cost: 0.0,
            estimate: 0,
            metrics: layer.metrics.clone(),
        })
    }

    /// The answering model, whose `cost` prices the tokens.
    pub fn answered_by(&mut self, policy: &CheckedPolicy, model: ModelId) {
        self.model_cost = policy.models.get(model.index()).map_or(0.0, |m| m.cost);
    }

    /// Charges `tokens` (off the answer's path: the client is not kept waiting).
    pub fn tokens(self, tokens: u64) {
        if tokens == 0 {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let now = self.clock.now_ms();
            for (counter, unit) in &self.counters {
                let amount = match unit {
                    BudgetUnit::Tokens => tokens as f64,
                    BudgetUnit::Cost => tokens as f64 / 1000.0 * self.model_cost,
                    BudgetUnit::Requests => continue,
                };
                if amount <= 0.0 {
                    continue;
                }
                match self.store.charge(counter, amount, now).await {
                    Ok(()) => self.metrics.charged(&counter.budget, amount),
                    Err(err) => {
                        tracing::warn!(%err, budget = %counter.budget, "a budget charge failed")
                    }
                }
            }
        });
    }
}
