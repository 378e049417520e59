//! A real Milvus for tests: milvus-lite (`python -m milvus_lite server`, from
//! `.cache/venv-milvus`, installed by scripts/setup.sh), which serves Milvus's gRPC API. Started
//! on a free loopback port with its own temporary data directory, ready once the port accepts
//! connections (the gRPC server binds only after its start-up), killed when dropped. `kill` and
//! `restart` (same port, same data directory) take it away under load and bring it back.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long a started server may take to listen (Python's start-up: a few seconds).
const READY_WITHIN: Duration = Duration::from_secs(60);

pub struct MilvusServer {
    child: Option<Child>,
    pub port: u16,
    data: tempfile::TempDir,
}

/// The venv's Python, with a clear message when scripts/setup.sh has not run.
fn python() -> PathBuf {
    let python = crate::models::repo().join(".cache/venv-milvus/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/setup.sh (it installs milvus-lite)",
        python.display()
    );
    python
}

impl MilvusServer {
    /// Starts milvus-lite on a free port; panics (failing the test) when it cannot.
    pub fn start() -> MilvusServer {
        let data = tempfile::tempdir().expect("a temporary data directory");
        let mut server = MilvusServer {
            child: None,
            port: 0,
            data,
        };
        for _ in 0..5 {
            server.port = crate::free_port();
            if server.spawn() {
                return server;
            }
        }
        panic!("milvus-lite did not start on any free port");
    }

    /// `http://127.0.0.1:PORT`, as a policy names it.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Stops the server at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        crate::process::stop(&mut self.child);
    }

    /// Starts the server again on the same port with the same data directory.
    pub fn restart(&mut self) {
        self.kill();
        let what = format!("milvus-lite restarted on port {}", self.port);
        crate::process::until(&what, READY_WITHIN, Duration::from_millis(100), || {
            self.spawn()
        });
    }

    fn spawn(&mut self) -> bool {
        let mut command = Command::new(python());
        command
            .args([
                "-m",
                "milvus_lite",
                "server",
                "--host",
                "127.0.0.1",
                "--port",
            ])
            .arg(self.port.to_string())
            .arg("--data-dir")
            .arg(self.data.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let port = self.port;
        self.child = crate::process::start_ready(
            &mut command,
            "run scripts/setup.sh",
            READY_WITHIN,
            Duration::from_millis(50),
            |_| TcpStream::connect(("127.0.0.1", port)).is_ok(),
        );
        self.child.is_some()
    }
}

impl Drop for MilvusServer {
    fn drop(&mut self) {
        self.kill();
    }
}
