//! Per-model cooldown (`failure { cooldown_after = N  cooldown = D }`): a model whose backend
//! failed N times in a row (a connect error, a timeout, a reset, a 5xx, a 404 or a 429) is
//! skipped for D, so requests go straight to their `else` models instead of paying for a
//! failure first. An answer below 400 is judged once its body ends ([`Verdict`]): one that ends
//! whole resets the count, one that breaks off or stalls in the middle (a stream ended with an
//! error event) is a failure like any other. An answer the client stopped reading is neither,
//! and other 4xx answers are about the request and change nothing.
//!
//! The state is kept by model name, so it outlives reloads. When the policy has a Redis store
//! (the session's, else the cache's), a cooldown that starts on one replica is written there
//! (`KeySpace::cooldown`, expiring with the cooldown, on the server's shared Redis link) and
//! every replica reads those keys on each `sync` tick, so the whole fleet skips the model; the
//! failure counts stay per replica.
//! Redis is never waited for on the request path: the write is a task of its own, and the read
//! runs beside the readiness probes.

use std::collections::HashMap;
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::{json, Value};
use src_compiler::hir::{CheckedPolicy, CooldownDef, RedisTarget, StoreDef};

use crate::log::rfc3339;
use crate::metrics as names;
use crate::store::{KeySpace, Links, Redis, Timeouts};
use crate::telemetry::ModelLabels;

#[derive(Debug, Default, Clone, Copy)]
struct State {
    /// Failures in a row since the last success or the last cooldown.
    failures: u32,
    /// Until when the model is skipped.
    until: Option<Instant>,
    /// The same moment on the wall clock, for reports.
    until_wall: Option<SystemTime>,
    /// Whether the cooldown started here (else it was read from Redis).
    local: bool,
}

/// The cooldown state of every model, shared by the request path, `/readyz` and the sync task.
#[derive(Default)]
pub struct Cooldowns {
    models: Mutex<HashMap<String, State>>,
    /// The server's Redis links, shared with its stores.
    links: Arc<Links>,
    trips: Family<ModelLabels, Counter>,
    cooling: Family<ModelLabels, Gauge<i64, AtomicI64>>,
}

impl Cooldowns {
    pub fn new() -> Cooldowns {
        Cooldowns::default()
    }

