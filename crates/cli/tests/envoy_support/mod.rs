//! Real processes for the Envoy tests: `src serve --extproc`, Envoy 1.40 running the
//! configuration `src manifest --format envoy` writes for the test's policy (its addresses
//! pointed at the test's ports), a recording upstream, and a small HTTP/1.1 client. Every
//! process is stopped when its handle drops. The `src` binary and its start-up are the shared
//! `support` module's.

#![allow(
    dead_code,
    reason = "each test file uses the part of the support it needs"
)]

use crate::support::{manifest_text, repo, serve};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bounds waits for a process to come up; never a measure of speed.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// The Envoy binary `scripts/setup.sh` installs (or `$ENVOY`).
pub fn envoy_binary() -> PathBuf {
    let path = std::env::var_os("ENVOY")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo(".cache/venv-envoy/bin/envoy"));
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
        let mut args = vec!["--extproc", extproc];
        args.extend_from_slice(extra);
        let (child, (http, extproc), _, lines) = serve(policy, &args, |fields| {
            let (http, extproc) = (fields["listen"].as_str()?, fields["extproc"].as_str()?);
            Some((
                http.parse().expect("an address"),
                extproc.parse().expect("an address"),
            ))
        });
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

    /// Stops the process with SIGSTOP, as a hung router: its sockets stay open and answer
    /// nothing. It continues when the guard drops.
    pub fn freeze(&self) -> Frozen {
        let pid = self.child.id().to_string();
        let status = Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .expect("kill runs");
        assert!(status.success(), "SIGSTOP failed");
        Frozen { pid }
    }
}

/// A stopped `src serve`, sent SIGCONT when dropped (before the process itself is killed).
pub struct Frozen {
    pid: String,
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-CONT", &self.pid]).status();
    }
}

