//! `redact = [types]` end to end: the official `openai` and `anthropic` Python clients send a
//! prompt with an email address and a phone number through every door (chat completions,
//! Responses, Messages translated to a chat backend and Messages to a native one), whole and
//! streamed. The recording backend answers by quoting what it was sent, a character or three per
//! event, and in a tool call's arguments; it must never see the values, and every client must
//! read them back in place of the placeholders.

use std::path::Path;

use serde_json::{json, Value};
use src_testkit::router::Router;
use src_testkit::upstream::{Reply, Seen, Upstream};
use src_testkit::TestResult;

const PROMPT: &str = "Mail ann.lee@example.com or call +1 415 555 0132 about it";
const VALUES: [&str; 2] = ["ann.lee@example.com", "415 555 0132"];

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
    let mut n = 0;
    let mut seq = || {
        n += 1;
        n
    };
    let mut events = vec![(
        "response.created",
        json!({"type": "response.created", "sequence_number": seq(),
            "response": response("in_progress", json!([]))}),
    )];
    for piece in pieces(text, 3) {
        events.push((
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "sequence_number": seq(),
                "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": piece,
                "logprobs": []}),
        ));
    }
    events.push((
        "response.output_text.done",
        json!({"type": "response.output_text.done", "sequence_number": seq(), "item_id": "msg_1",
            "output_index": 0, "content_index": 0, "text": text, "logprobs": []}),
    ));
    events.push((
        "response.completed",
        json!({"type": "response.completed", "sequence_number": seq(),
            "response": response("completed", message)}),
    ));
    Reply::stream(sse(&events))
}

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

fn policy(url: &str) -> String {
    format!(
        r#"
backend chat   {{ url = "{url}" }}
backend claude {{ url = "{url}"  api = anthropic }}
model echo        {{ backend = chat    serves = "echo" }}
model claude_echo {{ backend = claude  serves = "claude-echo" }}

signal contact = pii(history, ["email", "phone"])

route native priority 20 {{
  when contact and header("x-want") == "claude"
  to claude_echo
  redact = ["email", "phone"]
}}
route private priority 10 {{
  when contact
  to echo
  redact = ["email", "phone"]
}}
route default {{ to echo }}
"#
    )
}

