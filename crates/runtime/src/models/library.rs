//! Loading the ONNX Runtime shared library, once per process.
//!
//! `ort` is built with `load-dynamic`: nothing is linked, and its own fallback on first use
//! panics when the library is missing. Every path here therefore loads the library explicitly,
//! from `ORT_DYLIB_PATH`, before any other `ort` call, and turns each way that can fail into a
//! [`ModelError::Library`] that names the variable and the script that provides the file.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use super::error::ModelError;

/// The environment variable naming the ONNX Runtime library.
pub const ORT_DYLIB_PATH: &str = "ORT_DYLIB_PATH";

/// How to get the library, for messages.
pub const LIBRARY_HELP: &str = "set `ORT_DYLIB_PATH` to `libonnxruntime.so` (ONNX Runtime 1.31 or \
     later); `scripts/models.sh` downloads it from PyPI and prints the `export` line";

static LOADED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
/// Sessions hold the environment weakly: it must live as long as the process.
static ENVIRONMENT: Mutex<Option<ort::environment::Environment>> = Mutex::new(None);

/// The process's ONNX Runtime environment, loading the library first when needed.
pub fn environment() -> Result<ort::environment::Environment, ModelError> {
    ensure_library()?;
    ENVIRONMENT
        .lock()
        .ok()
        .and_then(|env| env.clone())
        .ok_or_else(|| ModelError::Library("the ONNX Runtime environment is not running".into()))
}

/// Loads the library named by `ORT_DYLIB_PATH` (the first call decides for the process), unless
/// [`load_from`] has already loaded one.
pub fn ensure_library() -> Result<(), ModelError> {
    if ENVIRONMENT.lock().is_ok_and(|env| env.is_some()) {
        return Ok(());
    }
    let outcome = LOADED.get_or_init(|| {
        let path = std::env::var_os(ORT_DYLIB_PATH)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from);
        match path {
            None => Err(format!("`{ORT_DYLIB_PATH}` is not set")),
            Some(path) => load_from(&path).map(|()| path),
        }
    });
    outcome
        .as_ref()
        .map(|_| ())
        .map_err(|why| ModelError::Library(why.clone()))
}

/// Loads the library at `path` and creates the process's ONNX Runtime environment. Once one
/// load has succeeded, later calls succeed without loading again (the library stays).
pub fn load_from(path: &Path) -> Result<(), String> {
    if !path.is_file() {
        return Err(format!(
            "`{ORT_DYLIB_PATH}` names `{}`, which is not a file",
            path.display()
        ));
    }
    let builder = ort::init_from(path)
        .map_err(|e| format!("cannot load ONNX Runtime from `{}`: {e}", path.display()))?;
    let mut environment = ENVIRONMENT
        .lock()
        .map_err(|_| "the ONNX Runtime environment lock is poisoned".to_string())?;
    if environment.is_none() {
        // `ort` errors hold non-`Send` parts: they become strings here.
        let built = builder
            .with_name("src")
            .with_telemetry(false)
            .build()
            .map_err(|e| format!("cannot start ONNX Runtime: {e}"))?;
        *environment = Some(built);
    }
    Ok(())
}
