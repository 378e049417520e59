//! Readiness: `/readyz` says whether this router can serve, which is not whether every backend
//! is up. It is ready when a policy is loaded and every route has at least one model (its `to`
//! or an `else`) whose backend answered its last probe and lists the model's served id, or none
//! of whose backends is probed yet.
//! One backend down therefore takes no replica out of rotation while the routes still have a way
//! to answer; the per-backend health stays in the report. This module keeps the probes' results
//! and writes the report; the probing itself (`server::health`) belongs to the running server.
//!
//! "Answered" means an HTTP answer below 500 arrived in time: a 401 from a backend that wants a
//! key still proves it is up; a refused connection, a timeout or a 5xx does not. When the
//! answer is a model list (`{"data": [{"id": ...}]}`, as OpenAI, NVIDIA Dynamo, vLLM and
//! Anthropic answer `GET /models`), a model whose served id it lacks cannot be served there (a
//! Dynamo frontend whose workers for it are gone answers 404): the backend is up, the model is
//! not. An answer that is no list (a 401, a 404, another shape) or says it is partial
//! (`has_more`) proves nothing either way about ids. The lists are read by the probes, on their
//! interval, and kept here: a `/readyz` probe reads what was kept and sends nothing. Simulated
//! backends run in-process and are always ready. Models cooling down after repeated failures
//! (`failure.cooldown_after`) are listed in the report; they do not change readiness, since a
//! cooldown ends by itself.

use std::collections::{BTreeMap, HashMap, HashSet};
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
    /// The served ids the backend listed, when its answer was a whole model list.
    listed: Option<HashSet<String>>,
}

/// The served ids in a `GET /models` answer, when it is a whole model list.
pub fn listed_ids(body: &[u8]) -> Option<HashSet<String>> {
    let list: Value = serde_json::from_slice(body).ok()?;
    if list["has_more"] == Value::Bool(true) {
        return None;
    }
    let data = list["data"].as_array()?;
    Some(
        data.iter()
            .filter_map(|m| m["id"].as_str().map(str::to_owned))
            .collect(),
    )
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

    /// Records the outcome of probing the backend at `base`: `listed` holds the served ids of
    /// its answer when that was a whole model list.
    pub fn record(&self, base: &str, ok: bool, detail: String, listed: Option<HashSet<String>>) {
        self.probes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                base.to_owned(),
                Probe {
                    ok,
                    detail,
                    at: SystemTime::now(),
                    listed,
                },
            );
    }

    /// Whether `snapshot` can serve, and the per-backend and per-route report behind the answer.
    pub fn report(&self, snapshot: &Snapshot) -> (bool, Value) {
        let probes = self.probes.lock().unwrap_or_else(PoisonError::into_inner);
        let policy = snapshot.policy();
        let state = |backend: usize, served: &str| -> Health {
            match snapshot.endpoints.get(backend) {
                Some(e) if e.simulated => Health::Up,
                Some(e) => match probes.get(&e.base) {
                    Some(p) if p.ok && unlisted(p, served) => Health::Down,
                    Some(p) if p.ok => Health::Up,
                    Some(_) => Health::Down,
                    None => Health::Unprobed,
                },
                None => Health::Down,
            }
        };
        let mut backends = BTreeMap::new();
        for (index, endpoint) in snapshot.endpoints.iter().enumerate() {
            if !policy.models.iter().any(|m| m.backend.index() == index) {
                continue;
            }
            let entry = if endpoint.simulated {
                json!({"ready": true, "simulated": true})
            } else {
                match probes.get(&endpoint.base) {
                    Some(p) => {
                        // Served ids bound here that the backend's list lacks (sorted, once).
                        let missing: std::collections::BTreeSet<&str> = policy
                            .models
                            .iter()
                            .filter(|m| m.backend.index() == index && unlisted(p, &m.serves))
                            .map(|m| m.serves.as_str())
                            .collect();
                        json!({"ready": p.ok, "url": endpoint.base, "detail": p.detail,
                               "probed_at": rfc3339(p.at), "missing_models": missing})
                    }
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
                .map(|m| state(m.backend.index(), &m.serves))
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

/// Whether `probe` listed the backend's models and `served` is not among them.
fn unlisted(probe: &Probe, served: &str) -> bool {
    probe
        .listed
        .as_ref()
        .is_some_and(|ids| !ids.contains(served))
}

/// What the last probe says of a model on its backend.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_model_list_names_its_ids_and_anything_else_names_none() {
        let ids = listed_ids(br#"{"object":"list","data":[{"id":"a"},{"id":"b"},{"x":1}]}"#);
        let mut ids: Vec<String> = ids.unwrap_or_default().into_iter().collect();
        ids.sort();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(listed_ids(br#"{"data":[]}"#).map(|i| i.len()), Some(0));
        assert_eq!(
            listed_ids(br#"{"data":[{"id":"a"}],"has_more":true}"#),
            None
        );
        assert_eq!(listed_ids(br#"{"error":"unauthorized"}"#), None);
        assert_eq!(listed_ids(b"not json"), None);
    }
}