/// Runs the client script under `venv`'s Python; what it printed.
async fn clients(base: String, venv: &str, door: &'static str) -> TestResult<Value> {
    let repo = src_testkit::models::repo();
    let python = repo.join(".cache").join(venv).join("bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/redact_clients.py");
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .arg(script)
            .args([base.as_str(), door, PROMPT])
            .output()
    })
    .await??;
    if !out.status.success() {
        return Err(format!(
            "{door} clients failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_never_sees_the_values_and_every_client_reads_them_back() -> TestResult {
    let upstream = Upstream::start(echo).await?;
    let record = tempfile::tempdir()?;
    let record_dir = record.path().to_path_buf();
    let router = Router::start_with(&policy(&upstream.url), |cfg| {
        cfg.record = Some(record_dir);
    })
    .await?;
    let base = router.url("");
    let expected = format!("Noted: {PROMPT}.");
    let quoted = json!({"said": PROMPT});

    let openai = clients(base.clone(), "venv-e2e", "openai").await?;
    for key in [
        "chat",
        "chat_stream",
        "responses",
        "responses_stream",
        "responses_stream_final",
    ] {
        assert_eq!(openai[key], expected, "{key}: {openai}");
    }
    for key in ["chat_arguments", "chat_stream_arguments"] {
        let arguments: Value = serde_json::from_str(openai[key].as_str().unwrap_or_default())?;
        assert_eq!(arguments, quoted, "{key}: {openai}");
    }

    let anthropic = clients(base, "venv-anthropic", "anthropic").await?;
    for key in ["translated", "translated_stream", "native", "native_stream"] {
        assert_eq!(anthropic[key], expected, "{key}: {anthropic}");
    }
    assert_eq!(anthropic["translated_tool"], quoted, "{anthropic}");
    assert_eq!(anthropic["translated_stream_tool"], quoted, "{anthropic}");

    let posts = upstream.posts();
    // Chat twice, Responses twice, Messages translated twice and native twice.
    assert_eq!(posts.len(), 8);
    let paths: Vec<&str> = posts.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths.iter().filter(|p| p.ends_with("/messages")).count(),
        2,
        "{paths:?}"
    );
    for post in &posts {
        let sent = String::from_utf8_lossy(&post.bytes);
        for value in VALUES {
            assert!(
                !sent.contains(value),
                "{} was sent {value}: {sent}",
                post.path
            );
        }
        assert_eq!(
            said(&post.body),
            "Mail <EMAIL_1> or call <PHONE_1> about it",
            "{}",
            post.path
        );
    }

    // The log says which types were replaced and how many values, never the values.
    let deadline = tokio::time::Instant::now() + src_testkit::PATIENCE;
    let lines = loop {
        let lines = router
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if lines.len() >= 8 || tokio::time::Instant::now() > deadline {
            break lines;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(lines.len(), 8);
    for line in &lines {
        assert_eq!(line["fields"]["redacted"], "email=1,phone=1", "{line}");
        let text = line.to_string();
        for value in VALUES {
            assert!(!text.contains(value), "{text}");
        }
    }

    // So does the `--record` file, whose bodies are the ones the backend was sent.
    let deadline = tokio::time::Instant::now() + src_testkit::PATIENCE;
    let recorded = loop {
        let recorded = src_runtime::record::read_recording(record.path()).unwrap_or_default();
        if recorded.len() >= 8 || tokio::time::Instant::now() > deadline {
            break recorded;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(recorded.len(), 8);
    for line in &recorded {
        assert_eq!(line["decision"]["redacted"], "email=1,phone=1", "{line}");
        let text = line.to_string();
        assert!(text.contains("<EMAIL_1>"), "{text}");
        for value in VALUES {
            assert!(!text.contains(value), "{text}");
        }
    }
    Ok(())
}

#[tokio::test]
async fn the_external_processor_sends_the_gateway_placeholders_too() -> TestResult {
    use src_testkit::extproc::{body, headers, post, response_headers, Stream};
    let router = Router::start_with(&policy("http://127.0.0.1:9/v1"), |cfg| {
        cfg.extproc = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    })
    .await?;
    let addr = router.server.extproc_addr.ok_or("no external processor")?;
    let mut stream = Stream::open(addr).await?;
    let mut asked = post("/v1/chat/completions");
    asked.push(("x-request-id", "ext-1"));
    stream.ask(headers(&asked, false)).await?;
    let sent = stream.ask(body(&src_testkit::user(PROMPT))).await?;
    let upstream = sent.body()?;
    assert_eq!(said(&upstream), "Mail <EMAIL_1> or call <PHONE_1> about it");
    stream.ask(response_headers("200")).await?;
    let line = router.log_line("ext-1").await?;
    assert_eq!(line["redacted"], "email=1,phone=1");
    Ok(())
}

/// A conversation's turns, the first the prompt, each later one with a value not sent before.
const TURNS: [&str; 4] = [
    PROMPT,
    "or write to bo.kim@example.org instead",
    "my cell is +1 415 555 0199, thanks",
    "nothing new",
];

/// The chat request of the conversation's first `n` turns, the answers between them.
fn turns(n: usize) -> Value {
    let mut messages = Vec::new();
    for (i, turn) in TURNS[..n].iter().enumerate() {
        if i > 0 {
            messages.push(json!({"role": "assistant", "content": "Noted."}));
        }
        messages.push(json!({"role": "user", "content": turn}));
    }
    json!({"model": "auto", "messages": messages})
}

#[tokio::test]
async fn a_conversation_resent_by_its_tenant_reaches_the_backend_as_one_searched_afresh(
) -> TestResult {
    let upstream = Upstream::start(echo).await?;
    let router = Router::start(&policy(&upstream.url)).await?;
    // The router remembers what a tenant's texts held: the same tenant twice, another, and a
    // call without a credential, which is searched afresh every time.
    let callers: [&[(&str, &str)]; 4] = [
        &[("authorization", "Bearer sk-tenant-a")],
        &[("authorization", "Bearer sk-tenant-a")],
        &[("authorization", "Bearer sk-tenant-b")],
        &[],
    ];
    for headers in callers {
        for n in 1..=TURNS.len() {
            let answer = router.chat(&turns(n), headers).await?;
            assert_eq!(
                answer.status,
                200,
                "{}",
                String::from_utf8_lossy(&answer.body)
            );
        }
    }
    let posts = upstream.posts();
    assert_eq!(posts.len(), callers.len() * TURNS.len());
    let searched = &posts[(callers.len() - 1) * TURNS.len()..];
    for (i, post) in posts.iter().enumerate() {
        assert_eq!(post.body, searched[i % TURNS.len()].body, "request {i}");
        let sent = String::from_utf8_lossy(&post.bytes);
        for value in VALUES.iter().chain(&["bo.kim@example.org", "555 0199"]) {
            assert!(
                !sent.contains(value),
                "request {i} was sent {value}: {sent}"
            );
        }
    }
    let last = &searched[TURNS.len() - 1].body["messages"];
    assert_eq!(
        last[0]["content"],
        "Mail <EMAIL_1> or call <PHONE_1> about it"
    );
    assert_eq!(last[2]["content"], "or write to <EMAIL_2> instead");
    assert_eq!(last[4]["content"], "my cell is <PHONE_2>, thanks");
    Ok(())
}
