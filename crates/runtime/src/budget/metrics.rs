//! The budget metrics. Names live in [`crate::metrics`]; labels are budget names and fixed
//! words, never tenants, so their cardinality is bounded by the policy.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::metrics as names;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExceededLabels {
    pub budget: String,
    /// `reject`, `to` or `observe`.
    pub action: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BudgetLabels {
    pub budget: String,
}

/// Every budget metric; cheap to clone (the families are shared).
#[derive(Clone, Default)]
pub struct BudgetMetrics {
    pub exceeded: Family<ExceededLabels, Counter>,
    pub used: Family<BudgetLabels, Counter<f64, AtomicU64>>,
    pub share: Family<BudgetLabels, Gauge<f64, AtomicU64>>,
}

impl BudgetMetrics {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            names::BUDGET_EXCEEDED,
            "Requests that found a budget exceeded, by what the budget did",
            self.exceeded.clone(),
        );
        registry.register(
            names::BUDGET_USED,
            "Units counted against each budget (requests, tokens or cost)",
            self.used.clone(),
        );
        registry.register(
            names::BUDGET_SHARE,
            "Share of the budget used that the last request it counted found",
            self.share.clone(),
        );
    }

    /// A request found `budget` exceeded and it did `action`.
    pub fn exceeded(&self, budget: &str, action: &'static str) {
        self.exceeded
            .get_or_create(&ExceededLabels {
                budget: budget.to_owned(),
                action,
            })
            .inc();
    }

    /// `amount` units were counted against `budget`.
    pub fn charged(&self, budget: &str, amount: f64) {
        self.used
            .get_or_create(&BudgetLabels {
                budget: budget.to_owned(),
            })
            .inc_by(amount);
    }

    /// A request found `share` of `budget` used.
    pub fn observed(&self, budget: &str, share: f64) {
        self.share
            .get_or_create(&BudgetLabels {
                budget: budget.to_owned(),
            })
            .set(share);
    }

    /// The Prometheus text of these metrics alone (tests).
    pub fn encode(&self) -> String {
        let mut registry = Registry::default();
        self.register(&mut registry);
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }
}
