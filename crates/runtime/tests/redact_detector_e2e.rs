//! `redact = ["email", people.PERSON, LOCATION]` end to end with the repository's
//! token-classification model (`models/pii_ner`): the official `openai` Python client sends a
//! prompt naming people and places through the chat and Responses doors, and the `anthropic`
//! client through Messages (translated to a chat backend, and native), whole and streamed;
//! the recording backend, which answers by quoting what it was sent a few characters per event,
//! never sees a name, and the client reads every name back. The log and the `--record` file
//! carry types and counts only; the external processor sends the gateway the same placeholders;
//! and a text the detector cannot read whole is not sent at all.

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};
use src_runtime::models::{ModelOptions, OnnxModels};
use src_testkit::models::{load_library, model_dir, repo};
use src_testkit::router::Router;
use src_testkit::upstream::{Reply, Seen, Upstream};
use src_testkit::TestResult;

const PROMPT: &str = "My name is Sarah Johnson and I live in Berlin. Please send the invoice \
                      to Marco Rossi in Milan, copying sarah.j@example.com.";
const VALUES: [&str; 5] = ["Sarah", "Johnson", "Berlin", "Rossi", "sarah.j@example.com"];

/// The text of the last message (or `input`) of a request, as the backend read it.
fn said(body: &Value) -> String {
    let last = match body.get("messages").and_then(Value::as_array) {
        Some(messages) => messages.last().map(|m| m["content"].clone()),
        None => body.get("input").cloned(),
    };
    match last {
        Some(Value::String(text)) => text,
        Some(Value::Array(parts)) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    }
}

/// `text` cut into pieces of `n` characters.
fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(n).map(|c| c.iter().collect()).collect()
}

fn sse(events: &[(&str, Value)]) -> String {
    events
        .iter()
        .map(|(name, data)| match name {
            &"" => format!("data: {data}\n\n"),
            name => format!("event: {name}\ndata: {data}\n\n"),
        })
        .collect()
}

/// A chat answer quoting `text`, with a tool call whose arguments quote it too.
fn chat(text: &str, arguments: &str, stream: bool) -> Reply {
    let call = json!({"id": "call_1", "type": "function",
        "function": {"name": "remember", "arguments": arguments}});
    if !stream {
        return Reply::json(&json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "echo",
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": text, "tool_calls": [call]}}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 9, "total_tokens": 18}
        }));
    }
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "echo", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut events = vec![(
        "",
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
    )];
    for piece in pieces(text, 3) {
        events.push(("", chunk(json!({"content": piece}), Value::Null)));
    }
    events.push((
        "",
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "remember", "arguments": ""}}]}),
            Value::Null,
        ),
    ));
    for piece in pieces(arguments, 4) {
        events.push((
            "",
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
                Value::Null,
            ),
        ));
    }
    events.push(("", chunk(json!({}), json!("tool_calls"))));
    Reply::stream(sse(&events) + "data: [DONE]\n\n")
}

/// A Responses answer quoting `text`.
fn responses(text: &str, stream: bool) -> Reply {
    let response = |status: &str, output: Value| {
        json!({"id": "resp_1", "object": "response", "created_at": 1, "status": status,
            "model": "echo", "output": output,
            "usage": {"input_tokens": 9, "output_tokens": 9, "total_tokens": 18}})
    };
    let message = json!([{"type": "message", "id": "msg_1", "status": "completed",
        "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]}]);
    if !stream {
        return Reply::json(&response("completed", message));
    }
    let mut events = vec![(
        "response.created",
        json!({"type": "response.created", "sequence_number": 0,
            "response": response("in_progress", json!([]))}),
    )];
    for (n, piece) in pieces(text, 3).into_iter().enumerate() {
        events.push((
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "sequence_number": n + 1,
                "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": piece,
                "logprobs": []}),
        ));
    }
    events.push((
        "response.completed",
        json!({"type": "response.completed", "sequence_number": 10_000,
            "response": response("completed", message)}),
    ));
    Reply::stream(sse(&events))
}

/// A Messages answer quoting `text`.
fn messages(text: &str, stream: bool) -> Reply {
    let usage = json!({"input_tokens": 9, "output_tokens": 9});
    if !stream {
        return Reply::json(&json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-echo",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn", "stop_sequence": null, "usage": usage
        }));
    }
    let mut events = vec![
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                "role": "assistant", "model": "claude-echo", "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": usage}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
        ),
    ];
    for piece in pieces(text, 3) {
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": piece}}),
        ));
    }
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn",
            "stop_sequence": null}, "usage": {"output_tokens": 9}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    Reply::stream(sse(&events))
}

