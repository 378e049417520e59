//! The one error every store answers — pins, cached answers, stored responses, shared
//! cooldowns and the shared model memo alike — so a failure reads, logs and counts the same
//! whichever store it came from. Which store failed is told by the caller (the
//! `failure` guard), not by the error.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;

/// What a store failure was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("the store did not answer `{op}` within {after:?}")]
    Timeout { op: &'static str, after: Duration },
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    /// Not sent: the store failed a call recently and its breaker skips it until a probe
    /// reaches it again.
    #[error("the store is skipped after a failure (next probe in {probe_in:?})")]
    Skipped { probe_in: Duration },
    #[error("the store refused the call: {0}")]
    Rejected(String),
    #[error("the store's state kept changing under concurrent writers: {0}")]
    Contended(String),
    #[error("the store answered something unreadable: {0}")]
    Corrupt(String),
    #[error("the store is misconfigured: {0}")]
    Config(String),
}

/// A store failure as a metric counts it: which store, what it was asked, and how it failed
/// ([`StoreError::kind`]). Every store's `*_store_errors_total` counter has these labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreErrorLabels {
    pub store: &'static str,
    pub op: &'static str,
    pub kind: &'static str,
}

impl StoreError {
    /// A short, fixed word for metric labels and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreError::Timeout { .. } => "timeout",
            // Skipped calls answer as the failure that opened the breaker did, so the
            // verdict and the labels read the same through an outage.
            StoreError::Unavailable(_) | StoreError::Skipped { .. } => "unavailable",
            StoreError::Rejected(_) => "rejected",
            StoreError::Contended(_) => "contended",
            StoreError::Corrupt(_) => "corrupt",
            StoreError::Config(_) => "config",
        }
    }

    /// A store that holds cached answers only (Milvus) named for something else; the checker
    /// refuses such a policy (E094), so only a policy built by hand meets this.
    pub fn cache_only() -> StoreError {
        StoreError::Config("a Milvus store holds cached answers only".into())
    }

    /// Whether the store could not be reached (timed out, unreachable, or skipped by its
    /// breaker). The link reports an outage once, when its breaker opens, so these are not
    /// logged again per request.
    pub fn is_outage(&self) -> bool {
        matches!(
            self,
            StoreError::Timeout { .. } | StoreError::Unavailable(_) | StoreError::Skipped { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_has_a_fixed_word() {
        let errors = [
            StoreError::Timeout {
                op: "get",
                after: Duration::from_millis(5),
            },
            StoreError::Unavailable("down".into()),
            StoreError::Corrupt("x".into()),
            StoreError::Config("y".into()),
            StoreError::Skipped {
                probe_in: Duration::from_millis(70),
            },
            StoreError::Rejected("WRONGTYPE".into()),
            StoreError::Contended("pin".into()),
        ];
        let kinds: Vec<&str> = errors.iter().map(StoreError::kind).collect();
        assert_eq!(
            kinds,
            [
                "timeout",
                "unavailable",
                "corrupt",
                "config",
                "unavailable",
                "rejected",
                "contended"
            ]
        );
        assert!(errors[0].to_string().contains("`get`"));
        let outages: Vec<bool> = errors.iter().map(StoreError::is_outage).collect();
        assert_eq!(outages, [true, true, false, false, true, false, false]);
    }
}
