//! The operator console's API on the admin listener, over real HTTP: the page and its files,
//! the token rule, the live stream (and that it lets go of a page that left), the counts, the
//! policy picture with its warnings, the explain box (the same answer as the compiler's
//! explainer), and the reload history with a failed reload's diagnostics.

use std::time::Duration;

use http_body_util::BodyExt;
use hyper::Method;
use serde_json::{json, Value};
use src_testkit::{user, Http, Router, TestResult, PATIENCE};

const POLICY: &str = r#"
backend sim { url = "http://127.0.0.1:9/v1"  simulated = true }

model small  { backend = sim  serves = "Qwen/Qwen3-0.6B" }
model strong { backend = sim  serves = "Qwen/Qwen3-8B" }
model spare  { backend = sim  serves = "spare-model" }

signal code_talk = contains(prompt, ["stack trace", "segfault"])
signal long_one  = tokens(prompt) > 2000
signal idle      = contains(prompt, ["never read"])

block too_long { when long_one  status = 413 }

route coding priority 20 { when code_talk  to strong else small }
route default { to small }
"#;

async fn get(router: &Router, path: &str, headers: &[(&str, &str)]) -> TestResult<Value> {
    let answer = Http::new()
        .send(Method::GET, &router.admin_url(path), "", headers)
        .await?;
    if answer.status != 200 {
        return Err(format!("GET {path}: {} {}", answer.status, answer.text()).into());
    }
    answer.json()
}

async fn explain(router: &Router, body: Value) -> TestResult<(u16, Value)> {
    let answer = router.admin_post("/v1/console/explain", &body, &[]).await?;
    Ok((answer.status, answer.json()?))
}

#[tokio::test]
async fn the_page_and_its_files_are_served_from_the_binary() -> TestResult {
    let router = Router::start(POLICY).await?;
    let http = Http::new();
    let page = http
        .send(Method::GET, &router.admin_url("/"), "", &[])
        .await?;
    assert_eq!(page.status, 200);
    assert!(page
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/html")));
    let html = page.text();
    assert!(html.contains("/console.js") && html.contains("id=\"live-rows\""));
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "no CDN"
    );
    for (path, kind) in [
        ("/console.js", "text/javascript"),
        ("/console.css", "text/css"),
    ] {
        let file = http
            .send(Method::GET, &router.admin_url(path), "", &[])
            .await?;
        assert_eq!(file.status, 200, "{path}");
        assert!(file
            .header("content-type")
            .is_some_and(|t| t.starts_with(kind)));
        assert!(file.body.len() > 100, "{path} is not empty");
    }
    // The API listener does not serve the console.
    assert_eq!(router.get("/").await?.status, 404);
    assert_eq!(router.get("/v1/console/policy").await?.status, 404);
    Ok(())
}

#[tokio::test]
async fn with_a_token_the_page_loads_but_the_api_needs_the_bearer() -> TestResult {
    let router = Router::start_with(POLICY, |cfg| {
        cfg.admin_token = src_runtime::AdminToken::new("s3cret");
    })
    .await?;
    let http = Http::new();
    let page = http
        .send(Method::GET, &router.admin_url("/"), "", &[])
        .await?;
    assert_eq!(page.status, 200);
    for path in [
        "/v1/console/policy",
        "/v1/console/health",
        "/v1/console/live",
    ] {
        let refused = http
            .send(Method::GET, &router.admin_url(path), "", &[])
            .await?;
        assert_eq!(refused.status, 401, "{path}");
        assert_eq!(refused.header("www-authenticate"), Some("Bearer"));
    }
    let policy = get(
        &router,
        "/v1/console/policy",
        &[("authorization", "Bearer s3cret")],
    )
    .await?;
    assert_eq!(policy["routes"][0]["name"], "coding");
    Ok(())
}

