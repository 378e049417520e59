//! Dynamic micro-batching: one worker thread per loaded model owns its session and runs the
//! texts that concurrent requests queue for it as one batch.
//!
//! The worker takes the first queued text, then everything already queued behind it. It waits
//! for more (up to `wait`, until `max` texts) only when it sees concurrency — more than one text
//! queued now, or the previous batch had more than one — so a lone request on an idle server
//! does not pay the wait, while a busy one fills its batches. Inference runs on this dedicated
//! thread, never on the async runtime. A caller that gave up (timeout) closes its reply channel
//! and its text is dropped before the batch runs.
//!
//! A batch is also bounded by its padded size (rows × longest row, in tokens): on a CPU, a
//! transformer's cost per text falls while a batch is small and rises again once the batch's
//! activations outgrow the caches, so long prompts gain nothing from company (measured in
//! docs/benchmarks.md). Each text is tokenized as it is taken; one that would push the batch
//! over the bound waits for the next batch.
//!
//! A text longer than the model's window is cut into windows ([`super::window`]); its windows
//! travel together — one text, one batch, even past the bounds — and its answer is their rows,
//! packed with the number of windows the whole text has (a detector's windows answer one row:
//! the text's entities, merged across windows).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use tokenizers::Encoding;
use tokio::sync::oneshot;

use super::entities;
use super::error::ModelError;
use super::metrics::{ModelLabel, ModelMetrics};
use super::model::{Model, Role};
use super::window::{self, Cut, Reading};

/// Padded tokens per batch on a CPU unless configured: the cost per text of the shipped
/// MiniLM models is lowest between about 256 and 512 (docs/benchmarks.md).
pub const CPU_BATCH_TOKENS: usize = 512;

/// Batching bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOptions {
    /// Most texts in one batch (at least 1).
    pub max: usize,
    /// Longest time the first text of a batch waits for company.
    pub wait: Duration,
    /// Most padded tokens (rows × longest row) in one batch; a single text is never refused.
    /// `None`: `CPU_BATCH_TOKENS` on a CPU, no bound on CUDA.
    pub max_tokens: Option<usize>,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            max: 32,
            wait: Duration::from_millis(2),
            max_tokens: None,
        }
    }
}

impl BatchOptions {
    /// The padded-token bound for a model running on `device` (`cpu` or `cuda`).
    pub fn token_bound(&self, device: &str) -> usize {
        match (self.max_tokens, device) {
            (Some(n), _) => n.max(1),
            (None, "cpu") => CPU_BATCH_TOKENS,
            (None, _) => usize::MAX,
        }
    }
}

/// A text's answer: its windows' rows, packed ([`window::pack`]).
type Answer = Result<std::sync::Arc<[f32]>, ModelError>;
type Reply = oneshot::Sender<Answer>;

struct Job {
    text: String,
    /// How to cut the text into windows.
    reading: Reading,
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

    /// Queues `text`, to be read in windows as `reading` says; the answer (packed rows, see
    /// [`window::Windows`]) arrives when its batch has run.
    pub fn submit(&self, text: String, reading: Reading) -> oneshot::Receiver<Answer> {
        let (reply, rx) = oneshot::channel();
        if let Err(mpsc::SendError(job)) = self.tx.send(Job {
            text,
            reading,
            reply,
        }) {
            let _ = job.reply.send(Err(ModelError::Inference(
                "the model thread has stopped".into(),
            )));
        }
        rx
    }

    /// Runs `texts` and waits (blocking) for the answers: for loading-time work such as
    /// embedding a policy's examples, off the async runtime. Each text is read in one window
    /// (a `similarity` example is a short phrase; a longer one is truncated).
    pub fn run_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        let pending: Vec<_> = texts
            .iter()
            .map(|t| self.submit(t.clone(), Reading::FIRST))
            .collect();
        pending
            .into_iter()
            .map(|rx| {
                let packed = rx.blocking_recv().unwrap_or_else(|_| {
                    Err(ModelError::Inference("the model thread has stopped".into()))
                })?;
                window::Windows::unpack(&packed)
                    .and_then(|w| w.rows().next().map(<[f32]>::to_vec))
                    .ok_or_else(|| ModelError::Inference("the model answered no row".into()))
            })
            .collect()
    }
}

/// A queued text, cut into windows.
struct Taken {
    job: Job,
    cut: Cut,
}

impl Taken {
    fn rows(&self) -> usize {
        self.cut.encodings.len()
    }

    fn longest(&self) -> usize {
        self.cut
            .encodings
            .iter()
            .map(Encoding::len)
            .max()
            .unwrap_or(0)
    }
}

/// The texts of the batch being formed, its rows (windows) and its padded size.
struct Forming {
    taken: Vec<Taken>,
    rows: usize,
    longest: usize,
}

impl Forming {
    /// Whether `rows` more rows of up to `len` tokens fit: the batch is empty, or its rows stay
    /// in `max` and its padded size in `bound`.
    fn fits(&self, rows: usize, len: usize, max: usize, bound: usize) -> bool {
        let all = self.rows + rows;
        self.taken.is_empty() || (all <= max && all.saturating_mul(self.longest.max(len)) <= bound)
    }

    fn push(&mut self, taken: Taken) {
        self.longest = self.longest.max(taken.longest());
        self.rows += taken.rows();
        self.taken.push(taken);
    }
}

