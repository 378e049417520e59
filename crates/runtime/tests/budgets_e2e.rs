//! Budgets end to end: real `src serve` replicas over the built-in simulator, real HTTP, and a
//! real `redis-server` shared by two replicas where the policy names one. Asynchronous effects
//! (a charge once an answer ends) are waited for with a bound, never timed.

use std::time::Duration;

use hyper::Method;
use serde_json::{json, Value};
use src_testkit::redis::RedisServer;
use src_testkit::{Answer, Router, TestResult, PATIENCE};

fn policy(budgets: &str, session: &str) -> String {
    format!(
        r#"
backend sim {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model small  {{ backend = sim  serves = "Qwen/Qwen3-0.6B"  cost = 0.1 }}
model strong {{ backend = sim  serves = "Qwen/Qwen3-8B"  cost = 1.0 }}
{budgets}
{session}
route default {{ to strong }}
"#
    )
}

fn user(text: &str) -> Value {
    json!({"model": "auto", "messages": [{"role": "user", "content": text}]})
}

fn key(k: &str) -> String {
    format!("Bearer {k}")
}

async fn chat(router: &Router, body: &Value, headers: &[(&str, &str)]) -> TestResult<Answer> {
    router.chat(body, headers).await
}

async fn messages(router: &Router, text: &str, api_key: &str) -> TestResult<Answer> {
    let body = json!({"model": "auto", "max_tokens": 32,
                      "messages": [{"role": "user", "content": text}]});
    router
        .post("/v1/messages", &body, &[("x-api-key", api_key)])
        .await
}

async fn metrics(router: &Router) -> TestResult<String> {
    Ok(router.admin_get("/metrics").await?.text())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejecting_budget_answers_429_in_the_chat_shape_with_retry_after() -> TestResult {
    let router = Router::start(&policy(
        "budget per_key { per = tenant  window = 1h  requests = 3  exceeded = reject }",
        "",
    ))
    .await?;
    let auth = key("sk-alpha");
    let h = [("authorization", auth.as_str())];
    for n in 0..3 {
        let a = chat(&router, &user("hi"), &h).await?;
        assert_eq!(a.status, 200, "request {n}: {}", a.text());
        assert_eq!(
            a.header("x-sr-budget"),
            Some(format!("per_key; used={n}; limit=3").as_str())
        );
    }
    let refused = chat(&router, &user("hi"), &h).await?;
    assert_eq!(refused.status, 429, "{}", refused.text());
    let (message, code, kind) = refused.error()?;
    assert_eq!(
        (code.as_deref(), kind.as_str()),
        (Some("rate_limit_exceeded"), "rate_limit_exceeded")
    );
    assert!(message.contains("per_key"), "{message}");
    let retry: u64 = refused.header_f64("retry-after")? as u64;
    assert!((1..=3600).contains(&retry), "Retry-After {retry}");
    assert_eq!(
        refused.header("x-sr-budget"),
        Some("per_key; used=3; limit=3; exceeded=reject")
    );
    // Another tenant has a budget of its own.
    let other = key("sk-beta");
    let a = chat(&router, &user("hi"), &[("authorization", other.as_str())]).await?;
    assert_eq!(a.status, 200);
    // Only admitted requests reached the backend.
    let sent: usize = router.sims().iter().map(|s| s.received().len()).sum();
    assert_eq!(sent, 4);
    let m = metrics(&router).await?;
    for line in [
        "src_budget_exceeded_total{budget=\"per_key\",action=\"reject\"} 1",
        "src_budget_used_total{budget=\"per_key\"} 4",
    ] {
        assert!(m.contains(line), "missing `{line}` in:\n{m}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejecting_budget_answers_in_the_messages_shape() -> TestResult {
    let router = Router::start(&policy(
        "budget per_key { per = tenant  window = 1h  requests = 1 }",
        "",
    ))
    .await?;
    let first = messages(&router, "hi", "sk-anthropic").await?;
    assert_eq!(first.status, 200, "{}", first.text());
    let refused = messages(&router, "hi", "sk-anthropic").await?;
    assert_eq!(refused.status, 429, "{}", refused.text());
    let v = refused.json()?;
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "rate_limit_error");
    assert!(refused.header("retry-after").is_some());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_budget_downgrades_and_an_observing_one_only_counts() -> TestResult {
    let router = Router::start(&policy(
        "budget strong_calls { per = tenant  window = 1h  requests = 1  exceeded = to small }\n\
         budget team { per = header(\"x-team\")  window = 1h  requests = 1  exceeded = observe }",
        "",
    ))
    .await?;
    let auth = key("sk-gamma");
    let h = [("authorization", auth.as_str()), ("x-team", "blue")];
    let first = chat(&router, &user("hi"), &h).await?;
    assert_eq!(first.header("x-sr-model"), Some("strong"));
    let second = chat(&router, &user("hi"), &h).await?;
    assert_eq!(second.status, 200);
    assert_eq!(second.header("x-sr-model"), Some("small"));
    assert_eq!(second.header("x-sr-route"), Some("default"));
    assert_eq!(
        second.header("x-sr-budget"),
        Some("strong_calls; used=1; limit=1; exceeded=to, team; used=1; limit=1")
    );
    let m = metrics(&router).await?;
    assert!(
        m.contains("src_budget_exceeded_total{budget=\"strong_calls\",action=\"to\"} 1"),
        "{m}"
    );
    // The observing budget acts only when it is the first exceeded.
    let third = chat(&router, &user("hi"), &[("x-team", "blue")]).await?;
    assert_eq!(third.header("x-sr-model"), Some("strong"));
    assert_eq!(
        third.header("x-sr-budget"),
        Some("strong_calls; used=0; limit=1, team; used=1; limit=1; exceeded=observe")
    );
    Ok(())
}

/// An agent's task: `open` leaves a tool result as the latest message (a tool loop).
fn agent(results: usize, open: bool) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "fix the build"})];
    for i in 0..results {
        let id = format!("call_{i}");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "run", "arguments": "{}"}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": "ok"}));
    }
    if !open {
        messages.push(json!({"role": "assistant", "content": "Done."}));
        messages.push(json!({"role": "user", "content": "thanks"}));
    }
    json!({"model": "auto", "messages": messages})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_loop_finishes_on_its_owner_through_a_downgrade() -> TestResult {
    let router = Router::start(&policy(
        "budget strong_calls { per = tenant  window = 1h  requests = 2  exceeded = to small }",
        "session { ttl = 10m }\nprotect { hold \"tool call in flight\" when request.tool_loop }",
    ))
    .await?;
    let auth = key("sk-agent");
    let h = [
        ("authorization", auth.as_str()),
        ("x-model-affinity", "task-7"),
    ];
    let first = chat(&router, &agent(0, true), &h).await?;
    assert_eq!(
        (first.header("x-sr-session"), first.header("x-sr-model")),
        (Some("new"), Some("strong"))
    );
    let second = chat(&router, &agent(1, true), &h).await?;
    assert_eq!(second.header("x-sr-model"), Some("strong"));
    // The budget is spent: it proposes `small`, and the loop in flight keeps its owner.
    let third = chat(&router, &agent(2, true), &h).await?;
    assert_eq!(
        (
            third.status,
            third.header("x-sr-session"),
            third.header("x-sr-model")
        ),
        (200, Some("held"), Some("strong"))
    );
    assert_eq!(third.header("x-sr-protection"), Some("tool call in flight"));
    assert!(third
        .header("x-sr-budget")
        .is_some_and(|b| b.ends_with("exceeded=to")));
    // The loop is over: the downgrade goes ahead.
    let fourth = chat(&router, &agent(2, false), &h).await?;
    assert_eq!(
        (fourth.header("x-sr-session"), fourth.header("x-sr-model")),
        (Some("switched"), Some("small"))
    );
    Ok(())
}

