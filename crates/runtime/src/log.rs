//! Logging: the process's tracing subscriber, and the one structured line written per request.
//!
//! Request lines are built as JSON values rather than tracing fields because the evidence they
//! carry has three states (a number, zero, or "the backend did not say"), and tracing's JSON
//! formatter cannot write `null`. The line uses the same envelope as the tracing JSON formatter
//! (`timestamp`, `level`, `target`, `fields`), so one log pipeline reads both. Lines are handed to
//! a writer thread through a bounded queue: the request path never waits on stderr.

use std::io::Write;
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;

/// Target of the per-request log line.
pub const REQUEST_TARGET: &str = "src::request";

/// Lines queued for the writer thread; beyond this, new lines are dropped with a warning.
const QUEUE: usize = 8192;

/// Default log filter: the router's own events at `info`; the JIT's code listings (which
/// Cranelift logs at `info`) only at `warn`.
pub const DEFAULT_FILTER: &str =
    "info,cranelift_codegen=warn,cranelift_jit=warn,cranelift_frontend=warn";

/// Installs the process-wide tracing subscriber: JSON lines on stderr, filtered by `RUST_LOG`
/// (default [`DEFAULT_FILTER`]). Returns `false` when a subscriber was already installed.
pub fn init_json_logging() -> bool {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_FILTER));
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init()
        .is_ok()
}

/// Everything the router knows about one request when it is done with it.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct RequestRecord {
    pub request_id: String,
    /// `chat` or `responses`, or the path of a non-proxy request.
    pub endpoint: String,
    pub route: Option<String>,
    pub block: Option<String>,
    /// The logical model that answered (or was last tried).
    pub model: Option<String>,
    /// Its served id.
    pub served: Option<String>,
    pub backend: Option<String>,
    pub status: u16,
    /// `upstream`, `cache`, `blocked` or `error`.
    pub path: &'static str,
    pub stream: bool,
    /// Models that failed before the one that answered, with the reason.
    pub fallbacks: Vec<String>,
    /// Whole request, from the first byte read to the last byte written.
    pub latency_ms: f64,
    /// Parsed request to routing decision.
    pub routing_us: f64,
    /// Upstream request sent to its first body byte; `None` without an upstream answer.
    pub ttft_ms: Option<f64>,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// `None` when the backend did not report it: unknown is never zero.
    pub cached_tokens: Option<u64>,
    /// Signals the decision did not need and that were never computed.
    pub skipped_signals: Vec<String>,
    pub policy_generation: u64,
    /// Why the request failed, or how the answer ended early (client gone, upstream cut).
    pub error: Option<String>,
    /// What the session layer did (`x-sr-session`), for session-managed policies.
    pub session: Option<&'static str>,
    /// The `protect` hold that kept the pin, or would have in observe mode.
    pub protection: Option<String>,
    /// What the response cache did (`x-sr-cache`: `hit`, `miss`, `skip`, `bypass`, `error`);
    /// `None` when the policy has no `cache` or the request never reached it.
    pub cache: Option<&'static str>,
    /// The similarity of the nearest cached entry compared (a hit's, or a miss's best).
    pub cache_score: Option<f64>,
}

/// Where request lines go.
#[derive(Clone)]
pub enum RequestLog {
    /// One JSON line per request on stderr.
    Stderr(SyncSender<String>),
    /// Kept in memory (tests read them back).
    Memory(Arc<Mutex<Vec<Value>>>),
    /// Nowhere.
    Off,
}

impl std::fmt::Debug for RequestLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RequestLog::Stderr(_) => "RequestLog::Stderr",
            RequestLog::Memory(_) => "RequestLog::Memory",
            RequestLog::Off => "RequestLog::Off",
        })
    }
}

impl RequestLog {
    /// Starts the writer thread. Falls back to [`RequestLog::Off`] if the thread cannot start,
    /// rather than failing the server for want of logs.
    pub fn stderr() -> RequestLog {
        let (tx, rx) = sync_channel::<String>(QUEUE);
        let spawned = std::thread::Builder::new()
            .name("src-request-log".into())
            .spawn(move || {
                let stderr = std::io::stderr();
                while let Ok(line) = rx.recv() {
                    let mut out = stderr.lock();
                    let _ = out.write_all(line.as_bytes());
                    let _ = out.write_all(b"\n");
                }
            });
        match spawned {
            Ok(_) => RequestLog::Stderr(tx),
            Err(err) => {
                tracing::error!(%err, "cannot start the request log writer; request lines are off");
                RequestLog::Off
            }
        }
    }

    /// An in-memory log and the handle to read it.
    pub fn memory() -> (RequestLog, Arc<Mutex<Vec<Value>>>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        (RequestLog::Memory(Arc::clone(&lines)), lines)
    }

    pub fn write(&self, record: &RequestRecord) {
        match self {
            RequestLog::Off => {}
            RequestLog::Memory(lines) => {
                lines
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(envelope(record));
            }
            RequestLog::Stderr(tx) => {
                let line = envelope(record).to_string();
                if let Err(TrySendError::Full(_)) = tx.try_send(line) {
                    tracing::warn!("request log queue full; a request line was dropped");
                }
            }
        }
    }
}

fn envelope(record: &RequestRecord) -> Value {
    serde_json::json!({
        "timestamp": rfc3339_now(),
        "level": "INFO",
        "target": REQUEST_TARGET,
        "fields": record,
    })
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ` in UTC, without a date library.
pub fn rfc3339_now() -> String {
    rfc3339(SystemTime::now())
}

pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, day) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60,
        d.subsec_micros()
    )
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        // 2024-02-29T12:34:56.5Z, a leap day.
        let t = UNIX_EPOCH + Duration::from_millis(1_709_210_096_500);
        assert_eq!(rfc3339(t), "2024-02-29T12:34:56.500000Z");
        let t = UNIX_EPOCH + Duration::from_secs(4_102_444_799);
        assert_eq!(rfc3339(t), "2099-12-31T23:59:59.000000Z");
    }

    #[test]
    fn unknown_cached_tokens_are_null_not_zero() {
        let (log, lines) = RequestLog::memory();
        log.write(&RequestRecord {
            request_id: "r1".into(),
            cached_tokens: None,
            prompt_tokens: Some(0),
            ..RequestRecord::default()
        });
        let lines = lines.lock().unwrap_or_else(PoisonError::into_inner);
        let fields = &lines[0]["fields"];
        assert!(fields["cached_tokens"].is_null());
        assert_eq!(fields["prompt_tokens"], 0);
        assert_eq!(lines[0]["target"], REQUEST_TARGET);
    }
}