/// Quotes what it was sent, in the API of the path.
fn echo(seen: &Seen) -> Reply {
    if seen.method == "GET" {
        return Reply::json(&json!({"object": "list", "data": []}));
    }
    let said = said(&seen.body);
    let text = format!("Noted: {said}.");
    let stream = seen.body["stream"] == true;
    if seen.path.ends_with("/messages") {
        messages(&text, stream)
    } else if seen.path.ends_with("/responses") {
        responses(&text, stream)
    } else {
        chat(&text, &json!({"said": said}).to_string(), stream)
    }
}

fn policy(url: &str, model: &Path) -> String {
    format!(
        r#"
backend chat {{ url = "{url}" }}
backend claude {{ url = "{url}"  api = anthropic }}
model echo {{ backend = chat  serves = "echo" }}
model claude_echo {{ backend = claude  serves = "claude-echo" }}

detector people {{ path = "{model}"  entities = [PERSON, LOCATION]  threshold = 0.5  window = 32  windows = 4 }}

route native priority 20 {{
  when header("x-want") == "claude"
  to claude_echo
  redact = ["email", people.PERSON, LOCATION]
}}
route private priority 10 {{
  when header("x-private") != "no"
  to echo
  redact = ["email", people.PERSON, LOCATION]
}}
route default {{ to echo }}
"#,
        model = model.display()
    )
}

async fn router(url: &str, record: Option<&Path>) -> TestResult<Router> {
    load_library()?;
    let policy = policy(url, &model_dir("pii_ner")?);
    let record = record.map(Path::to_path_buf);
    Router::start_full(
        &policy,
        |cfg| {
            cfg.record = record;
        },
        |parts| parts.models = Arc::new(OnnxModels::new(ModelOptions::default())),
    )
    .await
}

/// Runs the `openai` client script; what it printed.
async fn openai(base: String) -> TestResult<Value> {
    clients(base, "venv-e2e", "openai").await
}