/// Tokenizes a job; a text that cannot be tokenized is answered at once.
fn take(model: &mut Model, job: Job) -> Option<Taken> {
    match model.windows(&job.text, job.reading) {
        Ok(cut) => Some(Taken { job, cut }),
        Err(err) => {
            let _ = job.reply.send(Err(err));
            None
        }
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
    let bound = options.token_bound(model.device);
    let mut last_batch = 0usize;
    // A text that did not fit the previous batch opens the next one.
    let mut held: Option<Taken> = None;
    loop {
        let first = match held.take() {
            Some(taken) => taken,
            None => match rx.recv() {
                Ok(job) => match take(&mut model, job) {
                    Some(taken) => taken,
                    None => continue,
                },
                Err(_) => break,
            },
        };
        let mut batch = Forming {
            taken: Vec::with_capacity(max),
            rows: 0,
            longest: 0,
        };
        batch.push(first);
        let mut add = |job: Job, batch: &mut Forming| -> bool {
            let Some(taken) = take(&mut model, job) else {
                return true;
            };
            if batch.fits(taken.rows(), taken.longest(), max, bound) {
                batch.push(taken);
                true
            } else {
                held = Some(taken);
                false
            }
        };
        let mut open = true;
        while open && batch.rows < max {
            match rx.try_recv() {
                Ok(job) => open = add(job, &mut batch),
                Err(_) => break,
            }
        }
        if open && (batch.taken.len() > 1 || last_batch > 1) && !options.wait.is_zero() {
            let deadline = Instant::now() + options.wait;
            while open && batch.rows < max {
                let left = deadline.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left) {
                    Ok(job) => open = add(job, &mut batch),
                    Err(_) => break,
                }
            }
        }
        let mut taken = batch.taken;
        taken.retain(|t| !t.job.reply.is_closed());
        last_batch = taken.len();
        if taken.is_empty() {
            continue;
        }
        let started = Instant::now();
        let mut jobs: Vec<(Job, usize, usize)> = Vec::with_capacity(taken.len());
        let mut encodings: Vec<Encoding> = Vec::new();
        for t in taken {
            jobs.push((t.job, t.cut.encodings.len(), t.cut.total));
            encodings.extend(t.cut.encodings);
        }
        let answers = model.infer_encoded(&encodings);
        metrics
            .inference
            .get_or_create(&label)
            .observe(started.elapsed().as_secs_f64());
        metrics
            .batch_size
            .get_or_create(&label)
            .observe(encodings.len() as f64);
        match answers {
            Ok(rows) if rows.len() == encodings.len() => {
                let mut rows = rows.into_iter();
                for (job, ran, total) in jobs {
                    let mine: Vec<Vec<f32>> = rows.by_ref().take(ran).collect();
                    let answer = if model.role == Role::Detector {
                        // A detector's windows answer one list of the text's entities.
                        entities::merge_rows(&mine)
                            .map(|merged| window::pack(total, &[merged]))
                            .ok_or_else(|| {
                                ModelError::Inference("a detector answered no entities".into())
                            })
                    } else {
                        Ok(window::pack(total, &mine))
                    };
                    let _ = job.reply.send(answer);
                }
            }
            Ok(rows) => {
                let err = ModelError::Inference(format!(
                    "{} answers for {} windows",
                    rows.len(),
                    encodings.len()
                ));
                jobs.into_iter()
                    .for_each(|(j, ..)| drop(j.reply.send(Err(err.clone()))));
            }
            Err(err) => jobs
                .into_iter()
                .for_each(|(j, ..)| drop(j.reply.send(Err(err.clone())))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forming(rows: usize, longest: usize) -> Forming {
        let job = || Taken {
            job: Job {
                text: String::new(),
                reading: Reading::FIRST,
                reply: oneshot::channel().0,
            },
            cut: Cut {
                encodings: vec![Encoding::default()],
                total: 1,
            },
        };
        Forming {
            taken: (0..rows).map(|_| job()).collect(),
            rows,
            longest,
        }
    }

    #[test]
    fn the_padded_size_bounds_a_batch() {
        // 3 rows of 100 tokens: a 4th of 100 makes 400 padded tokens.
        assert!(forming(3, 100).fits(1, 100, 32, 400));
        assert!(!forming(3, 100).fits(1, 100, 32, 399));
        // A longer text pads every row to its length.
        assert!(!forming(3, 100).fits(1, 101, 32, 400));
        assert!(forming(1, 10).fits(1, 190, 32, 400));
    }

    #[test]
    fn the_row_count_bounds_a_batch() {
        assert!(!forming(4, 1).fits(1, 1, 4, usize::MAX));
        assert!(forming(3, 1).fits(1, 1, 4, usize::MAX));
    }

    #[test]
    fn a_text_s_windows_count_as_rows_and_travel_together() {
        // 2 rows queued: a text of 3 windows makes 5.
        assert!(forming(2, 10).fits(3, 10, 5, usize::MAX));
        assert!(!forming(2, 10).fits(3, 10, 4, usize::MAX));
        assert!(!forming(2, 10).fits(3, 10, 32, 49));
        // Alone, a text's windows run as one batch past both bounds.
        assert!(forming(0, 0).fits(16, 256, 4, 512));
    }

    #[test]
    fn a_lone_text_always_fits() {
        assert!(forming(0, 0).fits(1, 10_000, 1, 1));
    }

    #[test]
    fn the_token_bound_depends_on_the_device_unless_set() {
        let auto = BatchOptions::default();
        assert_eq!(auto.token_bound("cpu"), CPU_BATCH_TOKENS);
        assert_eq!(auto.token_bound("cuda"), usize::MAX);
        let set = BatchOptions {
            max_tokens: Some(2048),
            ..BatchOptions::default()
        };
        assert_eq!(set.token_bound("cpu"), 2048);
        assert_eq!(set.token_bound("cuda"), 2048);
    }
}
