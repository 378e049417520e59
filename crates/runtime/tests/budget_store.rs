//! The budget store contract, run alike against the memory store, a real `redis-server`, a
//! one-node Redis Cluster (which refuses a script whose keys span two slots) and a six-node
//! Redis Cluster: the settle rule, fixed windows, charges, the listing read, and one request's
//! budgets on different `per` values (different slots), settled by the same rule and exact
//! under concurrency; and a reservation that carries the session's pin read.

use std::sync::Arc;
use std::time::Duration;

use src_compiler::hir::{BudgetId, BudgetUnit, RedisTarget};
use src_compiler::procedure::budget::{BudgetAsk, BudgetKey};
use src_runtime::budget::{BudgetStore, Counter, MemoryBudgets, RedisBudgets};
use src_runtime::hooks::PinRead;
use src_runtime::session::identity::Identity;
use src_runtime::session::pin::Pin;
use src_runtime::session::{RedisStore, SessionStore};
use src_runtime::store::{KeySpace, Links, Redis};
use src_testkit::redis::RedisServer;
use src_testkit::redis_topology::RedisCluster;
use src_testkit::TestResult;

const HOUR: u64 = 3_600_000;

fn ask(i: u32, unit: BudgetUnit, limit: f64, refuses: bool) -> BudgetAsk {
    BudgetAsk {
        budget: BudgetId(i),
        key: BudgetKey::Tenant,
        unit,
        limit,
        window_ms: HOUR,
        reserve: if unit == BudgetUnit::Requests {
            1.0
        } else {
            0.0
        },
        refuses,
    }
}

fn counter(name: &str, tenant: &str) -> Counter {
    Counter {
        budget: name.into(),
        per: format!("t/{tenant}"),
        window_ms: HOUR,
    }
}

/// Every case, against one store; `tenant` keeps runs apart.
async fn contract(store: Arc<dyn BudgetStore>, tenant: &str) -> TestResult {
    let now = 10 * HOUR + 5_000;
    let keyed = vec![
        (
            ask(0, BudgetUnit::Requests, 2.0, false),
            counter("strong", tenant),
        ),
        (
            ask(1, BudgetUnit::Requests, 3.0, true),
            counter("per_key", tenant),
        ),
        (
            ask(2, BudgetUnit::Tokens, 100.0, false),
            counter("tokens", tenant),
        ),
    ];
    let used = |uses: &[src_compiler::procedure::budget::BudgetUse]| -> Vec<f64> {
        uses.iter().map(|u| u.used).collect()
    };
    let first = store.reserve(&keyed, now).await?;
    assert_eq!(used(&first), [0.0, 0.0, 0.0]);
    assert!(first.iter().all(|u| !u.exceeded));
    assert_eq!(first[0].retry_after_s, 3595, "the window ends on the hour");
    let second = store.reserve(&keyed, now).await?;
    assert_eq!(used(&second), [1.0, 1.0, 0.0]);
    // `strong` is spent (a downgrade): `per_key` still reserves.
    let third = store.reserve(&keyed, now).await?;
    assert_eq!(used(&third), [2.0, 2.0, 0.0]);
    assert!(third[0].exceeded && !third[1].exceeded);
    // `per_key` is spent too, but `strong` acts first: not a refusal, nothing more to reserve.
    let fourth = store.reserve(&keyed, now).await?;
    assert_eq!(used(&fourth), [2.0, 3.0, 0.0]);
    // A refusing budget acting first reserves nothing anywhere.
    let refusing_first = vec![keyed[1].clone(), keyed[2].clone()];
    let refused = store.reserve(&refusing_first, now).await?;
    assert!(refused[0].exceeded);
    assert_eq!(store.used(&keyed[1].1, now).await?, 3.0);
    // Tokens are charged, fractions too, and read back.
    store.charge(&keyed[2].1, 60.0, now).await?;
    store.charge(&keyed[2].1, 40.5, now).await?;
    assert_eq!(store.used(&keyed[2].1, now).await?, 100.5);
    let spent = store.reserve(&keyed[2..], now).await?;
    assert!(spent[0].exceeded);
    // The next window starts from nothing.
    let next = now + HOUR;
    assert_eq!(used(&store.reserve(&keyed, next).await?), [0.0, 0.0, 0.0]);
    Ok(())
}

fn per_text(name: &str, text: &str) -> Counter {
    Counter {
        budget: name.into(),
        per: format!("v/{text}"),
        window_ms: HOUR,
    }
}

