//! Every store kind on the Redis topologies production runs, each started here on loopback: a
//! six-node Redis Cluster (three masters, three replicas) and a Sentinel set (a primary, a
//! replica, three sentinels). The same contracts as on one `redis-server` (`store_contracts.rs`)
//! — sessions, cached answers, stored responses, shared cooldowns — through links made for
//! `redis_cluster([...])` and `redis_sentinel([...], master = ...)`; pins spread over the
//! cluster's masters and listed from all of them; and the stores written before a master is
//! killed (pins, stored responses, cached answers, a shared cooldown) are read back after the
//! failover, through the same links, with no restart.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "helpers outside `#[test]` functions fail the test on an unexpected error"
)]

mod contracts {
    pub mod cache;
    pub mod cooldown;
    pub mod responses;
    pub mod session;
}

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use src_compiler::hir::RedisTarget;
use src_runtime::cache::store::{accept_all, Lookup};
use src_runtime::cache::{CacheStore, Inserted, RedisCache, Scope};
use src_runtime::cooldown::Cooldowns;
use src_runtime::responses_state::{RedisResponses, ResponseStore};
use src_runtime::session::store::{Put, SessionStore};
use src_runtime::session::{Identity, Pin, RedisStore};
use src_runtime::store::survey::{survey, CLUSTER_SLOTS};
use src_runtime::store::{KeySpace, Links, Redis, StoreError};
use src_testkit::redis_topology::{RedisCluster, RedisSentinels, MASTER};
use src_testkit::PATIENCE;

const TIMEOUT: Duration = Duration::from_secs(2);
const TTL: u64 = 600_000;

fn cluster_target(cluster: &RedisCluster, seeds: usize) -> RedisTarget {
    let urls = cluster.urls();
    let seeds: Vec<&str> = urls.iter().take(seeds).map(String::as_str).collect();
    RedisTarget::cluster(&seeds).unwrap()
}

fn sentinel_target(set: &RedisSentinels) -> RedisTarget {
    let urls = set.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    RedisTarget::sentinel(&urls, MASTER).unwrap()
}

/// The session, cache and response contracts on stores built on one shared link to `target`.
async fn contracts_on(target: &RedisTarget) {
    let links = Links::new();
    let redis = || links.redis(target, TIMEOUT).unwrap();
    contracts::session::contract(Arc::new(RedisStore::on(redis()))).await;
    let cache = Arc::new(RedisCache::on(redis(), contracts::cache::MAX_ENTRY_BYTES));
    contracts::cache::contract(cache.clone()).await;
    contracts::cache::keeps_only_the_newest(cache.as_ref()).await;
    contracts::responses::contract(Arc::new(RedisResponses::on(redis()))).await;
    assert_eq!(links.len(), 1, "the three stores share one link");
}

