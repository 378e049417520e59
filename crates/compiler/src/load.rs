//! `load`: a policy directory (or one file) from disk into parsed files and their source map.
//!
//! Loading is the only step that touches the file system for `.sr` text; everything after it
//! works on the [`PolicySource`]. I/O problems that leave nothing to check (a missing path, an
//! unreadable file, a directory without `.sr` files) are a [`LoadError`]; problems inside the
//! text are parse diagnostics carried along in the source, so `check` reports them with the rest.

use src_dsl::{ast, parse, Diagnostic, FileId, SourceMap};
use std::path::{Path, PathBuf};

/// The parsed files of one policy, ready for `check`.
#[derive(Debug, Clone)]
pub struct PolicySource {
    pub sources: SourceMap,
    /// The policy directory (for a single file, its directory): relative paths in the policy
    /// (catalogs, model directories, tokenizers) resolve from here.
    pub root: PathBuf,
    /// Every file in lexicographic order of file name, with its tree.
    pub files: Vec<(FileId, ast::File)>,
    /// Parse diagnostics of every file.
    pub diagnostics: Vec<Diagnostic>,
}

/// Why a file could not be read (or an address bound), in words that do not depend on the
/// operating system (the OS's own message and error number vary between platforms and locales;
/// diagnostics should not).
pub fn io_reason(err: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match err.kind() {
        ErrorKind::NotFound => "no such file".into(),
        ErrorKind::PermissionDenied => "permission denied".into(),
        ErrorKind::IsADirectory => "it is a directory".into(),
        ErrorKind::InvalidData => "it is not UTF-8 text".into(),
        ErrorKind::AddrInUse => "the address is already in use".into(),
        ErrorKind::AddrNotAvailable => "the address is not one of this machine's".into(),
        _ => err.to_string(),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("`{}` does not exist", path.display())]
    NotFound { path: PathBuf },
    /// The cause is worded in the message, so it is not also a `source`: a chain printed whole
    /// (`{:#}`) would say it twice.
    #[error("cannot read `{}`: {}", .path.display(), io_reason(.cause))]
    Unreadable {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("`{}` is not UTF-8 text", path.display())]
    NotUtf8 { path: PathBuf },
    #[error("`{}` contains no `.sr` files", path.display())]
    NoSources { path: PathBuf },
}

impl LoadError {
    /// The file or directory that could not be loaded.
    pub fn path(&self) -> &Path {
        match self {
            LoadError::NotFound { path }
            | LoadError::Unreadable { path, .. }
            | LoadError::NotUtf8 { path }
            | LoadError::NoSources { path } => path,
        }
    }
}

/// Loads a directory (every `*.sr` file directly in it, in lexicographic order of file name) or
/// one `.sr` file.
pub fn load(path: &Path) -> Result<PolicySource, LoadError> {
    let meta = std::fs::metadata(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => LoadError::NotFound {
            path: path.to_path_buf(),
        },
        _ => LoadError::Unreadable {
            path: path.to_path_buf(),
            cause: source,
        },
    })?;
    let (root, paths) = if meta.is_dir() {
        (path.to_path_buf(), sr_files_in(path)?)
    } else {
        let root = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        (root, vec![path.to_path_buf()])
    };
    let mut texts = Vec::with_capacity(paths.len());
    for p in paths {
        let bytes = std::fs::read(&p).map_err(|cause| LoadError::Unreadable {
            path: p.clone(),
            cause,
        })?;
        let text = String::from_utf8(bytes).map_err(|_| LoadError::NotUtf8 { path: p.clone() })?;
        texts.push((p, text));
    }
    Ok(from_texts(root, texts))
}

/// One in-memory file as a policy whose root is the current directory (tests, the language
/// server, benches).
pub fn load_str(name: &str, text: &str) -> PolicySource {
    from_texts(
        PathBuf::from("."),
        vec![(PathBuf::from(name), text.to_string())],
    )
}

/// In-memory files (already in the order they should be read) as a policy rooted at `root`;
/// `load` ends here, and the language server uses it for unsaved buffers.
pub fn from_texts(root: PathBuf, files: Vec<(PathBuf, String)>) -> PolicySource {
    let mut sources = SourceMap::new();
    let mut parsed = Vec::with_capacity(files.len());
    let mut diagnostics = Vec::new();
    for (path, text) in files {
        let id = sources.add(path, text);
        let out = match sources.get(id) {
            Some(file) => parse(&file.text, id),
            None => continue,
        };
        diagnostics.extend(out.diagnostics);
        parsed.push((id, out.file));
    }
    PolicySource {
        sources,
        root,
        files: parsed,
        diagnostics,
    }
}

fn sr_files_in(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let unreadable = |cause| LoadError::Unreadable {
        path: dir.to_path_buf(),
        cause,
    };
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "sr") && path.is_file() {
            paths.push(path);
        }
    }
    if paths.is_empty() {
        return Err(LoadError::NoSources {
            path: dir.to_path_buf(),
        });
    }
    paths.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("src-load-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_directory_loads_its_sr_files_in_name_order() {
        let dir = temp_dir("order");
        std::fs::write(dir.join("b.sr"), "signal b = true\n").unwrap();
        std::fs::write(dir.join("a.sr"), "signal a = true\n").unwrap();
        std::fs::write(dir.join("notes.txt"), "not a policy").unwrap();
        std::fs::create_dir_all(dir.join("sub.sr")).unwrap();
        let source = load(&dir).unwrap();
        let names: Vec<String> = source
            .files
            .iter()
            .map(|(id, _)| {
                let path = &source.sources.get(*id).unwrap().path;
                path.file_name().unwrap().to_string_lossy().into_owned()
            })
            .collect();
        assert_eq!(names, ["a.sr", "b.sr"]);
        assert_eq!(source.root, dir);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_single_file_is_rooted_at_its_directory() {
        let dir = temp_dir("single");
        let file = dir.join("p.sr");
        std::fs::write(&file, "route d { to x }\n").unwrap();
        let source = load(&file).unwrap();
        assert_eq!(source.root, dir);
        assert_eq!(source.files.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn io_problems_are_load_errors() {
        let dir = temp_dir("errors");
        assert!(matches!(
            load(&dir.join("missing")),
            Err(LoadError::NotFound { .. })
        ));
        assert!(matches!(load(&dir), Err(LoadError::NoSources { .. })));
        std::fs::write(dir.join("bad.sr"), [0xff, 0xfe, 0x00]).unwrap();
        assert!(matches!(load(&dir), Err(LoadError::NotUtf8 { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn parse_diagnostics_travel_with_the_source() {
        let source = load_str("x.sr", "route {");
        assert!(source.diagnostics.iter().any(Diagnostic::is_error));
    }
}
