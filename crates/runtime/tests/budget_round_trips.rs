//! Budgets and sessions on one Redis share one round trip: a real `src serve` over the built-in
//! simulator, a real `redis-server` (one server, a one-node Cluster, a Sentinel set), and the
//! calls each request makes counted by the server itself (`INFO commandstats`). A request of
//! a live session under a `requests` budget is one script on one server or a Sentinel primary
//! (the reservation reads and touches the pin); on a Cluster, where the pin's slot is never the
//! counters', the pin's read goes beside the script: two calls, one wait.

use serde_json::{json, Value};
use src_testkit::redis::RedisServer;
use src_testkit::redis_topology::RedisSentinels;
use src_testkit::{Answer, Router, TestResult};

fn policy(store: &str, budgets: &str) -> String {
    format!(
        r#"
backend sim {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model small  {{ backend = sim  serves = "Qwen/Qwen3-0.6B" }}
model strong {{ backend = sim  serves = "Qwen/Qwen3-8B" }}
{budgets}
session {{ store = {store}  ttl = 10m }}
protect {{ hold "tool call in flight" when request.tool_loop }}
route default {{ to strong }}
"#
    )
}

fn user(text: &str) -> Value {
    json!({"model": "auto", "messages": [{"role": "user", "content": text}]})
}

/// A call of an agent whose last turn is `open` (a tool result the model has yet to read).
fn agent(open: bool) -> Value {
    let mut messages = vec![
        json!({"role": "user", "content": "fix the build"}),
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "run", "arguments": "{}"}}]}),
        json!({"role": "tool", "tool_call_id": "call_0", "content": "ok"}),
    ];
    if !open {
        messages.push(json!({"role": "assistant", "content": "Done."}));
        messages.push(json!({"role": "user", "content": "thanks"}));
    }
    json!({"model": "auto", "messages": messages})
}

/// The scripts the server has run, as `INFO commandstats` counts them: every step of a store
/// on this path is one script (`evalsha`), hence one call to Redis. The commands a script runs
/// are counted apart (`hgetall`, `incrbyfloat`...) and are not calls. A call the server failed
/// is left out: the `NOSCRIPT` of the first `evalsha` of a script a server has not seen yet,
/// answered by loading it (`script|load`) and calling again, once per script and server.
fn scripts(info: &str) -> u64 {
    info.lines()
        .filter_map(|line| line.strip_prefix("cmdstat_"))
        .filter_map(|line| {
            let (name, stats) = line.split_once(':')?;
            if name != "evalsha" && name != "eval" {
                return None;
            }
            let field = |name: &str| -> u64 {
                stats
                    .split(',')
                    .find_map(|s| s.trim().strip_prefix(name))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0)
            };
            Some(field("calls=") - field("failed_calls="))
        })
        .sum()
}

/// A session's calls with their answers, and the store commands each one cost.
struct Calls<'a> {
    router: &'a Router,
    info: Box<dyn Fn() -> String + 'a>,
    headers: Vec<(&'static str, String)>,
}

impl Calls<'_> {
    async fn call(&self, body: &Value) -> TestResult<(Answer, u64)> {
        let before = scripts(&(self.info)());
        let headers: Vec<(&str, &str)> =
            self.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let answer = self.router.chat(body, &headers).await?;
        let after = scripts(&(self.info)());
        Ok((answer, after - before))
    }
}

fn session_headers(api_key: &str, session: &str) -> Vec<(&'static str, String)> {
    vec![
        ("authorization", format!("Bearer {api_key}")),
        ("x-model-affinity", session.to_owned()),
    ]
}

