//! Logging: the process's tracing subscriber, and the one structured line written per request.
//!
//! Request lines are built as JSON values rather than tracing fields because the evidence they
//! carry has three states (a number, zero, or "the backend did not say"), and tracing's JSON
//! formatter cannot write `null`. The line uses the same envelope as the tracing JSON formatter
//! (`timestamp`, `level`, `target`, `fields`), so one log pipeline reads both.
//!
//! Lines are appended to a shared buffer that a writer thread empties onto stderr every
//! [`FLUSH_EVERY`], or sooner once [`FLUSH_AT`] bytes are waiting: the request path never waits
//! on stderr, and a busy server makes one write per batch of lines instead of a write (and a
//! thread wake-up) per request. Past [`BUFFER_LIMIT`] bytes new lines are dropped and counted.
//! [`volume`] says which lines are written at all (`--request-log`).

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;

mod line;
pub mod volume;

pub use volume::Volume;

/// Target of the per-request log line.
pub const REQUEST_TARGET: &str = "src::request";

/// Longest time a request line waits in the buffer.
pub const FLUSH_EVERY: Duration = Duration::from_millis(50);
/// Buffered bytes that wake the writer before [`FLUSH_EVERY`].
pub const FLUSH_AT: usize = 64 * 1024;
/// Buffered bytes beyond which new lines are dropped (stderr is not being read).
pub const BUFFER_LIMIT: usize = 8 * 1024 * 1024;

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
    /// The W3C trace id the request's hops share (the client's, or one the router started).
    pub trace_id: Option<String>,
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
    /// `prompt_tokens` or `completion_tokens` is the router's own count (⌈UTF-8 bytes / 4⌉ of
    /// the request's history and of the answer) because the backend reported none and the
    /// client's API promises them (a Messages answer translated from chat completions).
    pub usage_estimated: bool,
    /// Signals the decision did not need and that were never computed.
    pub skipped_signals: Vec<String>,
    pub policy_generation: u64,
    /// Why the request failed, or how the answer ended early (client gone, upstream cut).
    pub error: Option<String>,
    /// What the session layer did (`x-sr-session`), for session-managed policies.
    pub session: Option<&'static str>,
    /// The `protect` hold that kept the pin, or would have in observe mode.
    pub protection: Option<String>,
    /// Why a session call changed models other than by routing (`owner-lost`: the pinned model
    /// failed it and a fallback answered).
    pub switch_reason: Option<&'static str>,
    /// What the response cache did (`x-sr-cache`: `hit`, `miss`, `skip`, `bypass`, `error`);
    /// `None` when the policy has no `cache` or the request never reached it.
    pub cache: Option<&'static str>,
    /// The similarity of the nearest cached entry compared (a hit's, or a miss's best).
    pub cache_score: Option<f64>,
    /// How a `/v1/responses` turn with `previous_response_id` was sent (`x-sr-previous`).
    pub previous: Option<&'static str>,
    /// The budgets the request counted against (`x-sr-budget`: `NAME; used=U; limit=L`, comma
    /// separated), with the one that acted.
    pub budget: Option<String>,
    /// The personal data types a route's `redact` replaced in what was forwarded, each with how
    /// many distinct values (`email=2,phone=1`); never the values.
    pub redacted: Option<String>,
    /// Who sent it, as the console shows it: filled only while a console page watches the
    /// live stream, and never written to the log.
    #[serde(skip)]
    pub watched: Option<Who>,
}

/// Who sent a request, as the console shows it (worked out by the `watch` module).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Who {
    pub tenant: String,
    pub session: Option<String>,
    /// Characters of the text `prompt` reads.
    pub prompt_chars: usize,
    /// That text, cut to the length a live line carries, when prompt display is on.
    pub prompt: Option<String>,
}

/// Lines waiting for the writer thread.
#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    /// Lines dropped because the buffer was full, not yet reported.
    dropped: u64,
    /// Set by [`RequestLog::flush`]: write now, whatever the size.
    flush_asked: bool,
    /// A batch is being written (it left `bytes` already).
    writing: bool,
    /// Batches written so far.
    written: u64,
}

/// The buffer shared by the request path and the writer thread.
#[derive(Default)]
pub struct LineBuffer {
    pending: Mutex<Pending>,
    /// Wakes the writer (enough bytes, or a flush asked).
    ready: Condvar,
    /// Wakes `flush` callers when a batch has been written.
    written: Condvar,
}