/// Reads SSE `data:` lines from `body` until one satisfies `want` (bounded by `PATIENCE`).
async fn read_until(
    body: &mut hyper::body::Incoming,
    want: impl Fn(&Value) -> bool,
) -> TestResult<Value> {
    let mut buffer = String::new();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            for line in event.lines() {
                if let Some(data) = line.strip_prefix("data: ") {
                    let value: Value = serde_json::from_str(data)?;
                    if want(&value) {
                        return Ok(value);
                    }
                }
            }
        }
        let frame = tokio::time::timeout_at(deadline, body.frame())
            .await
            .map_err(|_| "the wanted line never came")?
            .ok_or("the stream ended")??;
        if let Ok(data) = frame.into_data() {
            buffer.push_str(std::str::from_utf8(&data)?);
        }
    }
}

async fn watchers(router: &Router) -> TestResult<u64> {
    let health = get(router, "/v1/console/health", &[]).await?;
    health["live_watchers"]
        .as_u64()
        .ok_or_else(|| "no live_watchers".into())
}

#[tokio::test]
async fn prompt_text_reaches_the_live_stream_only_when_the_operator_turns_it_on() -> TestResult {
    let router = Router::start_with(POLICY, |cfg| cfg.console_prompts = true).await?;
    let response = Http::new()
        .open(Method::GET, &router.admin_url("/v1/console/live"), "", &[])
        .await?;
    let mut body = response.into_body();
    let long = format!("a segfault in my stack trace {}", "x".repeat(600));
    let answer = router.chat(&user(&long), &[]).await?;
    assert_eq!(answer.status, 200);
    let line = read_until(&mut body, |l| l["route"] == "coding").await?;
    assert_eq!(line["prompt_chars"], long.chars().count());
    let shown = line["prompt"].as_str().ok_or("prompt text")?;
    assert_eq!(
        shown.chars().count(),
        500,
        "cut to its first 500 characters"
    );
    assert!(long.starts_with(shown));
    Ok(())
}

