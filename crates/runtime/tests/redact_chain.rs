//! `redact` along a `/v1/responses` chain whose state only the backend holds: the router keeps
//! each answer's vault (sealed) under the backend's response id, so the next turn gives a value
//! the placeholder the backend has already read and a new value the next number, and an answer
//! naming an earlier turn's placeholder is restored to that turn's value.
//!
//! The recording backend plays a provider-state Responses backend: it makes its own ids, keeps
//! what each turn said under them, and answers by quoting this turn and every earlier one of the
//! chain (placeholders and all), so a misnumbered placeholder shows in the client's text. Real
//! HTTP, the official `openai` Python client for a streamed turn, the memory store and a real
//! `redis-server` shared by routers.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{json, Value};
use src_testkit::redis::RedisServer;
use src_testkit::upstream::{Reply, Seen, Upstream};
use src_testkit::{Answer, Router, TestResult};

const ONE: (&str, &str) = ("authorization", "Bearer sk-tenant-one");
const TWO: (&str, &str) = ("authorization", "Bearer sk-tenant-two");
const ANN: &str = "ann@example.com";
const BOB: &str = "bob@example.org";
const CY: &str = "cy@example.net";

/// A backend that holds its conversations: each turn's text under the id it made.
#[derive(Clone, Default)]
struct Provider {
    /// Response id → the texts of the chain up to and including that response's turn.
    chains: Arc<Mutex<HashMap<String, Vec<String>>>>,
}

impl Provider {
    fn answer(&self, seen: &Seen) -> Reply {
        if seen.method == "GET" {
            return Reply::json(&json!({"object": "list", "data": []}));
        }
        let said = seen.body["input"].as_str().unwrap_or_default().to_owned();
        let mut chains = self.chains.lock().unwrap_or_else(PoisonError::into_inner);
        let mut chain = seen.body["previous_response_id"]
            .as_str()
            .and_then(|id| chains.get(id).cloned())
            .unwrap_or_default();
        let text = if chain.is_empty() {
            format!("Noted: {said}.")
        } else {
            format!("Noted: {said}. Before: {}.", chain.join(" | "))
        };
        chain.push(said);
        let id = format!("resp_up_{}", chains.len() + 1);
        chains.insert(id.clone(), chain);
        responses(&id, &text, seen.body["stream"] == true)
    }
}