impl LineBuffer {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, line: &[u8]) {
        let mut pending = self.lock();
        if pending.bytes.len() + line.len() > BUFFER_LIMIT {
            pending.dropped += 1;
            return;
        }
        let before = pending.bytes.len();
        pending.bytes.extend_from_slice(line);
        if before < FLUSH_AT && pending.bytes.len() >= FLUSH_AT {
            self.ready.notify_one();
        }
    }

    /// The writer thread: waits for bytes, takes them all, writes them in one call. Ends when
    /// every [`RequestLog`] handle is gone and nothing is left to write.
    fn run(self: Arc<Self>, out: &mut dyn Write) {
        let mut spare = Vec::new();
        loop {
            let (bytes, dropped) = {
                let mut pending = self.lock();
                if pending.bytes.len() < FLUSH_AT && !pending.flush_asked {
                    pending = self
                        .ready
                        .wait_timeout(pending, FLUSH_EVERY)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
                if pending.bytes.is_empty() && Arc::strong_count(&self) == 1 {
                    return;
                }
                pending.flush_asked = false;
                pending.writing = true;
                let dropped = std::mem::take(&mut pending.dropped);
                (std::mem::replace(&mut pending.bytes, spare), dropped)
            };
            if !bytes.is_empty() {
                let _ = out.write_all(&bytes);
                let _ = out.flush();
            }
            if dropped > 0 {
                tracing::warn!(
                    dropped,
                    "request log buffer full; request lines were dropped"
                );
            }
            spare = bytes;
            spare.clear();
            let mut pending = self.lock();
            pending.writing = false;
            pending.written += 1;
            self.written.notify_all();
        }
    }

    /// Waits until every line pushed before the call has been written, at most `limit` (a
    /// stuck stderr must not hang shutdown).
    fn flush(&self, limit: Duration) {
        let deadline = std::time::Instant::now() + limit;
        let mut pending = self.lock();
        // A batch being written may have left before our lines arrived: wait for the next.
        let target = pending.written + if pending.writing { 2 } else { 1 };
        pending.flush_asked = true;
        self.ready.notify_one();
        while pending.written < target {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return;
            }
            pending = self
                .written
                .wait_timeout(pending, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// Where request lines go.
#[derive(Clone)]
pub enum RequestLog {
    /// One JSON line per request on stderr, written by a thread in batches.
    Stderr(Arc<LineBuffer>),
    /// Kept in memory (tests read them back).
    Memory(Arc<Mutex<Vec<Value>>>),
    /// Nowhere.
    Off,
    /// The lines [`Volume`] keeps, written to another log.
    Filtered(Arc<Filtered>),
}

/// A log that writes only the lines its volume keeps.
pub struct Filtered {
    volume: Volume,
    inner: RequestLog,
    /// Requests ended so far, for sampling.
    ended: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for RequestLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RequestLog::Stderr(_) => "RequestLog::Stderr",
            RequestLog::Memory(_) => "RequestLog::Memory",
            RequestLog::Off => "RequestLog::Off",
            RequestLog::Filtered(_) => "RequestLog::Filtered",
        })
    }
}

impl RequestLog {
    /// Starts the writer thread. Falls back to [`RequestLog::Off`] if the thread cannot start,
    /// rather than failing the server for want of logs.
    pub fn stderr() -> RequestLog {
        RequestLog::writer(|| Box::new(std::io::stderr()))
    }

