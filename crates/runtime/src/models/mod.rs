//! Model-backed signals run for real: ONNX classifiers, guards, detectors and sentence encoders
//! through ONNX Runtime (`ort`, loaded from `ORT_DYLIB_PATH`) and Hugging Face `tokenizers`.
//!
//! [`OnnxModels`] is the server's [`crate::hooks::ModelSignals`]: `prepare` loads every model
//! directory a policy declares (one session per directory, shared by every declaration and
//! reload that names it) and embeds its `similarity` examples once; `compute` answers the texts
//! of one evaluation step from the model memo where it can and queues the rest on each model's
//! micro-batching worker, waiting with a timeout.
//! [`verify`] is the file check `src check` can run when a directory exists.

mod batch;
mod declared;
mod entities;
mod error;
mod library;
mod memo;
mod metrics;
mod model;
mod recall;
mod shared_memo;
mod signals;
mod window;

pub use batch::{BatchOptions, Batcher};
pub use entities::{Entity, Tags};
pub use error::ModelError;
pub use library::{ensure_library, load_from, LIBRARY_HELP, ORT_DYLIB_PATH};
pub use memo::{MemoOptions, DEFAULT_MEMO_BYTES, DEFAULT_SHARED_TTL};
pub use metrics::ModelMetrics;
pub use model::{softmax, verify, Model, Role};
pub use signals::{ModelOptions, OnnxModels};
pub use window::{capacity, overlap, Cut, Reading, Windows, DEFAULT_WINDOWS};
