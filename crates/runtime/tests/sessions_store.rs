//! Both session stores against the same contract: the in-process `MemoryStore` and
//! `RedisStore` on a real `redis-server`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "helpers outside `#[test]` functions fail the test on an unexpected error"
)]

use std::sync::Arc;
use std::time::Duration;

use src_runtime::session::store::{
    Cas, OutcomeKey, OutcomeStats, Put, Recorded, SessionStore, Verdict, OUTCOME_WINDOW,
};
use src_runtime::session::{Identity, MemoryStore, Pin, RedisStore};
use src_testkit::redis::RedisServer;

const TTL: u64 = 60_000;
const T0: u64 = 1_700_000_000_000;

fn id(tenant: &str, id: &str) -> Identity {
    Identity {
        tenant: tenant.into(),
        id: id.into(),
    }
}

fn redis_store(server: &RedisServer) -> Arc<dyn SessionStore> {
    Arc::new(RedisStore::connect(&server.url(), Duration::from_secs(2)).unwrap())
}

async fn put_if_absent_race_has_one_winner(store: Arc<dyn SessionStore>) {
    for round in 0..20 {
        let key = id("t", &format!("race-{round}"));
        let a = Pin::first("small", Some("default"), T0);
        let b = Pin::first("strong", Some("coding"), T0);
        let (sa, ka, pa) = (Arc::clone(&store), key.clone(), a.clone());
        let (sb, kb, pb) = (Arc::clone(&store), key.clone(), b.clone());
        let ta = tokio::spawn(async move { sa.put_if_absent(&ka, &pa, TTL).await });
        let tb = tokio::spawn(async move { sb.put_if_absent(&kb, &pb, TTL).await });
        let (ra, rb) = (ta.await.unwrap().unwrap(), tb.await.unwrap().unwrap());
        let stored = store.get(&key, T0).await.unwrap().unwrap();
        match (ra, rb) {
            (Put::Stored, Put::Exists(seen)) => {
                assert_eq!(seen, a);
                assert_eq!(stored, a);
            }
            (Put::Exists(seen), Put::Stored) => {
                assert_eq!(seen, b);
                assert_eq!(stored, b);
            }
            other => panic!("round {round}: not exactly one winner: {other:?}"),
        }
    }
}

async fn compare_and_set_detects_conflicts(store: Arc<dyn SessionStore>) {
    let key = id("t", "cas");
    let first = Pin::first("small", None, T0);
    assert_eq!(
        store.put_if_absent(&key, &first, TTL).await.unwrap(),
        Put::Stored
    );
    let moved = first.switched("strong", Some("coding"), T0 + 1, None);
    assert_eq!(
        store
            .compare_and_set(&key, &first, &moved, TTL)
            .await
            .unwrap(),
        Cas::Stored
    );
    let late = first.switched("medium", None, T0 + 2, None);
    assert_eq!(
        store
            .compare_and_set(&key, &first, &late, TTL)
            .await
            .unwrap(),
        Cas::Conflict(Some(moved.clone()))
    );
    assert_eq!(store.get(&key, T0 + 2).await.unwrap(), Some(moved));
    let absent = id("t", "never");
    assert_eq!(
        store
            .compare_and_set(&absent, &first, &late, TTL)
            .await
            .unwrap(),
        Cas::Conflict(None)
    );
}

/// Calls that touch a pin between a switch's read and its write stay counted.
async fn compare_and_set_keeps_concurrent_touches(store: Arc<dyn SessionStore>) {
    let key = id("t", "cas-touch");
    let first = Pin::first("small", None, T0);
    store.put_if_absent(&key, &first, TTL).await.unwrap();
    let read = store
        .get_and_touch(&key, T0 + 10, TTL)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.turns, 2);
    // Two other calls touch the pin while this one decides to switch.
    assert!(store.touch(&key, T0 + 20, TTL).await.unwrap());
    assert!(store.touch(&key, T0 + 30, TTL).await.unwrap());
    let moved = read.switched("strong", Some("coding"), T0 + 15, None);
    assert_eq!(
        store
            .compare_and_set(&key, &read, &moved, TTL)
            .await
            .unwrap(),
        Cas::Stored
    );
    let stored = store.get(&key, T0 + 30).await.unwrap().unwrap();
    assert_eq!(stored.model, "strong");
    assert_eq!(stored.version, read.version + 1);
    assert_eq!(stored.turns, 4, "the two concurrent touches are kept");
    assert_eq!(stored.seen_ms, T0 + 30, "the last touch's time is kept");
}

