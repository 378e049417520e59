//! The session store on the Redis topologies, in one run, as ratios:
//!
//! 1. **Throughput**: the same load (a pinned call's store steps: `get_and_touch`, a script, then
//!    a `record_outcome`, a script over two keys of one slot) from `CLIENTS` concurrent tasks for
//!    `SRC_BENCH_SECS` seconds, on one `redis-server` and on a six-node Redis Cluster (three
//!    masters) and a Sentinel set, all on this machine. Printed: operations per second and the
//!    topology's over the single server's.
//! 2. **Recovery**: on the cluster, clients keep reading every session's pin; a master is killed
//!    (SIGKILL); the time from the kill until a whole round over every session succeeds again,
//!    against the cluster's node timeout, beside the floor no client can beat: the time until
//!    the dead master's replica reports itself master. Repeated `ROUNDS` times on a fresh
//!    cluster.
//!
//! Needs `redis-server` and `redis-cli` on the PATH. Run with
//! `cargo bench -p src-runtime --bench topologies`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use src_compiler::hir::RedisTarget;
use src_runtime::session::store::{OutcomeKey, SessionStore, Verdict};
use src_runtime::session::{Identity, Pin, RedisStore};
use src_runtime::store::{KeySpace, Links};
use src_testkit::redis::RedisServer;
use src_testkit::redis_topology::{RedisCluster, RedisSentinels, MASTER};

const CLIENTS: usize = 32;
const SESSIONS: usize = 256;
const TTL: u64 = 600_000;
const ROUNDS: usize = 3;

