//! Test runs off the server thread.
//!
//! `src.runTests` checks a policy and runs its tests on both engines, which takes a while for a
//! policy with many tests. The server thread hands the run to a small pool of workers and goes
//! on answering hover, completion and the rest; the answer to the command (and its summary) is
//! sent when the run finishes. A run the client cancels, or one still going at `shutdown`, is
//! answered at once and its result dropped. Workers hold nothing of the connection, so `exit`
//! never waits for a run: a worker finishes its current run and stops when the server is gone.

use crate::actions::run_policy_tests;
use crate::workspace::Analysis;
use crossbeam_channel::{Receiver, Sender};
use lsp_server::RequestId;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Runs at once at most: a second run does not queue behind a long one, and the editor keeps
/// the rest of the machine.
const WORKERS: usize = 2;

/// Called on a worker just before each run (tests use it to hold a run in flight).
#[derive(Clone)]
pub struct RunHook(pub Arc<dyn Fn() + Send + Sync>);

impl fmt::Debug for RunHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RunHook")
    }
}

struct Job {
    id: RequestId,
    analysis: Arc<Analysis>,
    only: Option<String>,
    cancelled: Arc<AtomicBool>,
}

/// A run that ended: its request and its answer (`None` when the run panicked).
pub(crate) struct Finished {
    pub id: RequestId,
    pub outcome: Option<Value>,
}

/// The pool and the runs whose requests still wait for an answer.
pub(crate) struct Runs {
    jobs: Sender<Job>,
    done: Receiver<Finished>,
    in_flight: HashMap<RequestId, Arc<AtomicBool>>,
}

impl Runs {
    /// Starts the workers.
    pub fn start(hook: Option<RunHook>) -> std::io::Result<Runs> {
        let (jobs, queue) = crossbeam_channel::unbounded::<Job>();
        let (finished, done) = crossbeam_channel::unbounded();
        for _ in 0..WORKERS {
            let queue = queue.clone();
            let finished = finished.clone();
            let hook = hook.clone();
            std::thread::Builder::new()
                .name("src-lsp-tests".to_string())
                .spawn(move || work(&queue, &finished, hook.as_ref()))?;
        }
        Ok(Runs {
            jobs,
            done,
            in_flight: HashMap::new(),
        })
    }

    /// Queues a run of the policy's tests (all, or the one named) for request `id`; `false` when
    /// no worker is left to take it (they only stop with the server).
    pub fn submit(&mut self, id: RequestId, analysis: Arc<Analysis>, only: Option<String>) -> bool {
        let cancelled = Arc::new(AtomicBool::new(false));
        self.in_flight.insert(id.clone(), cancelled.clone());
        let job = Job {
            id: id.clone(),
            analysis,
            only,
            cancelled,
        };
        if self.jobs.send(job).is_err() {
            self.in_flight.remove(&id);
            return false;
        }
        true
    }

    /// Where finished runs arrive.
    pub fn finished(&self) -> &Receiver<Finished> {
        &self.done
    }

    /// Whether a finished run's request still waits for its answer (then it no longer does).
    pub fn take(&mut self, finished: &Finished) -> bool {
        self.in_flight.remove(&finished.id).is_some()
    }

    /// Forgets a run whose request will be answered otherwise; whether it was in flight.
    pub fn cancel(&mut self, id: &RequestId) -> bool {
        match self.in_flight.remove(id) {
            Some(flag) => {
                flag.store(true, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Forgets every run in flight; their requests.
    pub fn cancel_all(&mut self) -> Vec<RequestId> {
        let ids: Vec<RequestId> = self.in_flight.keys().cloned().collect();
        for id in &ids {
            self.cancel(id);
        }
        ids
    }
}

fn work(queue: &Receiver<Job>, finished: &Sender<Finished>, hook: Option<&RunHook>) {
    for job in queue {
        // A run cancelled while queued is skipped; one cancelled while running still finishes
        // (the tests run as one call) and its result is dropped by the server.
        if job.cancelled.load(Ordering::Relaxed) {
            continue;
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            if let Some(hook) = hook {
                (hook.0)();
            }
            run_policy_tests(&job.analysis, job.only.as_deref())
        }))
        .ok();
        if finished
            .send(Finished {
                id: job.id,
                outcome,
            })
            .is_err()
        {
            return;
        }
    }
}
