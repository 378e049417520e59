//! The budget store contract, run alike against the memory store, a real `redis-server` and a
//! one-node Redis Cluster (which refuses a script whose keys span two slots): the settle rule,
//! fixed windows, charges, and the listing read.

use std::sync::Arc;
use std::time::Duration;

use src_compiler::hir::{BudgetId, BudgetUnit};
use src_compiler::procedure::budget::{BudgetAsk, BudgetKey};
use src_runtime::budget::{BudgetStore, Counter, MemoryBudgets, RedisBudgets};
use src_runtime::store::Redis;
use src_testkit::redis::RedisServer;
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

#[tokio::test]
async fn memory() -> TestResult {
    contract(Arc::new(MemoryBudgets::default()), "mem").await
}

#[tokio::test]
async fn redis() -> TestResult {
    let server = RedisServer::start();
    let conn = Redis::connect(&server.url(), Duration::from_secs(2))?;
    contract(Arc::new(RedisBudgets::on(conn)), "redis").await
}

#[tokio::test]
async fn redis_cluster_one_tenants_budgets_share_a_slot() -> TestResult {
    let server = RedisServer::start_cluster();
    let conn = Redis::connect(&server.url(), Duration::from_secs(2))?;
    contract(Arc::new(RedisBudgets::on(conn)), "cluster").await
}
