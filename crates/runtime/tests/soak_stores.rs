//! Soak: two replicas share one real `redis-server`, 16 clients (alternating between the
//! replicas) send requests without pause, and Redis is killed in the middle of the load and
//! started again (empty). It runs once for each store on Redis, each under `failure.store =
//! open` and `closed`:
//!
//! - the session store (each client its own session): with `open`, a 200 (routed without the
//!   pin, `store-unavailable`, while Redis is down); with `closed`, a 503 (`code: session`)
//!   while it is down. Once each replica has reached the restarted Redis, a session pinned
//!   through one replica is `pinned` on the other, and two replicas racing on the first call of
//!   a new session with different proposals agree on one pin.
//! - the response cache (each client its own API key, so its own tenant, asking a few prompts
//!   over and over, the real MiniLM encoder): a `hit` or a `miss` while Redis is up; while it is
//!   down, with `open` a 200 from the backend (`x-sr-cache: error`, `x-sr-path: upstream`), with
//!   `closed` a 503 (`code: cache`). Once back, an answer stored through one replica answers a
//!   paraphrase on the other.
//!
//! No request may hang (each is bounded). While Redis is up a request may only go without the
//! store when a store call timed out (or, for the cache, the encoder failed) or the store's
//! breaker skipped it after such a timeout, and each such one is counted in the metrics. The run
//! lasts `SRC_SOAK_SECS` (9 by default, a third each for up, down and back) and prints its
//! figures, among them a request's median latency while Redis is down over its median while
//! Redis is up (the price of an outage, measured in the same run); nothing is asserted about
//! time.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use src_runtime::log::RequestLog;
use src_testkit::redis::RedisServer;
use src_testkit::sessions::{pinned_policy, tool_loop};
use src_testkit::{user, Answer, Router, TestResult, PATIENCE};

const CLIENTS: usize = 16;
/// Store calls a breaker answered at once, without sending them.
const SKIPPED: &str = "src_store_skipped_total";
const SID: &str = "x-session-id";

fn soak_secs() -> u64 {
    std::env::var("SRC_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(9)
}

/// Which store on Redis the soak takes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Session,
    Cache,
}

const PASSWORD: &str = "How do I reset my password?";
/// MiniLM puts this at ≈ 0.99 of [`PASSWORD`].
const PARAPHRASE: &str = "How can I reset my password?";
/// What the cache clients ask, in turn.
const PROMPTS: [&str; 4] = [
    PASSWORD,
    PARAPHRASE,
    "What is the capital of France?",
    "Which is the capital city of France?",
];

