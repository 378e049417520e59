//! What the commands that take paths find below them: `.sr` files for `src fmt`, policies for
//! `src check` and `src test`. One walk serves both, so a path means the same files to each.
//!
//! A policy is a directory and every `.sr` file directly in it (docs/language.md), or a single
//! `.sr` file named on the command line. Below a directory, every directory that holds `.sr`
//! files is a policy of its own: `src check policies/` checks `policies/production/` and its
//! siblings.

use anyhow::{bail, Context, Result};
use src_compiler::load::io_reason;
use std::path::{Path, PathBuf};

/// The paths a command was given, or the current directory.
pub fn roots(paths: &[PathBuf]) -> Vec<PathBuf> {
    if paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        paths.to_vec()
    }
}

/// Every `.sr` file at or below `path` (a file named directly is taken whatever its name), in
/// name order, skipping hidden directories and `target`.
pub fn sr_files(path: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    collect(path, &mut out)?;
    Ok(out)
}

fn collect(path: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("`{}` does not exist", path.display())
        }
        Err(e) => bail!("cannot read `{}`: {}", path.display(), io_reason(&e)),
    };
    if meta.is_file() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<_> = std::fs::read_dir(path)
        .with_context(|| format!("cannot list `{}`", path.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("cannot list `{}`", path.display()))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let p = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if p.is_dir() {
            if !name.starts_with('.') && name != "target" {
                collect(&p, out)?;
            }
        } else if name.ends_with(".sr") {
            out.push(p);
        }
    }
    Ok(())
}

/// The policies at or below `path`: the file itself when it is one, else each directory at or
/// below it that holds `.sr` files (found by [`sr_files`]), in the order of their first file.
pub fn policies(path: &Path) -> Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for file in sr_files(path)? {
        let dir = file
            .parent()
            .map_or_else(|| path.to_path_buf(), Path::to_path_buf);
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    if dirs.is_empty() {
        bail!(
            "`{}` holds no `.sr` files, in it or below it",
            path.display()
        );
    }
    Ok(dirs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            let path = dir.path().join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        dir
    }

    fn relative(root: &Path, found: Vec<PathBuf>) -> Vec<String> {
        found
            .iter()
            .map(|p| {
                p.strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/")
            })
            .collect()
    }

    #[test]
    fn every_directory_with_sources_below_a_root_is_a_policy() {
        let dir = tree(&[
            "a/main.sr",
            "a/sub/inner.sr",
            "a/tests.sr",
            "a/catalog/models.json",
            "b/nested/one.sr",
            "top.sr",
            ".hidden/x.sr",
            "target/y.sr",
            "empty/readme.md",
        ]);
        let root = dir.path();
        assert_eq!(
            relative(root, policies(root).unwrap()),
            ["a", "a/sub", "b/nested", ""]
        );
        assert_eq!(
            relative(root, sr_files(root).unwrap()),
            [
                "a/main.sr",
                "a/sub/inner.sr",
                "a/tests.sr",
                "b/nested/one.sr",
                "top.sr"
            ]
        );
        assert_eq!(
            relative(root, policies(&root.join("a/main.sr")).unwrap()),
            ["a/main.sr"]
        );
    }

    #[test]
    fn a_root_without_sources_is_an_error() {
        let dir = tree(&["docs/readme.md"]);
        let err = policies(dir.path()).unwrap_err().to_string();
        assert!(err.contains("holds no `.sr` files"), "{err}");
        assert!(policies(&dir.path().join("missing")).is_err());
    }
}