    /// Shares cooldowns through `links`, the server's shared Redis links.
    pub fn with_links(links: Arc<Links>) -> Cooldowns {
        Cooldowns {
            links,
            ..Cooldowns::default()
        }
    }

    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            names::MODEL_COOLDOWNS,
            "Cooldowns a model entered after failing `cooldown_after` times in a row",
            self.trips.clone(),
        );
        registry.register(
            names::MODEL_COOLING,
            "1 while a model is cooling down and skipped, else 0",
            self.cooling.clone(),
        );
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, State>> {
        self.models.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How much longer `model` is skipped, if it is cooling down.
    pub fn cooling(&self, model: &str) -> Option<Duration> {
        let now = Instant::now();
        self.lock()
            .get(model)
            .and_then(|s| s.until)
            .and_then(|until| until.checked_duration_since(now))
            .filter(|left| !left.is_zero())
    }

    /// Counts a failure of `model`; the failure that reaches `rule.after` starts its cooldown,
    /// which is then shared through the policy's Redis store, if it has one.
    pub fn failed(self: &Arc<Self>, policy: &CheckedPolicy, model: &str) {
        if let Some(rule) = policy.failure.cooldown {
            self.count_failure(rule, || shared_url(policy), model);
        }
    }

    /// The verdict on an answer of `model` whose head has arrived, to be given when its body
    /// ends; `None` when the policy declares no cooldown.
    pub fn pending(self: &Arc<Self>, policy: &CheckedPolicy, model: &str) -> Option<Verdict> {
        let rule = policy.failure.cooldown?;
        Some(Verdict {
            cooldowns: Arc::clone(self),
            model: model.to_owned(),
            rule,
            shared: shared_url(policy).map(Box::new),
        })
    }

    fn count_failure(
        self: &Arc<Self>,
        rule: CooldownDef,
        shared: impl FnOnce() -> Option<RedisTarget>,
        model: &str,
    ) {
        let tripped = {
            let mut models = self.lock();
            let state = models.entry(model.to_owned()).or_default();
            state.failures += 1;
            if state.failures >= rule.after {
                let length = Duration::from_millis(rule.millis);
                state.failures = 0;
                state.until = Some(Instant::now() + length);
                state.until_wall = Some(SystemTime::now() + length);
                state.local = true;
                true
            } else {
                false
            }
        };
        if !tripped {
            return;
        }
        let labels = ModelLabels {
            model: model.to_owned(),
        };
        self.trips.get_or_create(&labels).inc();
        self.cooling.get_or_create(&labels).set(1);
        tracing::warn!(
            model,
            failures = rule.after,
            cooldown_ms = rule.millis,
            "the model failed too often in a row: skipped while it cools down"
        );
        if let Some(url) = shared() {
            let this = Arc::clone(self);
            let model = model.to_owned();
            tokio::spawn(async move { this.publish(&url, &model, rule).await });
        }
    }

    /// An answer came: the failures in a row start again from zero.
    pub fn succeeded(&self, model: &str) {
        if let Some(state) = self.lock().get_mut(model) {
            state.failures = 0;
        }
    }

    /// The cooldowns in force, for `/readyz`: model, until when, and where it started.
    pub fn report(&self) -> Value {
        let now = Instant::now();
        let mut out: Vec<(String, Value)> = self
            .lock()
            .iter()
            .filter(|(_, s)| s.until.is_some_and(|u| u > now))
            .map(|(model, s)| {
                let left = s
                    .until
                    .map_or(0, |u| u.saturating_duration_since(now).as_millis());
                (
                    model.clone(),
                    json!({
                        "model": model,
                        "until": s.until_wall.map(rfc3339),
                        "remaining_ms": u64::try_from(left).unwrap_or(u64::MAX),
                        "source": if s.local { "local" } else { "redis" },
                    }),
                )
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Value::Array(out.into_iter().map(|(_, v)| v).collect())
    }

    /// Reads the cooldowns other replicas started (when the policy has a Redis store) and
    /// brings the `cooling` gauges up to date. Called on the probe interval.
    pub async fn sync(&self, policy: &CheckedPolicy) {
        if policy.failure.cooldown.is_some() {
            if let Some(url) = shared_url(policy) {
                self.read_shared(&url, policy).await;
            }
        }
        let now = Instant::now();
        let models = self.lock().clone();
        for model in &policy.models {
            let cooling = models
                .get(&model.name)
                .and_then(|s| s.until)
                .is_some_and(|u| u > now);
            let labels = ModelLabels {
                model: model.name.clone(),
            };
            if cooling || self.cooling.get(&labels).is_some() {
                self.cooling.get_or_create(&labels).set(i64::from(cooling));
            }
        }
    }

    fn connection(&self, url: &RedisTarget) -> Option<Redis> {
        match self.links.redis(url, Timeouts::default().cooldown) {
            Ok(redis) => Some(redis),
            Err(err) => {
                tracing::warn!(?err, "cooldowns cannot be shared: no Redis connection");
                None
            }
        }
    }

    async fn publish(&self, url: &RedisTarget, model: &str, rule: CooldownDef) {
        let Some(redis) = self.connection(url) else {
            return;
        };
        let mut conn = redis.connection();
        let mut cmd = redis::cmd("SET");
        cmd.arg(KeySpace::cooldown(model))
            .arg(1)
            .arg("PX")
            .arg(rule.millis);
        let set = cmd.query_async::<()>(&mut conn);
        if let Err(err) = redis.bounded("cooldown.set", set).await {
            tracing::warn!(model, ?err, "a cooldown could not be shared through Redis");
        }
    }

    async fn read_shared(&self, url: &RedisTarget, policy: &CheckedPolicy) {
        let Some(redis) = self.connection(url) else {
            return;
        };
        let mut conn = redis.connection();
        // Every cooldown key has the same hash tag: one pipeline, one Redis Cluster slot.
        let mut pipe = redis::pipe();
        for model in &policy.models {
            pipe.cmd("PTTL").arg(KeySpace::cooldown(&model.name));
        }
        let read = pipe.query_async::<Vec<i64>>(&mut conn);
        let left = match redis.bounded("cooldown.read", read).await {
            Ok(left) => left,
            Err(err) => {
                tracing::debug!(?err, "shared cooldowns could not be read");
                return;
            }
        };
        let now = Instant::now();
        let mut models = self.lock();
        for (model, left) in policy.models.iter().zip(left) {
            // PTTL: -2 no such key, -1 no expiry (never written so by the router).
            let Ok(ms) = u64::try_from(left) else {
                continue;
            };
            let until = now + Duration::from_millis(ms);
            let state = models.entry(model.name.clone()).or_default();
            if state
                .until
                .is_none_or(|u| u + Duration::from_millis(50) < until)
            {
                state.until = Some(until);
                state.until_wall = Some(SystemTime::now() + Duration::from_millis(ms));
                state.local = false;
            }
        }
    }
}

/// What the cooldown learns from an answer whose head arrived, once its body has ended: the
/// relay gives it exactly once, or drops it when the client went away first.
pub struct Verdict {
    cooldowns: Arc<Cooldowns>,
    model: String,
    rule: CooldownDef,
    /// The Redis the policy shares cooldowns through, if any.
    /// Boxed: a cluster's or Sentinel set's node list would make every answered attempt
    /// larger.
    shared: Option<Box<RedisTarget>>,
}

impl Verdict {
    /// The answer ended whole: the failures in a row start again from zero.
    pub fn whole(self) {
        self.cooldowns.succeeded(&self.model);
    }

    /// The answer broke off or stalled after its head: a failure of the model.
    pub fn broken(self) {
        let Verdict {
            cooldowns,
            model,
            rule,
            shared,
        } = self;
        cooldowns.count_failure(rule, || shared.map(|target| *target), &model);
    }
}

impl std::fmt::Debug for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verdict")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// The Redis the policy's cooldowns are shared through: the session store's, else the cache's.
fn shared_url(policy: &CheckedPolicy) -> Option<RedisTarget> {
    let session = policy.session.as_ref().map(|s| &s.store);
    let cache = policy.cache.as_ref().map(|c| &c.store);
    [session, cache]
        .into_iter()
        .flatten()
        .find_map(|store| match store {
            StoreDef::Redis(target) => Some(target.clone()),
            StoreDef::Memory | StoreDef::Milvus(_) => None,
        })
}
