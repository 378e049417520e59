//! Two `src serve` replicas share their sessions through a Redis Cluster (six nodes: three
//! masters, three replicas) or a Sentinel set (a primary, a replica, three sentinels), both
//! started here on loopback, and a master is killed under load:
//!
//! - a pin made through one replica holds on the other, and the pins land on at least two of the
//!   cluster's masters;
//! - while the master is down and its replica is promoted, every request is answered as
//!   `failure.store = open` declares (200, `x-sr-session: held` from the stored pin, or
//!   `store-unavailable` when the store could not answer, then kept on its model by the
//!   replica's own copy of the pin), none hangs, none leaves the pinned model, and no session is
//!   ever answered as `new` (a lost pin);
//! - once the failover is over, both replicas use the store again without a restart, and every
//!   pin written before the kill still holds on both.
//!
//! Nothing is asserted about time; the failover's duration is measured by `benches/topologies.rs`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{json, Value};
use src_testkit::redis_topology::{RedisCluster, RedisSentinels};
use src_testkit::{user, Router, TestResult, PATIENCE};

const SID: &str = "x-session-id";
const SESSIONS: usize = 12;

fn policy(store: &str) -> String {
    format!(
        r#"
backend sim {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model small  {{ backend = sim  serves = "small-id" }}
model strong {{ backend = sim  serves = "strong-id" }}
route coding priority 10 {{ when contains(prompt, ["segfault"])  to strong }}
route default {{ to small }}
session {{ store = {store} }}
protect {{ hold "tool call in flight" when request.tool_loop }}
failure {{ store = open }}
"#
    )
}

/// A call in the middle of a tool loop: the policy alone would route it to `small`, so only
/// the session's pin (or the replica's copy of it) keeps it on `strong`, and `x-sr-session:
/// held` says the stored pin was read.
fn tool_loop() -> Value {
    json!({"model": "auto", "messages": [
        {"role": "user", "content": "rename it"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_0", "type": "function",
            "function": {"name": "run", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": "ok"},
    ]})
}

fn session(i: usize) -> String {
    format!("failover-{i}")
}

/// One answer under load: its status, `x-sr-session` and model.
type Seen = (u16, String, String);

async fn ask(router: &Router, sid: &str) -> TestResult<Seen> {
    let answer = tokio::time::timeout(PATIENCE, router.chat(&tool_loop(), &[(SID, sid)]))
        .await
        .map_err(|_| format!("session {sid}: no answer within {PATIENCE:?}"))??;
    Ok((
        answer.status,
        answer.header("x-sr-session").unwrap_or_default().to_owned(),
        answer.header("x-sr-model").unwrap_or_default().to_owned(),
    ))
}

/// Pins every session to `strong` through replica `a` and checks it holds through `b`.
async fn pin_all(a: &Router, b: &Router) -> TestResult {
    for i in 0..SESSIONS {
        let sid = session(i);
        let first = a.chat(&user("it hit a segfault"), &[(SID, &sid)]).await?;
        assert_eq!(first.status, 200);
        assert_eq!(first.header("x-sr-session"), Some("new"), "{sid}");
        assert_eq!(first.header("x-sr-model"), Some("strong"), "{sid}");
        let (status, state, model) = ask(b, &sid).await?;
        assert_eq!(
            (status, state.as_str(), model.as_str()),
            (200, "held", "strong"),
            "the pin made through one replica holds on the other ({sid})"
        );
    }
    Ok(())
}

/// Runs `clients` sessions against both replicas until `stop`, recording what each saw.
fn load(
    replicas: Arc<[Router; 2]>,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<Seen>>>,
) -> Vec<tokio::task::JoinHandle<TestResult>> {
    (0..SESSIONS)
        .map(|i| {
            let (replicas, stop, seen) = (replicas.clone(), stop.clone(), seen.clone());
            tokio::spawn(async move {
                let sid = session(i);
                let mut turn = i;
                while !stop.load(Ordering::SeqCst) {
                    turn += 1;
                    let got = ask(&replicas[turn % 2], &sid).await?;
                    seen.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(got);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Ok(())
            })
        })
        .collect()
}

/// Asks both replicas for every session until each answers it from the stored pin
/// (`held`): a call the store cannot answer yet goes without it, on the pin's local copy.
async fn until_served_again(replicas: &[Router; 2]) -> TestResult {
    for router in replicas {
        for i in 0..SESSIONS {
            let deadline = std::time::Instant::now() + PATIENCE;
            loop {
                let (status, state, model) = ask(router, &session(i)).await?;
                assert_eq!(status, 200, "session {i}: {state} {model}");
                if state == "held" {
                    assert_eq!(model, "strong", "session {i}: the stored pin");
                    break;
                }
                assert_eq!(state, "store-unavailable", "session {i}: its pin was lost");
                assert!(
                    std::time::Instant::now() < deadline,
                    "a replica never used the store again"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    Ok(())
}

/// The whole scenario; `kill` takes a master away and returns once its replica serves.
async fn survive(store: String, kill: impl FnOnce() + Send + 'static) -> TestResult {
    let policy = policy(&store);
    let replicas = Arc::new([Router::start(&policy).await?, Router::start(&policy).await?]);
    pin_all(&replicas[0], &replicas[1]).await?;

    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let clients = load(replicas.clone(), stop.clone(), seen.clone());
    tokio::time::sleep(Duration::from_millis(200)).await;
    tokio::task::spawn_blocking(kill).await?;
    until_served_again(&replicas).await?;
    stop.store(true, Ordering::SeqCst);
    for client in clients {
        client.await??;
    }

    let seen = seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let unavailable = seen.iter().filter(|s| s.1 == "store-unavailable").count();
    eprintln!(
        "{} requests under load, {unavailable} answered without the store",
        seen.len()
    );
    for (status, state, model) in &seen {
        assert_eq!(*status, 200, "failure.store = open answers every request");
        assert!(
            matches!(state.as_str(), "held" | "store-unavailable"),
            "a session answered as `{state}`: its pin was lost"
        );
        if state == "held" {
            assert_eq!(model, "strong", "the stored pin kept the tool loop's model");
        }
    }
    // Without the store, the replica's own copy of the pin keeps the model: every failure a
    // failover causes is an outage (a store answer the router cannot read would go on without
    // affinity, off the pin).
    let off: Vec<&Seen> = seen.iter().filter(|s| s.2 != "strong").collect();
    assert!(
        off.is_empty(),
        "{} answers off the pin, e.g. {:?}",
        off.len(),
        off.first()
    );
    assert!(unavailable > 0, "the kill never reached a request");
    // Every pin written before the failover still holds, on both replicas.
    until_served_again(&replicas).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_pins_through_a_cluster_and_survive_a_master_kill() -> TestResult {
    let cluster = Arc::new(Mutex::new(RedisCluster::start()));
    let store = cluster
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .store(3);
    let killer = Arc::clone(&cluster);
    let pinned = Arc::new(AtomicBool::new(false));
    let spread_checked = Arc::clone(&pinned);
    survive(store, move || {
        let mut cluster = killer.lock().unwrap_or_else(PoisonError::into_inner);
        // The pins spread over the masters; the one holding most of them dies.
        let mut held: Vec<(u16, u64)> = cluster
            .masters()
            .iter()
            .map(|(port, _)| {
                let size = cluster.command(*port, "DBSIZE");
                (
                    *port,
                    size.trim().trim_start_matches(':').parse().unwrap_or(0),
                )
            })
            .collect();
        held.sort_by_key(|(_, keys)| std::cmp::Reverse(*keys));
        assert!(
            held.iter().filter(|(_, keys)| *keys > 0).count() >= 2,
            "pins on one master only: {held:?}"
        );
        spread_checked.store(true, Ordering::SeqCst);
        let victim = held[0].0;
        for (port, _) in &held {
            cluster.wait_replicated(*port);
        }
        cluster.kill(victim);
        cluster.wait_served();
    })
    .await?;
    assert!(pinned.load(Ordering::SeqCst));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_pins_through_sentinel_and_survive_a_primary_kill() -> TestResult {
    let set = Arc::new(Mutex::new(RedisSentinels::start()));
    let store = set.lock().unwrap_or_else(PoisonError::into_inner).store();
    let killer = Arc::clone(&set);
    survive(store, move || {
        let mut set = killer.lock().unwrap_or_else(PoisonError::into_inner);
        let old = set.primary();
        set.wait_replicated();
        set.kill(old);
        set.wait_promoted(old);
    })
    .await
}