fn secs() -> u64 {
    std::env::var("SRC_BENCH_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
}

fn id(i: usize) -> Identity {
    Identity {
        tenant: "bench".into(),
        id: format!("s-{i}"),
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn target_of(kind: &str, urls: &[String]) -> RedisTarget {
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let made = match kind {
        "cluster" => RedisTarget::cluster(&urls),
        _ => RedisTarget::sentinel(&urls, MASTER),
    };
    made.unwrap_or_else(|e| panic!("{kind}: {e}"))
}

async fn store_on(target: &RedisTarget, timeout: Duration) -> Arc<RedisStore> {
    let links = Links::new();
    let redis = links
        .redis(target, timeout)
        .unwrap_or_else(|e| panic!("a link: {e}"));
    let store = Arc::new(RedisStore::on(redis));
    for i in 0..SESSIONS {
        let pin = Pin::first("small", Some("default"), now());
        let _ = store.put_if_absent(&id(i), &pin, TTL).await;
    }
    store
}

/// Store operations per second under `CLIENTS` tasks for `secs()` seconds.
async fn throughput(store: Arc<RedisStore>) -> (f64, u64) {
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (store, done, failed, stop) =
                (store.clone(), done.clone(), failed.clone(), stop.clone());
            tokio::spawn(async move {
                let mut i = c;
                while !stop.load(Ordering::Relaxed) {
                    i = (i + CLIENTS) % SESSIONS;
                    let key = id(i);
                    let got = store.get_and_touch(&key, now(), TTL).await;
                    let outcome = OutcomeKey {
                        session: key,
                        model: "small".into(),
                    };
                    let rec = store
                        .record_outcome(&outcome, Verdict::Pass, None, now(), TTL)
                        .await;
                    if got.is_ok() && rec.is_ok() {
                        done.fetch_add(2, Ordering::Relaxed);
                    } else {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs())).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let ops = done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    (ops, failed.load(Ordering::Relaxed))
}

/// What a master kill cost: when Redis itself had promoted the dead master's replica (the floor
/// no client can beat), and when a whole round over every session succeeded again.
struct Recovery {
    promoted: Duration,
    recovered: Duration,
    node_timeout: Duration,
}

/// Kills the master holding session 0's pin while clients read every pin; answers the time
/// from the kill until its replica reports itself master, and until a whole round over every
/// session succeeds.
async fn recovery() -> Recovery {
    let mut cluster = RedisCluster::start();
    let target = target_of("cluster", &cluster.urls());
    let store = store_on(&target, Duration::from_millis(250)).await;
    let victim = cluster.master_of(&KeySpace::pin("bench", "s-0"));
    let heir = cluster.replica_of(victim);
    cluster.wait_replicated(victim);
    let stop = Arc::new(AtomicBool::new(false));
    // Background load, as a serving router would have.
    let load: Vec<_> = (0..8)
        .map(|c| {
            let (store, stop) = (store.clone(), stop.clone());
            tokio::spawn(async move {
                let mut i = c;
                while !stop.load(Ordering::Relaxed) {
                    i = (i + 8) % SESSIONS;
                    let _ = store.get(&id(i), now()).await;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let killed = Instant::now();
    cluster.kill(victim);
    let mut promoted = None;
    let recovered = loop {
        if promoted.is_none() && cluster.command(heir, "ROLE").contains("master") {
            promoted = Some(killed.elapsed());
        }
        let mut all = true;
        for i in 0..SESSIONS {
            if !matches!(store.get(&id(i), now()).await, Ok(Some(_))) {
                all = false;
                break;
            }
        }
        if all {
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < Duration::from_secs(60),
            "never recovered"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    stop.store(true, Ordering::Relaxed);
    for t in load {
        let _ = t.await;
    }
    // Promotion precedes any recovery; a round that recovered before the poll saw it is timed
    // at the recovery (the floor is then at most that).
    Recovery {
        promoted: promoted.unwrap_or(recovered),
        recovered,
        node_timeout: cluster.node_timeout(),
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("a runtime: {e}"));
    runtime.block_on(async {
        let timeout = Duration::from_secs(2);
        let single = RedisServer::start();
        let one = single.url().trim_end_matches('/').to_owned();
        let one = RedisTarget::Single(
            src_compiler::hir::RedisUrl::parse(&one).unwrap_or_else(|e| panic!("{e:?}")),
        );
        let (single_ops, single_failed) = throughput(store_on(&one, timeout).await).await;
        drop(single);
        let cluster = RedisCluster::start();
        let (cluster_ops, cluster_failed) =
            throughput(store_on(&target_of("cluster", &cluster.urls()), timeout).await).await;
        drop(cluster);
        let set = RedisSentinels::start();
        let (sentinel_ops, sentinel_failed) =
            throughput(store_on(&target_of("sentinel", &set.urls()), timeout).await).await;
        drop(set);
        println!("throughput ({CLIENTS} clients, {} s each, ops/s):", secs());
        println!("  single redis-server  {single_ops:>10.0}  (failed {single_failed})");
        println!(
            "  cluster, 3 masters   {cluster_ops:>10.0}  (failed {cluster_failed})  cluster/single = {:.2}",
            cluster_ops / single_ops
        );
        println!(
            "  sentinel primary     {sentinel_ops:>10.0}  (failed {sentinel_failed})  sentinel/single = {:.2}",
            sentinel_ops / single_ops
        );
        for round in 1..=ROUNDS {
            let Recovery {
                promoted,
                recovered,
                node_timeout,
            } = recovery().await;
            println!(
                "recovery {round}: replica promoted {:.0} ms, every session served again {:.0} ms after the kill; node timeout {} ms; promoted/node timeout = {:.2}, recovery/node timeout = {:.2}, recovery - promotion = {:.0} ms",
                promoted.as_secs_f64() * 1000.0,
                recovered.as_secs_f64() * 1000.0,
                node_timeout.as_millis(),
                promoted.as_secs_f64() / node_timeout.as_secs_f64(),
                recovered.as_secs_f64() / node_timeout.as_secs_f64(),
                (recovered.as_secs_f64() - promoted.as_secs_f64()) * 1000.0
            );
        }
    });
}
