//! Bounds on what one client connection may hold of the server: how long its request head and
//! body may take to arrive, how large its head may be, and how many connections are open at
//! once. They are what keeps a slow or hostile client (slow-loris, a flood of idle sockets, a
//! megabyte of headers) from tying up the listener that every other client shares.
//!
//! Each bound has an environment override, read once at start like the other `SRC_*` knobs.

use std::time::Duration;

/// `SRC_HEADER_READ_TIMEOUT_MS`: a request head must arrive whole within this (10 s).
pub const HEADER_READ_TIMEOUT_ENV: &str = "SRC_HEADER_READ_TIMEOUT_MS";
/// `SRC_BODY_READ_TIMEOUT_MS`: a request body must arrive whole within this (30 s).
pub const BODY_READ_TIMEOUT_ENV: &str = "SRC_BODY_READ_TIMEOUT_MS";
/// `SRC_MAX_CONNECTIONS`: connections served at once per listener (4096).
pub const MAX_CONNECTIONS_ENV: &str = "SRC_MAX_CONNECTIONS";
/// `SRC_MAX_HEADER_BYTES`: the largest request head (64 KiB; hyper needs at least 8 KiB).
pub const MAX_HEADER_BYTES_ENV: &str = "SRC_MAX_HEADER_BYTES";

/// The connection bounds of the API and admin listeners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Time from the connection's first byte (or the previous answer) to a complete request
    /// head; past it the connection is closed without an answer (HTTP/1.1).
    pub header_read_timeout: Duration,
    /// Time to read a whole request body once its head arrived; past it the answer is 408.
    pub body_read_timeout: Duration,
    /// Connections served at once; more wait in the listen backlog until one closes.
    pub max_connections: usize,
    /// Largest request head, request line and headers together; a larger one is refused with
    /// 431 (HTTP/1.1).
    pub max_header_bytes: usize,
}

/// hyper refuses a read buffer smaller than this.
const MIN_HEADER_BYTES: usize = 8192;

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            max_connections: 4096,
            max_header_bytes: 64 << 10,
        }
    }
}

impl ConnectionLimits {
    /// The defaults with the environment's overrides; a value that is not a positive number is
    /// ignored with a warning.
    pub fn from_env() -> ConnectionLimits {
        let read = |name: &str| -> Option<u64> {
            let raw = std::env::var(name).ok()?;
            match raw.trim().parse::<u64>() {
                Ok(n) if n > 0 => Some(n),
                _ => {
                    tracing::warn!(variable = name, value = %raw, "ignored: not a positive number");
                    None
                }
            }
        };
        let mut limits = ConnectionLimits::default();
        if let Some(ms) = read(HEADER_READ_TIMEOUT_ENV) {
            limits.header_read_timeout = Duration::from_millis(ms);
        }
        if let Some(ms) = read(BODY_READ_TIMEOUT_ENV) {
            limits.body_read_timeout = Duration::from_millis(ms);
        }
        if let Some(n) = read(MAX_CONNECTIONS_ENV) {
            limits.max_connections = usize::try_from(n).unwrap_or(usize::MAX);
        }
        if let Some(n) = read(MAX_HEADER_BYTES_ENV) {
            limits.max_header_bytes = usize::try_from(n).unwrap_or(usize::MAX);
        }
        limits
    }

    /// The head limit as hyper takes it (never under its minimum).
    pub fn header_buffer(&self) -> usize {
        self.max_header_bytes.max(MIN_HEADER_BYTES)
    }
}
