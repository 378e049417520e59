//! Stateful `/v1/responses` end to end: a real `src serve` over two simulated backends, real
//! HTTP, and a real `redis-server` shared by two routers. A route on a header forces the switch,
//! and the simulators' request logs show what each backend was really sent.

use hyper::Method;
use serde_json::{json, Value};
use src_testkit::redis::RedisServer;
use src_testkit::{Answer, Router, TestResult};

/// Two models on two backends; `x-move: yes` routes to the second.
fn policy(extra: &str) -> String {
    format!(
        r#"
backend a {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
backend b {{ url = "http://127.0.0.1:8/v1"  simulated = true }}
model first  {{ backend = a  serves = "model-a" }}
model second {{ backend = b  serves = "model-b" }}
route moved priority 10 {{ when header("x-move") == "yes"  to second }}
route default {{ to first }}
{extra}
"#
    )
}

const KEY: (&str, &str) = ("authorization", "Bearer sk-tenant-one");
const OTHER: (&str, &str) = ("authorization", "Bearer sk-tenant-two");
const MOVE: (&str, &str) = ("x-move", "yes");

async fn respond(router: &Router, body: &Value, headers: &[(&str, &str)]) -> TestResult<Answer> {
    router.post("/v1/responses", body, headers).await
}

async fn call(
    router: &Router,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
) -> TestResult<Answer> {
    router
        .client
        .send(method, &router.url(path), String::new(), headers)
        .await
}

/// The last request a backend received for `served`.
fn last_sent(router: &Router, served: &str) -> TestResult<Value> {
    router
        .sims()
        .iter()
        .flat_map(|s| s.received())
        .filter(|r| r.path == "/v1/responses")
        .filter_map(|r| r.json())
        .filter(|b| b["model"] == served)
        .last()
        .ok_or_else(|| format!("`{served}` received nothing").into())
}

/// Every text of an input list, in order (a string input is one).
fn texts(input: &Value) -> Vec<String> {
    let text = |content: &Value| match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    };
    match input {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().map(|i| text(&i["content"])).collect(),
        _ => Vec::new(),
    }
}

/// The answer's output text.
fn said(answer: &Answer) -> TestResult<String> {
    let v = answer.json()?;
    Ok(v["output"][0]["content"][0]["text"]
        .as_str()
        .ok_or_else(|| format!("no output text in {v}"))?
        .to_owned())
}

fn id(answer: &Answer) -> TestResult<String> {
    let v = answer.json()?;
    Ok(v["id"]
        .as_str()
        .ok_or_else(|| format!("no id in {v}"))?
        .to_owned())
}

#[tokio::test]
async fn a_forced_switch_sends_the_whole_history_and_the_owner_keeps_its_own_state() -> TestResult {
    let router = Router::start(&policy("")).await?;
    let one = respond(
        &router,
        &json!({"model": "auto", "input": "turn one"}),
        &[KEY],
    )
    .await?;
    assert_eq!(one.status, 200, "{}", one.text());
    assert_eq!(one.header("x-sr-model"), Some("first"));
    assert_eq!(one.header("x-sr-previous"), None);

    // Same owner: forwarded as written, the backend's own state stays useful.
    let body = json!({"model": "auto", "input": "turn two", "previous_response_id": id(&one)?});
    let two = respond(&router, &body, &[KEY]).await?;
    assert_eq!(two.status, 200, "{}", two.text());
    assert_eq!(two.header("x-sr-model"), Some("first"));
    assert_eq!(two.header("x-sr-previous"), Some("continued"));
    let sent = last_sent(&router, "model-a")?;
    assert_eq!(sent["previous_response_id"], id(&one)?);
    assert_eq!(texts(&sent["input"]), ["turn two"]);

    // Moved: the second backend never saw the conversation and gets all of it.
    let body = json!({"model": "auto", "input": "turn three", "previous_response_id": id(&two)?,
                      "instructions": "be brief"});
    let three = respond(&router, &body, &[KEY, MOVE]).await?;
    assert_eq!(three.status, 200, "{}", three.text());
    assert_eq!(three.header("x-sr-model"), Some("second"));
    assert_eq!(three.header("x-sr-previous"), Some("expanded"));
    let sent = last_sent(&router, "model-b")?;
    assert!(sent.get("previous_response_id").is_none(), "{sent}");
    assert_eq!(sent["instructions"], "be brief");
    assert_eq!(
        texts(&sent["input"]),
        [
            "turn one",
            &said(&one)?,
            "turn two",
            &said(&two)?,
            "turn three"
        ]
    );

    // And back: the first backend gets what the second added.
    let body = json!({"model": "auto", "input": "turn four", "previous_response_id": id(&three)?});
    let four = respond(&router, &body, &[KEY]).await?;
    assert_eq!(four.header("x-sr-previous"), Some("expanded"));
    let sent = last_sent(&router, "model-a")?;
    assert_eq!(
        texts(&sent["input"]),
        [
            "turn one",
            &said(&one)?,
            "turn two",
            &said(&two)?,
            "turn three",
            &said(&three)?,
            "turn four"
        ]
    );
    let line = router
        .log_line(four.header("x-sr-request-id").unwrap_or(""))
        .await?;
    assert_eq!(line["previous"], "expanded");
    Ok(())
}