/// A Responses answer `id` saying `text`, whole or streamed three characters an event.
fn responses(id: &str, text: &str, stream: bool) -> Reply {
    let response = |status: &str, output: Value| {
        json!({"id": id, "object": "response", "created_at": 1, "status": status,
            "model": "echo", "output": output,
            "usage": {"input_tokens": 9, "output_tokens": 9, "total_tokens": 18}})
    };
    let message = json!([{"type": "message", "id": "msg_1", "status": "completed",
        "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]}]);
    if !stream {
        return Reply::json(&response("completed", message));
    }
    let mut events = vec![json!({"type": "response.created", "sequence_number": 0,
        "response": response("in_progress", json!([]))})];
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(3) {
        events.push(json!({"type": "response.output_text.delta",
            "sequence_number": events.len(), "item_id": "msg_1", "output_index": 0,
            "content_index": 0, "delta": piece.iter().collect::<String>(), "logprobs": []}));
    }
    events.push(
        json!({"type": "response.output_text.done", "sequence_number": events.len(),
        "item_id": "msg_1", "output_index": 0, "content_index": 0, "text": text,
        "logprobs": []}),
    );
    events.push(
        json!({"type": "response.completed", "sequence_number": events.len(),
        "response": response("completed", message)}),
    );
    let body: String = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect();
    Reply::stream(body)
}

fn policy(url: &str, session: &str) -> String {
    format!(
        r#"
backend up {{ url = "{url}" }}
model echo {{ backend = up  serves = "echo" }}
route private {{ to echo  redact = ["email"] }}
{session}
"#
    )
}

/// A turn continuing `previous` (none: the chain's first, which the router does not keep).
fn turn(input: &str, previous: Option<&str>) -> Value {
    match previous {
        Some(id) => json!({"model": "auto", "input": input, "previous_response_id": id}),
        None => json!({"model": "auto", "input": input, "store": false}),
    }
}

async fn respond(router: &Router, body: &Value, key: (&str, &str)) -> TestResult<Answer> {
    router.post("/v1/responses", body, &[key]).await
}

fn said(answer: &Answer) -> TestResult<(String, String)> {
    let v = answer.json()?;
    let text = v["output"][0]["content"][0]["text"]
        .as_str()
        .ok_or_else(|| format!("no output text in {v}"))?;
    let id = v["id"].as_str().ok_or_else(|| format!("no id in {v}"))?;
    Ok((text.to_owned(), id.to_owned()))
}

/// What the backend read in its last request.
fn last_input(upstream: &Upstream) -> TestResult<String> {
    let posts = upstream.posts();
    let last = posts.last().ok_or("the backend was sent nothing")?;
    Ok(last.body["input"].as_str().unwrap_or_default().to_owned())
}

/// Turns one and two of a chain through `router`: the same value keeps its placeholder, a new
/// value gets the next number, and the answer naming turn one's placeholder is restored to
/// turn one's value. Answers turn two's response id.
async fn two_turns(router: &Router, upstream: &Upstream) -> TestResult<String> {
    let one = respond(router, &turn(&format!("Mail {ANN}"), None), ONE).await?;
    assert_eq!(one.status, 200, "{}", one.text());
    assert_eq!(last_input(upstream)?, "Mail <EMAIL_1>");
    let (text, first) = said(&one)?;
    assert_eq!(text, format!("Noted: Mail {ANN}."));

    let body = turn(&format!("Also {BOB}, not {ANN}"), Some(&first));
    let two = respond(router, &body, ONE).await?;
    assert_eq!(two.status, 200, "{}", two.text());
    assert_eq!(two.header("x-sr-previous"), Some("unowned"));
    assert_eq!(last_input(upstream)?, "Also <EMAIL_2>, not <EMAIL_1>");
    let (text, second) = said(&two)?;
    assert_eq!(
        text,
        format!("Noted: Also {BOB}, not {ANN}. Before: Mail {ANN}.")
    );
    Ok(second)
}

/// A refused turn: 409 in the Responses error shape, and the backend not called.
async fn refused(
    router: &Router,
    upstream: &Upstream,
    body: &Value,
    key: (&str, &str),
) -> TestResult {
    let before = upstream.posts().len();
    let answer = respond(router, body, key).await?;
    assert_eq!(answer.status, 409, "{}", answer.text());
    let (message, code, kind) = answer.error()?;
    assert_eq!(code.as_deref(), Some("redaction_chain_lost"));
    assert_eq!(kind, "invalid_request_error");
    assert!(message.contains("previous_response_id"), "{message}");
    assert_eq!(
        upstream.posts().len(),
        before,
        "a refused turn reached the backend"
    );
    Ok(())
}

/// Runs the streamed client script: what the `openai` client read of a streamed turn.
async fn streamed_client(base: String, previous: &str, input: &str) -> TestResult<Value> {
    let repo = src_testkit::models::repo();
    let python = repo.join(".cache/venv-e2e/bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/redact_chain_client.py");
    let args = [
        base,
        ONE.1.trim_start_matches("Bearer ").to_owned(),
        previous.to_owned(),
        input.to_owned(),
    ];
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .arg(script)
            .args(args)
            .output()
    })
    .await??;
    if !out.status.success() {
        return Err(format!(
            "the client failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

fn key_file(dir: &Path, name: &str, digit: &str) -> TestResult<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, format!("{}\n", digit.repeat(32)))?;
    Ok(path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_chain_keeps_its_placeholders_across_turns_and_tenants_stay_apart() -> TestResult {
    let provider = Provider::default();
    let upstream = Upstream::start(move |seen| provider.answer(seen)).await?;
    let router = Router::start(&policy(&upstream.url, "")).await?;
    let second = two_turns(&router, &upstream).await?;

    // Turn three, streamed, read by the official client: a third value, and an answer quoting
    // both earlier turns' placeholders, cut across events.
    let streamed =
        streamed_client(router.url(""), &second, &format!("Write to {CY} and {BOB}")).await?;
    assert_eq!(last_input(&upstream)?, "Write to <EMAIL_3> and <EMAIL_2>");
    let expected =
        format!("Noted: Write to {CY} and {BOB}. Before: Mail {ANN} | Also {BOB}, not {ANN}.");
    assert_eq!(streamed["deltas"], expected, "{streamed}");
    assert_eq!(streamed["final"], expected, "{streamed}");
    let third = streamed["id"].as_str().ok_or("no id")?.to_owned();

    // The streamed answer's vault was kept from its final event: turn four goes on from it.
    let four = respond(&router, &turn(&format!("{CY}?"), Some(&third)), ONE).await?;
    assert_eq!(four.status, 200, "{}", four.text());
    assert_eq!(last_input(&upstream)?, "<EMAIL_3>?");

    // Another tenant naming the chain does not open its vault.
    refused(
        &router,
        &upstream,
        &turn(&format!("to {ANN}"), Some(&second)),
        TWO,
    )
    .await?;

    // Nothing any backend was sent carries a value.
    for post in upstream.posts() {
        let sent = String::from_utf8_lossy(&post.bytes);
        for value in [ANN, BOB, CY] {
            assert!(
                !sent.contains(value),
                "the backend was sent {value}: {sent}"
            );
        }
    }

    // A router that never kept the chain (a restart, with a memory store) refuses it.
    let fresh = Router::start(&policy(&upstream.url, "")).await?;
    refused(
        &fresh,
        &upstream,
        &turn(&format!("to {ANN}"), Some(&second)),
        ONE,
    )
    .await?;
    // A turn without a value on a chain it never kept is refused too: its answer could name
    // an earlier placeholder.
    refused(&fresh, &upstream, &turn("go on", Some(&second)), ONE).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_on_a_route_that_does_not_redact_carries_the_chain_s_vault_on() -> TestResult {
    let provider = Provider::default();
    let upstream = Upstream::start(move |seen| provider.answer(seen)).await?;
    let plain = r#"route plain priority 10 { when header("x-plain") == "yes"  to echo }"#;
    let router = Router::start(&policy(&upstream.url, plain)).await?;
    let second = two_turns(&router, &upstream).await?;

    // The plain route sends the values as they are, and the answer quoting earlier turns'
    // placeholders reads their values.
    let body = turn(&format!("Plainly {CY}"), Some(&second));
    let three = router
        .post("/v1/responses", &body, &[ONE, ("x-plain", "yes")])
        .await?;
    assert_eq!(three.status, 200, "{}", three.text());
    assert_eq!(last_input(&upstream)?, format!("Plainly {CY}"));
    let (text, third) = said(&three)?;
    assert_eq!(
        text,
        format!("Noted: Plainly {CY}. Before: Mail {ANN} | Also {BOB}, not {ANN}.")
    );

    // A redacting turn after it goes on numbering from the chain's vault.
    let four = respond(
        &router,
        &turn(&format!("{BOB} and {CY}"), Some(&third)),
        ONE,
    )
    .await?;
    assert_eq!(four.status, 200, "{}", four.text());
    assert_eq!(last_input(&upstream)?, "<EMAIL_2> and <EMAIL_3>");
    Ok(())
}

/// A policy whose default route does not redact: only turns marked `x-private: yes` do.
fn mixed(url: &str, session: &str) -> String {
    format!(
        r#"
backend up {{ url = "{url}" }}
model echo {{ backend = up  serves = "echo" }}
route open {{ to echo }}
route private priority 10 {{ when header("x-private") == "yes"  to echo  redact = ["email"] }}
{session}
"#
    )
}

/// A chain whose first turn went to a route that does not redact: its second turn, on a
/// redacting route, numbers from 1 (the backend was sent no placeholder) and its answer is
/// restored; a third turn on the open route carries that vault on, and a fourth redacting one
/// numbers after it. A chain the router never relayed is still refused.
async fn open_then_private(router: &Router, upstream: &Upstream) -> TestResult {
    let private = ("x-private", "yes");
    let one = respond(router, &turn("hello", None), ONE).await?;
    assert_eq!(one.status, 200, "{}", one.text());
    assert_eq!(last_input(upstream)?, "hello");
    let (_, first) = said(&one)?;

    let body = turn(&format!("Mail {ANN}"), Some(&first));
    let two = router.post("/v1/responses", &body, &[ONE, private]).await?;
    assert_eq!(two.status, 200, "{}", two.text());
    assert_eq!(last_input(upstream)?, "Mail <EMAIL_1>");
    let (text, second) = said(&two)?;
    assert_eq!(text, format!("Noted: Mail {ANN}. Before: hello."));

    let three = respond(router, &turn(&format!("Plainly {BOB}"), Some(&second)), ONE).await?;
    assert_eq!(three.status, 200, "{}", three.text());
    assert_eq!(last_input(upstream)?, format!("Plainly {BOB}"));
    let (text, third) = said(&three)?;
    assert_eq!(
        text,
        format!("Noted: Plainly {BOB}. Before: hello | Mail {ANN}.")
    );

    let body = turn(&format!("{CY}, not {ANN}"), Some(&third));
    let four = router.post("/v1/responses", &body, &[ONE, private]).await?;
    assert_eq!(four.status, 200, "{}", four.text());
    assert_eq!(last_input(upstream)?, "<EMAIL_2>, not <EMAIL_1>");

    // A response id this router never relayed (a chain started elsewhere) has no vault.
    let body = turn(&format!("to {ANN}"), Some("resp_elsewhere"));
    let before = upstream.posts().len();
    let answer = router.post("/v1/responses", &body, &[ONE, private]).await?;
    assert_eq!(answer.status, 409, "{}", answer.text());
    let (_, code, _) = answer.error()?;
    assert_eq!(code.as_deref(), Some("redaction_chain_lost"));
    assert_eq!(upstream.posts().len(), before);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_chain_that_starts_on_a_route_that_does_not_redact_keeps_a_vault() -> TestResult {
    let provider = Provider::default();
    let upstream = Upstream::start(move |seen| provider.answer(seen)).await?;
    let router = Router::start(&mixed(&upstream.url, "")).await?;
    open_then_private(&router, &upstream).await?;
    let metrics = router.admin_get("/metrics").await?.text();
    for (outcome, n) in [("found", 3), ("missing", 1)] {
        let line = format!("src_response_vaults_total{{outcome=\"{outcome}\"}} {n}\n");
        assert!(metrics.contains(&line), "no `{line}` in {metrics}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_chain_that_starts_on_a_route_that_does_not_redact_keeps_a_vault() -> TestResult {
    let redis = RedisServer::start();
    let provider = Provider::default();
    let upstream = Upstream::start(move |seen| provider.answer(seen)).await?;
    let session = format!("session {{ store = redis({:?}) }}", redis.url());
    let keys = tempfile::tempdir()?;
    let key = key_file(keys.path(), "shared", "c3")?;
    let text = mixed(&upstream.url, &session);
    let router = Router::start_with(&text, |cfg| cfg.vault_key_file = Some(key)).await?;
    open_then_private(&router, &upstream).await?;
    // One vault per relayed answer, none for the refused turn; none holds a value.
    let stored = everything(&redis);
    let vaults = stored
        .iter()
        .filter(|(k, _)| k.starts_with("sr:v1:vault:"))
        .count();
    assert_eq!(vaults, 4, "{stored:?}");
    for (key, value) in &stored {
        for planted in [ANN, BOB, CY] {
            assert!(
                !key.contains(planted) && !value.contains(planted),
                "{key} holds {planted}: {value}"
            );
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_turn_on_a_route_that_does_not_redact_keeps_the_vault_it_continues() -> TestResult
{
    let provider = Provider::default();
    let upstream = Upstream::start(move |seen| provider.answer(seen)).await?;
    let router = Router::start(&mixed(&upstream.url, "")).await?;
    let private = ("x-private", "yes");
    // Turn one is redacted and stored by the router.
    let body = json!({"model": "auto", "input": format!("Mail {ANN}")});
    let one = router.post("/v1/responses", &body, &[ONE, private]).await?;
    assert_eq!(one.status, 200, "{}", one.text());
    assert_eq!(last_input(&upstream)?, "Mail <EMAIL_1>");
    let (_, first) = said(&one)?;

    // Turn two continues it on the open route, sent as written to the backend that holds turn
    // one's placeholder, and is not stored: only the backend holds the chain from here.
    let body = json!({"model": "auto", "input": format!("Plainly {BOB}"),
        "previous_response_id": first, "store": false});
    let two = respond(&router, &body, ONE).await?;
    assert_eq!(two.status, 200, "{}", two.text());
    assert_eq!(last_input(&upstream)?, format!("Plainly {BOB}"));
    let (_, second) = said(&two)?;

    // Turn three, redacting, numbers after turn one's placeholder and is restored.
    let body = turn(&format!("{CY}, not {ANN}"), Some(&second));
    let three = router.post("/v1/responses", &body, &[ONE, private]).await?;
    assert_eq!(three.status, 200, "{}", three.text());
    assert_eq!(last_input(&upstream)?, "<EMAIL_2>, not <EMAIL_1>");
    let (text, _) = said(&three)?;
    assert_eq!(
        text,
        format!("Noted: {CY}, not {ANN}. Before: Mail {ANN} | Plainly {BOB}.")
    );
    Ok(())
}

/// A second backend beside `up`, serving the same id, and a route to it: the response's owner
/// is `up`, so a turn decided there is sent the conversation expanded.
fn aside(url: &str) -> String {
    format!(
        r#"
backend other {{ url = "{url}" }}
model elsewhere {{ backend = other  serves = "echo" }}
route aside priority 5 {{ when header("x-aside") == "yes"  to elsewhere }}
"#
    )
}

/// A backend that holds nothing and answers with the `input` it read, as JSON text.
fn reader(seen: &Seen) -> Reply {
    if seen.method == "GET" {
        return Reply::json(&json!({"object": "list", "data": []}));
    }
    responses(
        "resp_other_1",
        &format!("Read {}", seen.body["input"]),
        false,
    )
}

/// Turn one, redacted and stored by the router; turn two continues it on a route without
/// `redact`, sent as written to the backend that holds turn one's placeholder: the answer
/// quoting it reads its value. A turn on a route to another backend is sent the stored
/// conversation expanded, values as the client wrote them and read them, and its answer is
/// left as it is. Answers turn one's response id.
async fn stored_then_open(
    router: &Router,
    upstream: &Upstream,
    other: &Upstream,
) -> TestResult<String> {
    let private = ("x-private", "yes");
    let body = json!({"model": "auto", "input": format!("Mail {ANN}")});
    let one = router.post("/v1/responses", &body, &[ONE, private]).await?;
    assert_eq!(one.status, 200, "{}", one.text());
    assert_eq!(last_input(upstream)?, "Mail <EMAIL_1>");
    let (text, first) = said(&one)?;
    assert_eq!(text, format!("Noted: Mail {ANN}."));

    let body = json!({"model": "auto", "input": format!("Plainly {BOB}"),
        "previous_response_id": first});
    let two = respond(router, &body, ONE).await?;
    assert_eq!(two.status, 200, "{}", two.text());
    assert_eq!(two.header("x-sr-previous"), Some("continued"));
    let sent = upstream.posts().last().ok_or("nothing sent")?.body.clone();
    assert_eq!(sent["input"], format!("Plainly {BOB}"));
    assert_eq!(sent["previous_response_id"], first.as_str());
    let (text, _) = said(&two)?;
    assert_eq!(text, format!("Noted: Plainly {BOB}. Before: Mail {ANN}."));

    let body = json!({"model": "auto", "input": format!("Aside {CY}"),
        "previous_response_id": first});
    let three = router
        .post("/v1/responses", &body, &[ONE, ("x-aside", "yes")])
        .await?;
    assert_eq!(three.status, 200, "{}", three.text());
    assert_eq!(three.header("x-sr-previous"), Some("expanded"));
    let sent = other
        .posts()
        .last()
        .ok_or("nothing sent aside")?
        .body
        .clone();
    assert_eq!(sent.get("previous_response_id"), None, "{sent}");
    let read = sent["input"].to_string();
    for expected in [
        format!("Mail {ANN}"),
        format!("Noted: Mail {ANN}."),
        format!("Aside {CY}"),
    ] {
        assert!(read.contains(&expected), "{expected} not in {read}");
    }
    assert!(!read.contains("<EMAIL_"), "{read}");
    let (text, _) = said(&three)?;
    assert_eq!(text, format!("Read {read}"));
    Ok(first)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_turn_to_its_owner_on_a_route_that_does_not_redact_is_restored() -> TestResult {
    let provider = Provider::default();
    let upstream = Upstream::start(move |seen| provider.answer(seen)).await?;
    let other = Upstream::start(reader).await?;
    let router = Router::start(&mixed(&upstream.url, &aside(&other.url))).await?;
    stored_then_open(&router, &upstream, &other).await?;
    // Turns two and three each looked the stored response's vault up once.
    let metrics = router.admin_get("/metrics").await?.text();
    let line = "src_response_vaults_total{outcome=\"found\"} 2\n";
    assert!(metrics.contains(line), "no `{line}` in {metrics}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_stored_turn_to_its_owner_on_a_route_that_does_not_redact_is_restored() -> TestResult
{
    let redis = RedisServer::start();
    let provider = Provider::default();
    let upstream = Upstream::start(move |seen| provider.answer(seen)).await?;
    let other = Upstream::start(reader).await?;
    let session = format!(
        "session {{ store = redis({:?}) }}\n{}",
        redis.url(),
        aside(&other.url)
    );
    let keys = tempfile::tempdir()?;
    let key = key_file(keys.path(), "shared", "d4")?;
    let text = mixed(&upstream.url, &session);
    let router = Router::start_with(&text, |cfg| cfg.vault_key_file = Some(key)).await?;
    let first = stored_then_open(&router, &upstream, &other).await?;

    // A stored turn whose vault is gone is not refused: a redacting route sends it expanded and
    // numbers it afresh, and the owner is sent a turn on the open route as written, its answer
    // then left as the backend wrote it.
    for (key, _) in everything(&redis) {
        if key.starts_with("sr:v1:vault:") {
            redis.command(&format!("DEL {key}"));
        }
    }
    let body = json!({"model": "auto", "input": format!("Again {BOB}"),
        "previous_response_id": first});
    let private = router
        .post("/v1/responses", &body, &[ONE, ("x-private", "yes")])
        .await?;
    assert_eq!(private.status, 200, "{}", private.text());
    assert_eq!(private.header("x-sr-previous"), Some("expanded"));
    let sent =
        String::from_utf8_lossy(&upstream.posts().last().ok_or("nothing")?.bytes).into_owned();
    assert!(
        sent.contains("Mail <EMAIL_1>") && sent.contains("Again <EMAIL_2>"),
        "{sent}"
    );
    assert!(!sent.contains(ANN) && !sent.contains(BOB), "{sent}");
    let open = respond(&router, &body, ONE).await?;
    assert_eq!(open.status, 200, "{}", open.text());
    assert_eq!(open.header("x-sr-previous"), Some("continued"));
    let (text, _) = said(&open)?;
    assert_eq!(text, format!("Noted: Again {BOB}. Before: Mail <EMAIL_1>."));
    let metrics = router.admin_get("/metrics").await?.text();
    for (outcome, n) in [("found", 2), ("missing", 2)] {
        let line = format!("src_response_vaults_total{{outcome=\"{outcome}\"}} {n}\n");
        assert!(metrics.contains(&line), "no `{line}` in {metrics}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_redacts_nowhere_keeps_and_looks_up_no_vault() -> TestResult {
    let redis = RedisServer::start();
    let provider = Provider::default();
    let upstream = Upstream::start(move |seen| provider.answer(seen)).await?;
    let text = format!(
        r#"
backend up {{ url = "{}" }}
model echo {{ backend = up  serves = "echo" }}
route open {{ to echo }}
session {{ store = redis({:?}) }}
"#,
        upstream.url,
        redis.url()
    );
    // No key file either: a policy that redacts nowhere needs none.
    let router = Router::start(&text).await?;
    let one = respond(&router, &turn(&format!("Mail {ANN}"), None), ONE).await?;
    assert_eq!(one.status, 200, "{}", one.text());
    let (_, first) = said(&one)?;
    let mut body = turn(&format!("Also {BOB}"), Some(&first));
    body["stream"] = json!(true);
    let two = respond(&router, &body, ONE).await?;
    assert_eq!(two.status, 200, "{}", two.text());
    assert_eq!(last_input(&upstream)?, format!("Also {BOB}"));
    let stored = everything(&redis);
    assert!(
        stored.iter().all(|(k, _)| !k.starts_with("sr:v1:vault:")),
        "{stored:?}"
    );
    let metrics = router.admin_get("/metrics").await?.text();
    for outcome in ["found", "missing", "unopened", "failed"] {
        let line = format!("src_response_vaults_total{{outcome=\"{outcome}\"}} ");
        let counted = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .unwrap_or("0");
        assert_eq!(counted, "0", "{outcome} in {metrics}");
    }
    Ok(())
}

/// Every key of `redis` with its value read by type.
fn everything(redis: &RedisServer) -> Vec<(String, String)> {
    let keys = redis.command("KEYS *");
    keys.lines()
        .filter(|l| l.starts_with("sr:"))
        .map(|key| {
            let kind = redis.command(&format!("TYPE {key}"));
            let value = match kind.trim() {
                "+string" => redis.command(&format!("GET {key}")),
                "+hash" => redis.command(&format!("HGETALL {key}")),
                "+list" => redis.command(&format!("LRANGE {key} 0 -1")),
                "+zset" => redis.command(&format!("ZRANGE {key} 0 -1")),
                "+set" => redis.command(&format!("SMEMBERS {key}")),
                other => format!("(a {other})"),
            };
            (key.to_owned(), value)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_chain_is_sealed_shared_by_key_and_refused_once_expired() -> TestResult {
    let redis = RedisServer::start();
    let provider = Provider::default();
    let upstream = Upstream::start(move |seen| provider.answer(seen)).await?;
    let session = format!("session {{ store = redis({:?}) }}", redis.url());
    let keys = tempfile::tempdir()?;
    let shared = key_file(keys.path(), "shared", "a1")?;
    let other = key_file(keys.path(), "other", "b2")?;
    let start = |key: Option<PathBuf>| {
        let text = policy(&upstream.url, &session);
        async move { Router::start_with(&text, |cfg| cfg.vault_key_file = key).await }
    };

    // Without a key, a shared store cannot be used: the router does not start.
    let Err(missing) = start(None).await else {
        return Err("a router sharing a Redis store started without a vault key".into());
    };
    assert!(
        missing.to_string().contains("--vault-key-file"),
        "{missing}"
    );

    let a = start(Some(shared.clone())).await?;
    let second = two_turns(&a, &upstream).await?;

    // Another router with the same key goes on with the chain: a new value, a streamed answer
    // naming the first turn's placeholder, restored.
    let b = start(Some(shared)).await?;
    let mut body = turn(&format!("Write to {CY}"), Some(&second));
    body["stream"] = json!(true);
    let three = respond(&b, &body, ONE).await?;
    assert_eq!(three.status, 200, "{}", three.text());
    assert_eq!(last_input(&upstream)?, "Write to <EMAIL_3>");
    let stream = three.text();
    let done = stream
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|e| e["type"] == "response.completed")
        .ok_or_else(|| format!("no final event in {stream}"))?;
    let third = done["response"]["id"].as_str().ok_or("no id")?.to_owned();
    assert_eq!(
        done["response"]["output"][0]["content"][0]["text"],
        format!("Noted: Write to {CY}. Before: Mail {ANN} | Also {BOB}, not {ANN}.")
    );
    let deltas: String = stream
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter(|e| e["type"] == "response.output_text.delta")
        .filter_map(|e| e["delta"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(deltas, done["response"]["output"][0]["content"][0]["text"]);

    // A router with another key cannot open the chain's vault; another tenant cannot name it.
    let c = start(Some(other)).await?;
    refused(
        &c,
        &upstream,
        &turn(&format!("to {ANN}"), Some(&third)),
        ONE,
    )
    .await?;
    refused(
        &a,
        &upstream,
        &turn(&format!("to {ANN}"), Some(&third)),
        TWO,
    )
    .await?;

    // The store holds the vaults sealed: no key or value carries a planted value, and each
    // vault lives no longer than a stored response.
    let stored = everything(&redis);
    let vaults: Vec<&String> = stored
        .iter()
        .map(|(k, _)| k)
        .filter(|k| k.starts_with("sr:v1:vault:"))
        .collect();
    assert_eq!(vaults.len(), 3, "{stored:?}");
    for (key, value) in &stored {
        for planted in [ANN, BOB, CY] {
            assert!(
                !key.contains(planted) && !value.contains(planted),
                "{key} holds {planted}: {value}"
            );
        }
    }
    let vault = vaults
        .iter()
        .find(|k| k.ends_with(&format!(":{third}")))
        .ok_or("no vault for the third turn")?
        .to_string();
    let ttl: i64 = redis
        .command(&format!("PTTL {vault}"))
        .trim()
        .trim_start_matches(':')
        .parse()?;
    assert!(ttl > 0 && ttl <= 24 * 60 * 60 * 1000, "{ttl}");

    // Expired, the vault is gone and the chain is refused rather than numbered afresh.
    redis.command(&format!("PEXPIRE {vault} 1"));
    let deadline = tokio::time::Instant::now() + src_testkit::PATIENCE;
    while redis.command(&format!("EXISTS {vault}")).trim() != ":0" {
        if tokio::time::Instant::now() > deadline {
            return Err("the vault did not expire".into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    refused(
        &a,
        &upstream,
        &turn(&format!("to {ANN}"), Some(&third)),
        ONE,
    )
    .await?;

    // Each router counts what its lookups found.
    for (router, outcome, n) in [
        (&a, "found", 1),
        (&a, "missing", 2),
        (&b, "found", 1),
        (&c, "unopened", 1),
    ] {
        let metrics = router.admin_get("/metrics").await?.text();
        let line = format!("src_response_vaults_total{{outcome=\"{outcome}\"}} {n}\n");
        assert!(metrics.contains(&line), "no `{line}` in {metrics}");
    }
    Ok(())
}
