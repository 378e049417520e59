//! What a budget costs per request: the request procedure driven to its decision without
//! budgets, then the same policy with a `requests` and a `tokens` budget per tenant answered by
//! the memory store (the tenant's hash, the counters' keys and the atomic reservation), and by
//! Redis over loopback (one script, one round trip) next to a `PING` through the same client.
//! Printed at the end as the time added and the ratio to the decision without budgets.
//!
//! Needs `redis-server` on the PATH for the Redis case (it is started on a free port).

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use src_compiler::procedure::budget::{BudgetAsk, BudgetUse};

/// A request's budget asks with their counters.
type Keyed = [(BudgetAsk, Counter)];
use src_compiler::procedure::SessionAnswer;
use src_compiler::request::RequestView;
use src_compiler::{CheckOptions, CompiledPolicy, EngineKind, Next, Procedure};
use src_runtime::budget::{BudgetStore, Counter, MemoryBudgets, RedisBudgets};
use src_runtime::store::Redis;
use tokio::runtime::Runtime;

const BASE: &str = r#"
backend sim { url = "http://127.0.0.1:9/v1"  simulated = true }
model small  { backend = sim  serves = "small"  cost = 0.1 }
model strong { backend = sim  serves = "strong" cost = 1.0 }
route coding priority 10 { when contains(prompt, ["stack trace", "segfault", "compile error"])  to strong }
route default { to small }
"#;

/// Limits no measured run reaches, so every call takes the admitting path.
const BUDGETS: &str = r#"
budget per_key { per = tenant  window = 1h  requests = 1000000000000 }
budget strong_tokens { per = tenant  window = 1h  tokens = 1000000000000  exceeded = to small }
"#;

fn compile(text: &str) -> CompiledPolicy {
    let checked = src_compiler::check(
        src_compiler::load::load_str("bench.sr", text),
        &CheckOptions::default(),
    )
    .policy
    .unwrap_or_else(|| panic!("the bench policy does not check"));
    match src_compiler::compile(checked, EngineKind::Jit) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    }
}

fn request() -> RequestView {
    let body = serde_json::json!({
        "model": "auto",
        "messages": [
            {"role": "system", "content": "You are a careful coding assistant."},
            {"role": "user", "content": "my program segfaults after the compile error is fixed"}
        ]
    });
    let headers = vec![("authorization".to_owned(), "Bearer sk-bench".to_owned())];
    RequestView::from_chat(&body, &headers).unwrap_or_default()
}

/// Drives the procedure to its decision, answering budgets with `reserve`.
fn decide(
    compiled: &CompiledPolicy,
    view: &RequestView,
    reserve: &mut dyn FnMut(&Keyed) -> Vec<BudgetUse>,
) -> usize {
    let mut procedure = Procedure::new(compiled, view);
    loop {
        match procedure.advance() {
            Ok(Next::Done(d)) => return d.candidates.len(),
            Ok(Next::Budgets(step)) => {
                let asks = step.asks;
                let tenant = src_runtime::session::identity::tenant(&compiled.checked, view);
                let keyed: Vec<_> = asks
                    .iter()
                    .map(|a| (a.clone(), Counter::of(&compiled.checked, a, &tenant)))
                    .collect();
                let uses = reserve(&keyed);
                procedure.budgets_answered(&uses);
            }
            Ok(Next::Session(_)) => procedure.session_answered(SessionAnswer::Keep),
            Ok(Next::Cache(_)) => procedure.cache_answered(false),
            other => panic!("unexpected {other:?}"),
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn mean(iters: u32, mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        f();
    }
    start.elapsed() / iters
}

fn bench(c: &mut Criterion) {
    let plain = compile(BASE);
    let budgeted = compile(&format!("{BASE}{BUDGETS}"));
    let view = request();
    let memory = MemoryBudgets::default();
    let rt: Runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("{e}"),
    };
    let server = src_testkit::redis::RedisServer::start();
    let redis = rt
        .block_on(async { Redis::connect(&server.url(), Duration::from_secs(1)) })
        .map(|conn| Arc::new(RedisBudgets::on(conn)))
        .unwrap_or_else(|e| panic!("{e}"));
    let client = redis::Client::open(server.url()).unwrap_or_else(|e| panic!("{e}"));
    let mut pinger = rt
        .block_on(client.get_multiplexed_async_connection())
        .unwrap_or_else(|e| panic!("{e}"));

    let mut none = |_: &Keyed| Vec::new();
    let mut in_memory = |keyed: &Keyed| memory.reserve_now(keyed, now_ms());
    let mut in_redis = |keyed: &Keyed| {
        rt.block_on(redis.reserve(keyed, now_ms()))
            .unwrap_or_else(|e| panic!("{e}"))
    };

    let mut group = c.benchmark_group("budget_overhead");
    group.bench_function("decide_without_budgets", |b| {
        b.iter(|| black_box(decide(&plain, &view, &mut none)))
    });
    group.bench_function("decide_with_budgets_memory", |b| {
        b.iter(|| black_box(decide(&budgeted, &view, &mut in_memory)))
    });
    group.bench_function("decide_with_budgets_redis", |b| {
        b.iter(|| black_box(decide(&budgeted, &view, &mut in_redis)))
    });
    group.finish();

    // The ratios the docs quote (criterion reports each case alone).
    let n = 20_000;
    let base = mean(n, || {
        black_box(decide(&plain, &view, &mut none));
    });
    let mem = mean(n, || {
        black_box(decide(&budgeted, &view, &mut in_memory));
    });
    let red = mean(n / 10, || {
        black_box(decide(&budgeted, &view, &mut in_redis));
    });
    let ping = mean(n / 10, || {
        let pong: String = rt
            .block_on(redis::cmd("PING").query_async(&mut pinger))
            .unwrap_or_else(|e| panic!("{e}"));
        black_box(pong);
    });
    let ratio = |d: Duration| d.as_secs_f64() / base.as_secs_f64().max(1e-12);
    println!(
        "budget overhead: decide {base:?}; + memory budgets {mem:?} ({:.2}x, +{:?}); + redis budgets {red:?} ({:.1}x)",
        ratio(mem),
        mem.saturating_sub(base),
        ratio(red)
    );
    println!(
        "redis budgets over memory {:?}: {:.2}x a PING through the same client ({ping:?})",
        red.saturating_sub(mem),
        red.saturating_sub(mem).as_secs_f64() / ping.as_secs_f64().max(1e-12)
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