/// The admin listing of one tenant's budgets.
async fn listing(router: &Router, tenant: &str) -> TestResult<Value> {
    let answer = router
        .admin_get(&format!("/v1/console/budgets?tenant={tenant}"))
        .await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    answer.json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_charged_from_usage_and_listed_for_the_tenant() -> TestResult {
    let router = Router::start(&policy(
        "budget strong_tokens { per = tenant  window = 1h  tokens = 100000  exceeded = to small }\n\
         budget spend { per = tenant  window = 1h  cost = 1000 }",
        "",
    ))
    .await?;
    let auth = key("sk-tokens");
    let h = [("authorization", auth.as_str())];
    let a = chat(&router, &user("count to three"), &h).await?;
    assert_eq!(a.status, 200, "{}", a.text());
    let usage = a.json()?["usage"].clone();
    let total = usage["prompt_tokens"].as_u64().unwrap_or(0)
        + usage["completion_tokens"].as_u64().unwrap_or(0);
    assert!(total > 0, "the simulator reports usage: {usage}");
    let tenant = src_runtime::session::identity::tenant_of_key(Some("sk-tokens"));
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let found = loop {
        let l = listing(&router, &tenant).await?;
        let used = l["budgets"][0]["used"].as_f64().unwrap_or(0.0);
        if used > 0.0 || tokio::time::Instant::now() > deadline {
            break l;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let budgets = found["budgets"].as_array().cloned().unwrap_or_default();
    assert_eq!(budgets.len(), 2, "{found}");
    assert_eq!(budgets[0]["budget"], "strong_tokens");
    assert_eq!(budgets[0]["unit"], "tokens");
    assert_eq!(budgets[0]["used"].as_f64(), Some(total as f64), "{found}");
    // Cost: the tokens priced at `strong`'s cost of 1.0 per thousand.
    let cost = budgets[1]["used"].as_f64().unwrap_or(0.0);
    assert!((cost - total as f64 / 1000.0).abs() < 1e-9, "{found}");
    Ok(())
}

/// `n` concurrent requests of one tenant spread over `routers`: how many were admitted.
async fn admitted(routers: &[&Router], n: usize, api_key: &str) -> TestResult<usize> {
    let auth = key(api_key);
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let router = routers[i % routers.len()];
        let url = router.url("/v1/chat/completions");
        let client = router.client.clone();
        let auth = auth.clone();
        tasks.push(tokio::spawn(async move {
            client
                .send(
                    Method::POST,
                    &url,
                    user("hi").to_string(),
                    &[("authorization", auth.as_str())],
                )
                .await
                .map(|a| a.status)
        }));
    }
    let mut ok = 0;
    for t in tasks {
        let status = t.await?.map_err(|e| e.to_string())?;
        match status {
            200 => ok += 1,
            429 => {}
            other => return Err(format!("unexpected status {other}").into()),
        }
    }
    Ok(ok)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_on_one_redis_admit_exactly_the_limit() -> TestResult {
    let redis = RedisServer::start();
    let text = policy(
        "budget per_key { per = tenant  window = 1h  requests = 100 }",
        &format!(
            "session {{ store = redis(\"{}\")  missing = route }}",
            redis.url()
        ),
    );
    let a = Router::start(&text).await?;
    let b = Router::start(&text).await?;
    let mut total = 0;
    for run in 0..10 {
        let ok = admitted(&[&a, &b], 200, &format!("sk-run-{run}")).await?;
        assert_eq!(
            ok, 100,
            "run {run}: admitted {ok} of 200 with a limit of 100"
        );
        total += ok;
    }
    // Only the admitted requests reached a backend, split over both replicas.
    let sent: Vec<usize> = [&a, &b]
        .iter()
        .map(|r| r.sims().iter().map(|s| s.received().len()).sum())
        .collect();
    assert_eq!(sent.iter().sum::<usize>(), total);
    assert!(sent.iter().all(|n| *n > 0), "{sent:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_replica_in_memory_admits_exactly_the_limit() -> TestResult {
    let router = Router::start(&policy(
        "budget per_key { per = tenant  window = 1h  requests = 30 }",
        "",
    ))
    .await?;
    for run in 0..3 {
        let ok = admitted(&[&router], 80, &format!("sk-mem-{run}")).await?;
        assert_eq!(ok, 30, "run {run}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_store_outage_follows_failure_store() -> TestResult {
    let mut redis = RedisServer::start();
    let budgets = "budget per_key { per = tenant  window = 1h  requests = 5 }";
    let session = |mode: &str| {
        format!(
            "session {{ store = redis(\"{}\")  missing = route }}\nfailure {{ store = {mode} }}",
            redis.url()
        )
    };
    let closed = Router::start(&policy(budgets, &session("closed"))).await?;
    let open = Router::start(&policy(budgets, &session("open"))).await?;
    let auth = key("sk-outage");
    let h = [("authorization", auth.as_str())];
    assert_eq!(chat(&closed, &user("hi"), &h).await?.status, 200);
    redis.kill();
    let refused = chat(&closed, &user("hi"), &h).await?;
    assert_eq!(refused.status, 503, "{}", refused.text());
    let (message, _, _) = refused.error()?;
    assert!(message.contains("budget store"), "{message}");
    let admitted = chat(&open, &user("hi"), &h).await?;
    assert_eq!(admitted.status, 200, "{}", admitted.text());
    assert_eq!(
        admitted.header("x-sr-budget"),
        None,
        "uncounted while the store is down"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_is_charged_its_usage_without_showing_the_client_a_chunk_it_did_not_ask_for(
) -> TestResult {
    let router = Router::start(&policy(
        "budget strong_tokens { per = tenant  window = 1h  tokens = 100000 }",
        "",
    ))
    .await?;
    let mut body = user("count to three");
    body["stream"] = json!(true);
    let a = chat(&router, &body, &[("authorization", "Bearer sk-stream")]).await?;
    assert_eq!(a.status, 200, "{}", a.text());
    let text = a.text();
    assert!(text.contains("[DONE]"), "{text}");
    assert!(
        !text.contains("\"usage\":{"),
        "the client did not ask for usage: {text}"
    );
    // The backend was asked for it.
    let sent = router
        .sims()
        .iter()
        .flat_map(|s| s.received())
        .next()
        .ok_or("nothing reached the simulator")?;
    let sent = sent.json().ok_or("the simulator got no JSON")?;
    assert_eq!(
        sent["stream_options"]["include_usage"],
        json!(true),
        "{sent}"
    );
    // And the budget is charged the usage it reported, not an estimate.
    let tenant = src_runtime::session::identity::tenant_of_key(Some("sk-stream"));
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let used = loop {
        let l = listing(&router, &tenant).await?;
        let used = l["budgets"][0]["used"].as_f64().unwrap_or(0.0);
        if used > 0.0 || tokio::time::Instant::now() > deadline {
            break used;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(used > 0.0);
    let line = router
        .log_line(a.header("x-sr-request-id").ok_or("no request id")?)
        .await?;
    assert_eq!(line["usage_estimated"], json!(false), "{line}");
    // A client that asks for usage keeps its chunk.
    body["stream_options"] = json!({"include_usage": true});
    let b = chat(&router, &body, &[("authorization", "Bearer sk-stream")]).await?;
    assert!(b.text().contains("\"usage\":{"), "{}", b.text());
    Ok(())
}
