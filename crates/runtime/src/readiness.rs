//! Readiness: `/readyz` says a policy is loaded and every backend a model is bound to answered
//! its last probe. This module keeps the probes' results and writes the report; the probing
//! itself (`server::health`) belongs to the running server.
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

    /// Whether `snapshot` can serve, and the per-backend report behind the answer.
    pub fn report(&self, snapshot: &Snapshot) -> (bool, Value) {
        let probes = self.probes.lock().unwrap_or_else(PoisonError::into_inner);
        let mut ready = true;
        let mut backends = BTreeMap::new();
        for endpoint in bound_endpoints(snapshot) {
            let entry = if endpoint.simulated {
                json!({"ready": true, "simulated": true})
            } else {
                match probes.get(&endpoint.base) {
                    Some(p) => {
                        ready &= p.ok;
                        json!({"ready": p.ok, "url": endpoint.base, "detail": p.detail,
                               "probed_at": rfc3339(p.at)})
                    }
                    None => {
                        ready = false;
                        json!({"ready": false, "url": endpoint.base, "detail": "not probed yet"})
                    }
                }
            };
            backends.insert(endpoint.name.clone(), entry);
        }
        let body = json!({
            "ready": ready,
            "policy": {"generation": snapshot.generation, "content_hash": snapshot.content_hash},
            "backends": backends,
        });
        (ready, body)
    }
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