    /// Request lines written by a thread to the writer `open` makes.
    pub fn writer(open: impl FnOnce() -> Box<dyn Write + Send> + Send + 'static) -> RequestLog {
        let buffer = Arc::new(LineBuffer::default());
        let shared = Arc::clone(&buffer);
        let spawned = std::thread::Builder::new()
            .name("src-request-log".into())
            .spawn(move || shared.run(&mut *open()));
        match spawned {
            Ok(_) => RequestLog::Stderr(buffer),
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

    /// This log, writing only the lines `volume` keeps.
    pub fn with_volume(self, volume: Volume) -> RequestLog {
        match volume {
            Volume::All => self,
            Volume::Off => RequestLog::Off,
            _ => RequestLog::Filtered(Arc::new(Filtered {
                volume,
                inner: self,
                ended: std::sync::atomic::AtomicU64::new(0),
            })),
        }
    }

    pub fn write(&self, record: &RequestRecord) {
        match self {
            RequestLog::Off => {}
            RequestLog::Filtered(filtered) => {
                let nth = filtered
                    .ended
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if filtered.volume.keeps(record, nth) {
                    filtered.inner.write(record);
                }
            }
            RequestLog::Memory(lines) => {
                lines
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(envelope(record));
            }
            RequestLog::Stderr(buffer) => {
                let mut bytes = Vec::with_capacity(768);
                let timestamp = rfc3339_now();
                if line::write(&mut bytes, &timestamp, "INFO", REQUEST_TARGET, record).is_ok() {
                    bytes.push(b'\n');
                    buffer.push(&bytes);
                }
            }
        }
    }

    /// Waits (at most two seconds) until every line written so far is out: called at
    /// shutdown so the last requests are not lost with the process.
    pub fn flush(&self) {
        match self {
            RequestLog::Stderr(buffer) => buffer.flush(Duration::from_secs(2)),
            RequestLog::Filtered(filtered) => filtered.inner.flush(),
            RequestLog::Memory(_) | RequestLog::Off => {}
        }
    }
}

/// The line's envelope, shared with the tracing JSON formatter.
#[derive(Serialize)]
struct Envelope<'a> {
    timestamp: String,
    level: &'static str,
    target: &'static str,
    fields: &'a RequestRecord,
}

impl<'a> Envelope<'a> {
    fn new(fields: &'a RequestRecord) -> Envelope<'a> {
        Envelope {
            timestamp: rfc3339_now(),
            level: "INFO",
            target: REQUEST_TARGET,
            fields,
        }
    }
}

fn envelope(record: &RequestRecord) -> Value {
    serde_json::to_value(Envelope::new(record)).unwrap_or(Value::Null)
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
    // Every request line carries one: digits are placed, not `format!`ted (which cost about
    // 3,000 instructions a line, a fifth of writing it).
    let mut out = *b"0000-00-00T00:00:00.000000Z";
    let mut place = |at: usize, width: usize, value: u64| {
        let mut value = value;
        for slot in out[at..at + width].iter_mut().rev() {
            *slot = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    place(0, 4, u64::try_from(y.clamp(0, 9999)).unwrap_or(0));
    place(5, 2, u64::from(m));
    place(8, 2, u64::from(day));
    place(11, 2, rem / 3600);
    place(14, 2, (rem / 60) % 60);
    place(17, 2, rem % 60);
    place(20, 6, u64::from(d.subsec_micros()));
    // Only ASCII digits and separators were written.
    String::from_utf8_lossy(&out).into_owned()
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
    use src_testkit::log_lines::Written;
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
    fn placed_digits_agree_with_formatted_ones() {
        let formatted = |t: SystemTime| {
            let d = t.duration_since(UNIX_EPOCH).unwrap();
            let (secs, rem) = (d.as_secs(), d.as_secs() % 86_400);
            let (y, m, day) = civil_from_days((secs / 86_400) as i64);
            format!(
                "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
                rem / 3600,
                (rem / 60) % 60,
                rem % 60,
                d.subsec_micros()
            )
        };
        let mut micros: u64 = 1;
        for _ in 0..2_000 {
            // Spread over 1970..2100 by a multiplicative walk.
            micros = micros
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1)
                % 4_102_444_800_000_000;
            let t = UNIX_EPOCH + Duration::from_micros(micros);
            assert_eq!(rfc3339(t), formatted(t));
        }
    }

    fn written_lines(out: &Written) -> Vec<Value> {
        String::from_utf8(out.bytes())
            .expect("utf-8")
            .lines()
            .map(|l| serde_json::from_str(l).expect("each line is one JSON object"))
            .collect()
    }

    #[test]
    fn flush_writes_every_line_pushed_before_it() {
        let out = Written::default();
        let sink = out.clone();
        let log = RequestLog::writer(move || Box::new(sink));
        for i in 0..500 {
            log.write(&RequestRecord {
                request_id: format!("r{i}"),
                ..RequestRecord::default()
            });
            if i == 250 {
                log.flush();
            }
        }
        log.flush();
        let lines = written_lines(&out);
        assert_eq!(lines.len(), 500);
        assert_eq!(lines[0]["fields"]["request_id"], "r0");
        assert_eq!(lines[499]["fields"]["request_id"], "r499");
        assert_eq!(lines[7]["target"], REQUEST_TARGET);
        assert!(lines[7]["fields"]["cached_tokens"].is_null());
    }

    #[test]
    fn lines_reach_the_writer_without_a_flush() {
        let out = Written::default();
        let sink = out.clone();
        let log = RequestLog::writer(move || Box::new(sink));
        log.write(&RequestRecord::default());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while written_lines(&out).is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(written_lines(&out).len(), 1);
    }

    #[test]
    fn a_full_buffer_drops_new_lines_and_counts_them() {
        let buffer = LineBuffer::default();
        let line = vec![b'x'; 1024];
        for _ in 0..BUFFER_LIMIT / 1024 {
            buffer.push(&line);
        }
        buffer.push(&line);
        buffer.push(&line);
        let pending = buffer.lock();
        assert_eq!(pending.bytes.len(), BUFFER_LIMIT);
        assert_eq!(pending.dropped, 2);
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
