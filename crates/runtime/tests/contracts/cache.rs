//! The cache store contract: what every `CacheStore` (memory, Redis, a Redis Cluster node) must
//! do — answer the nearest live entry of a scope, with its body only at the threshold and when
//! the look-alike check takes its question (passing over refused ones to the next), keep scopes
//! apart, forget entries at their ttl, keep at least the newest `PER_SCOPE` per scope (a vector
//! database: every live entry) and refuse bodies over the size limit. [`keeps_only_the_newest`]
//! is the Redis store's own bound (the memory store indexes a scope and bounds only the whole).

use std::sync::Arc;

use bytes::Bytes;
use src_runtime::cache::store::{accept_all, Lookup};
use src_runtime::cache::{CacheStore, Inserted, Nearest, Scope, PER_SCOPE};

const TTL: u64 = 60_000;
/// The per-entry size limit the stores under test are built with.
pub const MAX_ENTRY_BYTES: usize = 1_024;

/// The clock starts here, and each step of the contract runs at its own time: the memory store
/// reads the caller's time, Redis its own, so a step never sees another's expired entries.
fn t0() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn scope(n: u8) -> Scope {
    Scope([n; 32])
}

fn unit(x: f32, y: f32) -> Vec<f32> {
    let norm = (x * x + y * y).sqrt();
    vec![x / norm, y / norm]
}

/// The nearest entry to `vector` in `scope` at `now_ms`, every stored question accepted.
async fn nearest(
    store: &dyn CacheStore,
    scope: &Scope,
    vector: &[f32],
    threshold: f64,
    now_ms: u64,
    ttl_ms: u64,
) -> Nearest {
    store
        .nearest(Lookup {
            scope,
            vector,
            threshold,
            now_ms,
            ttl_ms,
            accept: &accept_all,
        })
        .await
        .unwrap()
}

/// Stores `body` at `vector` in `scope`, the answer to the question "question".
async fn insert(
    store: &dyn CacheStore,
    scope: &Scope,
    vector: &[f32],
    body: impl Into<Bytes>,
    now_ms: u64,
    ttl_ms: u64,
) -> Inserted {
    store
        .insert(scope, vector, "question", body.into(), now_ms, ttl_ms)
        .await
        .unwrap()
}

async fn an_empty_scope_has_no_nearest_entry(store: &dyn CacheStore) {
    let near = nearest(store, &scope(1), &unit(1.0, 0.0), 0.5, t0(), TTL).await;
    assert_eq!(near, Nearest::default());
}

async fn the_nearest_entry_answers_at_the_threshold(store: &dyn CacheStore) {
    let now = t0();
    let s = scope(2);
    let stored = insert(store, &s, &unit(1.0, 0.0), "east", now, TTL).await;
    assert_eq!(stored, Inserted::Stored);
    insert(store, &s, &unit(0.0, 1.0), "north", now, TTL).await;
    let near = nearest(store, &s, &unit(1.0, 0.1), 0.9, now, TTL).await;
    assert_eq!(near.body.as_deref(), Some(&b"east"[..]));
    assert!(near.score.is_some_and(|s| s > 0.99), "{near:?}");
    // Nearest, but below the threshold: the score and no body.
    let far = nearest(store, &s, &unit(1.0, 1.0), 0.99, now, TTL).await;
    assert_eq!(far.body, None);
    assert!(far.score.is_some_and(|s| s < 0.99 && s > 0.5), "{far:?}");
}

async fn scopes_are_isolated(store: &dyn CacheStore) {
    let now = t0();
    insert(store, &scope(3), &unit(1.0, 0.0), "a", now, TTL).await;
    let other = nearest(store, &scope(4), &unit(1.0, 0.0), 0.0, now, TTL).await;
    assert_eq!(other, Nearest::default());
}

async fn entries_end_at_their_ttl(store: &dyn CacheStore) {
    let now = t0();
    let s = scope(5);
    let ttl = 200;
    insert(store, &s, &unit(1.0, 0.0), "brief", now, ttl).await;
    let live = nearest(store, &s, &unit(1.0, 0.0), 0.9, now + 1, ttl).await;
    assert_eq!(live.body.as_deref(), Some(&b"brief"[..]));
    tokio::time::sleep(std::time::Duration::from_millis(ttl + 100)).await;
    let later = t0();
    let gone = nearest(store, &s, &unit(1.0, 0.0), 0.9, later, ttl).await;
    assert_eq!(gone.body, None, "an entry outlived its ttl");
}

async fn a_scope_keeps_at_least_its_newest_entries(store: &dyn CacheStore) {
    let now = t0();
    let s = scope(8);
    // A degree apart: cos 1° ≈ 0.99985, under the 0.9999 asked below.
    let at = |i: usize| {
        let angle = (60.0 + i as f32).to_radians();
        unit(angle.cos(), angle.sin())
    };
    for i in 0..PER_SCOPE {
        insert(store, &s, &at(i), format!("entry-{i}"), now, TTL).await;
    }
    for i in 0..PER_SCOPE {
        let near = nearest(store, &s, &at(i), 0.9999, now + 1, TTL).await;
        assert_eq!(
            near.body,
            Some(Bytes::from(format!("entry-{i}"))),
            "entry {i} of {PER_SCOPE}"
        );
    }
}

