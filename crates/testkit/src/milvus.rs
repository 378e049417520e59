//! A real Milvus for tests: milvus-lite (`python -m milvus_lite server`, from
//! `.cache/venv-milvus`, installed by scripts/setup.sh), which serves Milvus's gRPC API. Started
//! on a free loopback port with its own temporary data directory, ready once the port accepts
//! connections (the gRPC server binds only after its start-up), killed when dropped. `kill` and
//! `restart` (same port, same data directory) take it away under load and bring it back.
//! `forbid_new_collections` makes the server refuse to create a collection, as one whose
//! storage cannot be written would (milvus-lite has no access control to refuse otherwise).

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
    /// The collections directory was made immutable (`chattr +i`), to be undone before the
    /// temporary directory is removed.
    immutable: Option<PathBuf>,
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
            immutable: None,
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

    /// From now on the server cannot create a collection: its collections directory (one
    /// directory per collection) is made read-only, and where permissions do not bind (a test
    /// run as root) immutable with `chattr +i`. Collections made before stay readable. Panics
    /// (failing the test) when neither takes hold here.
    pub fn forbid_new_collections(&mut self) {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = self.data.path().join("collections");
        std::fs::create_dir_all(&dir).expect("the collections directory");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555))
            .expect("a read-only collections directory");
        if writable(&dir) {
            let done = Command::new("chattr").arg("+i").arg(&dir).status();
            assert!(
                matches!(done, Ok(s) if s.success()),
                "{} stays writable (run as root) and `chattr +i` failed: {done:?}",
                dir.display()
            );
            self.immutable = Some(dir.clone());
        }
        assert!(!writable(&dir), "{} is still writable", dir.display());
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

/// Whether a file can be created in `dir`.
fn writable(dir: &std::path::Path) -> bool {
    let probe = dir.join(".probe");
    let made = std::fs::File::create(&probe).is_ok();
    let _ = std::fs::remove_file(&probe);
    made
}

impl Drop for MilvusServer {
    fn drop(&mut self) {
        self.kill();
        // The temporary directory can be removed only once it may be written again.
        if let Some(dir) = self.immutable.take() {
            let _ = Command::new("chattr").arg("-i").arg(&dir).status();
        }
        use std::os::unix::fs::PermissionsExt as _;
        let _ = std::fs::set_permissions(
            self.data.path().join("collections"),
            std::fs::Permissions::from_mode(0o755),
        );
    }
}