#[tokio::test]
async fn the_live_stream_shows_each_decision_and_lets_go_of_a_page_that_left() -> TestResult {
    let router = Router::start(POLICY).await?;
    assert_eq!(watchers(&router).await?, 0);
    let response = Http::new()
        .open(Method::GET, &router.admin_url("/v1/console/live"), "", &[])
        .await?;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers().get("content-type").map(|v| v.as_bytes()),
        Some(&b"text/event-stream"[..])
    );
    let mut body = response.into_body();
    assert_eq!(watchers(&router).await?, 1);

    let coded = router
        .chat(
            &user("a segfault in my stack trace"),
            &[("authorization", "Bearer sk-live-key")],
        )
        .await?;
    assert_eq!(coded.status, 200);
    let line = read_until(&mut body, |l| l["route"] == "coding").await?;
    assert_eq!(line["model"], "strong");
    assert_eq!(line["path"], "upstream");
    assert_eq!(line["status"], 200);
    assert!(line["latency_ms"].as_f64().is_some_and(|ms| ms > 0.0));
    assert!(line["prompt"].is_null(), "no prompt text in a line: {line}");
    assert_eq!(line["prompt_chars"], "a segfault in my stack trace".len());
    assert!(!line.to_string().contains("segfault"), "{line}");
    // The tenant is a hash of the API key, never the key.
    let tenant = line["tenant"].as_str().ok_or("a tenant")?;
    assert_eq!(tenant.len(), 32, "{tenant}");
    assert!(tenant.chars().all(|c| c.is_ascii_hexdigit()), "{tenant}");
    assert!(!line.to_string().contains("sk-live"), "{line}");

    let blocked = router.chat(&user(&"word ".repeat(3000)), &[]).await?;
    assert_eq!(blocked.status, 413);
    let line = read_until(&mut body, |l| l["path"] == "blocked").await?;
    assert_eq!(line["block"], "too_long");
    // A refusal is filtered by tenant like a forwarded request (no key: the keyless tenant).
    assert!(line["tenant"].as_str().is_some(), "{line}");

    drop(body);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while watchers(&router).await? != 0 {
        if tokio::time::Instant::now() > deadline {
            return Err("the stream's receiver outlived its page".into());
        }
        // A request is what tells the stream's task its page is gone at the latest.
        router.chat(&user("hello"), &[]).await?;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

#[tokio::test]
async fn counts_per_route_and_model_cover_the_last_minute_and_hour() -> TestResult {
    let router = Router::start(POLICY).await?;
    for _ in 0..3 {
        router.chat(&user("segfault again"), &[]).await?;
    }
    router.chat(&user("hello"), &[]).await?;
    let counts = get(&router, "/v1/console/counts", &[]).await?;
    for window in ["minute", "hour"] {
        assert_eq!(counts[window]["by_route"]["coding"], 3.0, "{window}");
        assert_eq!(counts[window]["by_route"]["default"], 1.0, "{window}");
        assert_eq!(counts[window]["by_model"]["strong"], 3.0, "{window}");
        assert_eq!(counts[window]["by_model"]["small"], 1.0, "{window}");
    }
    Ok(())
}

#[tokio::test]
async fn the_policy_picture_has_routes_in_priority_order_with_signals_and_warnings() -> TestResult {
    let router = Router::start(POLICY).await?;
    let p = get(&router, "/v1/console/policy", &[]).await?;
    assert_eq!(p["blocks"][0]["name"], "too_long");
    assert_eq!(p["blocks"][0]["when"], "long_one");
    assert_eq!(p["blocks"][0]["action"], "refuse 413");
    let routes: Vec<&str> = p["routes"]
        .as_array()
        .ok_or("routes")?
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(routes, ["coding", "default"]);
    let coding = &p["routes"][0];
    assert_eq!(coding["when"], "code_talk");
    assert_eq!(coding["to"], "strong");
    assert_eq!(coding["fallbacks"], json!(["small"]));
    assert_eq!(
        coding["signals"],
        json!([{"name": "code_talk", "cost": "cheap"}])
    );
    assert!(p["routes"][1]["when"].is_null());
    let backend = &p["backends"][0];
    assert_eq!(
        backend["serves"],
        json!(["Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B", "spare-model"])
    );
    // `src check`'s warnings sit on the items they concern.
    let item = |kind: &str, name: &str| -> Value {
        p[kind]
            .as_array()
            .and_then(|items| items.iter().find(|i| i["name"] == name))
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(item("signals", "idle")["warnings"][0]["code"], "W001");
    assert_eq!(item("models", "spare")["warnings"][0]["code"], "W003");
    assert_eq!(item("signals", "code_talk")["warnings"], json!([]));
    assert_eq!(item("routes", "coding")["warnings"], json!([]));
    Ok(())
}

#[tokio::test]
async fn the_explain_box_answers_what_the_compilers_explainer_answers() -> TestResult {
    let router = Router::start(POLICY).await?;
    let (status, e) = explain(&router, json!({"prompt": "why does this segfault?"})).await?;
    assert_eq!(status, 200, "{e}");
    assert_eq!(e["route"], "coding");
    assert_eq!(e["model"], "strong");
    assert_eq!(e["serves"], "Qwen/Qwen3-8B");
    assert_eq!(e["signals"]["code_talk"], true);
    assert_eq!(e["skipped"], json!(["idle"]));

    // The same function, called directly on the same policy, gives the same answer.
    let path = router.policy_path();
    let source = src_compiler::load(&path)?;
    let checked = src_compiler::check(source, &src_compiler::CheckOptions::default())
        .policy
        .ok_or("the policy checks")?;
    let policy = src_compiler::compile(checked, src_compiler::EngineKind::Interp)?;
    let view =
        src_compiler::request::RequestView::from_prompt("why does this segfault?", None, &[]);
    struct NoModels;
    impl src_compiler::explain::ModelAnswers for NoModels {
        fn answer(
            &mut self,
            _: &src_compiler::hir::CheckedPolicy,
            _: &[src_compiler::eval::ModelCall],
        ) -> Result<Vec<src_compiler::eval::ModelResult>, src_compiler::explain::ModelsUnavailable>
        {
            Err(src_compiler::explain::ModelsUnavailable::CannotRun(
                "none".into(),
            ))
        }
    }
    let direct = src_compiler::explain::explain(
        &policy,
        &view,
        src_compiler::failover::Wire::Chat,
        &[],
        &mut NoModels,
    )?;
    assert_eq!(e, direct);

    // A default-route prompt: the trace says why the higher route lost.
    let (_, e) = explain(&router, json!({"prompt": "hello there"})).await?;
    assert_eq!(e["route"], "default");
    let coding = e["trace"]
        .as_array()
        .and_then(|t| t.iter().find(|c| c["name"] == "coding"))
        .ok_or("coding in the trace")?;
    assert_eq!(coding["state"], "not held");
    assert_eq!(coding["condition"], "code_talk");

    // A whole request with headers.
    let (_, e) = explain(
        &router,
        json!({"request": {"model": "auto", "messages": [{"role": "user", "content": "stack trace here"}]},
               "headers": {"x-team": "a"}}),
    )
    .await?;
    assert_eq!(e["route"], "coding");

    // An Anthropic Messages body, told from its blocks, decided as `/v1/messages` decides it:
    // a user message of tool results is no user turn, so the prompt is the question before.
    let messages = json!({"model": "auto", "max_tokens": 64, "messages": [
        {"role": "user", "content": "stack trace here"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "sh", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}
    ]});
    let (status, e) = explain(&router, json!({"request": messages})).await?;
    assert_eq!(status, 200, "{e}");
    assert_eq!(e["route"], "coding");
    let (status, e) = explain(&router, json!({"request": messages, "api": "messages"})).await?;
    assert_eq!((status, &e["route"]), (200, &json!("coding")), "{e}");
    let (status, e) = explain(&router, json!({"request": messages, "api": "chat"})).await?;
    assert_eq!(status, 400, "chat has no `tool_use` part: {e}");
    assert!(e["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("tool_use")));
    let (status, e) = explain(&router, json!({"request": messages, "api": "grpc"})).await?;
    assert_eq!(status, 400);
    assert!(e["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("`messages`")));

    // Bad input: the API's error shape.
    let (status, e) = explain(&router, json!({"nothing": 1})).await?;
    assert_eq!(status, 400);
    assert!(e["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("prompt")));
    let (status, _) = explain(
        &router,
        json!({"request": {"model": "nope", "messages": [{"role": "user", "content": "x"}]}}),
    )
    .await?;
    assert_eq!(status, 400);
    // Nothing went upstream: the simulator saw no request.
    assert_eq!(router.sims()[0].received().len(), 0);
    Ok(())
}

#[tokio::test]
async fn health_lists_reloads_with_a_failed_reloads_rendered_diagnostics() -> TestResult {
    let router = Router::start_with(POLICY, |cfg| cfg.watch = false).await?;
    std::fs::write(
        router.policy_path(),
        POLICY.replace("to strong else small", "to stronk else small"),
    )?;
    router.server.reload().await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let failed = loop {
        let health = get(&router, "/v1/console/health", &[]).await?;
        if health["reloads"][0]["result"] == "error" {
            break health;
        }
        if tokio::time::Instant::now() > deadline {
            return Err("the failed reload never showed".into());
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    let newest = &failed["reloads"][0];
    assert_eq!(newest["generation"], 1, "the old policy keeps serving");
    let rendered = newest["rendered"].as_str().ok_or("rendered")?;
    assert!(rendered.contains("stronk"), "{rendered}");
    assert!(rendered.contains("E0"), "a diagnostic code: {rendered}");
    assert_eq!(failed["reloads"][1]["result"], "ok");
    assert_eq!(failed["backends"]["sim"]["simulated"], true);
    assert!(failed["cache"]["hit_ratio"].is_null());
    Ok(())
}

fn session_policy(store: &str) -> String {
    format!(
        r#"
backend sim {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model small  {{ backend = sim  serves = "Qwen/Qwen3-0.6B" }}
model strong {{ backend = sim  serves = "Qwen/Qwen3-8B" }}
route coding priority 10 {{ when contains(prompt, ["segfault"])  to strong }}
route default {{ to small }}
session {{ ttl = 10m  {store} }}
"#
    )
}

/// Two tenants (API keys), one short and one long session id each; the listing groups them by
/// tenant, shows the long id hashed and never an API key.
async fn sessions_are_listed_by_tenant(router: &Router, store: &str) -> TestResult {
    let long_id = "conversation-".repeat(4);
    let calls = [
        ("sk-alice-key", "task-1", "hello"),
        ("sk-alice-key", "task-1", "hello again"),
        ("sk-alice-key", long_id.as_str(), "a segfault"),
        ("sk-bob-key", "task-1", "hi"),
    ];
    for (key, id, text) in calls {
        let bearer = format!("Bearer {key}");
        let answer = router
            .chat(
                &user(text),
                &[("x-session-id", id), ("authorization", &bearer)],
            )
            .await?;
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    let s = get(router, "/v1/console/sessions", &[]).await?;
    assert_eq!(s["store"], store);
    assert_eq!(s["listed"], 3);
    let text = s.to_string();
    assert!(
        !text.contains("sk-alice") && !text.contains("sk-bob"),
        "{text}"
    );
    assert!(!text.contains("conversation-conversation"), "{text}");
    let tenants = s["tenants"].as_object().ok_or("tenants")?;
    assert_eq!(tenants.len(), 2);
    let alice = tenants
        .values()
        .find(|pins| pins.as_array().is_some_and(|p| p.len() == 2))
        .ok_or("a tenant with two pins")?;
    let short = alice
        .as_array()
        .and_then(|p| p.iter().find(|p| p["id"] == "task-1"))
        .ok_or("task-1")?;
    assert_eq!(short["model"], "small");
    assert_eq!(short["turns"], 2);
    assert!(short["ttl_left_s"].as_f64().is_some_and(|t| t > 500.0));
    let long = alice
        .as_array()
        .and_then(|p| p.iter().find(|p| p["id"] != "task-1"))
        .ok_or("the long id")?;
    assert!(long["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("sha256:")));
    assert_eq!(long["model"], "strong");
    Ok(())
}

/// With a page connected, the router keeps each session's last decisions itself, so the
/// sessions view lists them even where the stream's pace (two lines a second here) left most of
/// them out of the stream.
#[tokio::test]
async fn a_sessions_recent_decisions_are_kept_whatever_the_stream_left_out() -> TestResult {
    let router = Router::start_with(&session_policy(""), |cfg| cfg.console_live_rate = 2).await?;
    let health = get(&router, "/v1/console/health", &[]).await?;
    assert_eq!(health["live_rate"], 2);
    let unwatched = router
        .chat(&user("before any page"), &[("x-session-id", "t")])
        .await?;
    assert_eq!(unwatched.status, 200);
    let response = Http::new()
        .open(Method::GET, &router.admin_url("/v1/console/live"), "", &[])
        .await?;
    let _body = response.into_body();
    assert_eq!(watchers(&router).await?, 1);
    for i in 0..12 {
        let text = if i == 11 { "a segfault" } else { "hello" };
        let answer = router.chat(&user(text), &[("x-session-id", "t")]).await?;
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    let s = get(&router, "/v1/console/sessions", &[]).await?;
    let pin = s["tenants"]
        .as_object()
        .and_then(|t| t.values().next())
        .and_then(|pins| pins.as_array())
        .and_then(|pins| pins.iter().find(|p| p["id"] == "t"))
        .ok_or("the pin")?;
    assert_eq!(pin["turns"], 13);
    let decisions = pin["decisions"].as_array().ok_or("decisions")?;
    // The last eight, newest first; the call made before a page watched is not among them.
    assert_eq!(decisions.len(), 8, "{pin}");
    assert_eq!(decisions[0]["route"], "coding");
    // Nothing protects the pin here: the coding turn switched it, and says so.
    assert_eq!(decisions[0]["model"], "strong", "{pin}");
    assert_eq!(decisions[0]["session"], "switched", "{pin}");
    assert!(
        decisions[1..]
            .iter()
            .all(|d| d["route"] == "default" && d["session"] == "pinned"),
        "{pin}"
    );
    assert!(decisions.iter().all(|d| d["path"] == "upstream"));
    assert!(decisions[0]["at_ms"].as_u64() >= decisions[7]["at_ms"].as_u64());
    Ok(())
}

#[tokio::test]
async fn sessions_in_memory_are_listed_by_tenant() -> TestResult {
    let router = Router::start(&session_policy("")).await?;
    sessions_are_listed_by_tenant(&router, "memory").await
}

#[tokio::test]
async fn sessions_in_redis_are_listed_by_tenant_with_a_bounded_scan() -> TestResult {
    let redis = src_testkit::redis::RedisServer::start();
    let store = format!("store = redis({:?})", redis.url());
    let router = Router::start(&session_policy(&store)).await?;
    sessions_are_listed_by_tenant(&router, "redis").await?;
    // The listing's `limit` bounds what is read.
    let s = get(&router, "/v1/console/sessions?limit=1", &[]).await?;
    assert_eq!(s["listed"], 1);
    Ok(())
}

#[tokio::test]
async fn without_a_session_the_listing_says_so() -> TestResult {
    let router = Router::start(POLICY).await?;
    let s = get(&router, "/v1/console/sessions", &[]).await?;
    assert!(s["store"].is_null());
    assert_eq!(s["listed"], 0);
    Ok(())
}

/// A path, the headers that get it refused, and the status.
type Refusal<'a> = (&'a str, &'a [(&'a str, &'a str)], u16);

/// A DNS-rebinding page names its own host; a cross-origin page sends its `Origin` and can post
/// `text/plain` without a preflight. The admin listener answers none of them, in the API's
/// error shape, and still answers the console's own same-origin calls.
#[tokio::test]
async fn foreign_hosts_origins_and_plain_text_posts_are_refused() -> TestResult {
    let router = Router::start_with(POLICY, |cfg| {
        cfg.admin_hosts = vec!["router.internal".into()];
    })
    .await?;
    let http = Http::new();
    let own = format!("http://{}", router.server.admin_addr);
    let refused: [Refusal; 4] = [
        ("/v1/console/policy", &[("host", "rebound.example")], 421),
        ("/v1/console/live", &[("host", "rebound.example:8802")], 421),
        (
            "/v1/router/policy",
            &[("origin", "http://evil.example")],
            403,
        ),
        ("/", &[("host", "rebound.example")], 421),
    ];
    for (path, headers, status) in refused {
        let answer = http
            .send(Method::GET, &router.admin_url(path), "", headers)
            .await?;
        assert_eq!(answer.status, status, "{path} {headers:?}");
        assert!(answer.json()?["error"]["message"].is_string(), "{path}");
        assert!(!answer.text().contains("\"routes\""), "{path}");
    }
    let body = json!({"prompt": "why does this segfault?"}).to_string();
    let url = router.admin_url("/v1/console/explain");
    let plain = http
        .send(
            Method::POST,
            &url,
            body.clone(),
            &[("content-type", "text/plain"), ("origin", &own)],
        )
        .await?;
    assert_eq!(plain.status, 415, "{}", plain.text());
    let foreign = http
        .send(
            Method::POST,
            &url,
            body.clone(),
            &[("origin", "http://evil.example")],
        )
        .await?;
    assert_eq!(foreign.status, 403, "{}", foreign.text());
    let same = http
        .send(Method::POST, &url, body, &[("origin", &own)])
        .await?;
    assert_eq!(same.status, 200, "{}", same.text());
    let configured = http
        .send(
            Method::GET,
            &router.admin_url("/v1/console/policy"),
            "",
            &[("host", "router.internal:8802")],
        )
        .await?;
    assert_eq!(configured.status, 200, "{}", configured.text());
    Ok(())
}
