//! The response store contract: what every `ResponseStore` (memory, Redis, a Redis Cluster
//! node) must do — read back what was put, replace on a second put, delete once, keep tenants
//! apart (separators included) and forget a response at its ttl.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use src_runtime::responses_state::ResponseStore;

const TTL: u64 = 60_000;

/// The memory store reads the caller's time, Redis its own: the contract passes wall time.
fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

async fn what_was_put_is_read_back_and_replaced(store: &dyn ResponseStore) {
    assert_eq!(store.get("t", "resp_absent", now()).await.unwrap(), None);
    store
        .put("t", "resp_1", Bytes::from_static(b"first"), now(), TTL)
        .await
        .unwrap();
    let read = store.get("t", "resp_1", now()).await.unwrap();
    assert_eq!(read.as_deref(), Some(&b"first"[..]));
    store
        .put("t", "resp_1", Bytes::from_static(b"second"), now(), TTL)
        .await
        .unwrap();
    let read = store.get("t", "resp_1", now()).await.unwrap();
    assert_eq!(read.as_deref(), Some(&b"second"[..]));
}

async fn a_response_is_deleted_once(store: &dyn ResponseStore) {
    store
        .put("t", "resp_del", Bytes::from_static(b"x"), now(), TTL)
        .await
        .unwrap();
    assert!(store.delete("t", "resp_del", now()).await.unwrap());
    assert_eq!(store.get("t", "resp_del", now()).await.unwrap(), None);
    assert!(!store.delete("t", "resp_del", now()).await.unwrap());
}

async fn tenants_are_isolated(store: &dyn ResponseStore) {
    store
        .put("tenant-a", "resp_s", Bytes::from_static(b"a"), now(), TTL)
        .await
        .unwrap();
    assert_eq!(store.get("tenant-b", "resp_s", now()).await.unwrap(), None);
    assert!(!store.delete("tenant-b", "resp_s", now()).await.unwrap());
    let kept = store.get("tenant-a", "resp_s", now()).await.unwrap();
    assert_eq!(kept.as_deref(), Some(&b"a"[..]));
    // Separators in tenants and ids cannot make two keys meet.
    store
        .put("x:y", "z", Bytes::from_static(b"xy"), now(), TTL)
        .await
        .unwrap();
    assert_eq!(store.get("x", "y:z", now()).await.unwrap(), None);
    assert_eq!(store.get("x%3Ay", "z", now()).await.unwrap(), None);
}

async fn a_response_ends_at_its_ttl(store: &dyn ResponseStore) {
    let ttl = 200;
    store
        .put("t", "resp_brief", Bytes::from_static(b"b"), now(), ttl)
        .await
        .unwrap();
    assert!(store.get("t", "resp_brief", now()).await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(ttl + 100)).await;
    assert_eq!(
        store.get("t", "resp_brief", now()).await.unwrap(),
        None,
        "a response outlived its ttl"
    );
}

/// Every step of the contract, in turn, on one store.
pub async fn contract(store: Arc<dyn ResponseStore>) {
    what_was_put_is_read_back_and_replaced(store.as_ref()).await;
    a_response_is_deleted_once(store.as_ref()).await;
    tenants_are_isolated(store.as_ref()).await;
    a_response_ends_at_its_ttl(store.as_ref()).await;
}
