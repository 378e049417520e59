//! Readiness: `/readyz` says whether this router can serve, which is not whether every backend
//! is up. It is ready when a policy is loaded and every route has at least one model (its `to`
//! or an `else`) whose backend answered its last probe, or none of whose backends is probed yet.
//! One backend down therefore takes no replica out of rotation while the routes still have a way
//! to answer; the per-backend health stays in the report. This module keeps the probes' results
//! and writes the report; the probing itself (`server::health`) belongs to the running server.
//!
//! "Answered" means an HTTP answer below 500 arrived in time: a 401 from a backend that wants a
//! key still proves it is up; a refused connection, a timeout or a 5xx does not. Simulated
//! backends run in-process and are always ready. Models cooling down after repeated failures
//! (`failure.cooldown_after`) are listed in the report; they do not change readiness, since a
//! cooldown ends by itself.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::{json, Value};

use crate::backends::Endpoint;
use crate::cooldown::Cooldowns;
use crate::log::rfc3339;
use crate::policy_store::Snapshot;

#[derive(Debug, Clone)]
struct Probe {
    ok: bool,
    detail: String,
    at: SystemTime,
}

/// The last probe of each backend base URL.
#[derive(Default)]
pub struct Readiness {
    probes: Mutex<HashMap<String, Probe>>,
    up: Family<BackendLabels, Gauge<i64, AtomicI64>>,
    /// The models cooling down, listed in the report.
    cooldowns: Option<Arc<Cooldowns>>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BackendLabels {
    backend: String,
}

impl Readiness {
    /// A readiness whose report also lists the models `cooldowns` holds back.
    pub fn with_cooldowns(cooldowns: Arc<Cooldowns>) -> Readiness {
        Readiness {
            cooldowns: Some(cooldowns),
            ..Readiness::default()
        }
    }

    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            crate::metrics::BACKEND_UP,
            "1 when the backend answered its last readiness probe, else 0",
            self.up.clone(),
        );
    }

    /// Sets `src_backend_up` of every backend `snapshot` binds a model to from its last probe
    /// (a backend not probed yet counts as down; a simulated one is up).
    pub fn publish(&self, snapshot: &Snapshot) {
        let probes = self.probes.lock().unwrap_or_else(PoisonError::into_inner);
        for endpoint in bound_endpoints(snapshot) {
            let up = endpoint.simulated || probes.get(&endpoint.base).is_some_and(|p| p.ok);
            self.up
                .get_or_create(&BackendLabels {
                    backend: endpoint.name.clone(),
                })
                .set(i64::from(up));
        }
    }

    /// Records the outcome of probing the backend at `base`.
    pub fn record(&self, base: &str, ok: bool, detail: String) {
        self.probes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                base.to_owned(),
                Probe {
                    ok,
                    detail,
                    at: SystemTime::now(),
                },
            );
    }

    /// Whether `snapshot` can serve, and the per-backend and per-route report behind the answer.
    pub fn report(&self, snapshot: &Snapshot) -> (bool, Value) {
        let probes = self.probes.lock().unwrap_or_else(PoisonError::into_inner);
        let policy = snapshot.policy();
        let state = |backend: usize| -> Health {
            match snapshot.endpoints.get(backend) {
                Some(e) if e.simulated => Health::Up,
                Some(e) => match probes.get(&e.base) {
                    Some(p) if p.ok => Health::Up,
                    Some(_) => Health::Down,
                    None => Health::Unprobed,
                },
                None => Health::Down,
            }
        };
        let mut backends = BTreeMap::new();
        for endpoint in bound_endpoints(snapshot) {
            let entry = if endpoint.simulated {
                json!({"ready": true, "simulated": true})
            } else {
                match probes.get(&endpoint.base) {
                    Some(p) => json!({"ready": p.ok, "url": endpoint.base, "detail": p.detail,
                                      "probed_at": rfc3339(p.at)}),
                    None => {
                        json!({"ready": false, "url": endpoint.base, "detail": "not probed yet"})
                    }
                }
            };
            backends.insert(endpoint.name.clone(), entry);
        }
        let mut routes = BTreeMap::new();
        let mut unservable = Vec::new();
        for route in &policy.routes {
            let health: Vec<Health> = std::iter::once(route.to)
                .chain(route.fallbacks.iter().copied())
                .filter_map(|m| policy.models.get(m.index()))
                .map(|m| state(m.backend.index()))
                .collect();
            let servable = health.contains(&Health::Up)
                || (!health.is_empty() && health.iter().all(|h| *h == Health::Unprobed));
            if !servable {
                unservable.push(route.name.clone());
            }
            routes.insert(route.name.clone(), json!({"servable": servable}));
        }
        let ready = unservable.is_empty();
        let body = json!({
            "ready": ready,
            "policy": {"generation": snapshot.generation, "content_hash": snapshot.content_hash},
            "backends": backends,
            "routes": routes,
            "unservable_routes": unservable,
            "cooling_models": self.cooldowns.as_ref().map_or_else(|| json!([]), |c| c.report()),
        });
        (ready, body)
    }
}

/// What the last probe says of a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Health {
    Up,
    Down,
    Unprobed,
}

/// Backends that at least one model is bound to.
pub fn bound_endpoints(snapshot: &Snapshot) -> impl Iterator<Item = &Endpoint> {
    let policy = snapshot.policy();
    snapshot
        .endpoints
        .iter()
        .enumerate()
        .filter(move |(i, _)| policy.models.iter().any(|m| m.backend.index() == *i))
        .map(|(_, e)| e)
}
