//! The circuit breaker of one store link, as a state machine that does no IO: it is told the
//! time and what calls and probes answered, and hands back whether a call may go out and which
//! state change to report. The link and its health (`store::health`) do the sleeping, the
//! probing, the logging and the counting.
//!
//! Closed, every call goes out. The first call that fails to reach the store opens it: from
//! then on calls are skipped at once (the store answers "unavailable", which `failure.store`
//! judges as before) instead of each paying the connection timeout. While open, a probe off the
//! request path tries the store after a back-off that doubles after each failed probe, from
//! [`Backoff::first`] up to [`Backoff::cap`]; the first probe that answers closes it. Calls that
//! were already in flight when it opened only report what they met: a late failure does not
//! reopen a closed breaker's back-off, and a late success does not close an open one (only a
//! probe, sent after the failure, proves the store is back).

use std::time::Duration;

/// How long an open breaker waits before each probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The wait before the first probe.
    pub first: Duration,
    /// The longest wait, however many probes failed.
    pub cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            first: Duration::from_millis(100),
            cap: Duration::from_secs(5),
        }
    }
}

impl Backoff {
    /// The wait after `wait`, doubled and capped.
    fn next(self, wait: Duration) -> Duration {
        wait.saturating_mul(2).min(self.cap).max(self.first)
    }
}

/// Where a breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Calls go out.
    Closed,
    /// Calls are skipped; a probe is due at `probe_at_ms`.
    Open {
        since_ms: u64,
        probe_at_ms: u64,
        wait: Duration,
        /// Calls skipped since it opened.
        skipped: u64,
    },
}

impl State {
    /// The value of the `src_store_breaker_state` gauge: 0 closed, 1 open.
    pub fn gauge(self) -> i64 {
        match self {
            State::Closed => 0,
            State::Open { .. } => 1,
        }
    }
}

/// Whether a call may go out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Call,
    /// Skipped: the store failed recently; the next probe is `probe_in` away.
    Skip {
        probe_in: Duration,
    },
}

/// A state change, for the link to log once and count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A call failed to reach the store; the first probe is `probe_in` away.
    Opened { probe_in: Duration },
    /// A probe answered: the store was skipped `skipped` times over `down` since it opened.
    Closed { skipped: u64, down: Duration },
}

/// What the link does after a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterProbe {
    /// The store answered: stop probing.
    Closed(Change),
    /// Still unreachable: probe again after `wait`.
    Again { wait: Duration },
}

/// One link's breaker.
#[derive(Debug, Clone)]
pub struct Breaker {
    backoff: Backoff,
    state: State,
}

