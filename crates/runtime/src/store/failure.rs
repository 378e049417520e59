//! `failure.store = open | closed`: what a request does when a store fails it, decided in one
//! place for every store a request consults (pins, cached answers, stored responses).
//!
//! `open` goes on as though the store held nothing (no pin, no cached answer, no stored
//! response); `closed` refuses the request with a 503. A store that could not be reached (a
//! timeout, a refused connection, a call its breaker skipped) was reported by its link once,
//! when the breaker opened, so it is logged here at `debug` only: an outage writes one warning,
//! not one a request. Any other failure is logged here at `warn`, naming the store, its kind,
//! the step and the error's kind. What the caller builds from the verdict (a forwarded
//! proposal, an error body) stays the caller's.

use src_dsl::ast::FailMode;

use crate::store::error::StoreError;

/// The status of a refusal under `failure.store = closed`.
pub const REFUSAL_STATUS: u16 = 503;

/// Which store failed at which step, for the log line and the refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Site {
    /// What the store keeps: `session`, `cache` or `response`.
    pub store: &'static str,
    /// `memory` or `redis`.
    pub kind: &'static str,
    /// The step: `connect`, `get`, `lookup`, ….
    pub op: &'static str,
}

/// A request refused because a store failed under `failure.store = closed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub store: &'static str,
    pub error: StoreError,
}

impl Refusal {
    /// The HTTP status to answer.
    pub fn status(&self) -> u16 {
        REFUSAL_STATUS
    }

    /// The message to answer, naming the store and not the error (which may name hosts).
    pub fn message(&self) -> String {
        format!("the {} store is unavailable", self.store)
    }
}

/// What a failed store step comes to under `failure.store`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failed {
    /// `open`: go on as though the store held nothing.
    Skip(StoreError),
    /// `closed`: refuse the request.
    Refuse(Refusal),
}

/// `result` under `mode`: its value, or the failure logged once and judged.
pub fn guard<T>(mode: FailMode, site: Site, result: Result<T, StoreError>) -> Result<T, Failed> {
    result.map_err(|err| judge(mode, site, err))
}

/// A failure under `mode`, logged once.
pub fn judge(mode: FailMode, site: Site, err: StoreError) -> Failed {
    if err.is_outage() {
        tracing::debug!(
            %err,
            store = site.store,
            kind = site.kind,
            op = site.op,
            error = err.kind(),
            fail = ?mode,
            "a store failed"
        );
    } else {
        tracing::warn!(
            %err,
            store = site.store,
            kind = site.kind,
            op = site.op,
            error = err.kind(),
            fail = ?mode,
            "a store failed"
        );
    }
    match mode {
        FailMode::Open => Failed::Skip(err),
        FailMode::Closed => Failed::Refuse(Refusal {
            store: site.store,
            error: err,
        }),
    }
}

impl Failed {
    /// What failed.
    pub fn error(&self) -> &StoreError {
        match self {
            Failed::Skip(err) => err,
            Failed::Refuse(refusal) => &refusal.error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SITE: Site = Site {
        store: "cache",
        kind: "redis",
        op: "lookup",
    };

    fn down() -> Result<u8, StoreError> {
        Err(StoreError::Unavailable("connection refused".into()))
    }

    #[test]
    fn a_value_passes_whatever_the_mode() {
        assert_eq!(guard(FailMode::Open, SITE, Ok(1)), Ok(1));
        assert_eq!(guard(FailMode::Closed, SITE, Ok(1)), Ok(1));
    }

    #[test]
    fn open_skips_and_closed_refuses_with_a_503() {
        let skipped = guard(FailMode::Open, SITE, down());
        assert!(matches!(
            skipped,
            Err(Failed::Skip(StoreError::Unavailable(_)))
        ));
        let Err(Failed::Refuse(refusal)) = guard(FailMode::Closed, SITE, down()) else {
            panic!("closed refuses");
        };
        assert_eq!(refusal.error, *Failed::Refuse(refusal.clone()).error());
        assert_eq!(refusal.status(), 503);
        assert_eq!(refusal.message(), "the cache store is unavailable");
        assert_eq!(refusal.error.kind(), "unavailable");
    }
}