fn policy(url: &str, failure: &str, kind: Kind) -> TestResult<String> {
    Ok(match kind {
        Kind::Session => pinned_policy(&format!("redis(\"{url}\")"), failure),
        Kind::Cache => {
            let minilm = src_testkit::models::model_dir("minilm")?;
            format!(
                r#"
backend sim {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model small  {{ backend = sim  serves = "small-id" }}
model strong {{ backend = sim  serves = "strong-id" }}
encoder minilm {{ path = "{}" }}
route coding priority 10 {{ when contains(prompt, ["segfault"])  to strong }}
route default {{ to small }}
cache {{ encoder = minilm  threshold = 0.9  ttl = 10m  store = redis("{url}") }}
failure {{ store = {failure} }}
"#,
                minilm.display()
            )
        }
    })
}

/// Where the soak stands.
const UP: u8 = 0;
const DOWN: u8 = 1;
const RESTARTING: u8 = 2;
/// Between asking Redis to die and it being gone.
const KILLING: u8 = 3;

/// One request as a client saw it.
#[derive(Debug, Clone)]
struct Call {
    replica: usize,
    /// The phase when it was sent and when it was answered.
    phases: (u8, u8),
    /// Whether its replica had reached the restarted Redis before it was sent.
    after_recovery: bool,
    status: u16,
    session: String,
    /// `x-sr-cache` and `x-sr-path`.
    cache: String,
    path: String,
    code: Option<String>,
    latency: Duration,
}

struct Soak {
    kind: Kind,
    replicas: [Router; 2],
    phase: AtomicU8,
    recovered: [AtomicBool; 2],
    stop: AtomicBool,
    calls: Mutex<Vec<Call>>,
    hung: Mutex<Vec<String>>,
}

async fn client(soak: Arc<Soak>, index: usize) {
    let session = format!("soak-{index}");
    let key = format!("Bearer soak-{index}");
    let mut turn = index;
    while !soak.stop.load(Ordering::SeqCst) {
        turn += 1;
        let replica = turn % 2;
        let after_recovery = soak.recovered[replica].load(Ordering::SeqCst);
        let sent_in = soak.phase.load(Ordering::SeqCst);
        let (body, header) = match soak.kind {
            Kind::Session => (user("hello"), (SID, session.as_str())),
            Kind::Cache => (
                user(PROMPTS[(turn / 2) % PROMPTS.len()]),
                ("authorization", key.as_str()),
            ),
        };
        let started = Instant::now();
        let call =
            tokio::time::timeout(PATIENCE, soak.replicas[replica].chat(&body, &[header])).await;
        let answer = match call {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => {
                soak.hung
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(format!("client {index}: {e}"));
                continue;
            }
            Err(_) => {
                soak.hung
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(format!("client {index}: no answer within {PATIENCE:?}"));
                continue;
            }
        };
        let code = answer
            .json()
            .ok()
            .and_then(|v| v["error"]["code"].as_str().map(str::to_owned));
        let call = Call {
            replica,
            phases: (sent_in, soak.phase.load(Ordering::SeqCst)),
            after_recovery,
            status: answer.status,
            session: answer.header("x-sr-session").unwrap_or_default().to_owned(),
            cache: answer.header("x-sr-cache").unwrap_or_default().to_owned(),
            path: answer.header("x-sr-path").unwrap_or_default().to_owned(),
            code,
            latency: started.elapsed(),
        };
        soak.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(call);
    }
}

/// How a call fared, judged by what `failure.store = open|closed` declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Served with the store: with its pin, or a cache hit or miss.
    Served,
    /// The store failed and the call got the declared answer (routed without the pin or the
    /// cache, or 503).
    StoreFailed,
    /// The cache's encoder failed: the backend answered without the cache, never a 5xx.
    EncoderFailed,
}

fn judge(call: &Call, open: bool, kind: Kind) -> Result<Verdict, String> {
    let (served, failed) = match kind {
        Kind::Session => (
            call.status == 200 && matches!(call.session.as_str(), "new" | "pinned"),
            if open {
                call.status == 200 && call.session == "store-unavailable"
            } else {
                call.status == 503 && call.code.as_deref() == Some("session")
            },
        ),
        Kind::Cache => (
            call.status == 200 && matches!(call.cache.as_str(), "hit" | "miss"),
            call.cache == "error"
                && if open {
                    call.status == 200 && call.path == "upstream"
                } else {
                    call.status == 503 && call.code.as_deref() == Some("cache")
                },
        ),
    };
    // With `open` a store failure and an encoder failure look alike; the metrics tell them
    // apart in the count below.
    let encoder_failed = kind == Kind::Cache
        && !open
        && call.status == 200
        && call.cache == "error"
        && call.path == "upstream";
    match (served, failed, call.phases == (DOWN, DOWN)) {
        (true, _, false) => Ok(Verdict::Served),
        (_, true, _) => Ok(Verdict::StoreFailed),
        _ if encoder_failed => Ok(Verdict::EncoderFailed),
        _ => Err(format!("{call:?}")),
    }
}

/// The sum over both replicas of `name`'s samples whose labels contain `label`.
async fn counted(replicas: &[Router], name: &str, label: &str) -> TestResult<f64> {
    let mut total = 0.0;
    for replica in replicas {
        let metrics = replica.admin_get("/metrics").await?.text();
        total += metrics
            .lines()
            .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
            .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
            .sum::<f64>();
    }
    Ok(total)
}

/// Store calls that timed out, over both replicas (and, for the cache, encoder failures).
async fn store_timeouts(replicas: &[Router], kind: Kind) -> TestResult<f64> {
    Ok(match kind {
        Kind::Session => {
            counted(
                replicas,
                "src_session_store_errors_total",
                "kind=\"timeout\"",
            )
            .await?
        }
        Kind::Cache => {
            // Lookups only: a failed store after the answer never changes the answer.
            counted(
                replicas,
                "src_cache_store_errors_total",
                "op=\"lookup\",kind=\"timeout\"",
            )
            .await?
                + counted(replicas, "src_model_failures_total", "model=").await?
        }
    })
}

