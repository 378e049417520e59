//! Open documents, the policy each one belongs to, and the analysis of a policy.
//!
//! A policy is a directory: a file's analysis takes every `*.sr` sibling on disk, with open
//! buffers standing in for (or adding to) the files on disk, since an editor's unsaved text is
//! what its user is looking at. A document whose URI is not a `file:` URI (an untitled buffer)
//! is a policy on its own, rooted at the server's working directory.
//!
//! Analysing a policy parses and checks it: the checker's diagnostics, names and types (partial
//! when there are errors) are what every feature reads, so the editor never works out again
//! what the compiler already knows.

use crate::position::LineIndex;
use crate::symbols::SymbolIndex;
use crate::uri::{path_to_uri, uri_to_path};
use lsp_types::Uri;
use src_compiler::load::{from_texts, PolicySource};
use src_compiler::{check, CheckOptions, NameTable};
use src_dsl::{Diagnostic, FileId};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// An open document.
#[derive(Debug, Clone)]
pub struct Document {
    pub text: String,
    pub version: i32,
}

/// Which policy a document belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PolicyKey {
    /// The directory of a `file:` document.
    Dir(PathBuf),
    /// A document without a file path, alone.
    Lone(String),
}

/// The open documents.
#[derive(Debug, Default)]
pub struct Workspace {
    docs: HashMap<String, (Uri, Document)>,
}

impl Workspace {
    pub fn open(&mut self, uri: Uri, text: String, version: i32) {
        self.docs
            .insert(uri.as_str().to_string(), (uri, Document { text, version }));
    }

    pub fn close(&mut self, uri: &Uri) {
        self.docs.remove(uri.as_str());
    }

    pub fn get(&self, uri: &Uri) -> Option<&Document> {
        self.docs.get(uri.as_str()).map(|(_, d)| d)
    }

    pub fn get_mut(&mut self, uri: &Uri) -> Option<&mut Document> {
        self.docs.get_mut(uri.as_str()).map(|(_, d)| d)
    }

    /// The policies with at least one open document.
    pub fn policies(&self) -> Vec<PolicyKey> {
        let mut keys: Vec<PolicyKey> = self.docs.values().map(|(u, _)| policy_key(u)).collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// Collects the files of a policy: disk siblings overridden by open buffers, in
    /// lexicographic order of file name (the order `load` uses).
    pub fn gather(&self, key: &PolicyKey) -> Gathered {
        match key {
            PolicyKey::Lone(uri) => {
                let files = self
                    .docs
                    .get(uri)
                    .map(|(u, d)| vec![(u.clone(), PathBuf::from(u.as_str()), d.text.clone())])
                    .unwrap_or_default();
                Gathered {
                    root: PathBuf::from("."),
                    files,
                }
            }
            PolicyKey::Dir(dir) => {
                let mut by_name: BTreeMap<String, (Uri, PathBuf, String)> = BTreeMap::new();
                for path in sr_files(dir) {
                    let (Some(name), Some(uri)) = (file_name(&path), path_to_uri(&path)) else {
                        continue;
                    };
                    if self.docs.contains_key(uri.as_str()) {
                        continue;
                    }
                    // A sibling that cannot be read as text is left out, as if it were absent.
                    if let Ok(text) = std::fs::read_to_string(&path) {
                        by_name.insert(name, (uri, path, text));
                    }
                }
                for (uri, doc) in self.docs.values() {
                    if let Some(path) = uri_to_path(uri) {
                        if path.parent() == Some(dir.as_path()) {
                            if let Some(name) = file_name(&path) {
                                by_name.insert(name, (uri.clone(), path, doc.text.clone()));
                            }
                        }
                    }
                }
                Gathered {
                    root: dir.clone(),
                    files: by_name.into_values().collect(),
                }
            }
        }
    }
}

/// The texts of one policy, before parsing.
#[derive(Debug, Clone)]
pub struct Gathered {
    pub root: PathBuf,
    pub files: Vec<(Uri, PathBuf, String)>,
}

/// The policy a document belongs to.
pub fn policy_key(uri: &Uri) -> PolicyKey {
    match uri_to_path(uri).and_then(|p| p.parent().map(Path::to_path_buf)) {
        Some(dir) => PolicyKey::Dir(dir),
        None => PolicyKey::Lone(uri.as_str().to_string()),
    }
}

fn file_name(path: &Path) -> Option<String> {
    path.file_name().map(|n| n.to_string_lossy().into_owned())
}

fn sr_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "sr") && p.is_file())
        .collect()
}

/// One file of an analysed policy.
#[derive(Debug, Clone)]
pub struct FileInfo {
    pub id: FileId,
    pub uri: Uri,
    pub lines: LineIndex,
    /// Whether the file parsed without errors.
    pub parses: bool,
}

/// A parsed, checked and indexed policy: what every request works from.
#[derive(Debug, Clone)]
pub struct Analysis {
    pub source: PolicySource,
    pub files: Vec<FileInfo>,
    pub symbols: SymbolIndex,
    /// The checker's names and types, as far as they resolved.
    pub names: NameTable,
    /// Every diagnostic of `check` (parse diagnostics included), as `src check` reports them.
    pub diagnostics: Vec<Diagnostic>,
}

impl Analysis {
    pub fn new(gathered: Gathered) -> Self {
        let uris: Vec<Uri> = gathered.files.iter().map(|(u, _, _)| u.clone()).collect();
        let texts = gathered
            .files
            .into_iter()
            .map(|(_, path, text)| (path, text))
            .collect();
        let source = from_texts(gathered.root, texts);
        let files = source
            .sources
            .files()
            .zip(uris)
            .map(|((id, f), uri)| FileInfo {
                id,
                uri,
                lines: LineIndex::new(&f.text),
                parses: !source
                    .diagnostics
                    .iter()
                    .any(|d| d.is_error() && d.primary_span().file == id),
            })
            .collect();
        let outcome = check(source.clone(), &CheckOptions::default());
        let symbols = SymbolIndex::build(&source.files, &outcome.names);
        Analysis {
            source,
            files,
            symbols,
            names: outcome.names,
            diagnostics: outcome.diagnostics,
        }
    }

    /// The file of a URI.
    pub fn file(&self, uri: &Uri) -> Option<&FileInfo> {
        self.files.iter().find(|f| f.uri == *uri)
    }

    /// The file of an id.
    pub fn file_by_id(&self, id: FileId) -> Option<&FileInfo> {
        self.files.iter().find(|f| f.id == id)
    }

    /// The text of a file.
    pub fn text(&self, id: FileId) -> &str {
        self.source
            .sources
            .get(id)
            .map(|f| f.text.as_str())
            .unwrap_or("")
    }

    /// The syntax tree of a file.
    pub fn tree(&self, id: FileId) -> Option<&src_dsl::ast::File> {
        self.source
            .files
            .iter()
            .find(|(f, _)| *f == id)
            .map(|(_, t)| t)
    }

    /// The LSP location of a span.
    pub fn location(&self, span: src_dsl::Span) -> Option<lsp_types::Location> {
        let file = self.file_by_id(span.file)?;
        let text = self.text(span.file);
        Some(lsp_types::Location::new(
            file.uri.clone(),
            file.lines.range(text, span.range()),
        ))
    }
}
