//! The threads that serve the API's HTTP/1.1 connections and the external processor's: each
//! runs its own single-threaded tokio runtime, takes whole connections from the accept loops,
//! and keeps every task of a request on itself (the client connection, the handler, the pooled
//! backend connection: see [`crate::shard`]; a processor connection's HTTP/2 streams).
//!
//! Why not one work-stealing runtime: there, a request's tasks land on whichever worker is free,
//! and each hand-off between the client's connection, the handler and the backend connection's
//! task that crosses threads costs a wake-up through the kernel (a futex) and the cache lines of
//! the other core. Here a connection is handed over once, when it is accepted, to the shard
//! with the fewest open connections.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use tokio::sync::mpsc;
use tokio::time::{Duration, MissedTickBehavior};

/// How far ahead a shard's timer driver is always due to wake, at most.
///
/// Tokio's timer driver sleeps until its earliest timer, and arming a timer earlier than that
/// wakes the sleeping driver through the kernel (an eventfd write and one more pass through
/// `epoll_wait`). Every request arms one: hyper's header-read timer for the connection's next
/// request, seconds out, armed again after each response, while the earliest timer is often far
/// later (a pool's idle sweep) — so every request paid that wake. A heartbeat at this period keeps
/// a timer this close, so any timer at least this long is later than the driver's next wake and
/// is armed without one; the cost is this many wake-ups of an idle shard (ten a second). The
/// shortest timers a request arms are the shared stores' call bounds (250 ms by default).
const HEARTBEAT: Duration = Duration::from_millis(100);

/// Runs for as long as its shard does; see [`HEARTBEAT`].
async fn heartbeat() {
    let mut tick = tokio::time::interval(HEARTBEAT);
    // A busy shard that misses beats needs no catching up: one pending beat is enough.
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
    }
}

/// One accepted connection, as the shard that serves it is handed it.
pub(super) type Job = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// The running shards. Locked once per accepted connection (never per request); emptied by
/// [`Shards::stop`].
pub(super) struct Shards {
    shards: Mutex<Vec<Shard>>,
}

struct Shard {
    jobs: mpsc::UnboundedSender<Job>,
    /// Connections handed to this shard and not yet closed.
    open: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

/// Decrements a shard's open count when its connection ends, however it ends.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Shards {
    /// Starts `count` shard threads (named `src-shard-N`).
    pub(super) fn start(count: usize) -> std::io::Result<Shards> {
        let mut shards = Vec::with_capacity(count);
        for index in 0..count {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let (jobs, mut queue) = mpsc::unbounded_channel::<Job>();
            let thread = std::thread::Builder::new()
                .name(format!("src-shard-{index}"))
                .spawn(move || {
                    crate::shard::enter(index);
                    runtime.block_on(async move {
                        tokio::spawn(heartbeat());
                        while let Some(job) = queue.recv().await {
                            tokio::spawn(job());
                        }
                    });
                    // Dropping the runtime here cancels what is left on it (idle pooled
                    // backend connections); connections were drained before the queue closed.
                })?;
            shards.push(Shard {
                jobs,
                open: Arc::new(AtomicUsize::new(0)),
                thread: Some(thread),
            });
        }
        Ok(Shards {
            shards: Mutex::new(shards),
        })
    }

    /// Hands `serve` (built on the chosen shard's thread, so that what it registers — the
    /// socket, timers, tasks — belongs to that shard's runtime) to the shard with the fewest
    /// open connections. `false` when no shard is running to take it.
    pub(super) fn dispatch<F, Fut>(&self, serve: F) -> bool
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let shards = self.shards.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(shard) = shards.iter().min_by_key(|s| s.open.load(Ordering::Relaxed)) else {
            return false;
        };
        shard.open.fetch_add(1, Ordering::Relaxed);
        let open = Open(Arc::clone(&shard.open));
        let job: Job = Box::new(move || {
            Box::pin(async move {
                let _open = open;
                serve().await;
            })
        });
        shard.jobs.send(job).is_ok()
    }

    /// Closes every shard's queue and waits for the threads to finish what they run; later
    /// dispatches are refused.
    pub(super) fn stop(&self) {
        let stopped =
            std::mem::take(&mut *self.shards.lock().unwrap_or_else(PoisonError::into_inner));
        let threads: Vec<_> = stopped
            .into_iter()
            .filter_map(|mut s| {
                // The queue closes as its sender goes with the rest of the shard.
                s.thread.take()
            })
            .collect();
        for thread in threads {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_goes_to_the_shard_with_the_fewest_open() {
        let shards = Shards::start(2).unwrap();
        let names = Arc::new(Mutex::new(Vec::new()));
        let (hold, held) = tokio::sync::watch::channel(false);
        for _ in 0..4 {
            let names = Arc::clone(&names);
            let mut held = held.clone();
            assert!(shards.dispatch(move || async move {
                let name = std::thread::current().name().map(str::to_owned);
                names.lock().unwrap().push(name);
                // Stays open until released, so the counts decide the next dispatch.
                let _ = held.wait_for(|go| *go).await;
            }));
        }
        while names.lock().unwrap().len() < 4 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let _ = hold.send(true);
        let mut seen = names.lock().unwrap().clone();
        seen.sort();
        assert_eq!(
            seen,
            [
                Some("src-shard-0".to_owned()),
                Some("src-shard-0".to_owned()),
                Some("src-shard-1".to_owned()),
                Some("src-shard-1".to_owned()),
            ]
        );
        shards.stop();
    }

    #[test]
    fn a_closed_connection_frees_its_place() {
        let shards = Shards::start(2).unwrap();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let done = done_tx.clone();
        assert!(shards.dispatch(move || async move {
            let _ = done.send(());
        }));
        done_rx.recv().unwrap();
        // The first shard's connection has ended: both are empty again, and it is picked again.
        while shards.shards.lock().unwrap()[0]
            .open
            .load(Ordering::Relaxed)
            != 0
        {
            std::thread::yield_now();
        }
        let (name_tx, name_rx) = std::sync::mpsc::channel();
        assert!(shards.dispatch(move || async move {
            let _ = name_tx.send(std::thread::current().name().map(str::to_owned));
        }));
        assert_eq!(name_rx.recv().unwrap().as_deref(), Some("src-shard-0"));
        drop(done_tx);
        shards.stop();
    }
}
