//! What can go wrong loading or running a model, as one `Send + Sync` error type (`ort`'s own
//! errors are not, so every `ort` call site converts to a string immediately).

use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The ONNX Runtime library is missing or unusable.
    #[error("ONNX Runtime is unavailable: {0}")]
    Library(String),
    /// A file of a model directory is missing or unreadable.
    #[error("`{}`: {why}", path.display())]
    File { path: PathBuf, why: String },
    /// The directory's files do not fit what the declaration needs.
    #[error("`{}`: {why}", dir.display())]
    Shape { dir: PathBuf, why: String },
    /// Tokenizing or running a batch failed.
    #[error("inference failed: {0}")]
    Inference(String),
    /// The execution provider asked for is not there.
    #[error("{0}")]
    Device(String),
}
