//! The session layer's counters. Names live in [`crate::metrics`]; label values are bounded by
//! the policy (model and rule names) and fixed words, never by session ids or tenants.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::metrics as names;
use crate::store::StoreErrorLabels;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreLabels {
    pub store: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SwitchLabels {
    pub from: String,
    pub to: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuleLabels {
    pub rule: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OwnerLostLabels {
    /// The pinned model that failed the call.
    pub model: String,
    /// `fail`, `fallback`, `move` or `observed`.
    pub action: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub verdict: &'static str,
    pub source: &'static str,
}

/// Every session counter; cheap to clone (the families are shared).
#[derive(Clone, Default)]
pub struct SessionMetrics {
    pub calls: Family<StateLabels, Counter>,
    pub pins: Family<StoreLabels, Counter>,
    pub switches: Family<SwitchLabels, Counter>,
    pub holds: Family<RuleLabels, Counter>,
    pub observed: Family<RuleLabels, Counter>,
    pub owner_lost: Family<OwnerLostLabels, Counter>,
    pub store_errors: Family<StoreErrorLabels, Counter>,
    pub outcomes: Family<OutcomeLabels, Counter>,
    pub local_pins: Family<StateLabels, Counter>,
}

impl SessionMetrics {
    /// Adds the counters to a registry (the server's, so `GET /metrics` shows them).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            names::SESSION_CALLS,
            "Calls by session state",
            self.calls.clone(),
        );
        registry.register(
            names::SESSION_PINS,
            "Pins written for new or expired sessions",
            self.pins.clone(),
        );
        registry.register(
            names::SESSION_SWITCHES,
            "Pins moved to another model",
            self.switches.clone(),
        );
        registry.register(
            names::SESSION_HOLDS,
            "Switches kept from happening by a protect hold",
            self.holds.clone(),
        );
        registry.register(
            names::SESSION_OBSERVED,
            "Switches a hold would have kept, let through in observe mode",
            self.observed.clone(),
        );
        registry.register(
            names::SESSION_OWNER_LOST,
            "Calls whose pinned model failed them, by what owner_lost did",
            self.owner_lost.clone(),
        );
        registry.register(
            names::SESSION_STORE_ERRORS,
            "Session store failures",
            self.store_errors.clone(),
        );
        registry.register(
            names::SESSION_OUTCOMES,
            "Outcomes recorded by verdict and source",
            self.outcomes.clone(),
        );
        registry.register(
            names::SESSION_LOCAL_PINS,
            "Calls decided on this replica's copy of their pin while the store was unreachable",
            self.local_pins.clone(),
        );
    }

    /// The Prometheus text of these counters alone (tests and tools that hold no registry).
    pub fn encode(&self) -> String {
        let mut registry = Registry::default();
        self.register(&mut registry);
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }
}