#[tokio::test]
async fn a_streamed_answer_is_kept_from_its_final_event() -> TestResult {
    let router = Router::start(&policy("")).await?;
    let body = json!({"model": "auto", "input": "stream me", "stream": true});
    let streamed = respond(&router, &body, &[KEY]).await?;
    assert_eq!(streamed.status, 200, "{}", streamed.text());
    let completed = streamed
        .text()
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|e| e["type"] == "response.completed")
        .ok_or("no response.completed event")?;
    let first_id = completed["response"]["id"]
        .as_str()
        .ok_or("no id")?
        .to_owned();
    let first_text = completed["response"]["output"][0]["content"][0]["text"].clone();

    let kept = call(
        &router,
        Method::GET,
        &format!("/v1/responses/{first_id}"),
        &[KEY],
    )
    .await?;
    assert_eq!(kept.status, 200, "{}", kept.text());
    assert_eq!(kept.json()?, completed["response"]);

    let body =
        json!({"model": "auto", "input": "next", "previous_response_id": first_id, "stream": true});
    let moved = respond(&router, &body, &[KEY, MOVE]).await?;
    assert_eq!(moved.status, 200, "{}", moved.text());
    assert_eq!(moved.header("x-sr-previous"), Some("expanded"));
    let sent = last_sent(&router, "model-b")?;
    let first_text = first_text.as_str().ok_or("no text")?;
    assert_eq!(texts(&sent["input"]), ["stream me", first_text, "next"]);
    Ok(())
}

#[tokio::test]
async fn stored_responses_are_read_listed_and_deleted_by_their_tenant_only() -> TestResult {
    let router = Router::start(&policy("")).await?;
    let one = respond(&router, &json!({"model": "auto", "input": "hello"}), &[KEY]).await?;
    let body = json!({"model": "auto", "input": [{"role": "user", "content": "again"}],
                      "previous_response_id": id(&one)?});
    let two = respond(&router, &body, &[KEY]).await?;
    let (one_id, two_id) = (id(&one)?, id(&two)?);

    let got = call(
        &router,
        Method::GET,
        &format!("/v1/responses/{two_id}"),
        &[KEY],
    )
    .await?;
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(got.json()?, two.json()?);

    let items = call(
        &router,
        Method::GET,
        &format!("/v1/responses/{two_id}/input_items"),
        &[KEY],
    )
    .await?;
    assert_eq!(items.status, 200, "{}", items.text());
    let list = items.json()?;
    assert_eq!(list["object"], "list");
    assert_eq!(
        texts(&list["data"]),
        ["again", &said(&one)?, "hello"],
        "newest first"
    );
    assert_eq!(list["has_more"], false);
    let asc = call(
        &router,
        Method::GET,
        &format!("/v1/responses/{two_id}/input_items?order=asc&limit=2"),
        &[KEY],
    )
    .await?;
    let asc = asc.json()?;
    assert_eq!(texts(&asc["data"]), ["hello", &said(&one)?]);
    assert_eq!(asc["has_more"], true);

    // Another tenant: 404 in OpenAI's shape, for reads, lists and deletes alike.
    for (method, path) in [
        (Method::GET, format!("/v1/responses/{one_id}")),
        (Method::GET, format!("/v1/responses/{one_id}/input_items")),
        (Method::DELETE, format!("/v1/responses/{one_id}")),
        (Method::GET, "/v1/responses/resp_nobody".to_owned()),
    ] {
        let answer = call(&router, method.clone(), &path, &[OTHER]).await?;
        assert_eq!(answer.status, 404, "{method} {path}: {}", answer.text());
        let (message, _, kind) = answer.error()?;
        assert_eq!(kind, "invalid_request_error");
        assert!(message.contains("not found"), "{message}");
    }
    // Nor can another tenant continue it: for that tenant it is nobody's stored response.
    let body = json!({"model": "auto", "input": "mine?", "previous_response_id": one_id});
    let foreign = respond(&router, &body, &[OTHER, MOVE]).await?;
    assert_eq!(foreign.header("x-sr-previous"), Some("unowned"));
    assert_eq!(
        last_sent(&router, "model-b")?["previous_response_id"],
        one_id
    );

    let deleted = call(
        &router,
        Method::DELETE,
        &format!("/v1/responses/{one_id}"),
        &[KEY],
    )
    .await?;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    assert_eq!(
        deleted.json()?,
        json!({"id": one_id, "object": "response.deleted", "deleted": true})
    );
    let gone = call(
        &router,
        Method::GET,
        &format!("/v1/responses/{one_id}"),
        &[KEY],
    )
    .await?;
    assert_eq!(gone.status, 404);
    let again = call(
        &router,
        Method::DELETE,
        &format!("/v1/responses/{one_id}"),
        &[KEY],
    )
    .await?;
    assert_eq!(again.status, 404);
    let wrong = call(
        &router,
        Method::POST,
        &format!("/v1/responses/{two_id}"),
        &[KEY],
    )
    .await?;
    assert_eq!(wrong.status, 405);
    assert_eq!(wrong.header("allow"), Some("GET, DELETE"));
    Ok(())
}