fn id(i: usize) -> Identity {
    Identity {
        tenant: "t".into(),
        id: format!("s-{i}"),
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Sends `step` until it answers, across a failover: a store error is what `failure.store`
/// judges, never a hang past the store's bound (checked by the caller's timing of each step).
async fn until_answered<T, F, Fut>(mut step: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let deadline = Instant::now() + PATIENCE;
    loop {
        match step().await {
            Ok(v) => return v,
            Err(err) => {
                assert!(Instant::now() < deadline, "never answered again: {err}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_keep_the_contracts_on_a_six_node_cluster() {
    let cluster = RedisCluster::start();
    // One seed is enough: the client discovers the other five nodes.
    contracts_on(&cluster_target(&cluster, 1)).await;
    contracts::cooldown::contract(&cluster.store(3)).await;

    // Sessions spread over every master, while each session's keys stay in one slot.
    let links = Links::new();
    let store = RedisStore::on(links.redis(&cluster_target(&cluster, 3), TIMEOUT).unwrap());
    let mut keys = Vec::new();
    for i in 0..48 {
        let pin = Pin::first("small", Some("default"), now());
        assert_eq!(
            store.put_if_absent(&id(i), &pin, TTL).await.unwrap(),
            Put::Stored
        );
        keys.push(KeySpace::pin("t", &format!("s-{i}")));
    }
    let spread = cluster.spread(&keys);
    assert!(spread.len() >= 2, "pins on one master only: {spread:?}");
    for (port, _) in &spread {
        let size = cluster.command(*port, "DBSIZE");
        assert!(size.trim() != ":0", "master {port} holds no key");
    }
    // The console's listing walks every master, not the one node a keyless `SCAN` reaches.
    let mut listed: Vec<String> = store
        .list(10_000, now())
        .await
        .unwrap()
        .into_iter()
        .filter(|(identity, _)| identity.tenant == "t" && identity.id.starts_with("s-"))
        .map(|(identity, _)| identity.id)
        .collect();
    listed.sort();
    let mut expected: Vec<String> = (0..48).map(|i| format!("s-{i}")).collect();
    expected.sort();
    assert_eq!(listed, expected, "pins listed of {spread:?}");

    let found = survey(&cluster_target(&cluster, 1), TIMEOUT).await.unwrap();
    assert_eq!(found.masters.len(), 3, "{found:?}");
    assert_eq!(found.replicas.len(), 3, "{found:?}");
    assert_eq!(found.slots, Some(CLUSTER_SLOTS));
    assert!(found.serves_every_key());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_keep_the_contracts_on_a_sentinel_set() {
    let set = RedisSentinels::start();
    let target = sentinel_target(&set);
    contracts_on(&target).await;
    contracts::cooldown::contract(&set.store()).await;
    let found = survey(&target, TIMEOUT).await.unwrap();
    assert_eq!(found.masters, vec![format!("127.0.0.1:{}", set.primary())]);
    assert_eq!(found.replicas.len(), 1, "{found:?}");
}

/// What one replica of the router wrote before a failover: pins, stored responses and cached
/// answers, their keys spread over the masters.
struct Written {
    pins: Vec<(Identity, Pin)>,
    responses: Vec<String>,
    /// Each cached answer's scope, its embedding being the scope's first byte on one axis.
    answers: Vec<Scope>,
}

/// A unit embedding of the cached answer of scope `n`.
fn embedding(n: u8) -> Vec<f32> {
    let angle = f32::from(n) / 10.0;
    vec![angle.cos(), angle.sin()]
}

async fn cache_before(cache: &RedisCache, written: &mut Written) {
    for n in 0..24u8 {
        let scope = Scope([n; 32]);
        let stored = cache
            .insert(
                &scope,
                &embedding(n),
                "question",
                Bytes::from(vec![n; 3]),
                now(),
                TTL,
            )
            .await
            .unwrap();
        assert_eq!(stored, Inserted::Stored);
        written.answers.push(scope);
    }
}

async fn write_before(sessions: &RedisStore, responses: &RedisResponses) -> Written {
    let mut written = Written {
        pins: Vec::new(),
        responses: Vec::new(),
        answers: Vec::new(),
    };
    for i in 0..24 {
        let pin = Pin::first(if i % 2 == 0 { "small" } else { "strong" }, None, now());
        assert_eq!(
            sessions.put_if_absent(&id(i), &pin, TTL).await.unwrap(),
            Put::Stored
        );
        written.pins.push((id(i), pin));
        let rid = format!("resp_{i}");
        responses
            .put("t", &rid, Bytes::from(rid.clone()), now(), TTL)
            .await
            .unwrap();
        written.responses.push(rid);
    }
    written
}

/// Reads back through another replica's links everything written before the failover; each
/// call is bounded by the store timeout, so none hangs.
async fn read_after(redis: Redis, written: &Written) {
    let sessions = RedisStore::on(redis.clone());
    let responses = RedisResponses::on(redis.clone());
    for (identity, pin) in &written.pins {
        let read = until_answered(|| sessions.get(identity, now())).await;
        assert_eq!(read.as_ref(), Some(pin), "pin of {identity:?} lost");
    }
    for rid in &written.responses {
        let read = until_answered(|| responses.get("t", rid, now())).await;
        assert_eq!(read.as_deref(), Some(rid.as_bytes()), "{rid} lost");
    }
    let cache = RedisCache::on(redis, contracts::cache::MAX_ENTRY_BYTES);
    for scope in &written.answers {
        let n = scope.0[0];
        let near_to = embedding(n);
        let near = until_answered(|| {
            cache.nearest(Lookup {
                scope,
                vector: &near_to,
                threshold: 0.99,
                now_ms: now(),
                ttl_ms: TTL,
                accept: &accept_all,
            })
        })
        .await;
        assert_eq!(near.body.as_deref(), Some(&[n; 3][..]), "answer {n} lost");
    }
}

/// Calls sent while a master is down either answer or fail within the store timeout (plus a
/// margin for a loaded machine): never a hang.
async fn bounded_while_failing_over(redis: &Redis, stop: Instant) -> (usize, usize) {
    let sessions = RedisStore::on(redis.clone());
    let (mut ok, mut failed) = (0, 0);
    let mut i = 0;
    while Instant::now() < stop {
        i += 1;
        let call = tokio::time::timeout(
            redis.timeout() * 4 + Duration::from_secs(1),
            sessions.get(&id(i % 24), now()),
        )
        .await;
        match call {
            Ok(Ok(_)) => ok += 1,
            Ok(Err(_)) => failed += 1,
            Err(_) => panic!("a store call outlived its bound during the failover"),
        }
        // A client's pace, not a spin: the machine running the cluster has two cores.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    (ok, failed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_master_killed_loses_no_store_written_before_and_the_link_follows() {
    let mut cluster = RedisCluster::start();
    let target = cluster_target(&cluster, 3);
    let (a, b) = (Links::new(), Links::new());
    let timeout = Duration::from_millis(250);
    let writer = a.redis(&target, timeout).unwrap();
    let mut written = write_before(
        &RedisStore::on(writer.clone()),
        &RedisResponses::on(writer.clone()),
    )
    .await;
    cache_before(
        &RedisCache::on(writer.clone(), contracts::cache::MAX_ENTRY_BYTES),
        &mut written,
    )
    .await;
    // A shared cooldown, published by one replica and seen by another before the failover.
    let policy = contracts::cooldown::policy(&cluster.store(3));
    let cooling = Arc::new(Cooldowns::with_links(Arc::new(Links::new())));
    cooling.failed(&policy, "strong");
    let seen = Cooldowns::with_links(Arc::new(Links::new()));
    let deadline = Instant::now() + PATIENCE;
    while seen.cooling("strong").is_none() {
        assert!(Instant::now() < deadline, "the cooldown was never shared");
        tokio::time::sleep(Duration::from_millis(20)).await;
        seen.sync(&policy).await;
    }
    let reader = b.redis(&target, timeout).unwrap();
    // The master killed holds the cooldown and part of every other kind of entry.
    let victim = cluster.master_of(&KeySpace::cooldown("strong"));
    let pins: Vec<String> = (0..24)
        .map(|i| KeySpace::pin("t", &format!("s-{i}")))
        .collect();
    let answers: Vec<String> = written
        .answers
        .iter()
        .map(|s| KeySpace::cache_list(&s.0))
        .collect();
    let responses: Vec<String> = written
        .responses
        .iter()
        .map(|r| KeySpace::response("t", r))
        .collect();
    for (kind, keys) in [
        ("pins", &pins),
        ("answers", &answers),
        ("responses", &responses),
    ] {
        let spread = cluster.spread(keys);
        assert!(
            spread.iter().any(|(port, _)| *port == victim),
            "no {kind} on the master killed: {spread:?}"
        );
    }
    // The replica that will take over has every write (replication is asynchronous: what a
    // failover may lose is only what it had not received yet).
    cluster.wait_replicated(victim);
    cluster.kill(victim);
    let (ok, failed) =
        bounded_while_failing_over(&reader, Instant::now() + cluster.node_timeout() * 2).await;
    eprintln!("during the failover: {ok} answered, {failed} failed as declared");
    cluster.wait_served();
    read_after(reader, &written).await;
    // A replica that starts after the failover still finds the cooldown.
    let later = Cooldowns::with_links(Arc::new(Links::new()));
    let deadline = Instant::now() + PATIENCE;
    loop {
        later.sync(&policy).await;
        if let Some(left) = later.cooling("strong") {
            assert!(left > Duration::from_secs(59 * 60), "{left:?} of the hour");
            break;
        }
        assert!(Instant::now() < deadline, "the cooldown was lost");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let found = survey(&target, TIMEOUT).await.unwrap();
    assert_eq!(found.slots, Some(CLUSTER_SLOTS), "{found:?}");
    assert!(
        found
            .failed
            .iter()
            .any(|n| n.ends_with(&format!(":{victim}"))),
        "{found:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_primary_killed_loses_no_store_written_before_and_the_link_follows() {
    let mut set = RedisSentinels::start();
    let target = sentinel_target(&set);
    let (a, b) = (Links::new(), Links::new());
    let timeout = Duration::from_millis(250);
    let writer = a.redis(&target, timeout).unwrap();
    let mut written = write_before(
        &RedisStore::on(writer.clone()),
        &RedisResponses::on(writer.clone()),
    )
    .await;
    cache_before(
        &RedisCache::on(writer.clone(), contracts::cache::MAX_ENTRY_BYTES),
        &mut written,
    )
    .await;
    let reader = b.redis(&target, timeout).unwrap();
    // The reader has a connection to the old primary before it dies.
    let early = RedisStore::on(reader.clone());
    let first = id(0);
    until_answered(|| early.get(&first, now())).await;
    let old = set.primary();
    set.wait_replicated();
    set.kill(old);
    let (ok, failed) =
        bounded_while_failing_over(&reader, Instant::now() + Duration::from_secs(2)).await;
    eprintln!("during the failover: {ok} answered, {failed} failed as declared");
    let promoted = set.wait_promoted(old);
    assert_ne!(promoted, old);
    read_after(reader, &written).await;
    // Writes go to the promoted primary.
    let sessions = RedisStore::on(writer);
    let pin = Pin::first("small", None, now());
    let new = id(99);
    let stored = until_answered(|| sessions.put_if_absent(&new, &pin, TTL)).await;
    assert_eq!(stored, Put::Stored);
}
