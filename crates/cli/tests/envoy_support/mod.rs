//! Real processes for the Envoy tests: `src serve --extproc`, Envoy 1.40 running a shipped
//! `deploy/envoy/` config (its addresses pointed at the test's ports), a recording upstream,
//! and a small HTTP/1.1 client. Every process is stopped when its handle drops.

#![allow(
    dead_code,
    reason = "each test file uses the part of the support it needs"
)]

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bounds waits for a process to come up; never a measure of speed.
pub const PATIENCE: Duration = Duration::from_secs(30);

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Envoy binary `scripts/setup.sh` installs (or `$ENVOY`).
pub fn envoy_binary() -> PathBuf {
    let path = std::env::var_os("ENVOY")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".cache/venv-envoy/bin/envoy"));
    assert!(
        path.is_file(),
        "Envoy is not installed at {}: run scripts/setup.sh (or set ENVOY)",
        path.display()
    );
    path
}

/// `src serve POLICY --extproc` on free ports.
pub struct Src {
    child: Child,
    pub http: SocketAddr,
    pub extproc: SocketAddr,
}

impl Src {
    pub fn start(policy: &Path, extra: &[&str]) -> Src {
        Src::start_at(policy, "127.0.0.1:0", extra)
    }

    /// As [`Src::start`], with the external processor on `extproc`.
    pub fn start_at(policy: &Path, extproc: &str, extra: &[&str]) -> Src {
        let mut child = Command::cargo_bin("src")
            .expect("the src binary is built")
            .arg("serve")
            .arg(policy)
            .args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
            .args(["--extproc", extproc])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("src serve starts");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let mut seen = Vec::new();
        let (http, extproc) = loop {
            let Some(Ok(line)) = lines.next() else {
                let _ = child.kill();
                panic!("src serve stopped before serving: {seen:?}");
            };
            let fields = serde_json::from_str::<Value>(&line)
                .map(|v| v["fields"].clone())
                .unwrap_or_default();
            if let (Some(http), Some(extproc)) =
                (fields["listen"].as_str(), fields["extproc"].as_str())
            {
                break (
                    http.parse().expect("an address"),
                    extproc.parse().expect("an address"),
                );
            }
            seen.push(line);
        };
        // Keep reading the request log so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Src {
            child,
            http,
            extproc,
        }
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Src {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A shipped config with its addresses pointed at this test's processes; Envoy's own listener
/// and admin interface take free ports.
pub fn config(name: &str, extproc: SocketAddr, backend: SocketAddr) -> String {
    let path = repo().join("deploy/envoy").join(name);
    let text = std::fs::read_to_string(&path).expect("the shipped config reads");
    for port in ["10000", "9901", "8803", "8000"] {
        assert!(
            text.contains(&format!("port_value: {port}")),
            "{} lost its port {port}",
            path.display()
        );
    }
    text.replace("port_value: 10000", "port_value: 0")
        .replace("port_value: 9901", "port_value: 0")
        .replace(
            "port_value: 8803",
            &format!("port_value: {}", extproc.port()),
        )
        .replace(
            "port_value: 8000",
            &format!("port_value: {}", backend.port()),
        )
}

/// Envoy 1.40 with one worker thread.
pub struct Envoy {
    child: Child,
    _dir: tempfile::TempDir,
    pub addr: SocketAddr,
    pub admin: SocketAddr,
}

impl Envoy {
    pub fn start(config: &str) -> Envoy {
        let dir = tempfile::tempdir().expect("a temp dir");
        let cfg = dir.path().join("envoy.yaml");
        std::fs::write(&cfg, config).expect("writes");
        let admin_path = dir.path().join("admin");
        let log = std::fs::File::create(dir.path().join("envoy.log")).expect("a log file");
        let mut child = Command::new(envoy_binary())
            .arg("-c")
            .arg(&cfg)
            // Several Envoys run at once in tests: no shared hot-restart state.
            .args([
                "--concurrency",
                "1",
                "-l",
                "warning",
                "--disable-hot-restart",
            ])
            .arg("--admin-address-path")
            .arg(&admin_path)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("envoy starts");
        let deadline = Instant::now() + PATIENCE;
        let admin: SocketAddr = loop {
            if let Some(addr) = std::fs::read_to_string(&admin_path)
                .ok()
                .and_then(|a| a.trim().parse().ok())
            {
                break addr;
            }
            if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
                let _ = child.kill();
                let log = std::fs::read_to_string(dir.path().join("envoy.log")).unwrap_or_default();
                panic!("Envoy did not start: {log}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let addr = loop {
            let listeners = get(admin, "/listeners?format=json");
            let port = serde_json::from_str::<Value>(&listeners.body_text())
                .ok()
                .and_then(|v| {
                    v["listener_statuses"][0]["local_address"]["socket_address"]["port_value"]
                        .as_u64()
                });
            if let Some(port) = port.filter(|p| *p != 0) {
                break SocketAddr::from(([127, 0, 0, 1], port as u16));
            }
            assert!(Instant::now() < deadline, "Envoy's listener never bound");
            std::thread::sleep(Duration::from_millis(50));
        };
        Envoy {
            child,
            _dir: dir,
            addr,
            admin,
        }
    }

    /// A counter from Envoy's stats (0 when not yet created).
    pub fn stat(&self, name: &str) -> u64 {
        get(self.admin, &format!("/stats?filter=^{name}$"))
            .body_text()
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request as the upstream received it.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_default()
    }
}

/// An OpenAI-style upstream that records every request: a chat completion for a JSON request,
/// an event stream in two chunks for `"stream": true`.
pub struct Recorder {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Received>>>,
}

/// What the recorder streams, byte for byte.
pub const STREAM: [&str; 2] = [
    "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"he\"}}]}\n\n",
    "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"llo\"}}]}\n\ndata: [DONE]\n\n",
];

impl Recorder {
    pub fn start() -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binds");
        let addr = listener.local_addr().expect("an address");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let record = Arc::clone(&record);
                std::thread::spawn(move || serve_connection(stream, &record));
            }
        });
        Recorder { addr, seen }
    }

    pub fn received(&self) -> Vec<Received> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