#[tokio::test]
async fn store_false_keeps_nothing_and_its_id_stays_the_provider_s() -> TestResult {
    let router = Router::start(&policy("")).await?;
    let body = json!({"model": "auto", "input": "forget me", "store": false});
    let one = respond(&router, &body, &[KEY]).await?;
    assert_eq!(one.status, 200, "{}", one.text());
    let path = format!("/v1/responses/{}", id(&one)?);
    assert_eq!(call(&router, Method::GET, &path, &[KEY]).await?.status, 404);
    let body = json!({"model": "auto", "input": "and now?", "previous_response_id": id(&one)?});
    let two = respond(&router, &body, &[KEY, MOVE]).await?;
    assert_eq!(two.status, 200, "{}", two.text());
    assert_eq!(two.header("x-sr-previous"), Some("unowned"));
    let sent = last_sent(&router, "model-b")?;
    assert_eq!(
        sent["previous_response_id"],
        id(&one)?,
        "forwarded as written"
    );
    let line = router
        .log_line(two.header("x-sr-request-id").unwrap_or(""))
        .await?;
    assert_eq!(line["previous"], "unowned");
    // A turn on the provider's state is not kept: the router could not expand it later.
    let kept = call(
        &router,
        Method::GET,
        &format!("/v1/responses/{}", id(&two)?),
        &[KEY],
    )
    .await?;
    assert_eq!(kept.status, 404);
    Ok(())
}

const SESSION: &str = "session { id = header(\"x-session\") }";

#[tokio::test]
async fn an_unknown_id_is_held_on_the_session_s_pinned_owner() -> TestResult {
    let router = Router::start(&policy(SESSION)).await?;
    let s = ("x-session", "s1");
    let one = respond(&router, &json!({"model": "auto", "input": "hi"}), &[KEY, s]).await?;
    assert_eq!(one.header("x-sr-session"), Some("new"));
    let body = json!({"model": "auto", "input": "go on", "previous_response_id": "resp_elsewhere"});
    let held = respond(&router, &body, &[KEY, s, MOVE]).await?;
    assert_eq!(held.status, 200, "{}", held.text());
    assert_eq!(held.header("x-sr-session"), Some("held"));
    assert_eq!(held.header("x-sr-model"), Some("first"));
    assert_eq!(held.header("x-sr-protection"), Some("provider state"));
    assert_eq!(held.header("x-sr-previous"), Some("provider"));
    assert_eq!(
        last_sent(&router, "model-a")?["previous_response_id"],
        "resp_elsewhere"
    );
    // A stored id is no provider state: the same switch goes ahead, expanded.
    let body = json!({"model": "auto", "input": "go on", "previous_response_id": id(&one)?});
    let moved = respond(&router, &body, &[KEY, s, MOVE]).await?;
    assert_eq!(moved.header("x-sr-session"), Some("switched"));
    assert_eq!(moved.header("x-sr-previous"), Some("expanded"));
    assert_eq!(moved.header("x-sr-protection"), None);
    Ok(())
}

