//! What the two session stores do beyond the shared contract (`store_contracts.rs`): the
//! memory store's bounds, and Redis expiry, layout and outages on a real `redis-server`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "helpers outside `#[test]` functions fail the test on an unexpected error"
)]

use std::sync::Arc;
use std::time::Duration;

use src_runtime::session::store::{Put, SessionStore};
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
    let ttl = server.command("PTTL sr:v1:{tenant:short-lived}:pin");
    let remaining: i64 = ttl.trim().trim_start_matches(':').parse().unwrap();
    assert!((1..=200).contains(&remaining), "PTTL answered {ttl}");
    assert!(server
        .command("HGET sr:v1:{tenant:short-lived}:pin m")
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
