//! Helpers the command-line tests share: the `src` binary and its start-up (a command read until
//! it says it is ready, a real `src serve` child process with every line it logs held to
//! `src_testkit::log_lines::check` when it stops), policies in temporary directories, the
//! built-in simulator as a backend, `src doctor`'s JSON report, and a tiny upstream that answers
//! every request with one canned response.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    dead_code,
    reason = "test helpers: a failed step fails the test with its message; not every test uses all"
)]

use assert_cmd::cargo::CommandCargoExt;
use serde::Deserialize;
use serde_json::Value;
use src_runtime::sim::{SimConfig, SimHandle};
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Lines, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::{Arc, Mutex};

pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

pub fn src() -> Command {
    Command::cargo_bin("src").expect("the src binary is built")
}

/// What is left of a started command's standard error.
pub type Stderr = Lines<BufReader<ChildStderr>>;

/// What [`start_until`] read.
pub struct Started<T> {
    /// The still running command, for the caller to stop.
    pub child: Child,
    /// What `ready` found; `None` when the command ended first.
    pub found: Option<T>,
    /// Every line read, the one `ready` found its answer in last.
    pub seen: Vec<String>,
    /// The lines not read yet.
    pub rest: Stderr,
}

/// Starts `src ARGS` and reads its standard error until `ready` finds what it waits for in a
/// line.
pub fn start_until<T>(args: &[&OsStr], mut ready: impl FnMut(&str) -> Option<T>) -> Started<T> {
    let mut child = src()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("src starts");
    let mut rest = BufReader::new(child.stderr.take().expect("piped standard error")).lines();
    let mut seen = Vec::new();
    let mut found = None;
    while let Some(Ok(line)) = rest.next() {
        found = ready(&line);
        seen.push(line);
        if found.is_some() {
            break;
        }
    }
    Started {
        child,
        found,
        seen,
        rest,
    }
}

/// `src serve POLICY` on free ports with `extra` arguments, its log read until `ready` finds what
/// it waits for in a line's fields: the child, that, the lines read and the rest of the log.
pub fn serve<T>(
    policy: &Path,
    extra: &[&str],
    ready: impl Fn(&Value) -> Option<T>,
) -> (Child, T, Vec<String>, Stderr) {
    let mut args: Vec<&OsStr> = vec!["serve".as_ref(), policy.as_os_str()];
    args.extend(
        ["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"]
            .iter()
            .chain(extra)
            .map(OsStr::new),
    );
    let Started {
        mut child,
        found,
        seen,
        rest,
    } = start_until(&args, |line| {
        ready(&serde_json::from_str::<Value>(line).ok()?["fields"])
    });
    let Some(found) = found else {
        let _ = child.kill();
        panic!("src serve stopped before serving: {seen:?}");
    };
    (child, found, seen, rest)
}

/// `src serve` on free ports, stopped when dropped; a log line that is not one JSON object with
/// unique keys fails the test then.
pub struct Server {
    child: Child,
    pub addr: SocketAddr,
    /// Every line logged so far.
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    pub fn start(policy: &Path) -> Server {
        Server::start_with(policy, &["--no-watch"])
    }

    /// [`Server::start`] with `extra` arguments instead of `--no-watch`.
    pub fn start_with(policy: &Path, extra: &[&str]) -> Server {
        let (child, addr, seen, lines) = serve(policy, extra, |fields| {
            fields["listen"]
                .as_str()
                .map(|addr| addr.parse().expect("a socket address"))
        });
        let log = Arc::new(Mutex::new(seen));
        // Keep reading the log so the server never blocks on a full pipe.
        let kept = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                kept.lock().expect("the log").push(line);
            }
        });
        Server { child, addr, log }
    }

    /// The lines logged so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().expect("the log").clone()
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            return;
        }
        let bad: Vec<String> = self
            .log()
            .iter()
            .filter_map(|line| src_testkit::log_lines::check(line).err())
            .collect();
        assert!(
            bad.is_empty(),
            "src serve logged bad lines:\n{}",
            bad.join("\n")
        );
    }
}

/// An upstream that answers every request `200` with `content-length: declared` and `body`
/// (a declared length longer than the body cuts the answer off), then closes the connection.
pub fn canned_upstream(body: &'static str, declared: usize) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binds");
    let addr = listener.local_addr().expect("an address");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            // Read the head and the body the content-length announces.
            while let Ok(n) = stream.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&seen).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if seen.len() >= end + 4 + length {
                        break;
                    }
                }
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {declared}\r\nconnection: close\r\n\r\n"
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body.as_bytes());
            let _ = stream.flush();
        }
    });
    addr
}

/// Writes `text` as `name` under `dir`.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("writes");
    path
}

/// What `src manifest --format FORMAT EXTRA POLICY` writes, run from the repository's root
/// (where a relative `policy` is), without a model timeout from the environment.
pub fn manifest_text(policy: &Path, format: &str, extra: &[&str]) -> String {
    let out = src()
        .current_dir(repo("."))
        .env_remove("SRC_MODEL_TIMEOUT_MS")
        .args(["manifest", "--color", "never", "--format", format])
        .args(extra)
        .arg(policy)
        .output()
        .expect("src manifest runs");
    assert!(
        out.status.success(),
        "src manifest failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("YAML is text")
}

/// The documents of a YAML stream.
pub fn documents(yaml: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(yaml)
        .map(|doc| Value::deserialize(doc).expect("a YAML document"))
        .collect()
}

/// A fresh directory holding `text` as `policy.sr`.
pub fn policy_dir(text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    write(dir.path(), "policy.sr", text);
    dir
}

/// Copies the files directly in `from` into `to`, made with its parents if missing.
pub fn copy_files(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("makes the directory");
    for entry in std::fs::read_dir(from).expect("reads the directory") {
        let path = entry.expect("an entry").path();
        let name = path.file_name().expect("a file name");
        std::fs::copy(&path, to.join(name)).expect("copies");
    }
}

/// The built-in simulator serving `ids` without delays, on a runtime kept alive with it.
pub fn simulator(ids: &[&str]) -> (tokio::runtime::Runtime, SimHandle) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let mut cfg = SimConfig::serving(ids.iter().map(|s| s.to_string()));
    cfg.time_scale = 0.0;
    let sim = runtime
        .block_on(SimHandle::spawn(cfg))
        .expect("the simulator starts");
    (runtime, sim)
}

/// `src doctor --format json` on `policy` with a `timeout` for each check: its exit code and
/// its report.
pub fn doctor_report(policy: &Path, timeout: &str) -> (Option<i32>, Value) {
    let out = src()
        .args(["doctor", "--color", "never", "--timeout", timeout])
        .args(["--format", "json"])
        .arg(policy)
        .output()
        .expect("src doctor runs");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), report)
}

/// The store phase's check in a doctor's report.
pub fn store_check(report: &Value) -> &Value {
    report["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["phase"] == "store"))
        .unwrap_or_else(|| panic!("no store check: {report}"))
}