/// Sends `first` and `second` for `id`, the second through the other replica, and retries a
/// round a store timeout spoiled (on a busy machine a Redis call may exceed its 250 ms).
async fn pair(
    soak: &Soak,
    id: &str,
    (first, second): (&serde_json::Value, &serde_json::Value),
    together: bool,
) -> TestResult<(src_testkit::Answer, src_testkit::Answer)> {
    for attempt in 0..20 {
        let id = format!("{id}-{attempt}");
        let h = [(SID, id.as_str())];
        let [a, b] = &soak.replicas;
        let (x, y) = if together {
            let (x, y) = tokio::join!(a.chat(first, &h), b.chat(second, &h));
            (x?, y?)
        } else {
            let x = a.chat(first, &h).await?;
            (x, b.chat(second, &h).await?)
        };
        let spoiled = |r: &src_testkit::Answer| {
            r.status == 503 || r.header("x-sr-session") == Some("store-unavailable")
        };
        if !spoiled(&x) && !spoiled(&y) {
            return Ok((x, y));
        }
    }
    Err(format!("every attempt of `{id}` met a store failure").into())
}

/// Asks `first` on replica A under a new API key (a miss, stored once relayed), then its
/// paraphrase on replica B without storing B's answers (`x-sr-cache: no-store`) until B answers
/// from the cache: the hit can only be A's answer. A round a store failure spoiled (Redis
/// calls may exceed their 250 ms on a busy machine) is tried again under another key.
async fn shared_answer(soak: &Soak, id: &str) -> TestResult<(Answer, Answer)> {
    let [a, b] = &soak.replicas;
    for attempt in 0..20 {
        let key = format!("Bearer {id}-{attempt}");
        let first = a.chat(&user(PASSWORD), &[("authorization", &key)]).await?;
        if first.status != 200 || first.header("x-sr-cache") != Some("miss") {
            continue;
        }
        let deadline = Instant::now() + PATIENCE / 4;
        while Instant::now() < deadline {
            let asked = b
                .chat(
                    &user(PARAPHRASE),
                    &[("authorization", &key), ("x-sr-cache", "no-store")],
                )
                .await?;
            if asked.header("x-sr-cache") == Some("hit") {
                return Ok((first, asked));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Err(format!("no answer of `{id}` stored through replica A reached replica B").into())
}

/// A replica that keeps no request log (the harness's in-memory log would grow with the load).
async fn quiet(policy: &str) -> TestResult<Router> {
    Router::start_full(policy, |_| {}, |parts| parts.log = RequestLog::Off).await
}

/// Whether `answer` was served with the store (not without it, not refused).
fn with_store(answer: &Answer, kind: Kind) -> bool {
    answer.status == 200
        && match kind {
            Kind::Session => answer.header("x-sr-session") != Some("store-unavailable"),
            Kind::Cache => matches!(answer.header("x-sr-cache"), Some("hit" | "miss")),
        }
}

async fn soak(failure: &str, kind: Kind) -> TestResult {
    let open = failure == "open";
    if kind == Kind::Cache {
        src_testkit::models::load_library()?;
    }
    let mut redis = RedisServer::start();
    let text = policy(&redis.url(), failure, kind)?;
    let soak = Arc::new(Soak {
        kind,
        replicas: [quiet(&text).await?, quiet(&text).await?],
        phase: AtomicU8::new(UP),
        recovered: [AtomicBool::new(false), AtomicBool::new(false)],
        stop: AtomicBool::new(false),
        calls: Mutex::new(Vec::new()),
        hung: Mutex::new(Vec::new()),
    });
    let third = Duration::from_millis(soak_secs() * 1000 / 3);
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| tokio::spawn(client(Arc::clone(&soak), i)))
        .collect();

    tokio::time::sleep(third).await;
    // Calls a breaker skipped while Redis was up (after a timeout tripped it) are counted from
    // the metrics of the up phases only.
    let skipped_before = counted(&soak.replicas, SKIPPED, "store=").await?;
    soak.phase.store(KILLING, Ordering::SeqCst);
    let redis = tokio::task::spawn_blocking(move || {
        redis.kill();
        redis
    })
    .await?;
    soak.phase.store(DOWN, Ordering::SeqCst);
    tokio::time::sleep(third).await;
    soak.phase.store(RESTARTING, Ordering::SeqCst);
    let mut redis = redis;
    let redis = tokio::task::spawn_blocking(move || {
        redis.restart();
        redis
    })
    .await?;
    // Each replica has recovered once a call of its own uses the store again.
    let mut skipped_at_recovery = [0.0; 2];
    for (i, replica) in soak.replicas.iter().enumerate() {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let probe = match kind {
                Kind::Session => (SID, format!("probe-{i}")),
                Kind::Cache => ("authorization", format!("Bearer probe-{i}")),
            };
            let probe = replica
                .chat(&user(PASSWORD), &[(probe.0, probe.1.as_str())])
                .await?;
            if with_store(&probe, kind) {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("replica {i} never reached the restarted Redis").into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        skipped_at_recovery[i] = counted(std::slice::from_ref(replica), SKIPPED, "store=").await?;
        soak.recovered[i].store(true, Ordering::SeqCst);
    }

    // Under the same load: answers stored now through one replica are hits on the other.
    let mut shared_hits = 0;
    for round in 0..20 {
        if kind != Kind::Cache {
            break;
        }
        let (first, hit) = shared_answer(&soak, &format!("after-restart-{round}")).await?;
        assert_eq!(hit.status, 200, "round {round}");
        assert_eq!(hit.header("x-sr-path"), Some("cache"), "round {round}");
        assert_eq!(
            hit.header("x-sr-model"),
            first.header("x-sr-model"),
            "round {round}"
        );
        assert_eq!(hit.body, first.body, "round {round}: replica A's answer");
        shared_hits += 1;
    }
    // Under the same load: pins written now are shared, and races on a new id agree.
    for round in 0..20 {
        if kind != Kind::Session {
            break;
        }
        let id = format!("after-restart-{round}");
        let hello = user("hello");
        let (first, second) = pair(&soak, &id, (&hello, &hello), false).await?;
        assert_eq!(first.header("x-sr-session"), Some("new"), "round {round}");
        assert_eq!(
            (second.header("x-sr-session"), second.header("x-sr-model")),
            (Some("pinned"), Some("small")),
            "round {round}: the other replica reads the pin"
        );
        let id = format!("race-{round}");
        // Tool-loop calls with different proposals: however they interleave, one writes the
        // pin and the other follows it (a loser of the race reads `pinned`; a call that came
        // second is kept by the hold).
        let (small, strong) = (tool_loop("ok"), tool_loop("segfault"));
        let (x, y) = pair(&soak, &id, (&small, &strong), true).await?;
        assert_eq!((x.status, y.status), (200, 200));
        let mut states = [
            x.header("x-sr-session").unwrap_or_default().to_owned(),
            y.header("x-sr-session").unwrap_or_default().to_owned(),
        ];
        states.sort();
        assert!(
            states == ["new", "pinned"] || states == ["held", "new"],
            "round {round}: exactly one pin wins: {states:?}"
        );
        assert_eq!(
            x.header("x-sr-model"),
            y.header("x-sr-model"),
            "round {round}: the loser follows the winning pin"
        );
    }
    tokio::time::sleep(third).await;
    soak.stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.await?;
    }
    drop(redis);

    let hung = soak
        .hung
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert!(hung.is_empty(), "{hung:#?}");
    let calls = soak
        .calls
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let verdicts: Vec<Result<Verdict, String>> =
        calls.iter().map(|c| judge(c, open, kind)).collect();
    let wrong: Vec<&String> = verdicts.iter().filter_map(|v| v.as_ref().err()).collect();
    assert!(
        wrong.is_empty(),
        "{} of {}: {wrong:#?}",
        wrong.len(),
        calls.len()
    );
    // While Redis was up, a call may only have gone without the store when a store call timed
    // out (the machine was too busy for 250 ms) or the encoder failed: each such call is one
    // the router counted.
    let without = |c: &Call, v: &Result<Verdict, String>| {
        let up = c.phases == (UP, UP) || c.after_recovery;
        (up && *v == Ok(Verdict::StoreFailed)) || *v == Ok(Verdict::EncoderFailed)
    };
    let failed_while_up = calls
        .iter()
        .zip(&verdicts)
        .filter(|(c, v)| without(c, v))
        .count();
    let timeouts = store_timeouts(&soak.replicas, kind).await?;
    let mut skipped_while_up = skipped_before;
    for (i, replica) in soak.replicas.iter().enumerate() {
        skipped_while_up += counted(std::slice::from_ref(replica), SKIPPED, "store=").await?
            - skipped_at_recovery[i];
    }
    assert!(
        failed_while_up as f64 <= timeouts + skipped_while_up,
        "{failed_while_up} calls went without the store while it was up, {timeouts} timeouts, \
         {skipped_while_up} skipped after one: {:#?}",
        calls
            .iter()
            .zip(&verdicts)
            .filter(|(c, v)| without(c, v))
            .map(|(c, _)| c)
            .collect::<Vec<_>>()
    );
    let count = |f: &dyn Fn(&Call) -> bool| calls.iter().filter(|c| f(c)).count();
    let down: Vec<&Call> = calls.iter().filter(|c| c.phases == (DOWN, DOWN)).collect();
    assert!(!down.is_empty(), "no request was made while Redis was down");
    let slowest_down = down.iter().map(|c| c.latency).max().unwrap_or_default();
    let slowest_up = calls
        .iter()
        .filter(|c| c.phases == (UP, UP))
        .map(|c| c.latency)
        .max()
        .unwrap_or_default();
    let up = |c: &Call| c.phases == (UP, UP) || c.after_recovery;
    let median = |f: &dyn Fn(&Call) -> bool| {
        let mut l: Vec<Duration> = calls.iter().filter(|c| f(c)).map(|c| c.latency).collect();
        l.sort();
        l.get(l.len() / 2)
            .copied()
            .unwrap_or_default()
            .as_secs_f64()
            * 1000.0
    };
    let errors = match kind {
        Kind::Session => "src_session_store_errors_total",
        Kind::Cache => "src_cache_store_errors_total",
    };
    let (timed_out, refused) = (
        counted(&soak.replicas, errors, "kind=\"timeout\"").await?,
        counted(&soak.replicas, errors, "kind=\"unavailable\"").await?,
    );
    let skipped = counted(&soak.replicas, SKIPPED, "store=").await?;
    let (median_down, median_up) = (
        median(&|c| c.phases == (DOWN, DOWN)),
        median(&|c| c.phases == (UP, UP)),
    );
    println!(
        "soak stores ({kind:?} store, failure.store = {failure}): {} requests from {CLIENTS} \
         clients on 2 replicas; {} while Redis was down ({} answered 503, {} went on without the \
         store), slowest then {:.0} ms (slowest while up {:.0} ms; store timeout 250 ms), median \
         {median_down:.1} ms down and {median_up:.1} ms up (down/up {:.2}); store errors: \
         {timed_out} timeouts, {refused} unavailable ({skipped} skipped by the breaker); \
         requests per replica [{}, {}]; 0 hung; {failed_while_up} calls while up met a store \
         timeout or an encoder failure; cache while up: {} hits, {} misses; {shared_hits} \
         answers stored through one replica were hits on the other after the restart",
        calls.len(),
        down.len(),
        count(&|c| c.phases == (DOWN, DOWN) && c.status == 503),
        count(&|c| c.phases == (DOWN, DOWN)
            && c.status == 200
            && (c.session == "store-unavailable" || c.cache == "error")),
        slowest_down.as_secs_f64() * 1000.0,
        slowest_up.as_secs_f64() * 1000.0,
        median_down / median_up.max(f64::MIN_POSITIVE),
        count(&|c| c.replica == 0),
        count(&|c| c.replica == 1),
        count(&|c| up(c) && c.cache == "hit"),
        count(&|c| up(c) && c.cache == "miss"),
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redis_outage_under_load_follows_failure_store_open() -> TestResult {
    soak("open", Kind::Session).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redis_outage_under_load_follows_failure_store_closed() -> TestResult {
    soak("closed", Kind::Session).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redis_outage_of_the_cache_under_load_follows_failure_store_open() -> TestResult {
    soak("open", Kind::Cache).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redis_outage_of_the_cache_under_load_follows_failure_store_closed() -> TestResult {
    soak("closed", Kind::Cache).await
}
