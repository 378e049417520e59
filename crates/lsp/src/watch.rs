//! Files the editor does not have open: asking the client to watch them, and which policies a
//! change on disk touches.
//!
//! The diagnostics of an open document depend on files its user may never open: the other
//! `*.sr` files of its directory and the catalogs its backends name. A `git checkout` or another
//! tool can change those behind the editor's back, so when the client can register watchers
//! dynamically the server asks it to watch `**/*.sr` and each catalog of an open policy (and
//! registers again when that set of catalogs changes). `workspace/didChangeWatchedFiles` then
//! names the files that changed; every open policy that reads one of them is analysed again
//! from disk, while open documents keep the text of their buffers.

use crate::uri::{path_to_uri, uri_to_path};
use crate::workspace::{policy_key, Analysis, PolicyKey};
use lsp_server::{Request, RequestId};
use lsp_types::request::{RegisterCapability, Request as _, UnregisterCapability};
use lsp_types::{
    notification::{DidChangeWatchedFiles, Notification as _},
    DidChangeWatchedFilesRegistrationOptions, FileEvent, FileSystemWatcher, GlobPattern, OneOf,
    Registration, RegistrationParams, RelativePattern, Unregistration, UnregistrationParams,
};
use serde_json::Value;
use src_dsl::ast::ItemKind;
use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};

/// The pattern every policy file matches.
pub const POLICY_FILES: &str = "**/*.sr";

/// What the client can do with watchers, and what is registered with it now.
#[derive(Debug, Default)]
pub struct Watching {
    /// The client registers `workspace/didChangeWatchedFiles` watchers on request.
    dynamic: bool,
    /// The client takes patterns relative to a base URI (LSP 3.17).
    relative: bool,
    /// The registration in force: its id and watchers.
    registered: Option<(String, Vec<FileSystemWatcher>)>,
    /// Requests sent so far (ids of requests and registrations).
    sent: u64,
}

impl Watching {
    /// Reads the client's capabilities from its `initialize` parameters.
    pub fn new(initialize_params: &Value) -> Self {
        let watched = initialize_params
            .pointer("/capabilities/workspace/didChangeWatchedFiles")
            .cloned()
            .unwrap_or(Value::Null);
        let flag = |name: &str| watched.get(name).and_then(Value::as_bool) == Some(true);
        Watching {
            dynamic: flag("dynamicRegistration"),
            relative: flag("relativePatternSupport"),
            registered: None,
            sent: 0,
        }
    }

    /// The requests that bring the client's watchers in line with these catalogs: none when
    /// nothing changed or the client cannot register watchers, else the old registration's
    /// removal and the new one.
    pub fn update(&mut self, catalogs: &BTreeSet<PathBuf>) -> Vec<Request> {
        if !self.dynamic {
            return Vec::new();
        }
        let watchers = watchers(catalogs, self.relative);
        if self
            .registered
            .as_ref()
            .is_some_and(|(_, w)| *w == watchers)
        {
            return Vec::new();
        }
        let mut out = Vec::new();
        if let Some((id, _)) = self.registered.take() {
            let params = UnregistrationParams {
                unregisterations: vec![Unregistration {
                    id,
                    method: DidChangeWatchedFiles::METHOD.to_string(),
                }],
            };
            out.push(self.request(UnregisterCapability::METHOD, params));
        }
        self.sent += 1;
        let id = format!("src/watched-files/{}", self.sent);
        let options = DidChangeWatchedFilesRegistrationOptions {
            watchers: watchers.clone(),
        };
        let params = RegistrationParams {
            registrations: vec![Registration {
                id: id.clone(),
                method: DidChangeWatchedFiles::METHOD.to_string(),
                register_options: serde_json::to_value(options).ok(),
            }],
        };
        out.push(self.request(RegisterCapability::METHOD, params));
        self.registered = Some((id, watchers));
        out
    }

    fn request(&mut self, method: &str, params: impl serde::Serialize) -> Request {
        self.sent += 1;
        let id = RequestId::from(format!("src/{}", self.sent));
        Request::new(id, method.to_string(), params)
    }
}

/// The watchers for policy files and these catalogs. A catalog is watched by its exact path
/// where the client takes relative patterns, else by its file name anywhere in the workspace
/// (events for other files of that name match no catalog and change nothing).
pub fn watchers(catalogs: &BTreeSet<PathBuf>, relative: bool) -> Vec<FileSystemWatcher> {
    let mut out = vec![FileSystemWatcher {
        glob_pattern: GlobPattern::String(POLICY_FILES.to_string()),
        kind: None,
    }];
    for path in catalogs {
        let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
            continue;
        };
        let base = path.parent().and_then(path_to_uri);
        let glob_pattern = match base {
            Some(base) if relative => GlobPattern::Relative(RelativePattern {
                base_uri: OneOf::Right(base),
                pattern: name,
            }),
            _ => GlobPattern::String(format!("**/{name}")),
        };
        let watcher = FileSystemWatcher {
            glob_pattern,
            kind: None,
        };
        if !out.contains(&watcher) {
            out.push(watcher);
        }
    }
    out
}

/// The catalog files the backends of a policy name, as absolute paths.
pub fn catalogs(analysis: &Analysis) -> BTreeSet<PathBuf> {
    let root = absolute(&analysis.source.root);
    analysis
        .source
        .files
        .iter()
        .flat_map(|(_, file)| &file.items)
        .filter_map(|item| match &item.kind {
            ItemKind::Backend(b) => b.catalog.as_ref(),
            _ => None,
        })
        .map(|c| normalize(&root.join(&c.value)))
        .collect()
}