/// One server or a Sentinel primary: the pin's read rides in the reservation's script.
async fn one_script_per_pinned_call(router: &Router, info: impl Fn() -> String) -> TestResult {
    let calls = Calls {
        router,
        info: Box::new(info),
        headers: session_headers("sk-trips", "task-1"),
    };
    // The first call of the session: the reservation with the (empty) pin read, then the pin.
    let (first, trips) = calls.call(&user("hello")).await?;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.header("x-sr-session"), Some("new"));
    assert_eq!(trips, 2, "the first call: one script, then the new pin");
    for n in 1..6 {
        let (a, trips) = calls.call(&user("hello again")).await?;
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(a.header("x-sr-session"), Some("pinned"));
        assert_eq!(
            a.header("x-sr-budget"),
            Some(format!("per_key; used={n}; limit=1000").as_str())
        );
        assert_eq!(trips, 1, "call {n}: budgets and the session in one script");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_call_under_a_budget_is_one_script_on_one_redis() -> TestResult {
    let redis = RedisServer::start();
    let router = Router::start(&policy(
        &format!("redis(\"{}\")", redis.url()),
        "budget per_key { per = tenant  window = 1h  requests = 1000 }",
    ))
    .await?;
    one_script_per_pinned_call(&router, || redis.command("INFO commandstats")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_call_under_a_budget_is_one_script_on_a_sentinel_primary() -> TestResult {
    let set = RedisSentinels::start();
    let router = Router::start(&policy(
        &set.store(),
        "budget per_key { per = tenant  window = 1h  requests = 1000 }",
    ))
    .await?;
    let primary = set.primary();
    one_script_per_pinned_call(&router, || set.command(primary, "INFO commandstats")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_the_pin_is_read_beside_the_reservation() -> TestResult {
    // One node owning every slot: it refuses any script whose keys span two slots.
    let node = RedisServer::start_cluster();
    let router = Router::start(&policy(
        &format!("redis_cluster([\"{}\"])", node.url()),
        "budget per_key { per = tenant  window = 1h  requests = 1000 }",
    ))
    .await?;
    let calls = Calls {
        router: &router,
        info: Box::new(|| node.command("INFO commandstats")),
        headers: session_headers("sk-cluster", "task-1"),
    };
    let (first, _) = calls.call(&user("hello")).await?;
    assert_eq!(
        first.header("x-sr-session"),
        Some("new"),
        "{}",
        first.text()
    );
    for n in 1..4 {
        let (a, trips) = calls.call(&user("hello again")).await?;
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(a.header("x-sr-session"), Some("pinned"));
        assert_eq!(
            a.header("x-sr-budget"),
            Some(format!("per_key; used={n}; limit=1000").as_str()),
            "the reservation ran (no CROSSSLOT refusal)"
        );
        assert_eq!(
            trips, 2,
            "call {n}: the script and the pin's read, side by side"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pin_read_with_the_budgets_drives_holds_and_refusals_leave_it_untouched() -> TestResult
{
    let redis = RedisServer::start();
    let router = Router::start(&policy(
        &format!("redis(\"{}\")", redis.url()),
        "budget per_key { per = tenant  window = 1h  requests = 4  exceeded = reject }\n\
         budget strong_calls { per = tenant  window = 1h  requests = 2  exceeded = to small }",
    ))
    .await?;
    let calls = Calls {
        router: &router,
        info: Box::new(|| redis.command("INFO commandstats")),
        headers: session_headers("sk-agent", "task-7"),
    };
    let (first, _) = calls.call(&agent(true)).await?;
    assert_eq!(
        (first.header("x-sr-session"), first.header("x-sr-model")),
        (Some("new"), Some("strong"))
    );
    let (second, trips) = calls.call(&agent(true)).await?;
    assert_eq!(second.header("x-sr-session"), Some("pinned"));
    assert_eq!(trips, 1);
    // `strong_calls` is spent and proposes `small`: the pin read with the budgets says the
    // session's owner is `strong`, and the tool loop in flight keeps it, with no other call.
    let (third, trips) = calls.call(&agent(true)).await?;
    assert_eq!(
        (
            third.header("x-sr-session"),
            third.header("x-sr-model"),
            third.header("x-sr-protection")
        ),
        (Some("held"), Some("strong"), Some("tool call in flight"))
    );
    assert_eq!(trips, 1, "a hold reads the pin and writes nothing");
    // The loop is over: the switch writes the pin (compare-and-set on the version read ahead).
    let (fourth, trips) = calls.call(&agent(false)).await?;
    assert_eq!(
        (fourth.header("x-sr-session"), fourth.header("x-sr-model")),
        (Some("switched"), Some("small"))
    );
    assert_eq!(trips, 2, "the script, then the switch");
    // `per_key` is spent: the refusal is one script, and the session's pin is not touched.
    let tenant = src_runtime::session::identity::tenant_of_key(Some("sk-agent"));
    let pin = src_runtime::store::KeySpace::pin(&tenant, "task-7");
    let turns = || redis.command(&format!("HGET {pin} t"));
    let before = turns();
    assert!(
        before.starts_with('$'),
        "the pin counts its turns: {before}"
    );
    let (refused, trips) = calls.call(&agent(false)).await?;
    assert_eq!(refused.status, 429, "{}", refused.text());
    assert_eq!(trips, 1);
    assert_eq!(turns(), before, "a refused call is no turn of its session");
    Ok(())
}
