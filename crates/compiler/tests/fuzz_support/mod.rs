//! Properties of untrusted input and the corpus they are replayed on, shared by the fuzz tests
//! of this crate and the coverage-guided fuzz targets under `fuzz/`.
//!
//! - [`policy`]: any `.sr` text through parse, check and format;
//! - [`request`]: any bytes as a chat or responses body, up to a decision;
//! - [`text`]: any text through folding and phrase matching;
//! - [`corpus`]: the inputs the fuzz targets found and the repository's own `.sr` files.

#![allow(
    dead_code,
    reason = "each test binary uses a different subset of the helpers"
)]

pub mod policy;
pub mod request;
pub mod text;

/// The committed inputs of a fuzz target, and what proptest needs to know about case counts.
pub mod corpus {
    use std::path::{Path, PathBuf};

    /// The repository's root.
    pub fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// Every file under `dir`, recursively, with its bytes, sorted by path.
    pub fn files(dir: &Path, extension: Option<&str>) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        let mut dirs = vec![dir.to_path_buf()];
        while let Some(d) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for path in entries.flatten().map(|e| e.path()) {
                if path.is_dir() {
                    dirs.push(path);
                } else if extension.is_none_or(|x| path.extension().is_some_and(|e| e == x)) {
                    if let Ok(bytes) = std::fs::read(&path) {
                        out.push((path, bytes));
                    }
                }
            }
        }
        out.sort();
        out
    }

    /// The committed corpus of fuzz target `target` (`fuzz/corpus/<target>/`).
    pub fn of_target(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
        files(&root().join("fuzz/corpus").join(target), None)
    }

    /// Cases for a proptest: `ci` unless `PROPTEST_CASES` asks for another number (a long
    /// search by hand).
    pub fn cases(ci: u32) -> u32 {
        std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(ci)
    }
}