impl Breaker {
    pub fn new(backoff: Backoff) -> Breaker {
        Breaker {
            backoff,
            state: State::Closed,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn backoff(&self) -> Backoff {
        self.backoff
    }

    /// Whether a call at `now_ms` may go out; a skipped call is counted.
    pub fn admit(&mut self, now_ms: u64) -> Admit {
        match &mut self.state {
            State::Closed => Admit::Call,
            State::Open {
                probe_at_ms,
                skipped,
                ..
            } => {
                *skipped = skipped.saturating_add(1);
                Admit::Skip {
                    probe_in: Duration::from_millis(probe_at_ms.saturating_sub(now_ms)),
                }
            }
        }
    }

    /// A call failed to reach the store at `now_ms`: the breaker opens unless it already is
    /// (the link then starts probing).
    pub fn failed(&mut self, now_ms: u64) -> Option<Change> {
        match self.state {
            State::Open { .. } => None,
            State::Closed => {
                let wait = self.backoff.first;
                self.state = State::Open {
                    since_ms: now_ms,
                    probe_at_ms: now_ms.saturating_add(millis(wait)),
                    wait,
                    skipped: 0,
                };
                Some(Change::Opened { probe_in: wait })
            }
        }
    }

    /// A probe at `now_ms` answered (`reached`) or not.
    pub fn probed(&mut self, now_ms: u64, reached: bool) -> AfterProbe {
        let State::Open {
            since_ms,
            wait,
            skipped,
            ..
        } = self.state
        else {
            // Nothing to probe for: a closed breaker stops its prober.
            return AfterProbe::Closed(Change::Closed {
                skipped: 0,
                down: Duration::ZERO,
            });
        };
        if reached {
            self.state = State::Closed;
            return AfterProbe::Closed(Change::Closed {
                skipped,
                down: Duration::from_millis(now_ms.saturating_sub(since_ms)),
            });
        }
        let wait = self.backoff.next(wait);
        self.state = State::Open {
            since_ms,
            probe_at_ms: now_ms.saturating_add(millis(wait)),
            wait,
            skipped,
        };
        AfterProbe::Again { wait }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::clock::{Clock, ManualClock};

    fn breaker() -> Breaker {
        Breaker::new(Backoff {
            first: Duration::from_millis(100),
            cap: Duration::from_millis(700),
        })
    }

    #[test]
    fn a_closed_breaker_lets_every_call_out() {
        let mut b = breaker();
        for now in 0..5 {
            assert_eq!(b.admit(now), Admit::Call);
        }
        assert_eq!(b.state(), State::Closed);
        assert_eq!(b.state().gauge(), 0);
    }

    #[test]
    fn one_failure_opens_it_and_later_calls_are_skipped_and_counted() {
        let clock = ManualClock::new(1_000);
        let mut b = breaker();
        assert_eq!(
            b.failed(clock.now_ms()),
            Some(Change::Opened {
                probe_in: Duration::from_millis(100)
            })
        );
        assert_eq!(b.state().gauge(), 1);
        clock.advance(30);
        assert_eq!(
            b.admit(clock.now_ms()),
            Admit::Skip {
                probe_in: Duration::from_millis(70)
            }
        );
        // A call that was in flight when it opened fails late: no second opening.
        assert_eq!(b.failed(clock.now_ms()), None);
        for _ in 0..9 {
            assert!(matches!(b.admit(clock.now_ms()), Admit::Skip { .. }));
        }
        let State::Open { skipped, .. } = b.state() else {
            panic!("still open: {:?}", b.state());
        };
        assert_eq!(skipped, 10);
    }

    #[test]
    fn failed_probes_double_the_wait_up_to_the_cap() {
        let clock = ManualClock::new(0);
        let mut b = breaker();
        b.failed(clock.now_ms());
        let mut waits = Vec::new();
        for _ in 0..5 {
            clock.advance(100);
            match b.probed(clock.now_ms(), false) {
                AfterProbe::Again { wait } => waits.push(wait.as_millis()),
                closed => panic!("an unanswered probe keeps it open: {closed:?}"),
            }
        }
        assert_eq!(waits, [200, 400, 700, 700, 700]);
        assert_eq!(
            b.admit(clock.now_ms()),
            Admit::Skip {
                probe_in: Duration::from_millis(700)
            }
        );
    }

    #[test]
    fn an_answered_probe_closes_it_and_reports_the_outage() {
        let clock = ManualClock::new(5_000);
        let mut b = breaker();
        b.failed(clock.now_ms());
        for _ in 0..3 {
            b.admit(clock.now_ms());
        }
        clock.advance(100);
        assert!(matches!(
            b.probed(clock.now_ms(), false),
            AfterProbe::Again { .. }
        ));
        b.admit(clock.now_ms());
        clock.advance(200);
        assert_eq!(
            b.probed(clock.now_ms(), true),
            AfterProbe::Closed(Change::Closed {
                skipped: 4,
                down: Duration::from_millis(300)
            })
        );
        assert_eq!(b.admit(clock.now_ms()), Admit::Call);
        // The next outage starts again from the first wait, with a fresh count.
        assert_eq!(
            b.failed(clock.now_ms()),
            Some(Change::Opened {
                probe_in: Duration::from_millis(100)
            })
        );
        assert!(matches!(b.state(), State::Open { skipped: 0, .. }));
    }

    #[test]
    fn a_probe_of_a_closed_breaker_only_stops_the_prober() {
        let mut b = breaker();
        assert!(matches!(b.probed(0, false), AfterProbe::Closed(_)));
        assert_eq!(b.state(), State::Closed);
    }

    #[test]
    fn default_back_off_runs_from_100_ms_to_5_s() {
        let d = Backoff::default();
        let mut wait = d.first;
        let mut waits = vec![wait];
        while wait < d.cap {
            wait = d.next(wait);
            waits.push(wait);
        }
        let ms: Vec<u128> = waits.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [100, 200, 400, 800, 1600, 3200, 5000]);
    }
}
