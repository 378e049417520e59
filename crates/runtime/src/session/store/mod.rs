//! Where pins and outcome windows live: one small async trait, an in-process implementation
//! ([`MemoryStore`]) and a shared one ([`RedisStore`]) for several router replicas.
//!
//! The session layer owns every decision; a store only offers the few atomic steps the switch
//! protocol needs (read-and-touch, create-if-absent, compare-and-set on a version) and the
//! outcome log. Time is passed in by the caller so one clock governs a request end to end and
//! tests can move it. Physically a pin is kept for [`retain_ms`] — twice its idle `ttl` — so a
//! call that arrives after the ttl still finds it and can be told its pin *expired* rather than
//! that it never had one.

pub mod memory;
pub mod redis;

pub use self::memory::MemoryStore;
pub use self::redis::RedisStore;

use crate::hooks::BoxFuture;
use crate::session::identity::Identity;
use crate::session::pin::Pin;
pub use crate::store::StoreError;

/// Outcomes kept per (tenant, session, model): `fail_rate` and `count` describe at most this
/// many of the most recent ones.
pub const OUTCOME_WINDOW: usize = 20;

/// How long an outcome's idempotency key is remembered.
pub const IDEMPOTENCY_MS: u64 = 10 * 60 * 1000;

/// How long a pin (and its outcome windows) is kept after its last touch, given its idle ttl.
pub fn retain_ms(ttl_ms: u64) -> u64 {
    ttl_ms.saturating_mul(2).max(1)
}

/// The answer of [`SessionStore::put_if_absent`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Put {
    Stored,
    /// Another writer got there first; this is its pin.
    Exists(Pin),
}

/// The answer of [`SessionStore::compare_and_set`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cas {
    Stored,
    /// The pin's version was not the expected one; this is what is stored now (`None`: nothing).
    Conflict(Option<Pin>),
}

/// A verdict on one step of a session's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
}

/// Whose outcomes: one model's record inside one session.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OutcomeKey {
    pub session: Identity,
    pub model: String,
}

/// The answer of [`SessionStore::record_outcome`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    New,
    /// The idempotency key was seen within [`IDEMPOTENCY_MS`]; nothing was recorded.
    Duplicate,
}

/// The recent outcomes of one model in one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutcomeStats {
    pub count: u64,
    pub fails: u64,
}

impl OutcomeStats {
    /// Failures over the window; `None` when nothing was recorded (unknown is not zero).
    pub fn fail_rate(self) -> Option<f64> {
        (self.count > 0).then(|| self.fails as f64 / self.count as f64)
    }

    /// Stats of a window of verdicts, most recent first; only the first [`OUTCOME_WINDOW`] count.
    pub fn of(verdicts: impl IntoIterator<Item = Verdict>) -> OutcomeStats {
        verdicts
            .into_iter()
            .take(OUTCOME_WINDOW)
            .fold(OutcomeStats::default(), |s, v| OutcomeStats {
                count: s.count + 1,
                fails: s.fails + u64::from(v == Verdict::Fail),
            })
    }
}

/// Pins and outcomes, shared by every request of every policy generation that names the store.
///
/// Every method is one atomic step of the store (one round trip for Redis). `now_ms` is the
/// caller's clock; `ttl_ms` the session's idle ttl.
pub trait SessionStore: Send + Sync {
    /// `memory` or `redis`, for metric labels.
    fn kind(&self) -> &'static str;

    /// The stored pin, live or stale, without touching it.
    fn get<'a>(
        &'a self,
        key: &'a Identity,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Option<Pin>, StoreError>>;

    /// Slides a live pin's expiry and counts a turn; `false` when there is no live pin.
    fn touch<'a>(
        &'a self,
        key: &'a Identity,
        now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// The hot path: [`get`](Self::get) and, when the pin is live, [`touch`](Self::touch), as
    /// one step. Answers the pin as it is after the touch (a stale pin is answered untouched).
    fn get_and_touch<'a>(
        &'a self,
        key: &'a Identity,
        now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Option<Pin>, StoreError>>;

    /// Creates the pin unless one exists (live or stale).
    fn put_if_absent<'a>(
        &'a self,
        key: &'a Identity,
        pin: &'a Pin,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Put, StoreError>>;

    /// Replaces the pin if the stored one still has the version of `read` (the pin the caller
    /// decided on). Calls that touched the pin since `read` stay counted: the stored turns are
    /// `pin.turns` plus the stored pin's turns beyond `read.turns`, and `seen_ms` never goes back.
    fn compare_and_set<'a>(
        &'a self,
        key: &'a Identity,
        read: &'a Pin,
        pin: &'a Pin,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Cas, StoreError>>;

    /// Appends a verdict to the model's window in the session, unless `idempotency` (scoped to
    /// the session) was recorded within [`IDEMPOTENCY_MS`].
    fn record_outcome<'a>(
        &'a self,
        key: &'a OutcomeKey,
        verdict: Verdict,
        idempotency: Option<&'a str>,
        now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Recorded, StoreError>>;

    /// The model's recent outcomes in the session.
    fn outcomes<'a>(
        &'a self,
        key: &'a OutcomeKey,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<OutcomeStats, StoreError>>;

    /// Up to `limit` stored pins (live or stale), for the operator console: a bounded walk,
    /// never a listing of the whole store.
    fn list<'a>(
        &'a self,
        _limit: usize,
        _now_ms: u64,
    ) -> BoxFuture<'a, Result<Vec<(Identity, Pin)>, StoreError>> {
        Box::pin(std::future::ready(Err(StoreError::Unavailable(format!(
            "the {} store does not list its pins",
            self.kind()
        )))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_rate_is_unknown_without_outcomes_and_windowed_otherwise() {
        assert_eq!(OutcomeStats::default().fail_rate(), None);
        let s = OutcomeStats::of([Verdict::Fail, Verdict::Pass, Verdict::Pass, Verdict::Fail]);
        assert_eq!((s.count, s.fails), (4, 2));
        assert_eq!(s.fail_rate(), Some(0.5));
        let many = OutcomeStats::of(
            std::iter::repeat_n(Verdict::Pass, OUTCOME_WINDOW)
                .chain(std::iter::repeat_n(Verdict::Fail, 5)),
        );
        assert_eq!((many.count, many.fails), (OUTCOME_WINDOW as u64, 0));
    }
}
