//! A test client for the language server over `Connection::memory()`: the server runs on its own
//! thread exactly as `src lsp` runs it, and the test speaks the protocol to it.

#![allow(
    dead_code,
    reason = "each test binary uses a different subset of the helpers"
)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "the client fails the test on an unexpected error, like the tests do"
)]

use lsp_server::{Connection, Message, Notification, Request, RequestId, Response};
use lsp_types::notification::Notification as _;
use lsp_types::request::Request as _;
use lsp_types::{notification as note, request as req, Position, Uri};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::thread::JoinHandle;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

pub struct Client {
    conn: Connection,
    thread: Option<JoinHandle<Result<(), src_lsp::LspError>>>,
    next_id: i32,
    /// Notifications received while waiting for something else.
    pub inbox: Vec<Notification>,
    /// Requests from the server (watcher registrations), in order of arrival.
    pub server_requests: Vec<Request>,
    /// Responses received while waiting for something else.
    pub responses: Vec<Response>,
    pub dir: tempfile::TempDir,
}

/// Text with a `|caret|` marker: the text without it, and the marker's LSP position (UTF-16).
pub fn caret(marked: &str) -> (String, Position) {
    let at = marked.find("|caret|").expect("text has a |caret| marker");
    let text = marked.replacen("|caret|", "", 1);
    (text, utf16_position(marked, at))
}

/// The LSP position of a byte offset, counted independently of the server's code.
pub fn utf16_position(text: &str, offset: usize) -> Position {
    let before = &text[..offset];
    let line = before.matches('\n').count() as u32;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let character = before[line_start..].encode_utf16().count() as u32;
    Position::new(line, character)
}

impl Client {
    /// Writes `files` into a fresh policy directory and starts an initialized server.
    pub fn start(files: &[(&str, &str)]) -> Client {
        Client::start_with(files, json!({}), src_lsp::Config::default())
    }

    /// Like [`Client::start`], declaring these client capabilities and serving with `config`.
    pub fn start_with(
        files: &[(&str, &str)],
        capabilities: Value,
        config: src_lsp::Config,
    ) -> Client {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let (server, client) = Connection::memory();
        let thread = std::thread::spawn(move || src_lsp::serve(server, config));
        let mut c = Client {
            conn: client,
            thread: Some(thread),
            next_id: 0,
            inbox: Vec::new(),
            server_requests: Vec::new(),
            responses: Vec::new(),
            dir,
        };
        let result = c.request_raw(
            req::Initialize::METHOD,
            json!({ "capabilities": capabilities }),
        );
        assert!(
            result.response_result.is_ok(),
            "initialize failed: {result:?}"
        );
        c.notify(note::Initialized::METHOD, json!({}));
        c
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn uri(&self, name: &str) -> Uri {
        uri_of(&self.path(name))
    }

    pub fn notify(&self, method: &str, params: Value) {
        self.conn
            .sender
            .send(Message::Notification(Notification::new(
                method.to_string(),
                params,
            )))
            .unwrap();
    }

    /// Receives messages into the inboxes until `take` finds what it wants there.
    fn wait_for<T>(&mut self, what: &str, mut take: impl FnMut(&mut Self) -> Option<T>) -> T {
        loop {
            if let Some(found) = take(self) {
                return found;
            }
            match self.conn.receiver.recv_timeout(WAIT) {
                Ok(Message::Notification(n)) => self.inbox.push(n),
                Ok(Message::Request(r)) => self.server_requests.push(r),
                Ok(Message::Response(r)) => self.responses.push(r),
                Err(e) => panic!("waiting for {what}: {e}"),
            }
        }
    }

    /// Sends a request without waiting for its response.
    pub fn send_request(&mut self, method: &str, params: Value) -> RequestId {
        self.next_id += 1;
        let id = RequestId::from(self.next_id);
        self.conn
            .sender
            .send(Message::Request(Request::new(
                id.clone(),
                method.to_string(),
                params,
            )))
            .unwrap();
        id
    }

    /// Waits for the response to request `id`.
    pub fn response(&mut self, id: &RequestId) -> Response {
        self.wait_for("the server's answer", |c| {
            let i = c.responses.iter().position(|r| r.id == *id)?;
            Some(c.responses.remove(i))
        })
    }

    /// Sends a request and waits for its response, keeping notifications in the inbox.
    pub fn request_raw(&mut self, method: &str, params: Value) -> Response {
        let id = self.send_request(method, params);
        self.response(&id)
    }

    /// Waits for the next request of `method` from the server and answers it with `null`.
    pub fn server_request(&mut self, method: &str) -> Request {
        let r = self.wait_for(method, |c| {
            let i = c.server_requests.iter().position(|r| r.method == method)?;
            Some(c.server_requests.remove(i))
        });
        let answer = Response::new_ok(r.id.clone(), Value::Null);
        self.conn.sender.send(Message::Response(answer)).unwrap();
        r
    }

    /// A request that must succeed; its result.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let r = self.request_raw(method, params);
        match r.response_result {
            Ok(v) => v,
            Err(e) => panic!("{method} failed: {e:?}"),
        }
    }

