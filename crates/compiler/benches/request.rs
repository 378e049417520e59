//! Reading a request's facts from its parsed body: a one-message chat request and a 40-turn
//! agent conversation (system prompt, user turns with content parts, assistant tool calls and
//! tool results), since the second is what an agent's tool loop sends on every turn.
//!
//! A second group takes the headers the official `openai` Python client sends, decoded to owned
//! pairs as a front door does, then either lent to the reader (which copies them) or moved in.

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::{json, Value};
use src_compiler::request::RequestView;
use std::hint::black_box;

fn one_message() -> Value {
    json!({
        "model": "auto",
        "messages": [{"role": "user", "content": "please explain this stack trace from my build"}],
    })
}

fn agent_conversation(turns: usize) -> Value {
    let mut messages = vec![json!({
        "role": "system",
        "content": "You are a coding agent. Use the tools to read and edit files.",
    })];
    for turn in 0..turns {
        messages.push(json!({
            "role": "user",
            "content": [
                {"type": "text", "text": format!("step {turn}: fix the failing test in src/lib.rs")},
                {"type": "text", "text": "the build log is attached below"},
            ],
        }));
        messages.push(json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [{
                "id": format!("call_{turn}"),
                "type": "function",
                "function": {"name": "read_file", "arguments": "{\"path\":\"src/lib.rs\"}"},
            }],
        }));
        messages.push(json!({
            "role": "tool",
            "tool_call_id": format!("call_{turn}"),
            "content": "fn main() { println!(\"hello\"); }\n".repeat(8),
        }));
    }
    json!({
        "model": "auto",
        "messages": messages,
        "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {}}}],
    })
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("request_view");
    let headers = vec![("x-session-id".to_string(), "task-1".to_string())];
    for (name, body) in [
        ("one_message", one_message()),
        ("agent_40_turns", agent_conversation(40)),
    ] {
        // A body the reader refuses would measure the error path, not the one served.
        if let Err(e) = RequestView::from_chat(&body, &headers) {
            panic!("{name}: the bench body is refused: {e}");
        }
        group.bench_function(name, |b| {
            b.iter(|| RequestView::from_chat(black_box(&body), black_box(&headers)))
        });
    }
    group.finish();
}

/// The headers of a chat completion sent by the `openai` Python client (1.x), with a session id.
const CLIENT_HEADERS: &[(&str, &str)] = &[
    ("host", "127.0.0.1:8080"),
    ("accept-encoding", "gzip, deflate"),
    ("connection", "keep-alive"),
    ("accept", "application/json"),
    ("content-type", "application/json"),
    ("user-agent", "OpenAI/Python 1.106.1"),
    ("x-stainless-lang", "python"),
    ("x-stainless-package-version", "1.106.1"),
    ("x-stainless-os", "Linux"),
    ("x-stainless-arch", "x64"),
    ("x-stainless-runtime", "CPython"),
    ("x-stainless-runtime-version", "3.11.2"),
    ("authorization", "Bearer sk-local-0123456789abcdef"),
    ("x-stainless-async", "false"),
    ("x-stainless-retry-count", "0"),
    ("x-stainless-read-timeout", "600"),
    ("x-session-id", "task-1"),
    ("content-length", "97"),
];

fn decoded() -> Vec<(String, String)> {
    CLIENT_HEADERS
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect()
}

fn bench_headers(c: &mut Criterion) {
    let mut group = c.benchmark_group("request_view_headers");
    let body = one_message();
    group.bench_function("lent", |b| {
        b.iter(|| {
            let pairs = decoded();
            RequestView::from_chat(black_box(&body), &pairs)
        })
    });
    group.bench_function("moved", |b| {
        b.iter(|| RequestView::from_chat(black_box(&body), decoded()))
    });
    group.finish();
}

criterion_group!(benches, bench, bench_headers);
criterion_main!(benches);
