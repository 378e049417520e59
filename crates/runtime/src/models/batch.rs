//! Dynamic micro-batching: one worker thread per loaded model owns its session and runs the
//! texts that concurrent requests queue for it as one batch.
//!
//! The worker takes the first queued text, then everything already queued behind it. It waits
//! for more (up to `wait`, until `max` texts) only when it sees concurrency — more than one text
//! queued now, or the previous batch had more than one — so a lone request on an idle server
//! does not pay the wait, while a busy one fills its batches. Inference runs on this dedicated
//! thread, never on the async runtime. A caller that gave up (timeout) closes its reply channel
//! and its text is dropped before the batch runs.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::error::ModelError;
use super::metrics::{ModelLabel, ModelMetrics};
use super::model::{Model, Role};

/// Batching bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOptions {
    /// Most texts in one batch (at least 1).
    pub max: usize,
    /// Longest time the first text of a batch waits for company.
    pub wait: Duration,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            max: 32,
            wait: Duration::from_millis(2),
        }
    }
}

type Reply = oneshot::Sender<Result<Vec<f32>, ModelError>>;

struct Job {
    text: String,
    reply: Reply,
}

/// A model behind its worker thread. Dropping the last handle stops the thread.
pub struct Batcher {
    tx: mpsc::Sender<Job>,
    pub role: Role,
    pub labels: Vec<String>,
    pub fingerprint: String,
    pub device: &'static str,
    /// The metric label: the directory's name.
    pub name: String,
}

impl std::fmt::Debug for Batcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher")
            .field("name", &self.name)
            .field("role", &self.role)
            .field("device", &self.device)
            .finish()
    }
}

impl Batcher {
    /// Starts the worker thread for `model`.
    pub fn start(
        model: Model,
        options: BatchOptions,
        metrics: ModelMetrics,
    ) -> Result<Batcher, ModelError> {
        let name = model
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| model.dir.display().to_string());
        let (tx, rx) = mpsc::channel();
        let batcher = Batcher {
            tx,
            role: model.role,
            labels: model.labels.clone(),
            fingerprint: model.fingerprint.clone(),
            device: model.device,
            name: name.clone(),
        };
        let label = ModelLabel {
            model: name.clone(),
        };
        std::thread::Builder::new()
            .name(format!("model-{name}"))
            .spawn(move || work(model, rx, options, metrics, label))
            .map_err(|e| ModelError::Inference(format!("cannot start the model thread: {e}")))?;
        Ok(batcher)
    }

    /// Queues `text`; the answer arrives when its batch has run.
    pub fn submit(&self, text: String) -> oneshot::Receiver<Result<Vec<f32>, ModelError>> {
        let (reply, rx) = oneshot::channel();
        if let Err(mpsc::SendError(job)) = self.tx.send(Job { text, reply }) {
            let _ = job.reply.send(Err(ModelError::Inference(
                "the model thread has stopped".into(),
            )));
        }
        rx
    }

    /// Runs `texts` and waits (blocking) for the answers: for loading-time work such as
    /// embedding a policy's examples, off the async runtime.
    pub fn run_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        let pending: Vec<_> = texts.iter().map(|t| self.submit(t.clone())).collect();
        pending
            .into_iter()
            .map(|rx| {
                rx.blocking_recv().unwrap_or_else(|_| {
                    Err(ModelError::Inference("the model thread has stopped".into()))
                })
            })
            .collect()
    }
}

fn work(
    mut model: Model,
    rx: mpsc::Receiver<Job>,
    options: BatchOptions,
    metrics: ModelMetrics,
    label: ModelLabel,
) {
    let max = options.max.max(1);
    let mut last_batch = 0usize;
    while let Ok(first) = rx.recv() {
        let mut jobs = vec![first];
        while jobs.len() < max {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        if (jobs.len() > 1 || last_batch > 1) && !options.wait.is_zero() {
            let deadline = Instant::now() + options.wait;
            while jobs.len() < max {
                let left = deadline.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left) {
                    Ok(job) => jobs.push(job),
                    Err(_) => break,
                }
            }
        }
        jobs.retain(|j| !j.reply.is_closed());
        last_batch = jobs.len();
        if jobs.is_empty() {
            continue;
        }
        let started = Instant::now();
        let texts: Vec<&str> = jobs.iter().map(|j| j.text.as_str()).collect();
        let answers = model.infer(&texts);
        metrics
            .inference
            .get_or_create(&label)
            .observe(started.elapsed().as_secs_f64());
        metrics
            .batch_size
            .get_or_create(&label)
            .observe(jobs.len() as f64);
        match answers {
            Ok(rows) if rows.len() == jobs.len() => {
                for (job, row) in jobs.into_iter().zip(rows) {
                    let _ = job.reply.send(Ok(row));
                }
            }
            Ok(rows) => {
                let err = ModelError::Inference(format!(
                    "{} answers for {} texts",
                    rows.len(),
                    jobs.len()
                ));
                jobs.into_iter()
                    .for_each(|j| drop(j.reply.send(Err(err.clone()))));
            }
            Err(err) => jobs
                .into_iter()
                .for_each(|j| drop(j.reply.send(Err(err.clone())))),
        }
    }
}
