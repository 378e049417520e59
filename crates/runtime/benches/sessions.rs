//! What session affinity costs per request: the route decision alone (no session), then the
//! decision plus the session layer's hot path — a pinned call following its pin — on the
//! memory store and on Redis over loopback. Printed at the end as ratios to the decision alone,
//! and the Redis path against the floor it stands on: a `PING` through the same client
//! (`redis_ping`), and a `PING` written and read on a plain blocking socket (`socket_ping`).
//!
//! Needs `redis-server` on the PATH for the Redis case (it is started on a free port).

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use src_compiler::eval::Step;
use src_compiler::hir::{ModelId, StoreDef};
use src_compiler::request::RequestView;
use src_compiler::CompiledPolicy;
use src_runtime::session::{
    Continuity, ContinuityInput, MemoryStore, PolicyHolds, RedisStore, SessionLayer,
};
use support::{coding_request, compile, mean, ping, pinger, runtime, CODING_POLICY};

/// The coding policy with a session that holds its pin through a tool loop.
const SESSION: &str = r#"
session { id = header("x-session-id")  ttl = 10m }
protect { hold "tool call in flight" when request.tool_loop }
"#;

fn route(compiled: &CompiledPolicy, view: &RequestView) -> ModelId {
    let mut evaluation = compiled.evaluate(view);
    match evaluation.step() {
        Step::Decided(src_compiler::ir::Verdict::Route(r)) => compiled.checked.routes[r.index()].to,
        other => panic!("unexpected step {other:?}"),
    }
}

async fn route_and_pin(
    layer: &SessionLayer,
    compiled: &CompiledPolicy,
    view: &RequestView,
) -> ModelId {
    let proposed = route(compiled, view);
    let input = ContinuityInput {
        policy: &compiled.checked,
        view,
        route: None,
        proposed,
        ahead: None,
    };
    match layer
        .decide(
            input,
            &PolicyHolds {
                compiled,
                view,
                models: None,
            },
        )
        .await
    {
        Continuity::Forward { model, .. } => model,
        other => panic!("unexpected {other:?}"),
    }
}

fn bench(c: &mut Criterion) {
    let compiled = compile(&format!("{CODING_POLICY}{SESSION}"));
    let view = coding_request(&[("x-session-id", "bench-session")]);
    let rt = runtime();
    let memory =
        SessionLayer::default().with_store(StoreDef::Memory, Arc::new(MemoryStore::default()));
    let server = src_testkit::redis::RedisServer::start();
    let redis_store = rt
        .block_on(async { RedisStore::connect(&server.url(), Duration::from_secs(1)) })
        .unwrap_or_else(|e| panic!("{e}"));
    // The policy says `store = memory`; serving that name from Redis measures the Redis path.
    let redis = SessionLayer::default().with_store(StoreDef::Memory, Arc::new(redis_store));
    // The first call pins; every measured call then follows the pin (the hot path).
    rt.block_on(route_and_pin(&memory, &compiled, &view));
    rt.block_on(route_and_pin(&redis, &compiled, &view));

    let mut connection = pinger(&rt, &server.url());
    let mut socket =
        TcpStream::connect(("127.0.0.1", server.port)).unwrap_or_else(|e| panic!("{e}"));
    socket.set_nodelay(true).unwrap_or_else(|e| panic!("{e}"));
    let mut socket_ping = move || {
        let mut pong = [0u8; 7];
        socket
            .write_all(b"PING\r\n")
            .unwrap_or_else(|e| panic!("{e}"));
        socket
            .read_exact(&mut pong)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&pong, b"+PONG\r\n");
    };

    let mut group = c.benchmark_group("session_overhead");
    group.bench_function("route_only", |b| {
        b.iter(|| black_box(route(&compiled, &view)))
    });
    group.bench_function("route_and_pin_memory", |b| {
        b.iter(|| black_box(rt.block_on(route_and_pin(&memory, &compiled, &view))))
    });
    group.bench_function("route_and_pin_redis", |b| {
        b.iter(|| black_box(rt.block_on(route_and_pin(&redis, &compiled, &view))))
    });
    group.bench_function("redis_ping", |b| {
        b.iter(|| black_box(ping(&rt, &mut connection)))
    });
    group.bench_function("socket_ping", |b| b.iter(&mut socket_ping));
    group.finish();

    // A plain summary with the ratios the docs quote (criterion reports each case alone).
    let n = 20_000;
    let base = mean(n, || {
        black_box(route(&compiled, &view));
    });
    let mem = mean(n, || {
        black_box(rt.block_on(route_and_pin(&memory, &compiled, &view)));
    });
    let red = mean(n / 10, || {
        black_box(rt.block_on(route_and_pin(&redis, &compiled, &view)));
    });
    let client_ping = mean(n / 10, || {
        black_box(ping(&rt, &mut connection));
    });
    let wire_ping = mean(n / 10, &mut socket_ping);
    let ratio = |d: Duration| d.as_secs_f64() / base.as_secs_f64().max(1e-12);
    println!(
        "session overhead: route only {base:?}; + memory pin {mem:?} ({:.1}x); + redis pin {red:?} ({:.1}x)",
        ratio(mem),
        ratio(red)
    );
    let over = red.saturating_sub(mem);
    println!(
        "redis over memory {over:?}: {:.2}x a PING through the same client ({client_ping:?}), {:.2}x a PING on a plain socket ({wire_ping:?})",
        over.as_secs_f64() / client_ping.as_secs_f64().max(1e-12),
        over.as_secs_f64() / wire_ping.as_secs_f64().max(1e-12)
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
