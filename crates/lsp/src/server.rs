//! The server loop: one thread, messages in order, diagnostics debounced.
//!
//! Every request is answered from the analysis of its policy (cached until one of the policy's
//! documents changes, or a file it reads changes on disk). Diagnostics are published when a
//! document opens or is saved, when a watched file changes, and a short while after the last
//! change (so typing does not check the policy on every keystroke). Test runs are the one slow
//! request: they go to [`crate::runs`] workers and are answered when they finish, while this
//! thread keeps answering. A handler that panics (a bug; none should) answers that request with
//! an internal error and the server keeps serving: no text a user can type may take the
//! editor's language support down.

use crate::actions::summary;
use crate::diagnostics::{check_policy, Checked};
use crate::requests::{self, Host};
use crate::runs::{Finished, RunHook, Runs};
use crate::watch::{self, Watching};
use crate::workspace::{policy_key, Analysis, PolicyKey, Workspace};
use crate::LspError;
use lsp_server::{
    Connection, ErrorCode, Message, Notification, Request, RequestId, Response, ResponseError,
};
use lsp_types::notification::Notification as _;
use lsp_types::request::{self as req, Request as _};
use lsp_types::{notification as note, NumberOrString, TextDocumentContentChangeEvent, Uri};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the server behaves.
#[derive(Debug, Clone)]
pub struct Config {
    /// Quiet time after the last change before diagnostics are recomputed.
    pub debounce: Duration,
    /// Called on the worker just before each test run; `None` in `src lsp`.
    pub run_hook: Option<RunHook>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            debounce: Duration::from_millis(150),
            run_hook: None,
        }
    }
}

/// Serves one client over a connection until it sends `exit` or hangs up.
pub fn serve(connection: Connection, config: Config) -> Result<(), LspError> {
    let capabilities = serde_json::to_value(crate::capabilities())?;
    let client = connection.initialize(capabilities)?;
    let runs = Runs::start(config.run_hook.clone())?;
    let mut server = Server {
        connection: &connection,
        config,
        workspace: Workspace::default(),
        analyses: HashMap::new(),
        last_good: HashMap::new(),
        checked: HashMap::new(),
        published: HashMap::new(),
        pending: HashMap::new(),
        catalogs: HashMap::new(),
        watching: Watching::new(&client),
        runs,
        shut_down: false,
    };
    server.sync_watchers()?;
    server.run()
}

pub(crate) struct Server<'c> {
    connection: &'c Connection,
    config: Config,
    workspace: Workspace,
    analyses: HashMap<PolicyKey, Arc<Analysis>>,
    /// The latest analysis of each policy in which every file parsed (for completion).
    last_good: HashMap<PolicyKey, Arc<Analysis>>,
    /// The latest check, with the analysis it was made from.
    checked: HashMap<PolicyKey, (Arc<Analysis>, Arc<Checked>)>,
    /// URIs that were last sent non-empty diagnostics, by policy.
    published: HashMap<PolicyKey, HashSet<String>>,
    /// Policies waiting for diagnostics, and when they are due.
    pending: HashMap<PolicyKey, Instant>,
    /// The catalog files of each analysed policy (as of its latest analysis).
    catalogs: HashMap<PolicyKey, BTreeSet<PathBuf>>,
    /// The client's file watchers.
    watching: Watching,
    /// Test runs in flight.
    runs: Runs,
    shut_down: bool,
}