/// Runs the client script of `door` under `venv`'s Python; what it printed.
async fn clients(base: String, venv: &str, door: &'static str) -> TestResult<Value> {
    let python = repo().join(".cache").join(venv).join("bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/redact_clients.py");
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .arg(script)
            .args([base.as_str(), door, PROMPT])
            .output()
    })
    .await??;
    if !out.status.success() {
        return Err(format!("clients failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// Waits for `n` items of what `read` returns.
async fn at_least<T>(n: usize, read: impl Fn() -> Vec<T>) -> Vec<T> {
    let deadline = tokio::time::Instant::now() + src_testkit::PATIENCE;
    loop {
        let items = read();
        if items.len() >= n || tokio::time::Instant::now() > deadline {
            return items;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_never_sees_the_names_and_the_client_reads_them_back() -> TestResult {
    let upstream = Upstream::start(echo).await?;
    let record = tempfile::tempdir()?;
    let router = router(&upstream.url, Some(record.path())).await?;
    let client = openai(router.url("")).await?;
    let expected = format!("Noted: {PROMPT}.");
    for key in [
        "chat",
        "chat_stream",
        "responses",
        "responses_stream",
        "responses_stream_final",
    ] {
        assert_eq!(client[key], expected, "{key}: {client}");
    }
    let quoted = json!({"said": PROMPT});
    for key in ["chat_arguments", "chat_stream_arguments"] {
        let arguments: Value = serde_json::from_str(client[key].as_str().unwrap_or_default())?;
        assert_eq!(arguments, quoted, "{key}: {client}");
    }

    let posts = upstream.posts();
    assert_eq!(posts.len(), 4);
    let mut sent_texts = Vec::new();
    for post in &posts {
        let sent = String::from_utf8_lossy(&post.bytes);
        for value in VALUES {
            assert!(
                !sent.contains(value),
                "{} was sent {value}: {sent}",
                post.path
            );
        }
        sent_texts.push(said(&post.body));
    }
    // Every door sends the same placeholders: two people, two places, one address, each
    // numbered by where it first appears.
    let first = &sent_texts[0];
    assert!(sent_texts.iter().all(|t| t == first), "{sent_texts:?}");
    for placeholder in [
        "<PERSON_1>",
        "<PERSON_2>",
        "<LOCATION_1>",
        "<LOCATION_2>",
        "<EMAIL_1>",
    ] {
        assert!(first.contains(placeholder), "{placeholder} in {first}");
    }
    assert!(
        first.find("<PERSON_1>") < first.find("<PERSON_2>")
            && first.find("<LOCATION_1>") < first.find("<LOCATION_2>"),
        "{first}"
    );

    // The log and the record carry types and counts, never a name.
    let lines = at_least(4, || {
        router
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    })
    .await;
    assert_eq!(lines.len(), 4);
    for line in &lines {
        assert_eq!(
            line["fields"]["redacted"], "email=1,LOCATION=2,PERSON=2",
            "{line}"
        );
        let text = line.to_string();
        for value in VALUES {
            assert!(!text.contains(value), "{text}");
        }
    }
    let recorded = at_least(4, || {
        src_runtime::record::read_recording(record.path()).unwrap_or_default()
    })
    .await;
    assert_eq!(recorded.len(), 4);
    for line in &recorded {
        assert_eq!(
            line["decision"]["redacted"], "email=1,LOCATION=2,PERSON=2",
            "{line}"
        );
        let text = line.to_string();
        assert!(text.contains("<PERSON_1>"), "{text}");
        for value in VALUES {
            assert!(!text.contains(value), "{text}");
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_the_detector_cannot_read_whole_is_not_sent() -> TestResult {
    let upstream = Upstream::start(echo).await?;
    let router = router(&upstream.url, None).await?;
    // Four windows of 32 tokens cannot hold it: the unread rest could name anyone.
    let long = format!(
        "{PROMPT} {}",
        "the quarterly report covers revenue. ".repeat(40)
    );
    let answer = router
        .chat(&src_testkit::user(&long), &[("x-request-id", "long-1")])
        .await?;
    assert_eq!(answer.status, 503, "{:?}", answer.body);
    let body: Value = serde_json::from_slice(&answer.body)?;
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("detector `people`"), "{body}");
    assert!(upstream.posts().is_empty());

    // A route that does not redact sends it as it is.
    let answer = router
        .chat(&src_testkit::user(&long), &[("x-private", "no")])
        .await?;
    assert_eq!(answer.status, 200);
    assert_eq!(upstream.posts().len(), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_external_processor_sends_the_gateway_the_same_placeholders() -> TestResult {
    use src_testkit::extproc::{body, headers, post, Stream};
    load_library()?;
    let policy = policy("http://127.0.0.1:9/v1", &model_dir("pii_ner")?);
    let router = Router::start_full(
        &policy,
        |cfg| cfg.extproc = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
        |parts| parts.models = Arc::new(OnnxModels::new(ModelOptions::default())),
    )
    .await?;
    let addr = router.server.extproc_addr.ok_or("no external processor")?;
    let mut stream = Stream::open(addr).await?;
    let mut asked = post("/v1/chat/completions");
    asked.push(("x-request-id", "ext-1"));
    stream.ask(headers(&asked, false)).await?;
    let sent = stream.ask(body(&src_testkit::user(PROMPT))).await?;
    let text = said(&sent.body()?);
    for value in VALUES {
        assert!(!text.contains(value), "{text}");
    }
    assert!(
        text.contains("<PERSON_2>") && text.contains("<LOCATION_1>"),
        "{text}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prompt_a_signal_read_is_not_read_again_and_the_other_texts_share_one_batch(
) -> TestResult {
    let upstream = Upstream::start(echo).await?;
    load_library()?;
    let policy = format!(
        r#"
backend chat {{ url = "{url}" }}
model echo {{ backend = chat  serves = "echo" }}
detector people {{ path = "{model}"  entities = [PERSON, LOCATION] }}
signal names = people(prompt, [PERSON])
route private priority 10 {{ when names  to echo  redact = [PERSON, LOCATION] }}
route default {{ to echo }}
"#,
        url = upstream.url,
        model = model_dir("pii_ner")?.display()
    );
    let router = Router::start_full(
        &policy,
        |_| {},
        |parts| parts.models = Arc::new(OnnxModels::new(ModelOptions::default())),
    )
    .await?;
    let request = json!({"model": "auto", "messages": [
        {"role": "system", "content": "You write to Olga Petrova in Kyoto."},
        {"role": "user", "content": PROMPT}
    ]});
    let calls = |metrics: &str| {
        src_testkit::models::sample(metrics, "src_model_calls_total", "model=\"pii_ner\"")
    };
    for _ in 0..2 {
        let answer = router.chat(&request, &[]).await?;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
        let metrics = router.admin_get("/metrics").await?;
        let metrics = String::from_utf8_lossy(&metrics.body);
        // The signal read the prompt; redaction read the system prompt only, the prompt's
        // entities coming from the memo. The same request again is all memo.
        assert_eq!(calls(&metrics), 2.0, "{metrics}");
    }
    let posts = upstream.posts();
    assert_eq!(posts.len(), 2);
    for post in &posts {
        let sent = String::from_utf8_lossy(&post.bytes);
        for value in VALUES.iter().chain(&["Olga", "Petrova", "Kyoto"]) {
            if *value == "sarah.j@example.com" {
                // Only the detector's types are redacted here: the address goes as written.
                assert!(sent.contains(value), "{sent}");
                continue;
            }
            assert!(!sent.contains(value), "{value} was sent: {sent}");
        }
        assert!(
            sent.contains("You write to <PERSON_1> in <LOCATION_1>."),
            "{sent}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_anthropic_client_reads_the_names_back_translated_and_native() -> TestResult {
    let upstream = Upstream::start(echo).await?;
    let router = router(&upstream.url, None).await?;
    let client = clients(router.url(""), "venv-anthropic", "anthropic").await?;
    let expected = format!("Noted: {PROMPT}.");
    for key in ["translated", "translated_stream", "native", "native_stream"] {
        assert_eq!(client[key], expected, "{key}: {client}");
    }
    let quoted = json!({"said": PROMPT});
    assert_eq!(client["translated_tool"], quoted, "{client}");
    assert_eq!(client["translated_stream_tool"], quoted, "{client}");
    let posts = upstream.posts();
    // Translated to the chat backend twice, to the native Messages backend twice.
    assert_eq!(posts.len(), 4);
    let native = posts
        .iter()
        .filter(|p| p.path.ends_with("/messages"))
        .count();
    assert_eq!(native, 2);
    for post in &posts {
        let sent = String::from_utf8_lossy(&post.bytes);
        for value in VALUES {
            assert!(
                !sent.contains(value),
                "{} was sent {value}: {sent}",
                post.path
            );
        }
        assert!(said(&post.body).contains("<PERSON_2>"), "{sent}");
    }
    Ok(())
}
