//! What a budget costs per request: the request procedure driven to its decision without
//! budgets, then the same policy with a `requests` and a `tokens` budget per tenant answered by
//! the memory store (the tenant's hash, the counters' keys and the atomic reservation), and by
//! Redis over loopback (one script, one round trip) next to a `PING` through the same client.
//! Printed at the end as the time added and the ratio to the decision without budgets.
//!
//! Then, with a session on that Redis, what budgets add to a pinned call as the pipeline runs it
//! (the budget step, then the session layer following the pin): without budgets (one round trip,
//! the pin's read-and-touch), with the reservation and the pin's read as two round trips, and
//! with the pin's read carried by the reservation's script (one). Each case runs in rounds,
//! interleaved with the others, and the median round counts.
//!
//! Needs `redis-server` on the PATH for the Redis case (it is started on a free port).

mod support;

use std::sync::Arc;
use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use src_compiler::procedure::budget::{BudgetAsk, BudgetUse};
use src_compiler::procedure::SessionAnswer;
use src_compiler::request::RequestView;
use src_compiler::{CompiledPolicy, Next, Procedure};
use src_runtime::budget::{BudgetLayer, BudgetStore, Counter, MemoryBudgets, RedisBudgets};
use src_runtime::hooks::Sessions;
use src_runtime::pipeline::budget_step;
use src_runtime::session::{Continuity, ContinuityInput, PolicyHolds, SessionLayer};
use src_runtime::store::{Links, Redis, Timeouts};
use support::{
    coding_request, compile, mean, middle, ping, pinger, runtime, CODING_POLICY as BASE,
};

/// A request's budget asks with their counters.
type Keyed = [(BudgetAsk, Counter)];

/// Limits no measured run reaches, so every call takes the admitting path.
const BUDGETS: &str = r#"
budget per_key { per = tenant  window = 1h  requests = 1000000000000 }
budget strong_tokens { per = tenant  window = 1h  tokens = 1000000000000  exceeded = to small }
"#;

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

fn bench(c: &mut Criterion) {
    let plain = compile(BASE);
    let budgeted = compile(&format!("{BASE}{BUDGETS}"));
    let view = coding_request(&[]);
    let memory = MemoryBudgets::default();
    let rt = runtime();
    let server = src_testkit::redis::RedisServer::start();
    let redis = rt
        .block_on(async { Redis::connect(&server.url(), Duration::from_secs(1)) })
        .map(|conn| Arc::new(RedisBudgets::on(conn)))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut connection = pinger(&rt, &server.url());

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
        black_box(ping(&rt, &mut connection));
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

/// The session kept in `url`, for the shared-trip cases.
fn with_session(url: &str, budgets: bool) -> CompiledPolicy {
    let session = format!(
        "session {{ id = header(\"x-session-id\")  store = redis(\"{url}\")  ttl = 10m }}\n"
    );
    compile(&format!(
        "{BASE}{}{session}",
        if budgets { BUDGETS } else { "" }
    ))
}

fn session_request() -> RequestView {
    coding_request(&[("x-session-id", "bench-session")])
}

/// Drives the procedure as the pipeline does: the budget step through `budget_step::reserve`
/// (carrying the pin's read when `shared`), the session through the session layer.
async fn decide_in_session(
    compiled: &CompiledPolicy,
    view: &RequestView,
    budgets: &BudgetLayer,
    sessions: &SessionLayer,
    shared: bool,
) -> usize {
    let policy = &compiled.checked;
    let mut procedure = Procedure::new(compiled, view);
    let mut ahead = None;
    loop {
        match procedure.advance() {
            Ok(Next::Done(d)) => return d.candidates.len(),
            Ok(Next::Budgets(step)) => {
                let tenant = src_runtime::session::identity::tenant(policy, view);
                let pin = (shared && step.session)
                    .then(|| sessions.pin_read(policy, view))
                    .flatten();
                let mut reserved = budget_step::reserve(budgets, policy, &step.asks, &tenant, pin)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                ahead = reserved.ahead.take();
                procedure.budgets_answered(&reserved.uses);
            }
            Ok(Next::Session(proposal)) => {
                let input = ContinuityInput {
                    policy,
                    view,
                    route: proposal.route,
                    proposed: proposal.model,
                    ahead: ahead.as_ref(),
                };
                let holds = PolicyHolds {
                    compiled,
                    view,
                    models: None,
                };
                match sessions.decide(input, &holds).await {
                    Continuity::Forward { model, .. } => {
                        procedure.session_answered(SessionAnswer::Use(model))
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
            Ok(Next::Cache(_)) => procedure.cache_answered(false),
            other => panic!("unexpected {other:?}"),
        }
    }
}

fn bench_shared_trip(c: &mut Criterion) {
    let rt = runtime();
    let server = src_testkit::redis::RedisServer::start();
    let plain = with_session(&server.url(), false);
    let budgeted = with_session(&server.url(), true);
    let view = session_request();
    // One set of links, as a server has: the budgets' store and the pins share the connection.
    let (budgets, sessions) = rt.block_on(async {
        let links = Arc::new(Links::new());
        (
            BudgetLayer::new(Arc::clone(&links), Timeouts::default()),
            SessionLayer::default().with_links(links),
        )
    });
    let case = |compiled: &CompiledPolicy, shared: bool| {
        rt.block_on(decide_in_session(
            compiled, &view, &budgets, &sessions, shared,
        ))
    };
    // The first call pins; every measured call then follows the pin.
    case(&plain, false);

    let mut group = c.benchmark_group("budget_shared_trip");
    group.bench_function("session_without_budgets", |b| {
        b.iter(|| black_box(case(&plain, false)))
    });
    group.bench_function("session_and_budgets_two_trips", |b| {
        b.iter(|| black_box(case(&budgeted, false)))
    });
    group.bench_function("session_and_budgets_one_trip", |b| {
        b.iter(|| black_box(case(&budgeted, true)))
    });
    group.finish();

    let n = 1_000;
    let (mut alone, mut two, mut one) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..7 {
        alone.push(mean(n, || {
            black_box(case(&plain, false));
        }));
        two.push(mean(n, || {
            black_box(case(&budgeted, false));
        }));
        one.push(mean(n, || {
            black_box(case(&budgeted, true));
        }));
    }
    let median = |rounds| middle(rounds).unwrap_or_default();
    let (alone, two, one) = (median(alone), median(two), median(one));
    let added_two = two.saturating_sub(alone);
    let added_one = one.saturating_sub(alone);
    println!(
        "budgets beside a session on redis: session alone {alone:?}; + budgets, two trips {two:?} (+{added_two:?}); + budgets, one trip {one:?} (+{added_one:?})"
    );
    println!(
        "time budgets add, one trip over two: {:.2}x; whole call, one trip over two: {:.2}x",
        added_one.as_secs_f64() / added_two.as_secs_f64().max(1e-12),
        one.as_secs_f64() / two.as_secs_f64().max(1e-12)
    );
}

criterion_group!(benches, bench, bench_shared_trip);
criterion_main!(benches);