/// One request's budgets on two `per` values: the first exceeded in declaration order acts
/// across both, and what is reserved follows from it, whichever value each budget counts.
async fn across_values(store: Arc<dyn BudgetStore>, tenant: &str) -> TestResult {
    let now = 20 * HOUR + 1_000;
    let used = |uses: &[src_compiler::procedure::budget::BudgetUse]| -> Vec<f64> {
        uses.iter().map(|u| u.used).collect()
    };
    // A refusing budget on the tenant acts: the team's budget gives its unit back.
    let refusing = vec![
        (
            ask(0, BudgetUnit::Requests, 1.0, true),
            counter("per_key", tenant),
        ),
        (
            ask(1, BudgetUnit::Requests, 10.0, false),
            per_text("per_team", tenant),
        ),
    ];
    assert_eq!(used(&store.reserve(&refusing, now).await?), [0.0, 0.0]);
    let refused = store.reserve(&refusing, now).await?;
    assert_eq!(used(&refused), [1.0, 1.0]);
    assert!(refused[0].exceeded && !refused[1].exceeded);
    assert_eq!(store.used(&refusing[1].1, now).await?, 1.0, "given back");
    // A downgrade on the team acts before the tenant's refusing budget: the tenant's other
    // budget still reserves, though its own group alone would have refused.
    let downgrade_first = vec![
        (
            ask(0, BudgetUnit::Requests, 1.0, false),
            per_text("team_strong", tenant),
        ),
        (
            ask(1, BudgetUnit::Requests, 1.0, true),
            counter("key_cap", tenant),
        ),
        (
            ask(2, BudgetUnit::Requests, 10.0, false),
            counter("key_all", tenant),
        ),
    ];
    assert_eq!(
        used(&store.reserve(&downgrade_first, now).await?),
        [0.0, 0.0, 0.0]
    );
    let second = store.reserve(&downgrade_first, now).await?;
    assert_eq!(used(&second), [1.0, 1.0, 1.0]);
    assert!(second[0].exceeded && second[1].exceeded && !second[2].exceeded);
    let after: Vec<f64> = [
        store.used(&downgrade_first[0].1, now).await?,
        store.used(&downgrade_first[1].1, now).await?,
        store.used(&downgrade_first[2].1, now).await?,
    ]
    .to_vec();
    assert_eq!(after, [1.0, 1.0, 2.0]);
    Ok(())
}