async fn touch_slides_live_pins_and_leaves_stale_ones(store: Arc<dyn SessionStore>) {
    let key = id("t", "ttl");
    let ttl = 1_000;
    store
        .put_if_absent(&key, &Pin::first("small", None, T0), ttl)
        .await
        .unwrap();
    let touched = store
        .get_and_touch(&key, T0 + 900, ttl)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((touched.turns, touched.seen_ms), (2, T0 + 900));
    // 1,800 ms after creation but only 900 after the touch: still live.
    let again = store
        .get_and_touch(&key, T0 + 1_800, ttl)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((again.turns, again.seen_ms), (3, T0 + 1_800));
    assert!(store.touch(&key, T0 + 2_000, ttl).await.unwrap());
    // Idle for a whole ttl: stale, answered untouched.
    let stale = store
        .get_and_touch(&key, T0 + 3_000, ttl)
        .await
        .unwrap()
        .unwrap();
    assert!(stale.is_stale(T0 + 3_000, ttl));
    assert_eq!((stale.turns, stale.seen_ms), (4, T0 + 2_000));
    assert!(!store.touch(&key, T0 + 3_500, ttl).await.unwrap());
    assert!(!store.touch(&id("t", "absent"), T0, ttl).await.unwrap());
}

async fn tenants_are_isolated(store: Arc<dyn SessionStore>) {
    let a = id("tenant-a", "shared-id");
    let b = id("tenant-b", "shared-id");
    store
        .put_if_absent(&a, &Pin::first("small", None, T0), TTL)
        .await
        .unwrap();
    assert_eq!(store.get(&b, T0).await.unwrap(), None);
    assert_eq!(
        store
            .put_if_absent(&b, &Pin::first("strong", None, T0), TTL)
            .await
            .unwrap(),
        Put::Stored
    );
    assert_eq!(
        store.get(&a, T0).await.unwrap().map(|p| p.model),
        Some("small".into())
    );
    // Separators in tenants and ids cannot make two keys meet.
    let c = id("x:y", "z");
    let d = id("x", "y:z");
    store
        .put_if_absent(&c, &Pin::first("small", None, T0), TTL)
        .await
        .unwrap();
    assert_eq!(store.get(&d, T0).await.unwrap(), None);

    let out_a = OutcomeKey {
        session: a.clone(),
        model: "small".into(),
    };
    let out_b = OutcomeKey {
        session: b.clone(),
        model: "small".into(),
    };
    store
        .record_outcome(&out_a, Verdict::Fail, Some("k"), T0, TTL)
        .await
        .unwrap();
    // The same idempotency key under another tenant is another key.
    assert_eq!(
        store
            .record_outcome(&out_b, Verdict::Pass, Some("k"), T0, TTL)
            .await
            .unwrap(),
        Recorded::New
    );
    assert_eq!(
        store.outcomes(&out_a, T0).await.unwrap(),
        OutcomeStats { count: 1, fails: 1 }
    );
    assert_eq!(
        store.outcomes(&out_b, T0).await.unwrap(),
        OutcomeStats { count: 1, fails: 0 }
    );
}

async fn outcomes_are_windowed_and_idempotent(store: Arc<dyn SessionStore>) {
    let key = OutcomeKey {
        session: id("t", "outcomes"),
        model: "strong".into(),
    };
    assert_eq!(
        store.outcomes(&key, T0).await.unwrap(),
        OutcomeStats::default()
    );
    assert_eq!(
        store
            .record_outcome(&key, Verdict::Fail, Some("step-1"), T0, TTL)
            .await
            .unwrap(),
        Recorded::New
    );
    assert_eq!(
        store
            .record_outcome(&key, Verdict::Pass, Some("step-1"), T0, TTL)
            .await
            .unwrap(),
        Recorded::Duplicate
    );
    assert_eq!(
        store.outcomes(&key, T0).await.unwrap(),
        OutcomeStats { count: 1, fails: 1 }
    );
    for _ in 0..OUTCOME_WINDOW {
        store
            .record_outcome(&key, Verdict::Pass, None, T0, TTL)
            .await
            .unwrap();
    }
    // The one failure has left the window of the most recent outcomes.
    assert_eq!(
        store.outcomes(&key, T0).await.unwrap(),
        OutcomeStats {
            count: OUTCOME_WINDOW as u64,
            fails: 0
        }
    );
    let other_model = OutcomeKey {
        model: "small".into(),
        ..key.clone()
    };
    assert_eq!(
        store.outcomes(&other_model, T0).await.unwrap(),
        OutcomeStats::default()
    );
}

