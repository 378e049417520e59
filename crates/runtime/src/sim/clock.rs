//! Sub-millisecond waits for the simulator's pacing.
//!
//! tokio's timer works in whole milliseconds and rounds every deadline up to the next one, so an
//! answer paced on it starts up to a millisecond late, by an amount that depends on when in the
//! millisecond the request arrived. Anything measured against the simulator, such as a proxy's
//! added time to first token, then measures that rounding: a proxy that delays a request by
//! 50 µs can move the answer by a whole millisecond or by nothing. So the paced events wait here
//! instead: one thread keeps the pending deadlines in a heap and sleeps to the earliest on the
//! operating system's timer (tens of microseconds), then wakes the tasks that wait on them.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::OnceLock;
use std::time::Instant;

use tokio::sync::oneshot;

type Request = (Instant, oneshot::Sender<()>);

/// The clock thread's inbox; `None` when the thread could not be started, and then waits fall
/// back to tokio's timer.
static CLOCK: OnceLock<Option<mpsc::Sender<Request>>> = OnceLock::new();

/// Waits until `deadline`, to within the operating system's timer slack.
pub(crate) async fn sleep_until(deadline: tokio::time::Instant) {
    let (done, fired) = oneshot::channel();
    let sent = clock().is_some_and(|inbox| inbox.send((deadline.into_std(), done)).is_ok());
    if !sent || fired.await.is_err() {
        tokio::time::sleep_until(deadline).await;
    }
}

fn clock() -> Option<&'static mpsc::Sender<Request>> {
    CLOCK
        .get_or_init(|| {
            let (inbox, requests) = mpsc::channel();
            std::thread::Builder::new()
                .name("sim-clock".into())
                .spawn(move || run(requests))
                .ok()
                .map(|_| inbox)
        })
        .as_ref()
}

/// One pending wait, earliest first (the heap is a max-heap, so the order is reversed), ties in
/// arrival order.
struct Wait {
    at: Instant,
    seq: u64,
    done: oneshot::Sender<()>,
}

impl PartialEq for Wait {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Wait {}

impl PartialOrd for Wait {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Wait {
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

fn run(requests: mpsc::Receiver<Request>) {
    let mut pending: BinaryHeap<Wait> = BinaryHeap::new();
    let mut seq = 0u64;
    loop {
        let now = Instant::now();
        while pending.peek().is_some_and(|w| w.at <= now) {
            if let Some(due) = pending.pop() {
                // The waiter may be gone (its stream was dropped); nothing to wake then.
                let _ = due.done.send(());
            }
        }
        let next = match pending.peek() {
            Some(w) => requests.recv_timeout(w.at.saturating_duration_since(now)),
            None => requests.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match next {
            Ok((at, done)) => {
                pending.push(Wait { at, seq, done });
                seq += 1;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    #[tokio::test]
    async fn never_wakes_before_the_deadline() {
        for micros in [0u64, 150, 700, 1_300, 2_500] {
            let deadline = tokio::time::Instant::now() + Duration::from_micros(micros);
            sleep_until(deadline).await;
            assert!(tokio::time::Instant::now() >= deadline, "{micros} µs");
        }
    }

    #[tokio::test]
    async fn wakes_waits_in_deadline_order() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let start = tokio::time::Instant::now();
        let waits: Vec<_> = [3u64, 1, 2]
            .into_iter()
            .map(|ms| {
                let order = order.clone();
                tokio::spawn(async move {
                    sleep_until(start + Duration::from_millis(ms)).await;
                    order.lock().map(|mut o| o.push(ms)).ok();
                })
            })
            .collect();
        for wait in waits {
            wait.await.ok();
        }
        assert_eq!(*order.lock().unwrap(), vec![1, 2, 3]);
    }

    #[tokio::test]
    async fn a_dropped_wait_does_not_stop_the_clock() {
        let start = tokio::time::Instant::now();
        let dropped = tokio::spawn(sleep_until(start + Duration::from_millis(1)));
        dropped.abort();
        let deadline = start + Duration::from_millis(2);
        sleep_until(deadline).await;
        assert!(tokio::time::Instant::now() >= deadline);
    }
}