/// The open policies that read a file of these events: the policy of the directory of a `.sr`
/// file, and every policy with a backend whose catalog is the file.
pub fn affected(
    events: &[FileEvent],
    open: &[PolicyKey],
    catalogs: &HashMap<PolicyKey, BTreeSet<PathBuf>>,
) -> BTreeSet<PolicyKey> {
    let mut out = BTreeSet::new();
    for event in events {
        let Some(path) = uri_to_path(&event.uri) else {
            continue;
        };
        if path.extension().is_some_and(|e| e == "sr") {
            let key = policy_key(&event.uri);
            if open.contains(&key) {
                out.insert(key);
            }
            continue;
        }
        let path = normalize(&path);
        for key in open {
            if catalogs.get(key).is_some_and(|c| c.contains(&path)) {
                out.insert(key.clone());
            }
        }
    }
    out
}

fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    match std::env::current_dir() {
        Ok(cwd) => cwd.join(path),
        Err(_) => path.to_path_buf(),
    }
}

/// `a/./b/../c` → `a/c`, without asking the file system (a deleted file has no canonical path).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if out.file_name().is_some() {
                    out.pop();
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::Gathered;
    use lsp_types::FileChangeType;
    use serde_json::json;

    fn analysis(root: &str, text: &str) -> Analysis {
        let path = PathBuf::from(root).join("providers.sr");
        let uri = path_to_uri(&path).unwrap();
        Analysis::new(Gathered {
            root: PathBuf::from(root),
            files: vec![(uri, path, text.to_string())],
        })
    }

    #[test]
    fn catalogs_resolve_from_the_policy_directory() {
        let a = analysis(
            "/p/policy",
            "backend a { url = \"http://a\"  catalog = \"a.json\" }\n\
             backend b { url = \"http://b\"  catalog = \"../shared/./b.json\" }\n\
             backend c { url = \"http://c\" }\n",
        );
        let found: Vec<PathBuf> = catalogs(&a).into_iter().collect();
        assert_eq!(
            found,
            [
                PathBuf::from("/p/policy/a.json"),
                PathBuf::from("/p/shared/b.json")
            ]
        );
    }

    #[test]
    fn events_touch_the_policy_of_their_directory_or_of_their_catalog() {
        let policy = PolicyKey::Dir(PathBuf::from("/p/policy"));
        let other = PolicyKey::Dir(PathBuf::from("/p/other"));
        let open = vec![policy.clone(), other.clone()];
        let mut cats = HashMap::new();
        cats.insert(
            other.clone(),
            BTreeSet::from([PathBuf::from("/p/shared/b.json")]),
        );
        let event = |path: &str| {
            FileEvent::new(
                path_to_uri(Path::new(path)).unwrap(),
                FileChangeType::CHANGED,
            )
        };
        let touched = affected(&[event("/p/policy/extra.sr")], &open, &cats);
        assert_eq!(touched, BTreeSet::from([policy.clone()]));
        let touched = affected(&[event("/p/shared/b.json")], &open, &cats);
        assert_eq!(touched, BTreeSet::from([other.clone()]));
        let touched = affected(
            &[event("/p/closed/x.sr"), event("/p/policy/b.json")],
            &open,
            &cats,
        );
        assert!(touched.is_empty(), "{touched:?}");
    }

    #[test]
    fn registration_follows_the_catalogs_and_needs_dynamic_registration() {
        let none = BTreeSet::new();
        let mut plain = Watching::new(&json!({"capabilities": {}}));
        assert!(plain.update(&none).is_empty());

        let mut w = Watching::new(
            &json!({"capabilities": {"workspace": {"didChangeWatchedFiles":
            {"dynamicRegistration": true, "relativePatternSupport": true}}}}),
        );
        let first = w.update(&none);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].method, "client/registerCapability");
        let watchers = &first[0].params["registrations"][0]["registerOptions"]["watchers"];
        assert_eq!(watchers, &json!([{"globPattern": "**/*.sr"}]));
        assert!(
            w.update(&none).is_empty(),
            "unchanged watchers are not sent again"
        );

        let cats = BTreeSet::from([PathBuf::from("/p/cat alog.json")]);
        let again = w.update(&cats);
        let methods: Vec<&str> = again.iter().map(|r| r.method.as_str()).collect();
        assert_eq!(
            methods,
            ["client/unregisterCapability", "client/registerCapability"]
        );
        assert_eq!(
            again[0].params["unregisterations"][0]["id"],
            first[0].params["registrations"][0]["id"]
        );
        let watchers = &again[1].params["registrations"][0]["registerOptions"]["watchers"];
        assert_eq!(
            watchers[1],
            json!({"globPattern": {"baseUri": "file:///p", "pattern": "cat alog.json"}})
        );
        assert_ne!(again[0].id, again[1].id);

        let by_name = watchers_of(&cats, false);
        assert_eq!(by_name[1], json!({"globPattern": "**/cat alog.json"}));
    }

    fn watchers_of(catalogs: &BTreeSet<PathBuf>, relative: bool) -> Vec<Value> {
        watchers(catalogs, relative)
            .into_iter()
            .map(|w| serde_json::to_value(w).unwrap())
            .collect()
    }
}