impl Server<'_> {
    fn run(&mut self) -> Result<(), LspError> {
        let incoming = self.connection.receiver.clone();
        let finished = self.runs.finished().clone();
        loop {
            let due = match self.pending.values().min() {
                Some(at) => crossbeam_channel::at(*at),
                None => crossbeam_channel::never(),
            };
            crossbeam_channel::select! {
                recv(incoming) -> message => match message {
                    Ok(Message::Request(req)) => self.on_request(req)?,
                    Ok(Message::Notification(n)) if n.method == note::Exit::METHOD => {
                        return Ok(())
                    }
                    Ok(Message::Notification(n)) => {
                        let method = n.method.clone();
                        match catch_unwind(AssertUnwindSafe(|| self.on_notification(n))) {
                            Ok(result) => result?,
                            Err(_) => {
                                self.log(&format!("internal error while handling `{method}`"))?
                            }
                        }
                    }
                    // Answers to our watcher registrations: nothing to do either way.
                    Ok(Message::Response(_)) => {}
                    Err(_) => return Ok(()),
                },
                recv(finished) -> run => {
                    if let Ok(run) = run {
                        self.on_finished(run)?;
                    }
                }
                recv(due) -> _ => {}
            }
            self.flush_due()?;
            self.sync_watchers()?;
        }
    }

    fn send(&self, message: Message) -> Result<(), LspError> {
        self.connection
            .sender
            .send(message)
            .map_err(|_| LspError::Disconnected)
    }

    fn notify<N: note::Notification>(&self, params: N::Params) -> Result<(), LspError> {
        self.send(Message::Notification(Notification::new(
            N::METHOD.to_string(),
            params,
        )))
    }

    fn log(&self, message: &str) -> Result<(), LspError> {
        self.notify::<note::LogMessage>(lsp_types::LogMessageParams {
            typ: lsp_types::MessageType::ERROR,
            message: message.to_string(),
        })
    }

    pub(crate) fn show(&self, message: &str) -> Result<(), LspError> {
        self.notify::<note::ShowMessage>(lsp_types::ShowMessageParams {
            typ: lsp_types::MessageType::INFO,
            message: message.to_string(),
        })
    }

    fn on_request(&mut self, req: Request) -> Result<(), LspError> {
        let id = req.id.clone();
        let response = if self.shut_down {
            Response::new_err(
                id,
                ErrorCode::InvalidRequest as i32,
                "the server is shutting down".to_string(),
            )
        } else if req.method == req::Shutdown::METHOD {
            // Runs in flight are answered now; their workers' results will find no one waiting.
            for run in self.runs.cancel_all() {
                self.cancelled(run, "the server is shutting down")?;
            }
            self.shut_down = true;
            Response {
                id,
                response_result: Ok(Value::Null),
            }
        } else {
            let method = req.method.clone();
            match catch_unwind(AssertUnwindSafe(|| self.handle(req))) {
                Ok(Ok(Some(value))) => Response {
                    id,
                    response_result: Ok(value),
                },
                // Answered when its run finishes.
                Ok(Ok(None)) => return Ok(()),
                Ok(Err(e)) => Response {
                    id,
                    response_result: Err(e),
                },
                Err(_) => Response::new_err(
                    id,
                    ErrorCode::InternalError as i32,
                    format!("internal error while answering `{method}`"),
                ),
            }
        };
        self.send(Message::Response(response))
    }

    /// The answer to a request, or `None` when it is answered later.
    fn handle(&mut self, req: Request) -> Result<Option<Value>, ResponseError> {
        if req.method == req::ExecuteCommand::METHOD {
            requests::execute_command(self, req).map(|()| None)
        } else {
            requests::dispatch(self, req).map(Some)
        }
    }

    /// Answers a finished test run's request (unless it was answered already) and shows its
    /// summary, since clients show it even when they ignore the command's result.
    fn on_finished(&mut self, run: Finished) -> Result<(), LspError> {
        if !self.runs.take(&run) {
            return Ok(());
        }
        let response_result = match run.outcome {
            Some(result) => {
                self.show(&summary(&result))?;
                Ok(result)
            }
            None => Err(ResponseError {
                code: ErrorCode::InternalError as i32,
                message: "internal error while running the tests".to_string(),
                data: None,
            }),
        };
        self.send(Message::Response(Response {
            id: run.id,
            response_result,
        }))
    }

    fn cancelled(&self, id: RequestId, why: &str) -> Result<(), LspError> {
        self.send(Message::Response(Response::new_err(
            id,
            ErrorCode::RequestCanceled as i32,
            why.to_string(),
        )))
    }

    fn on_notification(&mut self, n: Notification) -> Result<(), LspError> {
        let now = Instant::now();
        match n.method.as_str() {
            note::DidOpenTextDocument::METHOD => {
                if let Ok(p) =
                    serde_json::from_value::<lsp_types::DidOpenTextDocumentParams>(n.params)
                {
                    let key = policy_key(&p.text_document.uri);
                    let doc = p.text_document;
                    self.workspace.open(doc.uri, doc.text, doc.version);
                    self.invalidate(&key);
                    self.pending.insert(key, now);
                }
            }
            note::DidChangeTextDocument::METHOD => {
                if let Ok(p) =
                    serde_json::from_value::<lsp_types::DidChangeTextDocumentParams>(n.params)
                {
                    let uri = p.text_document.uri;
                    if let Some(doc) = self.workspace.get_mut(&uri) {
                        for change in p.content_changes {
                            apply_change(&mut doc.text, change);
                        }
                        doc.version = p.text_document.version;
                    }
                    let key = policy_key(&uri);
                    self.invalidate(&key);
                    self.pending.insert(key, now + self.config.debounce);
                }
            }
            note::DidSaveTextDocument::METHOD => {
                if let Ok(p) =
                    serde_json::from_value::<lsp_types::DidSaveTextDocumentParams>(n.params)
                {
                    let key = policy_key(&p.text_document.uri);
                    self.invalidate(&key);
                    self.pending.insert(key, now);
                }
            }
            note::DidCloseTextDocument::METHOD => {
                if let Ok(p) =
                    serde_json::from_value::<lsp_types::DidCloseTextDocumentParams>(n.params)
                {
                    let key = policy_key(&p.text_document.uri);
                    self.workspace.close(&p.text_document.uri);
                    self.invalidate(&key);
                    self.pending.insert(key, now);
                }
            }
            note::DidChangeWatchedFiles::METHOD => {
                if let Ok(p) =
                    serde_json::from_value::<lsp_types::DidChangeWatchedFilesParams>(n.params)
                {
                    let open = self.workspace.policies();
                    for key in watch::affected(&p.changes, &open, &self.catalogs) {
                        self.invalidate(&key);
                        self.pending.insert(key, now);
                    }
                }
            }
            note::Cancel::METHOD => {
                if let Ok(p) = serde_json::from_value::<lsp_types::CancelParams>(n.params) {
                    let id = match p.id {
                        NumberOrString::Number(n) => RequestId::from(n),
                        NumberOrString::String(s) => RequestId::from(s),
                    };
                    if self.runs.cancel(&id) {
                        self.cancelled(id, "the test run was cancelled")?;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn invalidate(&mut self, key: &PolicyKey) {
        self.analyses.remove(key);
    }

    /// Registers the watchers the open policies need, when they changed.
    fn sync_watchers(&mut self) -> Result<(), LspError> {
        let catalogs: BTreeSet<PathBuf> = self
            .workspace
            .policies()
            .iter()
            .filter_map(|k| self.catalogs.get(k))
            .flatten()
            .cloned()
            .collect();
        for request in self.watching.update(&catalogs) {
            self.send(Message::Request(request))?;
        }
        Ok(())
    }

    fn flush_due(&mut self) -> Result<(), LspError> {
        let now = Instant::now();
        let due: Vec<PolicyKey> = self
            .pending
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            self.pending.remove(&key);
            let published = catch_unwind(AssertUnwindSafe(|| self.publish(&key)));
            match published {
                Ok(result) => result?,
                Err(_) => self.log("internal error while checking the policy")?,
            }
        }
        Ok(())
    }

    /// Checks a policy and publishes its diagnostics file by file, clearing files that had
    /// diagnostics before and have none now (or left the policy).
    fn publish(&mut self, key: &PolicyKey) -> Result<(), LspError> {
        let still_open = self.workspace.policies().contains(key);
        let mut sent = Vec::new();
        if still_open {
            let (_, checked) = self.checked(key);
            sent = checked.per_file.clone();
        }
        let before = self.published.remove(key).unwrap_or_default();
        let mut now_published = HashSet::new();
        let mut seen = HashSet::new();
        for (uri, diagnostics) in sent {
            seen.insert(uri.as_str().to_string());
            if diagnostics.is_empty()
                && !before.contains(uri.as_str())
                && self.workspace.get(&uri).is_none()
            {
                continue;
            }
            if !diagnostics.is_empty() {
                now_published.insert(uri.as_str().to_string());
            }
            let version = self.workspace.get(&uri).map(|d| d.version);
            self.notify::<note::PublishDiagnostics>(lsp_types::PublishDiagnosticsParams {
                uri,
                diagnostics,
                version,
            })?;
        }
        for gone in before.difference(&seen) {
            if let Ok(uri) = gone.parse::<Uri>() {
                self.notify::<note::PublishDiagnostics>(lsp_types::PublishDiagnosticsParams {
                    uri,
                    diagnostics: Vec::new(),
                    version: None,
                })?;
            }
        }
        if !now_published.is_empty() {
            self.published.insert(key.clone(), now_published);
        }
        Ok(())
    }
}

impl Host for Server<'_> {
    /// The current analysis of a policy.
    fn analysis(&mut self, key: &PolicyKey) -> Arc<Analysis> {
        if let Some(a) = self.analyses.get(key) {
            return a.clone();
        }
        let analysis = Arc::new(Analysis::new(self.workspace.gather(key)));
        self.catalogs
            .insert(key.clone(), watch::catalogs(&analysis));
        if analysis.files.iter().all(|f| f.parses) {
            self.last_good.insert(key.clone(), analysis.clone());
        }
        self.analyses.insert(key.clone(), analysis.clone());
        analysis
    }

    /// The check of the current analysis of a policy (reused while nothing changed).
    fn checked(&mut self, key: &PolicyKey) -> (Arc<Analysis>, Arc<Checked>) {
        let analysis = self.analysis(key);
        if let Some((a, c)) = self.checked.get(key) {
            if Arc::ptr_eq(a, &analysis) {
                return (a.clone(), c.clone());
            }
        }
        let checked = Arc::new(check_policy(&analysis));
        self.checked
            .insert(key.clone(), (analysis.clone(), checked.clone()));
        (analysis, checked)
    }

    /// The analyses of every policy with an open document.
    fn all_analyses(&mut self) -> Vec<Arc<Analysis>> {
        self.workspace
            .policies()
            .iter()
            .map(|k| self.analysis(k))
            .collect()
    }

    fn last_good(&self, key: &PolicyKey) -> Option<Arc<Analysis>> {
        self.last_good.get(key).cloned()
    }

    fn submit_run(&mut self, id: RequestId, analysis: Arc<Analysis>, only: Option<String>) -> bool {
        self.runs.submit(id, analysis, only)
    }
}

/// Applies one change to a document's text; ranges are clamped to the text.
fn apply_change(text: &mut String, change: TextDocumentContentChangeEvent) {
    match change.range {
        None => *text = change.text,
        Some(range) => {
            let lines = crate::position::LineIndex::new(text);
            let bytes = lines.byte_range(text, range);
            text.replace_range(bytes, &change.text);
        }
    }
}
