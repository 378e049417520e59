//! The session store contract: what every `SessionStore` (memory, Redis, a Redis Cluster node)
//! must do — one winner when first calls race, compare-and-set on the version read, sliding
//! ttls, tenants kept apart, windowed and idempotent outcomes.

use std::sync::Arc;

use src_runtime::session::store::{
    Cas, OutcomeKey, OutcomeStats, Put, Recorded, SessionStore, Verdict, OUTCOME_WINDOW,
};
use src_runtime::session::{Identity, Pin};

const TTL: u64 = 60_000;
const T0: u64 = 1_700_000_000_000;

fn id(tenant: &str, id: &str) -> Identity {
    Identity {
        tenant: tenant.into(),
        id: id.into(),
    }
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

/// Every step of the contract, in turn, on one store.
pub async fn contract(store: Arc<dyn SessionStore>) {
    put_if_absent_race_has_one_winner(Arc::clone(&store)).await;
    compare_and_set_detects_conflicts(Arc::clone(&store)).await;
    compare_and_set_keeps_concurrent_touches(Arc::clone(&store)).await;
    touch_slides_live_pins_and_leaves_stale_ones(Arc::clone(&store)).await;
    tenants_are_isolated(Arc::clone(&store)).await;
    outcomes_are_windowed_and_idempotent(store).await;
}