/// Concurrent requests whose budgets span two `per` values admit exactly the tenant's limit,
/// and the team's budget keeps exactly the admitted requests' units.
async fn exact_across_values(store: Arc<dyn BudgetStore>, tenant: &str) -> TestResult {
    let now = 30 * HOUR + 1_000;
    let keyed = Arc::new(vec![
        (
            ask(0, BudgetUnit::Requests, 10.0, true),
            counter("per_key", tenant),
        ),
        (
            ask(1, BudgetUnit::Requests, 1000.0, false),
            per_text("per_team", tenant),
        ),
    ]);
    let mut requests = Vec::new();
    for _ in 0..40 {
        let (store, keyed) = (Arc::clone(&store), Arc::clone(&keyed));
        requests.push(tokio::spawn(async move {
            store
                .reserve(&keyed, now)
                .await
                .map(|uses| !uses[0].exceeded)
        }));
    }
    let mut admitted = 0;
    for request in requests {
        if request.await?? {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 10);
    assert_eq!(store.used(&keyed[0].1, now).await?, 10.0);
    assert_eq!(store.used(&keyed[1].1, now).await?, 10.0);
    Ok(())
}

#[tokio::test]
async fn memory() -> TestResult {
    let store: Arc<dyn BudgetStore> = Arc::new(MemoryBudgets::default());
    across_values(Arc::clone(&store), "mem").await?;
    exact_across_values(Arc::clone(&store), "mem").await?;
    contract(store, "mem").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_budgets_on_different_values_live_in_different_slots() -> TestResult {
    let cluster = RedisCluster::start();
    let urls = cluster.urls();
    let seeds: Vec<&str> = urls.iter().map(String::as_str).collect();
    let target = RedisTarget::cluster(&seeds)?;
    let links = Links::new();
    let store: Arc<dyn BudgetStore> = Arc::new(RedisBudgets::on(
        links.redis(&target, Duration::from_secs(2))?,
    ));
    across_values(Arc::clone(&store), "six").await?;
    exact_across_values(Arc::clone(&store), "six").await?;
    contract(store, "six").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis() -> TestResult {
    let server = RedisServer::start();
    let conn = Redis::connect(&server.url(), Duration::from_secs(2))?;
    let store: Arc<dyn BudgetStore> = Arc::new(RedisBudgets::on(conn));
    across_values(Arc::clone(&store), "redis").await?;
    exact_across_values(Arc::clone(&store), "redis").await?;
    contract(store, "redis").await
}

#[tokio::test]
async fn redis_cluster_one_tenants_budgets_share_a_slot() -> TestResult {
    let server = RedisServer::start_cluster();
    let conn = Redis::connect(&server.url(), Duration::from_secs(2))?;
    let store: Arc<dyn BudgetStore> = Arc::new(RedisBudgets::on(conn));
    across_values(Arc::clone(&store), "cluster").await?;
    contract(store, "cluster").await
}

/// A pin store, and a way to send its Redis one command.
type Pins<'a> = Option<(&'a RedisStore, &'a dyn Fn(&str) -> String)>;

/// A reservation that carries a session's pin read (`reserve_carrying`): it reserves as
/// `reserve` does and answers the pin's hash as it was, touched; a refusal leaves the pin alone;
/// `shared` says whether the store carries the read (not memory, nor a cluster node it reaches
/// as one server, which refuses a script over two slots and is then reserved from alone), and
/// `beside` that it reads the pin beside the script (a cluster), touching it even when the
/// budgets refuse.
async fn carrying(
    store: Arc<dyn BudgetStore>,
    pins: Pins<'_>,
    tenant: &str,
    (shared, beside): (bool, bool),
) -> TestResult {
    let now = 10 * HOUR + 5_000;
    let keyed = vec![(
        ask(0, BudgetUnit::Requests, 2.0, true),
        counter("per_key", tenant),
    )];
    let identity = Identity {
        tenant: tenant.into(),
        id: "task-1".into(),
    };
    let ttl = 600_000;
    let read = PinRead {
        key: KeySpace::pin(tenant, "task-1"),
        now_ms: now,
        ttl_ms: ttl,
        retain_ms: 2 * ttl,
    };
    if let Some((pins, _)) = pins {
        pins.put_if_absent(&identity, &Pin::first("strong", None, now - 1_000), ttl)
            .await?;
    }
    let turns = |pins: Pins<'_>| pins.map(|(_, command)| command(&format!("HGET {} t", read.key)));
    let before = turns(pins);
    for used in [0.0, 1.0] {
        let carried = store.reserve_carrying(&keyed, now, &read).await?;
        assert_eq!(carried.uses.len(), 1);
        assert_eq!(carried.uses[0].used, used, "{tenant}");
        assert!(!carried.uses[0].exceeded);
        match (&carried.pin, shared) {
            (Some(fields), true) => {
                let at = fields.iter().position(|f| f == "m");
                let model = at.and_then(|i| fields.get(i + 1));
                assert_eq!(model.map(String::as_str), Some("strong"), "{fields:?}");
            }
            (None, false) => {}
            (pin, _) => panic!("{tenant}: carried {pin:?}, expected shared = {shared}"),
        }
    }
    if shared {
        assert_ne!(
            turns(pins),
            before,
            "{tenant}: an admitted call touches its pin"
        );
    }
    let touched = turns(pins);
    let refused = store.reserve_carrying(&keyed, now, &read).await?;
    assert!(refused.uses[0].exceeded);
    assert_eq!(refused.pin, None, "{tenant}: a refusal reads no pin");
    assert_eq!(
        store.used(&keyed[0].1, now).await?,
        2.0,
        "{tenant}: reserved once per admitted call"
    );
    if shared && !beside {
        assert_eq!(turns(pins), touched, "{tenant}: a refusal touches no pin");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_carries_the_pin_read_where_one_script_may() -> TestResult {
    let memory: Arc<dyn BudgetStore> = Arc::new(MemoryBudgets::default());
    carrying(memory, None, "mem", (false, false)).await?;

    let server = RedisServer::start();
    let conn = Redis::connect(&server.url(), Duration::from_secs(2))?;
    let pins = RedisStore::on(conn.clone());
    let command = |line: &str| server.command(line);
    let store: Arc<dyn BudgetStore> = Arc::new(RedisBudgets::on(conn));
    carrying(store, Some((&pins, &command)), "one", (true, false)).await?;

    // A cluster node named as one server: the joint script is refused, nothing reserved twice.
    let node = RedisServer::start_cluster();
    let conn = Redis::connect(&node.url(), Duration::from_secs(2))?;
    let pins = RedisStore::on(conn.clone());
    let command = |line: &str| node.command(line);
    let store: Arc<dyn BudgetStore> = Arc::new(RedisBudgets::on(conn));
    carrying(
        Arc::clone(&store),
        Some((&pins, &command)),
        "node",
        (false, false),
    )
    .await?;
    carrying(store, Some((&pins, &command)), "node-again", (false, false)).await?;

    // The same node as a cluster: the pin's read goes beside the script.
    let target = RedisTarget::cluster(&[node.url().as_str()])?;
    let links = Links::new();
    let conn = links.redis(&target, Duration::from_secs(2))?;
    let pins = RedisStore::on(conn.clone());
    let store: Arc<dyn BudgetStore> = Arc::new(RedisBudgets::on(conn));
    carrying(store, Some((&pins, &command)), "cluster", (true, true)).await
}