#[tokio::test]
async fn observe_mode_only_reports_the_provider_state_hold() -> TestResult {
    let router =
        Router::start(&policy(&format!("{SESSION}\nprotect {{ mode = observe }}"))).await?;
    let s = ("x-session", "s1");
    respond(&router, &json!({"model": "auto", "input": "hi"}), &[KEY, s]).await?;
    let body = json!({"model": "auto", "input": "go on", "previous_response_id": "resp_elsewhere"});
    let moved = respond(&router, &body, &[KEY, s, MOVE]).await?;
    assert_eq!(moved.header("x-sr-session"), Some("observed"));
    assert_eq!(moved.header("x-sr-model"), Some("second"));
    assert_eq!(moved.header("x-sr-protection"), Some("provider state"));
    assert_eq!(moved.header("x-sr-previous"), Some("unowned"));
    Ok(())
}

#[tokio::test]
async fn policies_read_request_provider_state() -> TestResult {
    let extra = "route keep priority 20 { when request.provider_state  to first }";
    let router = Router::start(&policy(extra)).await?;
    let body = json!({"model": "auto", "input": "go on", "previous_response_id": "resp_elsewhere"});
    let kept = respond(&router, &body, &[KEY, MOVE]).await?;
    assert_eq!(kept.header("x-sr-route"), Some("keep"));
    let one = respond(&router, &json!({"model": "auto", "input": "hi"}), &[KEY]).await?;
    let body = json!({"model": "auto", "input": "go on", "previous_response_id": id(&one)?});
    let moved = respond(&router, &body, &[KEY, MOVE]).await?;
    assert_eq!(
        moved.header("x-sr-route"),
        Some("moved"),
        "a stored id is the router's"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_stored_through_one_replica_is_expanded_by_another() -> TestResult {
    let redis = RedisServer::start();
    let text = policy(&format!("session {{ store = redis({:?}) }}", redis.url()));
    let a = Router::start(&text).await?;
    let b = Router::start(&text).await?;
    let one = respond(
        &a,
        &json!({"model": "auto", "input": "on replica a"}),
        &[KEY],
    )
    .await?;
    assert_eq!(one.status, 200, "{}", one.text());
    let body = json!({"model": "auto", "input": "on replica b", "previous_response_id": id(&one)?});
    let two = respond(&b, &body, &[KEY, MOVE]).await?;
    assert_eq!(two.status, 200, "{}", two.text());
    assert_eq!(two.header("x-sr-previous"), Some("expanded"));
    let sent = last_sent(&b, "model-b")?;
    assert_eq!(
        texts(&sent["input"]),
        ["on replica a", &said(&one)?, "on replica b"]
    );
    // Both replicas read, and one deletes for both.
    let path = format!("/v1/responses/{}", id(&two)?);
    assert_eq!(call(&a, Method::GET, &path, &[KEY]).await?.status, 200);
    assert_eq!(call(&a, Method::GET, &path, &[OTHER]).await?.status, 404);
    assert_eq!(call(&b, Method::DELETE, &path, &[KEY]).await?.status, 200);
    assert_eq!(call(&a, Method::GET, &path, &[KEY]).await?.status, 404);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_store_follows_failure_store() -> TestResult {
    let mut redis = RedisServer::start();
    let session = format!("session {{ store = redis({:?}) }}", redis.url());
    let open = Router::start(&policy(&session)).await?;
    let closed =
        Router::start(&policy(&format!("{session}\nfailure {{ store = closed }}"))).await?;
    redis.kill();
    let body = json!({"model": "auto", "input": "go on", "previous_response_id": "resp_1"});
    let forwarded = respond(&open, &body, &[KEY]).await?;
    assert_eq!(forwarded.status, 200, "{}", forwarded.text());
    assert_eq!(forwarded.header("x-sr-previous"), Some("unowned"));
    let refused = respond(&closed, &body, &[KEY]).await?;
    assert_eq!(refused.status, 503, "{}", refused.text());
    let read = call(&open, Method::GET, "/v1/responses/resp_1", &[KEY]).await?;
    assert_eq!(read.status, 503, "{}", read.text());
    Ok(())
}

#[tokio::test]
async fn a_redacting_route_sends_the_whole_conversation_so_one_vault_numbers_every_turn(
) -> TestResult {
    let policy = r#"
backend a { url = "http://127.0.0.1:9/v1"  simulated = true }
model first { backend = a  serves = "model-a" }
route private { to first  redact = ["email"] }
"#;
    let router = Router::start(policy).await?;
    let one = respond(
        &router,
        &json!({"model": "auto", "input": "write to alice@example.com"}),
        &[KEY],
    )
    .await?;
    assert_eq!(one.status, 200, "{}", one.text());
    let sent = last_sent(&router, "model-a")?;
    assert_eq!(texts(&sent["input"]), ["write to <EMAIL_1>"]);

    // The owner holds the first turn with `<EMAIL_1>` for alice. Continued as written, this
    // turn's own vault would give bob `<EMAIL_1>` too; expanded, one vault numbers both.
    let body = json!({"model": "auto", "input": "and to bob@example.org",
                      "previous_response_id": id(&one)?});
    let two = respond(&router, &body, &[KEY]).await?;
    assert_eq!(two.status, 200, "{}", two.text());
    assert_eq!(two.header("x-sr-previous"), Some("expanded"));
    let sent = last_sent(&router, "model-a")?;
    assert!(sent.get("previous_response_id").is_none(), "{sent}");
    let turns = texts(&sent["input"]);
    assert_eq!(
        turns.first().map(String::as_str),
        Some("write to <EMAIL_1>")
    );
    assert_eq!(turns.last().map(String::as_str), Some("and to <EMAIL_2>"));
    let raw = sent.to_string();
    assert!(
        !raw.contains("alice@") && !raw.contains("bob@"),
        "a value reached the backend: {raw}"
    );
    Ok(())
}

/// Items go into the store as the client wrote them and come out spliced into an expanded turn
/// byte for byte; and an entry as a router that kept trees wrote it (keys sorted, no
/// whitespace: the same JSON object) is read, listed and continued as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_are_kept_as_written_and_entries_written_as_trees_still_continue() -> TestResult {
    let redis = RedisServer::start();
    let router = Router::start(&policy(&format!(
        "session {{ store = redis({:?}) }}",
        redis.url()
    )))
    .await?;
    let item = r#"{ "role" : "user", "content" : [ { "type" : "input_text", "text" : "one \u00e9" } ], "n" : 1.50 }"#;
    let body = format!(r#"{{"model":"auto", "input": [ {item} ]}}"#);
    let one = router
        .client
        .send(Method::POST, &router.url("/v1/responses"), body, &[KEY])
        .await?;
    assert_eq!(one.status, 200, "{}", one.text());

    let body = json!({"model": "auto", "input": "two", "previous_response_id": id(&one)?});
    let two = respond(&router, &body, &[KEY, MOVE]).await?;
    assert_eq!(two.header("x-sr-previous"), Some("expanded"));
    let sent = router
        .sims()
        .iter()
        .flat_map(|s| s.received())
        .filter(|r| r.path == "/v1/responses")
        .last()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .unwrap_or_default();
    assert!(sent.contains(item), "the item was rewritten: {sent}");
    assert!(!sent.contains("previous_response_id"), "{sent}");

    // Every entry rewritten as a tree-keeping router wrote it.
    let mut conn = redis::Client::open(redis.url())?.get_connection()?;
    let keys: Vec<String> = redis::cmd("KEYS").arg("sr:v1:resp:*").query(&mut conn)?;
    assert_eq!(keys.len(), 2, "{keys:?}");
    for key in &keys {
        let kept: Vec<u8> = redis::cmd("GET").arg(key).query(&mut conn)?;
        let tree: Value = serde_json::from_slice(&kept)?;
        let () = redis::cmd("SET")
            .arg(key)
            .arg(tree.to_string())
            .arg("KEEPTTL")
            .query(&mut conn)?;
    }
    let body = json!({"model": "auto", "input": "three", "previous_response_id": id(&two)?});
    let three = respond(&router, &body, &[KEY]).await?;
    assert_eq!(three.status, 200, "{}", three.text());
    assert_eq!(three.header("x-sr-previous"), Some("expanded"));
    assert_eq!(
        texts(&last_sent(&router, "model-a")?["input"]),
        ["one é", &said(&one)?, "two", &said(&two)?, "three"]
    );
    let read = call(
        &router,
        Method::GET,
        &format!("/v1/responses/{}", id(&two)?),
        &[KEY],
    )
    .await?;
    assert_eq!(read.status, 200, "{}", read.text());
    assert_eq!(read.json()?["id"], id(&two)?);
    let path = format!("/v1/responses/{}/input_items?order=asc", id(&two)?);
    let listed = call(&router, Method::GET, &path, &[KEY]).await?.json()?;
    assert_eq!(listed["data"][0]["n"], json!(1.5), "{listed}");
    assert_eq!(listed["data"][0]["content"][0]["text"], "one é");
    Ok(())
}