impl Drop for Src {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What `src manifest POLICY --format envoy` writes for this test's `src`: its external
/// processor and HTTP listener, Envoy's own listener and admin interface on free ports.
pub fn generated(policy: &Path, src: &Src, fail_open: bool) -> String {
    let (extproc, router) = (src.extproc.to_string(), src.http.to_string());
    let mut args = vec!["--listen", "127.0.0.1:0"];
    args.extend(["--extproc-address", &extproc, "--router-address", &router]);
    if fail_open {
        args.push("--fail-open");
    }
    let text = manifest_text(policy, "envoy", &args);
    assert!(text.contains("port_value: 9901"), "the admin port moved");
    text.replace("port_value: 9901", "port_value: 0")
}

/// `config` with every backend's cluster sent to `upstream` instead (in plain HTTP): for tests
/// that look at the router's decisions, whatever backends the policy names.
pub fn backends_at(config: &str, upstream: SocketAddr) -> String {
    let mut doc: Value = serde_norway::from_str(config).expect("the configuration reads");
    let clusters = doc["static_resources"]["clusters"]
        .as_array_mut()
        .expect("clusters");
    for cluster in clusters {
        if !cluster["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("backend_"))
        {
            continue;
        }
        if let Some(map) = cluster.as_object_mut() {
            map.remove("transport_socket");
            map.insert("type".into(), "STATIC".into());
        }
        cluster["load_assignment"]["endpoints"] = serde_json::json!([{"lb_endpoints": [{
            "endpoint": {"address": {"socket_address": {
                "address": upstream.ip().to_string(),
                "port_value": upstream.port(),
            }}}
        }]}]);
    }
    serde_norway::to_string(&doc).expect("the configuration writes")
}

/// A duration Envoy's configuration writes as `"1.200s"`, read back.
pub fn envoy_duration(config: &str, key: &str) -> Duration {
    let line = config
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("no `{key}` in the configuration"));
    let seconds: f64 = line
        .trim_matches('"')
        .trim_end_matches('s')
        .parse()
        .expect("a duration");
    Duration::from_secs_f64(seconds)
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

/// Request header that makes the [`Recorder`] drip an event stream: `COUNT,PAUSE_MS`, one
/// event after each pause, then `data: [DONE]`.
pub const DRIP: &str = "x-test-drip";

/// An OpenAI-style upstream that records every request: a chat completion for a JSON request,
/// an event stream in two chunks for `"stream": true`, a slow one for [`DRIP`]. The router's
/// readiness probes get an empty model list and are not recorded.
pub struct Recorder {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Received>>>,
}

/// What the recorder streams, byte for byte.
pub const STREAM: [&str; 2] = [
    "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"he\"}}]}\n\n",
    "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"llo\"}}]}\n\ndata: [DONE]\n\n",
];

/// The usage event the recorder adds before `data: [DONE]` when the request asks for it
/// (`stream_options.include_usage`).
pub const USAGE_EVENT: &str = "data: {\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":31,\"total_tokens\":42}}\n\n";

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
        // The router's readiness probe (`GET /v1/models`) is answered, not recorded.
        if header(&headers, "user-agent") == Some("src-router-probe") {
            let list = r#"{"object":"list","data":[]}"#;
            let out = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{list}",
                list.len()
            );
            if writer.write_all(out.as_bytes()).is_err() {
                return;
            }
            continue;
        }
        let model = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v["model"].as_str().map(String::from))
            .unwrap_or_default();
        let streamed = serde_json::from_slice::<Value>(&body)
            .map(|v| v["stream"] == true)
            .unwrap_or(false);
        let usage_asked = serde_json::from_slice::<Value>(&body)
            .map(|v| v["stream_options"]["include_usage"] == true)
            .unwrap_or(false);
        let drip = header(&headers, DRIP).and_then(|v| {
            let (count, pause) = v.split_once(',')?;
            Some((count.parse::<u32>().ok()?, pause.parse::<u64>().ok()?))
        });
        if let Ok(mut seen) = record.lock() {
            seen.push(Received {
                path,
                headers,
                body,
            });
        }
        let ok = if let Some((count, pause)) = drip {
            drip_events(&mut writer, count, Duration::from_millis(pause))
        } else if streamed {
            let mut out = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                           transfer-encoding: chunked\r\n\r\n"
                .to_string();
            out.push_str(&format!("{:x}\r\n{}\r\n", STREAM[0].len(), STREAM[0]));
            writer.write_all(out.as_bytes()).is_ok() && writer.flush().is_ok() && {
                std::thread::sleep(Duration::from_millis(20));
                let tail = if usage_asked {
                    let (events, done) =
                        STREAM[1].split_at(STREAM[1].len() - "data: [DONE]\n\n".len());
                    format!("{events}{USAGE_EVENT}{done}")
                } else {
                    STREAM[1].to_owned()
                };
                let last = format!("{:x}\r\n{tail}\r\n0\r\n\r\n", tail.len());
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

/// An event stream of `count` events, each after `pause`, then `data: [DONE]`.
fn drip_events(writer: &mut TcpStream, count: u32, pause: Duration) -> bool {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                transfer-encoding: chunked\r\n\r\n";
    if writer.write_all(head.as_bytes()).is_err() {
        return false;
    }
    for i in 0..count {
        std::thread::sleep(pause);
        let event = dripped(i);
        let chunk = format!("{:x}\r\n{event}\r\n", event.len());
        if writer.write_all(chunk.as_bytes()).is_err() || writer.flush().is_err() {
            return false;
        }
    }
    let done = "data: [DONE]\n\n";
    let last = format!("{:x}\r\n{done}\r\n0\r\n\r\n", done.len());
    writer.write_all(last.as_bytes()).is_ok()
}

/// The `i`th event of a [`DRIP`] stream.
pub fn dripped(i: u32) -> String {
    format!("data: {{\"object\":\"chat.completion.chunk\",\"n\":{i}}}\n\n")
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