async fn contract(store: Arc<dyn SessionStore>) {
    put_if_absent_race_has_one_winner(Arc::clone(&store)).await;
    compare_and_set_detects_conflicts(Arc::clone(&store)).await;
    compare_and_set_keeps_concurrent_touches(Arc::clone(&store)).await;
    touch_slides_live_pins_and_leaves_stale_ones(Arc::clone(&store)).await;
    tenants_are_isolated(Arc::clone(&store)).await;
    outcomes_are_windowed_and_idempotent(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_store_keeps_the_contract() {
    contract(Arc::new(MemoryStore::default())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_keeps_the_contract() {
    let server = RedisServer::start();
    contract(redis_store(&server)).await;
}

#[tokio::test]
async fn memory_store_is_bounded_by_least_recent_use() {
    let store = MemoryStore::new(3);
    for i in 0..3 {
        store
            .put_if_absent(
                &id("t", &format!("s{i}")),
                &Pin::first("small", None, T0),
                TTL,
            )
            .await
            .unwrap();
    }
    // s0 is used again, so s1 is now the least recently used.
    assert!(store
        .get_and_touch(&id("t", "s0"), T0 + 1, TTL)
        .await
        .unwrap()
        .is_some());
    store
        .put_if_absent(&id("t", "s3"), &Pin::first("small", None, T0 + 2), TTL)
        .await
        .unwrap();
    assert_eq!(store.len(), 3);
    assert!(store.get(&id("t", "s1"), T0 + 2).await.unwrap().is_none());
    for kept in ["s0", "s2", "s3"] {
        assert!(
            store.get(&id("t", kept), T0 + 2).await.unwrap().is_some(),
            "{kept}"
        );
    }
}

#[tokio::test]
async fn memory_store_forgets_pins_after_twice_their_ttl() {
    let store = MemoryStore::default();
    let key = id("t", "gone");
    store
        .put_if_absent(&key, &Pin::first("small", None, T0), 1_000)
        .await
        .unwrap();
    assert!(store.get(&key, T0 + 1_999).await.unwrap().is_some());
    assert!(store.get(&key, T0 + 2_000).await.unwrap().is_none());
    assert!(store.is_empty());
}

#[tokio::test]
async fn redis_keys_expire_and_follow_the_documented_layout() {
    let server = RedisServer::start();
    let store = redis_store(&server);
    let key = id("tenant", "short-lived");
    // A 100 ms ttl keeps the pin 200 ms in Redis.
    store
        .put_if_absent(&key, &Pin::first("small", None, T0), 100)
        .await
        .unwrap();
    let ttl = server.command("PTTL sr:v1:pin:tenant:short-lived");
    let remaining: i64 = ttl.trim().trim_start_matches(':').parse().unwrap();
    assert!((1..=200).contains(&remaining), "PTTL answered {ttl}");
    assert!(server
        .command("HGET sr:v1:pin:tenant:short-lived m")
        .contains("small"));
    let mut gone = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if store.get(&key, T0).await.unwrap().is_none() {
            gone = true;
            break;
        }
    }
    assert!(gone, "the pin outlived its retention");
}

#[tokio::test]
async fn redis_store_fails_fast_when_redis_is_gone_and_recovers() {
    let mut server = RedisServer::start();
    let store = RedisStore::connect(&server.url(), Duration::from_millis(300)).unwrap();
    let key = id("t", "outage");
    store
        .put_if_absent(&key, &Pin::first("small", None, T0), TTL)
        .await
        .unwrap();
    server.kill();
    let err = store.get(&key, T0).await.unwrap_err();
    assert!(
        matches!(err.kind(), "timeout" | "unavailable"),
        "unexpected error {err:?}"
    );
    server.restart();
    // The restarted server is empty; the store reconnects by itself.
    let mut answered = None;
    for _ in 0..100 {
        if let Ok(pin) = store.get(&key, T0).await {
            answered = Some(pin);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(answered, Some(None), "the store never recovered");
    assert_eq!(
        store
            .put_if_absent(&key, &Pin::first("strong", None, T0), TTL)
            .await
            .unwrap(),
        Put::Stored
    );
}

#[test]
fn a_malformed_redis_url_is_a_config_error() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let err = RedisStore::connect("not a url", Duration::from_millis(100))
            .err()
            .map(|e| e.kind());
        assert_eq!(err, Some("config"));
    });
}
