//! The model memo end to end through `src serve` with the repository's real models: the turns
//! of an agent's tool loop (the same last user message every time) run the guard and the
//! classifier once; a different text runs them again; a reload with the same model files keeps
//! the memo and one with a changed file does not reuse it; the byte bound evicts; and with
//! sharing on, a second replica over the same real `redis-server` answers from what the first
//! one's models said. Concurrent requests for the same text run each model once.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use hyper::Method;
use serde_json::{json, Value};
use src_runtime::models::{MemoOptions, ModelOptions};
use src_testkit::models::{sample, serve, Served};
use src_testkit::redis::RedisServer;
use src_testkit::TestResult;
use src_testkit::PATIENCE;

const HEAD: &str = r#"
backend sim { url = "http://127.0.0.1:9/v1"  simulated = true }
model small  { backend = sim  serves = "Qwen/Qwen3-0.6B" }
model strong { backend = sim  serves = "Qwen/Qwen3-8B" }
"#;

const BODY: &str = r#"
signal attack = prompt_guard(prompt)
signal topic  = domain(prompt)

block injection { when attack > 0.5  message = "blocked by the prompt guard" }

route maths   priority 20 { when topic is math  to strong }
route default             { to small }
"#;

const TASK: &str = "What is the derivative of x^3 + 2x with respect to x? Check it with the tool.";

fn policy(models: &str, session: &str) -> String {
    format!(
        "{HEAD}{session}\nguard prompt_guard {{ path = \"{models}/prompt_guard\" }}\n\
         classifier domain {{ path = \"{models}/domain\"  labels = [math, code, law, other] }}\n{BODY}"
    )
}

fn options(memo: MemoOptions) -> ModelOptions {
    ModelOptions {
        memo,
        timeout: Duration::from_secs(30),
        ..ModelOptions::default()
    }
}

/// Turn `turn` (from 0) of a tool loop: the task, then one tool call and its result per turn
/// before this one. The last user message is the task on every turn.
fn tool_loop_turn(turn: usize) -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a careful maths assistant."}),
        json!({"role": "user", "content": TASK}),
    ];
    for i in 0..turn {
        let id = format!("call_{i}");
        messages.push(json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [{"id": id, "type": "function",
                            "function": {"name": "calc", "arguments": format!("{{\"step\":{i}}}")}}],
        }));
        messages
            .push(json!({"role": "tool", "tool_call_id": id, "content": format!("step {i}: ok")}));
    }
    json!({"model": "auto", "messages": messages})
}

async fn send(served: &Served, body: &Value) -> TestResult<(u16, Option<String>)> {
    let url = format!("http://{}/v1/chat/completions", served.server.addr);
    let answer = served
        .client
        .send(Method::POST, &url, body.to_string(), &[])
        .await?;
    let route = answer.header("x-sr-route").map(str::to_owned);
    assert_eq!(answer.status, 200, "{}", answer.text());
    Ok((answer.status, route))
}

/// Posts `body` with `key` as the bearer credential; the answer's `x-sr-cache` header.
async fn send_as(served: &Served, body: &Value, key: &str) -> TestResult<Option<String>> {
    let url = format!("http://{}/v1/chat/completions", served.server.addr);
    let auth = format!("Bearer {key}");
    let answer = served
        .client
        .send(
            Method::POST,
            &url,
            body.to_string(),
            &[("authorization", &auth)],
        )
        .await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    Ok(answer.header("x-sr-cache").map(str::to_owned))
}

fn count(metrics: &str, name: &str, model: &str) -> f64 {
    sample(metrics, name, &format!("model=\"{model}\""))
}

fn calls(metrics: &str, model: &str) -> f64 {
    count(metrics, "src_model_calls_total", model)
}