fn serve_connection(stream: TcpStream, record: &Mutex<Vec<Received>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clones"));
    let mut writer = stream;
    while let Some((path, headers, body)) = read_message(&mut reader, true) {
        let model = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v["model"].as_str().map(String::from))
            .unwrap_or_default();
        let streamed = serde_json::from_slice::<Value>(&body)
            .map(|v| v["stream"] == true)
            .unwrap_or(false);
        if let Ok(mut seen) = record.lock() {
            seen.push(Received {
                path,
                headers,
                body,
            });
        }
        let ok = if streamed {
            let mut out = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                           transfer-encoding: chunked\r\n\r\n"
                .to_string();
            out.push_str(&format!("{:x}\r\n{}\r\n", STREAM[0].len(), STREAM[0]));
            writer.write_all(out.as_bytes()).is_ok() && writer.flush().is_ok() && {
                std::thread::sleep(Duration::from_millis(20));
                let last = format!("{:x}\r\n{}\r\n0\r\n\r\n", STREAM[1].len(), STREAM[1]);
                writer.write_all(last.as_bytes()).is_ok()
            }
        } else {
            let answer = serde_json::json!({
                "object": "chat.completion",
                "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            })
            .to_string();
            let out = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                answer.len()
            );
            writer.write_all(out.as_bytes()).is_ok()
        };
        if !ok {
            return;
        }
    }
}

/// A message's start-line word (request path or status), headers and body.
type Message = (String, Vec<(String, String)>, Vec<u8>);

/// Reads one HTTP/1.1 message: its request path or status, headers and whole body
/// (`content-length` or chunked). `None` at the end of the connection.
fn read_message(reader: &mut impl BufRead, request: bool) -> Option<Message> {
    let mut first = String::new();
    if reader.read_line(&mut first).ok()? == 0 {
        return None;
    }
    let start = first.split(' ').nth(1).unwrap_or_default().to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let mut body = Vec::new();
    if header(&headers, "transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(length) = header(&headers, "content-length").and_then(|v| v.parse().ok()) {
        body = vec![0; length];
        reader.read_exact(&mut body).ok()?;
    } else if !request {
        reader.read_to_end(&mut body).ok()?;
    }
    Some((start, headers, body))
}

pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// A whole answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_default()
    }

    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One request on its own connection.
pub fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Answer {
    send_in_pieces(addr, method, path, headers, &[body], Duration::ZERO)
}

/// One request on its own connection, its body (of `content-length` their total) written in
/// `pieces` with `pause` between them, each in a segment of its own.
pub fn send_in_pieces(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    pieces: &[&[u8]],
    pause: Duration,
) -> Answer {
    let length: usize = pieces.iter().map(|p| p.len()).sum();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-length: {length}\r\nconnection: close\r\n"
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut stream = TcpStream::connect(addr).expect("connects");
    stream
        .set_read_timeout(Some(PATIENCE))
        .expect("a read timeout");
    stream.set_nodelay(true).expect("no delay");
    stream.write_all(head.as_bytes()).expect("sends");
    for (i, piece) in pieces.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(pause);
        }
        stream.write_all(piece).expect("sends the body");
    }
    let mut reader = BufReader::new(stream);
    let (status, headers, body) = read_message(&mut reader, false).expect("an answer");
    Answer {
        status: status.parse().expect("a status"),
        headers,
        body,
    }
}

pub fn get(addr: SocketAddr, path: &str) -> Answer {
    send(addr, "GET", path, &[], b"")
}

pub fn chat(addr: SocketAddr, body: &Value, headers: &[(&str, &str)]) -> Answer {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    send(
        addr,
        "POST",
        "/v1/chat/completions",
        &all,
        body.to_string().as_bytes(),
    )
}
