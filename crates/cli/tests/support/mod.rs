//! Helpers the replay, eval, what-if and differential tests share: a real `src serve` child
//! process (every line it logs held to `src_testkit::log_lines::check` when it stops), and a
//! tiny upstream that answers every request with one canned response.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    dead_code,
    reason = "test helpers: a failed step fails the test with its message; not every test uses all"
)]

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

pub fn src() -> Command {
    Command::cargo_bin("src").expect("the src binary is built")
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
        let mut child = src()
            .arg("serve")
            .arg(policy)
            .args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("src serve starts");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let mut seen = Vec::new();
        let addr = loop {
            let Some(Ok(line)) = lines.next() else {
                let _ = child.kill();
                panic!("src serve stopped before serving: {seen:?}");
            };
            let listen = serde_json::from_str::<Value>(&line)
                .ok()
                .and_then(|v| v["fields"]["listen"].as_str().map(String::from));
            seen.push(line);
            if let Some(addr) = listen {
                break addr.parse().expect("a socket address");
            }
        };
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
