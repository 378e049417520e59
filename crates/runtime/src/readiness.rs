//! Readiness: `/readyz` says whether this router can serve, which is not whether every backend
//! is up. It is ready when a policy is loaded and every route has at least one model (its `to`
//! or an `else`) whose backend answered its last probe, or none of whose backends is probed yet.
//! One backend down therefore takes no replica out of rotation while the routes still have a way
//! to answer; the per-backend health stays in the report. This module keeps the probes' results
//! and writes the report; the probing itself (`server::health`) belongs to the running server.
//!
//! "Answered" means an HTTP answer below 500 arrived in time: a 401 from a backend that wants a
//! key still proves it is up; a refused connection, a timeout or a 5xx does not. Simulated
//! backends run in-process and are always ready.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use serde_json::{json, Value};

use crate::backends::Endpoint;
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
}

impl Readiness {
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