fn plain(metrics: &str, name: &str) -> f64 {
    let want = format!("{name} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&want))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_loop_runs_each_model_once() -> TestResult {
    let served = serve(&policy("{models}", ""), options(MemoOptions::default())).await?;
    for turn in 0..5 {
        let (_, route) = send(&served, &tool_loop_turn(turn)).await?;
        assert_eq!(route.as_deref(), Some("maths"), "turn {turn}");
    }
    let metrics = served.metrics().await?;
    for model in ["prompt_guard", "domain"] {
        assert_eq!(calls(&metrics, model), 1.0, "{model}:\n{metrics}");
        assert_eq!(count(&metrics, "src_model_memo_misses_total", model), 1.0);
        assert_eq!(count(&metrics, "src_model_memo_hits_total", model), 4.0);
    }
    assert_eq!(plain(&metrics, "src_model_memo_entries"), 2.0, "{metrics}");
    assert_eq!(served.models.remembered(), 2);

    // Another text is another call of each model.
    let other = json!({"model": "auto", "messages": [
        {"role": "user", "content": "Summarise the plot of Hamlet in two sentences."}]});
    let (_, route) = send(&served, &other).await?;
    assert_eq!(route.as_deref(), Some("default"));
    let metrics = served.metrics().await?;
    for model in ["prompt_guard", "domain"] {
        assert_eq!(calls(&metrics, model), 2.0, "{model}:\n{metrics}");
    }
    Ok(())
}

/// The memo is a tenant's own: another credential's identical text is a fresh call of each
/// model (no hit, no speed-up to learn from), while the same credential's is a hit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenant_never_hits_a_tenants_memo() -> TestResult {
    let served = serve(&policy("{models}", ""), options(MemoOptions::default())).await?;
    let turn = tool_loop_turn(0);
    let ask = |key: &'static str| send_as(&served, &turn, key);
    ask("tenant-a").await?;
    ask("tenant-b").await?;
    let metrics = served.metrics().await?;
    for model in ["prompt_guard", "domain"] {
        assert_eq!(calls(&metrics, model), 2.0, "{model}:\n{metrics}");
        assert_eq!(count(&metrics, "src_model_memo_hits_total", model), 0.0);
    }
    ask("tenant-a").await?;
    let metrics = served.metrics().await?;
    for model in ["prompt_guard", "domain"] {
        assert_eq!(calls(&metrics, model), 2.0, "{model}:\n{metrics}");
        assert_eq!(count(&metrics, "src_model_memo_hits_total", model), 1.0);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_memo_off_every_turn_runs_the_models() -> TestResult {
    let off = MemoOptions {
        bytes: 0,
        ..MemoOptions::default()
    };
    let served = serve(&policy("{models}", ""), options(off)).await?;
    for turn in 0..3 {
        send(&served, &tool_loop_turn(turn)).await?;
    }
    let metrics = served.metrics().await?;
    for model in ["prompt_guard", "domain"] {
        assert_eq!(calls(&metrics, model), 3.0, "{model}:\n{metrics}");
        assert_eq!(count(&metrics, "src_model_memo_hits_total", model), 0.0);
    }
    Ok(())
}

fn copy_model(from: &Path, to: &Path) -> TestResult {
    std::fs::create_dir_all(to)?;
    for name in ["model.onnx", "tokenizer.json", "config.json"] {
        std::fs::copy(from.join(name), to.join(name))?;
    }
    Ok(())
}

/// Asks for a reload and waits until it is done. Only model files changed, so the policy is
/// `unchanged` (its generation stays) while its models were loaded again.
async fn reloaded(served: &Served) -> TestResult {
    let done = |metrics: &str| sample(metrics, "src_reloads_total", "result=\"unchanged\"");
    let before = done(&served.metrics().await?);
    served.server.reload().await;
    let started = Instant::now();
    loop {
        let metrics = served.metrics().await?;
        if done(&metrics) > before {
            return Ok(());
        }
        if started.elapsed() > PATIENCE {
            return Err(format!("no reload:\n{metrics}").into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_model_file_is_not_answered_from_the_memo() -> TestResult {
    let copies = tempfile::tempdir()?;
    for name in ["prompt_guard", "domain"] {
        copy_model(
            &src_testkit::models::model_dir(name)?,
            &copies.path().join(name),
        )?;
    }
    let text = policy(&copies.path().display().to_string(), "");
    let served = serve(&text, options(MemoOptions::default())).await?;
    send(&served, &tool_loop_turn(0)).await?;

    // Same bytes, a new modification time: the model is loaded again, its answers are kept.
    let config = copies.path().join("domain/config.json");
    let later = SystemTime::now() + Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(&config)?
        .set_modified(later)?;
    reloaded(&served).await?;
    send(&served, &tool_loop_turn(1)).await?;
    let metrics = served.metrics().await?;
    assert_eq!(calls(&metrics, "domain"), 1.0, "{metrics}");

    // Changed content: a new fingerprint, so the same text runs the new model.
    let mut json: Value = serde_json::from_str(&std::fs::read_to_string(&config)?)?;
    json["memo_probe"] = json!("changed");
    std::fs::write(&config, serde_json::to_string_pretty(&json)?)?;
    std::fs::File::options()
        .write(true)
        .open(&config)?
        .set_modified(later + Duration::from_secs(60))?;
    reloaded(&served).await?;
    let (_, route) = send(&served, &tool_loop_turn(2)).await?;
    assert_eq!(route.as_deref(), Some("maths"));
    let metrics = served.metrics().await?;
    assert_eq!(calls(&metrics, "domain"), 2.0, "{metrics}");
    // The guard's files did not change: its answer still comes from the memo.
    assert_eq!(calls(&metrics, "prompt_guard"), 1.0, "{metrics}");
    // The old model's answer was dropped, not merely left unused.
    assert_eq!(served.models.remembered(), 2);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_byte_bound_evicts() -> TestResult {
    // Room for about eight answers of these two-to-four-label models.
    let bound = 8 * 112;
    let small = MemoOptions {
        bytes: bound,
        ..MemoOptions::default()
    };
    let served = serve(&policy("{models}", ""), options(small)).await?;
    let prompts: Vec<Value> = (0..24)
        .map(|i| {
            json!({"model": "auto", "messages": [
                {"role": "user", "content": format!("Tell me fact number {i} about volcanoes.")}]})
        })
        .collect();
    for body in &prompts {
        send(&served, body).await?;
    }
    let metrics = served.metrics().await?;
    assert!(
        plain(&metrics, "src_model_memo_bytes") <= bound as f64,
        "{metrics}"
    );
    let held = plain(&metrics, "src_model_memo_entries");
    assert!(held > 0.0 && held <= 8.0, "{held} entries:\n{metrics}");
    assert_eq!(calls(&metrics, "domain"), 24.0);
    // Asked again, most texts were evicted and run their models again.
    for body in &prompts {
        send(&served, body).await?;
    }
    let metrics = served.metrics().await?;
    let again = calls(&metrics, "domain") + calls(&metrics, "prompt_guard") - 48.0;
    assert!(
        again >= 48.0 - held,
        "{again} calls for 48 texts:\n{metrics}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_replica_answers_from_the_shared_memo() -> TestResult {
    let redis = RedisServer::start();
    let session = format!(
        "session {{ ttl = 10m  store = redis(\"{}\") }}",
        redis.url()
    );
    let shared = MemoOptions {
        shared: true,
        ..MemoOptions::default()
    };
    let text = policy("{models}", &session);
    let a = serve(&text, options(shared)).await?;
    let b = serve(&text, options(shared)).await?;

    send(&a, &tool_loop_turn(0)).await?;
    // Replica A stores its answers in the background: wait until both are there.
    let started = Instant::now();
    loop {
        let keys = redis.command("KEYS sr:v1:memo:*");
        if keys.starts_with("*2") {
            break;
        }
        if started.elapsed() > PATIENCE {
            return Err(format!("the answers were not shared: {keys}").into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let ttl = redis.command(&format!(
        "PTTL {}",
        redis
            .command("KEYS sr:v1:memo:*")
            .lines()
            .nth(2)
            .unwrap_or_default()
    ));
    assert!(ttl.starts_with(':') && !ttl.starts_with(":-"), "{ttl}");

    let (_, route) = send(&b, &tool_loop_turn(1)).await?;
    assert_eq!(route.as_deref(), Some("maths"));
    let metrics = b.metrics().await?;
    for model in ["prompt_guard", "domain"] {
        assert_eq!(calls(&metrics, model), 0.0, "{model}:\n{metrics}");
        assert_eq!(
            count(&metrics, "src_model_memo_shared_hits_total", model),
            1.0
        );
        assert_eq!(count(&metrics, "src_model_memo_hits_total", model), 1.0);
    }

    // Redis gone: replica B runs its models for a new text and still answers.
    drop(redis);
    let other = json!({"model": "auto", "messages": [
        {"role": "user", "content": "Summarise the plot of Hamlet in two sentences."}]});
    let (_, route) = send(&b, &other).await?;
    assert_eq!(route.as_deref(), Some("default"));
    let metrics = b.metrics().await?;
    assert_eq!(calls(&metrics, "domain"), 1.0, "{metrics}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_identical_requests_run_each_model_once() -> TestResult {
    let served =
        std::sync::Arc::new(serve(&policy("{models}", ""), options(MemoOptions::default())).await?);
    let mut tasks = Vec::new();
    for turn in 0..8 {
        let served = std::sync::Arc::clone(&served);
        tasks.push(tokio::spawn(async move {
            send(&served, &tool_loop_turn(turn)).await
        }));
    }
    for task in tasks {
        let (_, route) = task.await??;
        assert_eq!(route.as_deref(), Some("maths"));
    }
    let metrics = served.metrics().await?;
    for model in ["prompt_guard", "domain"] {
        assert_eq!(calls(&metrics, model), 1.0, "{model}:\n{metrics}");
        assert_eq!(count(&metrics, "src_model_memo_hits_total", model), 7.0);
    }
    Ok(())
}

/// The response cache's own embedding of the prompt is remembered per tenant too: another
/// credential's identical prompt is a fresh encoder call, the same credential's a memo hit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_embedding_is_remembered_per_tenant() -> TestResult {
    let text = format!(
        "{HEAD}\nencoder minilm {{ path = \"{{models}}/minilm\" }}\nroute default {{ to small }}\n\
         cache {{ encoder = minilm  threshold = 0.95 }}\n"
    );
    let served = serve(&text, options(MemoOptions::default())).await?;
    let body = json!({"model": "auto", "messages": [{"role": "user", "content": TASK}]});
    let ask = |key: &'static str| send_as(&served, &body, key);
    assert_eq!(ask("tenant-a").await?.as_deref(), Some("miss"));
    assert_eq!(ask("tenant-b").await?.as_deref(), Some("miss"));
    let metrics = served.metrics().await?;
    assert_eq!(calls(&metrics, "minilm"), 2.0, "{metrics}");
    assert_eq!(count(&metrics, "src_model_memo_hits_total", "minilm"), 0.0);
    assert_eq!(ask("tenant-a").await?.as_deref(), Some("hit"));
    let metrics = served.metrics().await?;
    assert_eq!(calls(&metrics, "minilm"), 2.0, "{metrics}");
    assert_eq!(count(&metrics, "src_model_memo_hits_total", "minilm"), 1.0);
    Ok(())
}
