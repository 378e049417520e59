//! The one error every store answers — pins, cached answers, stored responses, shared
//! cooldowns and the shared model memo alike — so a failure reads, logs and counts the same
//! whichever store it came from. Which store failed is told by the caller (the
//! `failure` guard), not by the error.

use std::time::Duration;

/// What a store failure was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("the store did not answer `{op}` within {after:?}")]
    Timeout { op: &'static str, after: Duration },
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    #[error("the store answered something unreadable: {0}")]
    Corrupt(String),
    #[error("the store is misconfigured: {0}")]
    Config(String),
}

impl StoreError {
    /// A short, fixed word for metric labels and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreError::Timeout { .. } => "timeout",
            StoreError::Unavailable(_) => "unavailable",
            StoreError::Corrupt(_) => "corrupt",
            StoreError::Config(_) => "config",
        }
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
        ];
        let kinds: Vec<&str> = errors.iter().map(StoreError::kind).collect();
        assert_eq!(kinds, ["timeout", "unavailable", "corrupt", "config"]);
        assert!(errors[0].to_string().contains("`get`"));
    }
}
