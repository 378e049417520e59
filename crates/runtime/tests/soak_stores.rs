//! Soak: two replicas share session pins through one real `redis-server`, 16 clients (each its
//! own session, alternating between the replicas) send requests without pause, and Redis is
//! killed in the middle of the load and started again (empty). Every request must get what
//! `failure.store` declares: with `open`, a 200 (routed without the pin, `store-unavailable`,
//! while Redis is down); with `closed`, a 200 while Redis is up and a 503 (`code: session`)
//! while it is down. No request may hang (each is bounded), and once each replica has reached
//! the restarted Redis, pins are shared again: a session pinned through one replica is `pinned`
//! on the other, and two replicas racing on the first call of a new session with different
//! proposals agree on one pin. The run lasts `SRC_SOAK_SECS` (9 by default, a third each for
//! up, down and back) and prints its figures; nothing is asserted about time.

mod proxy_support;
mod support {
    pub mod redis;
}

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use proxy_support::{user, Router, TestResult, PATIENCE};
use src_runtime::log::RequestLog;
use support::redis::RedisServer;

const CLIENTS: usize = 16;
const SID: &str = "x-session-id";

fn soak_secs() -> u64 {
    std::env::var("SRC_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(9)
}

fn policy(url: &str, failure: &str) -> String {
    format!(
        r#"
backend sim {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model small  {{ backend = sim  serves = "small-id" }}
model strong {{ backend = sim  serves = "strong-id" }}
route coding priority 10 {{ when contains(history, ["segfault"])  to strong }}
route default {{ to small }}
session {{ store = redis("{url}") }}
protect {{ hold "tool call in flight" when request.tool_loop }}
failure {{ store = {failure} }}
"#
    )
}

/// A call in the middle of a tool loop whose result says `result`.
fn tool_loop(result: &str) -> serde_json::Value {
    serde_json::json!({"model": "auto", "messages": [
        {"role": "user", "content": "rename it"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_0", "type": "function",
            "function": {"name": "run", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": result},
    ]})
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
    code: Option<String>,
    latency: Duration,
}

struct Soak {
    replicas: [Router; 2],
    phase: AtomicU8,
    recovered: [AtomicBool; 2],
    stop: AtomicBool,
    calls: Mutex<Vec<Call>>,
    hung: Mutex<Vec<String>>,
}

async fn client(soak: Arc<Soak>, index: usize) {
    let session = format!("soak-{index}");
    let mut turn = index;
    while !soak.stop.load(Ordering::SeqCst) {
        turn += 1;
        let replica = turn % 2;
        let after_recovery = soak.recovered[replica].load(Ordering::SeqCst);
        let sent_in = soak.phase.load(Ordering::SeqCst);
        let started = Instant::now();
        let call = tokio::time::timeout(
            PATIENCE,
            soak.replicas[replica].chat(&user("hello"), &[(SID, &session)]),
        )
        .await;
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
    /// Served with its pin.
    Pinned,
    /// The store failed and the call got the declared answer (routed without the pin, or 503).
    StoreFailed,
}

fn judge(call: &Call, open: bool) -> Result<Verdict, String> {
    let pinned = call.status == 200 && matches!(call.session.as_str(), "new" | "pinned");
    let failed = if open {
        call.status == 200 && call.session == "store-unavailable"
    } else {
        call.status == 503 && call.code.as_deref() == Some("session")
    };
    match (pinned, failed, call.phases == (DOWN, DOWN)) {
        (true, _, false) => Ok(Verdict::Pinned),
        (_, true, _) => Ok(Verdict::StoreFailed),
        _ => Err(format!("{call:?}")),
    }
}

/// Session store calls that timed out, over both replicas.
async fn store_timeouts(replicas: &[Router]) -> TestResult<f64> {
    let mut total = 0.0;
    for replica in replicas {
        let metrics = replica.get("/metrics").await?.text();
        total += metrics
            .lines()
            .filter(|l| {
                l.starts_with("src_session_store_errors_total{") && l.contains("kind=\"timeout\"")
            })
            .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
            .sum::<f64>();
    }
    Ok(total)
}

/// Sends `first` and `second` for `id`, the second through the other replica, and retries a
/// round a store timeout spoiled (on a busy machine a Redis call may exceed its 250 ms).
async fn pair(
    soak: &Soak,
    id: &str,
    (first, second): (&serde_json::Value, &serde_json::Value),
    together: bool,
) -> TestResult<(proxy_support::Answer, proxy_support::Answer)> {
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
        let spoiled = |r: &proxy_support::Answer| {
            r.status == 503 || r.header("x-sr-session") == Some("store-unavailable")
        };
        if !spoiled(&x) && !spoiled(&y) {
            return Ok((x, y));
        }
    }
    Err(format!("every attempt of `{id}` met a store failure").into())
}

/// A replica that keeps no request log (the harness's in-memory log would grow with the load).
async fn quiet(policy: &str) -> TestResult<Router> {
    Router::start_full(policy, |_| {}, |parts| parts.log = RequestLog::Off).await
}

async fn soak(failure: &str) -> TestResult {
    let open = failure == "open";
    let mut redis = RedisServer::start();
    let text = policy(&redis.url(), failure);
    let soak = Arc::new(Soak {
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
    // Each replica has recovered once a call of its own pins again.
    for (i, replica) in soak.replicas.iter().enumerate() {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let probe = replica
                .chat(&user("hello"), &[(SID, &format!("probe-{i}"))])
                .await?;
            if probe.status == 200 && probe.header("x-sr-session") != Some("store-unavailable") {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("replica {i} never reached the restarted Redis").into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        soak.recovered[i].store(true, Ordering::SeqCst);
    }

    // Under the same load: pins written now are shared, and races on a new id agree.
    for round in 0..20 {
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
    let verdicts: Vec<Result<Verdict, String>> = calls.iter().map(|c| judge(c, open)).collect();
    let wrong: Vec<&String> = verdicts.iter().filter_map(|v| v.as_ref().err()).collect();
    assert!(
        wrong.is_empty(),
        "{} of {}: {wrong:#?}",
        wrong.len(),
        calls.len()
    );
    // While Redis was up, a call may only have gone without its pin when a store call timed
    // out (the machine was too busy for 250 ms): each such call is one the router counted.
    let failed_while_up = calls
        .iter()
        .zip(&verdicts)
        .filter(|(c, v)| {
            (c.phases == (UP, UP) || c.after_recovery) && **v == Ok(Verdict::StoreFailed)
        })
        .count();
    let timeouts = store_timeouts(&soak.replicas).await?;
    assert!(
        failed_while_up as f64 <= timeouts,
        "{failed_while_up} calls went without the store while it was up, {timeouts} timeouts: {:#?}",
        calls
            .iter()
            .zip(&verdicts)
            .filter(|(c, v)| (c.phases == (UP, UP) || c.after_recovery)
                && **v == Ok(Verdict::StoreFailed))
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
    println!(
        "soak stores (failure.store = {failure}): {} requests from {CLIENTS} clients on 2 replicas; \
         {} while Redis was down ({} answered 503, {} routed without the pin), slowest then {:.0} ms \
         (slowest while up {:.0} ms; store timeout 250 ms); requests per replica [{}, {}]; 0 hung; \
         {failed_while_up} calls while up met a store timeout",
        calls.len(),
        down.len(),
        count(&|c| c.phases == (DOWN, DOWN) && c.status == 503),
        count(&|c| c.phases == (DOWN, DOWN) && c.session == "store-unavailable"),
        slowest_down.as_secs_f64() * 1000.0,
        slowest_up.as_secs_f64() * 1000.0,
        count(&|c| c.replica == 0),
        count(&|c| c.replica == 1),
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redis_outage_under_load_follows_failure_store_open() -> TestResult {
    soak("open").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redis_outage_under_load_follows_failure_store_closed() -> TestResult {
    soak("closed").await
}
