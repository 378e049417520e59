//! Every store kind against the same contracts, on its real server: the session, cache and
//! response stores in memory, on a `redis-server`, and on a one-node Redis Cluster (which
//! refuses any script or transaction whose keys span two hash slots), the cache store on
//! milvus-lite (Milvus's gRPC API; no per-scope cap there), and the cooldowns one
//! replica shares with another through Redis and through the cluster node. Beside them, the key
//! layout itself: every key one multi-key step touches hashes to one Cluster slot, computed here
//! with the Cluster specification's CRC16 and checked against the server's own `CLUSTER
//! KEYSLOT`. The model memo's shared tier keeps its contract in its own module's tests
//! (`models::shared_memo`, on `redis-server` and the cluster node): its type is the runtime's own.

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

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use src_compiler::hir::MilvusTarget;
use src_runtime::cache::{MemoryCache, MilvusCache, RedisCache};
use src_runtime::responses_state::{MemoryResponses, RedisResponses, ResponseStore};
use src_runtime::session::{MemoryStore, RedisStore};
use src_runtime::store::{KeySpace, Links};
use src_testkit::milvus::MilvusServer;
use src_testkit::redis::RedisServer;

const TIMEOUT: Duration = Duration::from_secs(2);

/// The three contracts on stores built on one shared link to `server`, as a server builds them.
async fn redis_contracts(server: &RedisServer) {
    let links = Links::new();
    let url = server.url();
    let redis = || links.redis_url(&url, TIMEOUT).unwrap();
    contracts::session::contract(Arc::new(RedisStore::on(redis()))).await;
    let cache = Arc::new(RedisCache::on(redis(), contracts::cache::MAX_ENTRY_BYTES));
    contracts::cache::contract(cache.clone()).await;
    contracts::cache::keeps_only_the_newest(cache.as_ref()).await;
    contracts::responses::contract(Arc::new(RedisResponses::on(redis()))).await;
    // The sealed vaults of redacted chains are a response store under keys of their own.
    let vaults = RedisResponses::vaults_on(redis());
    contracts::responses::contract(Arc::new(RedisResponses::vaults_on(redis()))).await;
    let responses = RedisResponses::on(redis());
    let value = bytes::Bytes::from_static(b"a response");
    responses
        .put("t", "resp_same", value, 0, 60_000)
        .await
        .unwrap();
    assert_eq!(vaults.get("t", "resp_same", 0).await.unwrap(), None);
    assert_eq!(links.len(), 1, "the three stores share one link");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_session_store_keeps_the_contract() {
    contracts::session::contract(Arc::new(MemoryStore::default())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn milvus_cache_store_keeps_the_contract() {
    let server = MilvusServer::start();
    let target = MilvusTarget::parse(&server.url(), Some("contract")).unwrap();
    let store = MilvusCache::new(target, TIMEOUT, contracts::cache::MAX_ENTRY_BYTES);
    contracts::cache::contract_uncapped(Arc::new(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_cache_store_keeps_the_contract() {
    let store = MemoryCache::new(1_000, 1 << 20, contracts::cache::MAX_ENTRY_BYTES);
    contracts::cache::contract(Arc::new(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_response_store_keeps_the_contract() {
    contracts::responses::contract(Arc::new(MemoryResponses::new(1_000, 1 << 20))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stores_keep_the_contracts() {
    let server = RedisServer::start();
    redis_contracts(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stores_keep_the_contracts_on_a_cluster_node() {
    let server = RedisServer::start_cluster();
    redis_contracts(&server).await;
    // The contracts wrote keys of every kind; the node accepted each multi-key step.
    assert!(server.command("DBSIZE").starts_with(':'));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_cooldowns_keep_the_contract_on_redis_and_a_cluster_node() {
    let server = RedisServer::start();
    contracts::cooldown::contract(&format!("redis(\"{}\")", server.url())).await;
    let cluster = RedisServer::start_cluster();
    contracts::cooldown::contract(&format!("redis(\"{}\")", cluster.url())).await;
}

/// The cluster fixture is a real check: it refuses what a cluster refuses.
#[test]
fn a_cluster_node_refuses_a_step_over_two_slots() {
    let server = RedisServer::start_cluster();
    let spread = server.command("EVAL \"return redis.call('MGET', KEYS[1], KEYS[2])\" 2 a b");
    assert!(spread.contains("CROSSSLOT"), "{spread}");
    let tagged = server.command("EVAL \"return redis.call('MGET', KEYS[1], KEYS[2])\" 2 {x}a {x}b");
    assert!(tagged.starts_with('*'), "{tagged}");
}

/// CRC16-XMODEM (polynomial 0x1021, initial 0), as the Redis Cluster specification defines it.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The Cluster slot of `key`: only the hash tag (between the first `{` and the next `}`) is
/// hashed when it is not empty.
fn slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let hashed = match bytes.iter().position(|&b| b == b'{') {
        Some(open) => match bytes[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &bytes[open + 1..open + 1 + len],
            _ => bytes,
        },
        None => bytes,
    };
    crc16(hashed) % 16384
}

#[test]
fn the_slot_function_follows_the_cluster_specification() {
    assert_eq!(crc16(b"123456789"), 0x31C3);
    assert_eq!(slot("{user1000}.following"), slot("{user1000}.followers"));
    assert_eq!(slot("foo{}{bar}"), crc16(b"foo{}{bar}") % 16384);
    assert_eq!(slot("foo{{bar}}zap"), crc16(b"{bar") % 16384);
    assert_eq!(slot("foo{bar}{zap}"), crc16(b"bar") % 16384);
    let server = RedisServer::start_cluster();
    for key in [
        KeySpace::pin("t", "s"),
        KeySpace::cache_list(&[7; 32]),
        KeySpace::cooldown("m"),
        KeySpace::memo(&[1; 32]),
        "plain".to_owned(),
    ] {
        let answer = server.command(&format!("CLUSTER KEYSLOT {key}"));
        assert_eq!(answer.trim(), format!(":{}", slot(&key)), "{key}");
    }
}

/// Parts that try to break a key's tag: separators, braces, escapes, empty strings.
const PARTS: &[&str] = &["t", "", "a:b", "{x}", "}", "{", "%7B", "x}{y", "ünï"];

#[test]
fn every_multi_key_step_touches_one_slot() {
    for tenant in PARTS {
        for session in PARTS {
            // Recording an outcome: one script over the window and the idempotency key.
            let pin = slot(&KeySpace::pin(tenant, session));
            for other in PARTS {
                assert_eq!(slot(&KeySpace::outcomes(tenant, session, other)), pin);
                assert_eq!(slot(&KeySpace::idempotency(tenant, session, other)), pin);
            }
        }
    }
    // Storing an answer: one transaction over the scope's list and the new body.
    for n in 0..=255u8 {
        let scope = [n; 32];
        let list = slot(&KeySpace::cache_list(&scope));
        assert_eq!(slot(&KeySpace::cache_body(&scope, &[n; 16])), list);
        assert_eq!(slot(&KeySpace::cache_body(&scope, &[0; 16])), list);
    }
    // Reading the cooldowns: one pipeline over every model's key.
    let cooling: HashSet<u16> = PARTS.iter().map(|m| slot(&KeySpace::cooldown(m))).collect();
    assert_eq!(cooling.len(), 1);
}

#[test]
fn tags_spread_sessions_and_scopes_over_the_cluster() {
    let sessions: HashSet<u16> = (0..64)
        .map(|i| slot(&KeySpace::pin("t", &format!("s-{i}"))))
        .collect();
    assert!(
        sessions.len() > 32,
        "sessions share too few slots: {}",
        sessions.len()
    );
    let scopes: HashSet<u16> = (0..64u8)
        .map(|n| slot(&KeySpace::cache_list(&[n; 32])))
        .collect();
    assert!(
        scopes.len() > 32,
        "scopes share too few slots: {}",
        scopes.len()
    );
}
