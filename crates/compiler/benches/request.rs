//! Reading a request's facts from its parsed body: a one-message chat request and a 40-turn
//! agent conversation (system prompt, user turns with content parts, assistant tool calls and
//! tool results), since the second is what an agent's tool loop sends on every turn.

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

criterion_group!(benches, bench);
criterion_main!(benches);