/// A store bounded per scope (Redis) drops the oldest entry of a scope past [`PER_SCOPE`].
pub async fn keeps_only_the_newest(store: &dyn CacheStore) {
    let now = t0();
    let s = scope(6);
    insert(store, &s, &unit(1.0, 0.0), "oldest", now, TTL).await;
    // Each newer entry a degree apart (none so alike that a store may merge them), all far from
    // the oldest.
    for i in 0..PER_SCOPE {
        let angle = (60.0 + i as f32).to_radians();
        let body = format!("newer-{i}");
        insert(
            store,
            &s,
            &unit(angle.cos(), angle.sin()),
            body,
            now + 1,
            TTL,
        )
        .await;
    }
    let near = nearest(store, &s, &unit(1.0, 0.0), 0.9, now + 2, TTL).await;
    assert_eq!(near.body, None, "the oldest entry was kept beyond the cap");
}

async fn bodies_over_the_limit_are_not_stored(store: &dyn CacheStore) {
    let now = t0();
    let s = scope(7);
    let big = vec![b'x'; MAX_ENTRY_BYTES + 1];
    let answer = insert(store, &s, &unit(1.0, 0.0), big, now, TTL).await;
    assert_eq!(answer, Inserted::TooLarge);
    let near = nearest(store, &s, &unit(1.0, 0.0), 0.0, now, TTL).await;
    assert_eq!(near, Nearest::default());
}

async fn refused_questions_are_counted_and_passed_over(store: &dyn CacheStore) {
    let now = t0();
    let s = scope(8);
    // The look-alike is the nearer; the paraphrase is next.
    for (question, body, y) in [
        ("convert 5 miles to km", &b"look-alike"[..], 0.05),
        ("convert 5 km to miles", &b"paraphrase"[..], 0.1),
    ] {
        store
            .insert(
                &s,
                &unit(1.0, y),
                question,
                Bytes::from_static(body),
                now,
                TTL,
            )
            .await
            .unwrap();
    }
    let accept = |q: &str| q == "convert 5 km to miles";
    let near = store
        .nearest(Lookup {
            scope: &s,
            vector: &unit(1.0, 0.05),
            threshold: 0.9,
            now_ms: now,
            ttl_ms: TTL,
            accept: &accept,
        })
        .await
        .unwrap();
    assert_eq!(near.body.as_deref(), Some(&b"paraphrase"[..]));
    assert_eq!(near.rejected, 1, "{near:?}");
    let refuse = |_: &str| false;
    let none = store
        .nearest(Lookup {
            scope: &s,
            vector: &unit(1.0, 0.05),
            threshold: 0.9,
            now_ms: now,
            ttl_ms: TTL,
            accept: &refuse,
        })
        .await
        .unwrap();
    assert_eq!((none.body.clone(), none.rejected), (None, 2));
    assert!(none.score.is_some_and(|s| s > 0.99), "{none:?}");
}

/// A store with no per-scope cap (a vector database) keeps every live entry of a scope: the
/// oldest is still found after more than [`PER_SCOPE`] newer ones.
async fn a_scope_keeps_every_live_entry(store: &dyn CacheStore) {
    let now = t0();
    let s = scope(9);
    insert(store, &s, &unit(1.0, 0.0), "oldest", now, TTL).await;
    for i in 0..=PER_SCOPE {
        let angle = (60.0 + i as f32 * 0.4).to_radians();
        let body = format!("newer-{i}");
        insert(
            store,
            &s,
            &unit(angle.cos(), angle.sin()),
            body,
            now + 1,
            TTL,
        )
        .await;
    }
    let near = nearest(store, &s, &unit(1.0, 0.0), 0.9, now + 2, TTL).await;
    assert_eq!(near.body.as_deref(), Some(&b"oldest"[..]));
}

/// The steps every store keeps, capped or not.
async fn common(store: &dyn CacheStore) {
    an_empty_scope_has_no_nearest_entry(store).await;
    the_nearest_entry_answers_at_the_threshold(store).await;
    scopes_are_isolated(store).await;
    entries_end_at_their_ttl(store).await;
    bodies_over_the_limit_are_not_stored(store).await;
    refused_questions_are_counted_and_passed_over(store).await;
}

/// Every step of the contract, in turn, on one store built with [`MAX_ENTRY_BYTES`].
pub async fn contract(store: Arc<dyn CacheStore>) {
    common(store.as_ref()).await;
    a_scope_keeps_at_least_its_newest_entries(store.as_ref()).await;
}

/// The contract of a store with no per-scope cap: every step but the cap's, and the oldest of
/// more than [`PER_SCOPE`] entries is still found.
#[allow(
    dead_code,
    reason = "each test binary that includes the contracts uses some of them"
)]
pub async fn contract_uncapped(store: Arc<dyn CacheStore>) {
    common(store.as_ref()).await;
    a_scope_keeps_every_live_entry(store.as_ref()).await;
}