    pub fn open(&self, name: &str, text: &str) {
        self.notify(
            note::DidOpenTextDocument::METHOD,
            json!({"textDocument": {"uri": self.uri(name), "languageId": "sr", "version": 1, "text": text}}),
        );
    }

    pub fn change(&self, name: &str, version: i32, text: &str) {
        self.notify(
            note::DidChangeTextDocument::METHOD,
            json!({"textDocument": {"uri": self.uri(name), "version": version},
                   "contentChanges": [{"text": text}]}),
        );
    }

    /// Waits for the next diagnostics published for `name`.
    pub fn diagnostics(&mut self, name: &str) -> Vec<lsp_types::Diagnostic> {
        let uri = json!(self.uri(name));
        let n = self.wait_for(&format!("diagnostics of {name}"), |c| {
            let i = c.inbox.iter().position(|n| {
                n.method == note::PublishDiagnostics::METHOD && n.params["uri"] == uri
            })?;
            Some(c.inbox.remove(i))
        });
        serde_json::from_value(n.params["diagnostics"].clone()).unwrap()
    }

    /// Whether diagnostics for `name` wait in the inbox.
    pub fn has_diagnostics(&self, name: &str) -> bool {
        let uri = json!(self.uri(name));
        self.inbox
            .iter()
            .any(|n| n.method == note::PublishDiagnostics::METHOD && n.params["uri"] == uri)
    }

    /// Tells the server that files changed on disk (`1` created, `2` changed, `3` deleted).
    pub fn files_changed(&self, changes: &[(&str, u32)]) {
        let changes: Vec<Value> = changes
            .iter()
            .map(|(name, kind)| json!({"uri": self.uri(name), "type": kind}))
            .collect();
        self.notify(
            note::DidChangeWatchedFiles::METHOD,
            json!({ "changes": changes }),
        );
    }

    /// A `textDocument` + `position` parameter object.
    pub fn at(&self, name: &str, position: Position) -> Value {
        json!({"textDocument": {"uri": self.uri(name)}, "position": position})
    }

    /// shutdown → exit, and the server thread ends cleanly.
    pub fn shutdown(mut self) {
        let r = self.request_raw(req::Shutdown::METHOD, Value::Null);
        assert!(r.response_result.is_ok());
        self.exit();
    }

    /// exit, and the server thread ends cleanly.
    pub fn exit(mut self) {
        self.notify(note::Exit::METHOD, Value::Null);
        let thread = self.thread.take().unwrap();
        thread.join().unwrap().unwrap();
    }
}

pub fn uri_of(path: &Path) -> Uri {
    src_lsp::uri::path_to_uri(path).unwrap_or_else(|| Uri::from_str("file:///").unwrap())
}
