//! A real `redis-server` for tests: started on a free port with persistence off, ready once it
//! answers PING, killed when dropped. `kill` and `restart` (same port) let tests take Redis
//! away under load and bring it back. `start_cluster` starts a one-node Redis Cluster owning
//! every slot: it answers like a plain server but refuses, as every cluster does, a script or
//! transaction whose keys hash to more than one slot (CROSSSLOT).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long a started server may take to answer PING (it usually needs ~10 ms).
const READY_WITHIN: Duration = Duration::from_secs(10);

pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    /// The node's cluster configuration file, for a cluster node.
    cluster: Option<std::path::PathBuf>,
}

impl RedisServer {
    /// Starts a server on a free port; panics (failing the test) when `redis-server` is not
    /// installed — install it with `apt-get install -y redis-server`.
    pub fn start() -> RedisServer {
        for _ in 0..5 {
            let port = crate::free_port();
            let mut server = RedisServer {
                child: None,
                port,
                cluster: None,
            };
            if server.spawn() {
                return server;
            }
        }
        panic!("redis-server did not start on any free port");
    }

    /// Starts a one-node Redis Cluster that owns all 16384 slots, ready once its state is `ok`.
    pub fn start_cluster() -> RedisServer {
        for _ in 0..5 {
            let port = crate::free_port();
            let nodes = std::env::temp_dir()
                .join(format!("src-test-nodes-{}-{port}.conf", std::process::id()));
            let _ = std::fs::remove_file(&nodes);
            let mut server = RedisServer {
                child: None,
                port,
                cluster: Some(nodes),
            };
            if !server.spawn() {
                continue;
            }
            let added = server.command("CLUSTER ADDSLOTSRANGE 0 16383");
            assert!(
                added.starts_with("+OK"),
                "CLUSTER ADDSLOTSRANGE answered {added}"
            );
            let what = format!("the one-node cluster on {port}");
            crate::process::until(&what, READY_WITHIN, Duration::from_millis(20), || {
                server.command("CLUSTER INFO").contains("cluster_state:ok")
            });
            return server;
        }
        panic!("redis-server did not start a cluster node on any free port");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Stops the server at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        crate::process::stop(&mut self.child);
    }

    /// Starts the server again on the same port (empty: persistence is off).
    pub fn restart(&mut self) {
        self.kill();
        let what = format!("redis-server restarted on port {}", self.port);
        crate::process::until(&what, READY_WITHIN, Duration::from_millis(50), || {
            self.spawn()
        });
    }

    /// Sends one inline command and answers the raw reply (for assertions on keys).
    pub fn command(&self, line: &str) -> String {
        command_on(self.port, line)
    }

    fn spawn(&mut self) -> bool {
        let mut command = Command::new("redis-server");
        command.args([
            "--port",
            &self.port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]);
        if let Some(nodes) = &self.cluster {
            command
                .args(["--cluster-enabled", "yes", "--cluster-config-file"])
                .arg(nodes);
        }
        command.stdout(Stdio::null()).stderr(Stdio::null());
        let port = self.port;
        self.child = crate::process::start_ready(
            &mut command,
            "install it with `apt-get install -y redis-server`",
            READY_WITHIN,
            Duration::from_millis(10),
            |_| ping(port),
        );
        self.child.is_some()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        if let Some(nodes) = &self.cluster {
            let _ = std::fs::remove_file(nodes);
        }
    }
}

/// Sends one inline command to the server on `port` and answers its whole raw (RESP) reply;
/// an empty answer when the server cannot be reached.
pub fn command_on(port: u16, line: &str) -> String {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.write_all(format!("{line}\r\n").as_bytes());
    let mut reply = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while complete(&reply).is_none() {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => reply.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&reply).into_owned()
}

/// The length of the first whole RESP value in `bytes`, if it is all there.
fn complete(bytes: &[u8]) -> Option<usize> {
    let end = bytes.windows(2).position(|w| w == b"\r\n")?;
    let head = std::str::from_utf8(&bytes[1..end]).ok()?;
    let after = end + 2;
    match bytes.first()? {
        b'$' => {
            let len: i64 = head.parse().ok()?;
            if len < 0 {
                return Some(after);
            }
            let total = after + usize::try_from(len).ok()? + 2;
            (bytes.len() >= total).then_some(total)
        }
        b'*' => {
            let count: i64 = head.parse().ok()?;
            let mut at = after;
            for _ in 0..count.max(0) {
                at += complete(&bytes[at..])?;
            }
            Some(at)
        }
        _ => Some(after),
    }
}

pub(crate) fn ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 16];
    matches!(stream.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
}
