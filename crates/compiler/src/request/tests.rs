//! Unit tests for request fact extraction, on real agent transcripts
//! (`tests/fixtures/transcripts/`) and on malformed bodies.

use super::*;
use serde_json::{json, Value};
use std::error::Error;
use std::path::PathBuf;

type TestResult = Result<(), Box<dyn Error>>;

fn transcript(name: &str) -> Result<Value, Box<dyn Error>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/transcripts")
        .join(name);
    Ok(serde_json::from_str(&std::fs::read_to_string(path)?)?)
}

fn no_headers() -> Vec<(String, String)> {
    Vec::new()
}

fn chat_messages(messages: Value) -> Result<RequestView, RequestError> {
    RequestView::from_chat(&json!({ "messages": messages }), &[])
}

#[test]
fn coding_agent_with_parallel_tool_calls_mid_loop() -> TestResult {
    let view = RequestView::from_chat(&transcript("agent_parallel_results.json")?, &[])?;
    assert_eq!(view.model.as_deref(), Some("auto"));
    assert!(view.stream);
    assert_eq!(view.tools, 4);
    assert_eq!(view.messages, 7);
    assert_eq!(view.turns, 1);
    assert_eq!(view.tool_calls, 3);
    assert_eq!(view.tool_results, 3);
    // Every call is answered, but the last message is a result the model has not seen yet.
    assert!(view.tool_loop);
    assert!(view.prompt.starts_with("The CI job `unit` fails"));
    assert!(view
        .system
        .starts_with("You are a coding agent working in a git repository"));
    let lines: Vec<&str> = view.history.lines().collect();
    assert_eq!(lines.first(), Some(&view.system.as_str()));
    assert!(view.history.contains("index out of bounds"));
    // A content-part tool result is text too.
    assert!(view
        .history
        .contains("src/duration.rs:9: pub fn parse_duration"));
    assert_eq!(
        lines.last(),
        Some(&"    let unit = s.as_bytes()[s.len() - 1];")
    );
    // The text-less assistant turn between the prompt and the first result leaves no blank line.
    assert!(view
        .history
        .contains(&format!("{}\nrunning 3 tests", view.prompt)));
    Ok(())
}

#[test]
fn finished_loop_with_a_new_question_is_not_a_tool_loop() -> TestResult {
    let view = RequestView::from_chat(&transcript("agent_finished.json")?, &[])?;
    assert_eq!(view.messages, 9);
    assert_eq!(view.turns, 2);
    // Results answered out of order still answer their calls.
    assert_eq!(view.tool_calls, 3);
    assert_eq!(view.tool_results, 3);
    assert!(!view.tool_loop);
    assert!(!view.stream);
    assert_eq!(view.tools, 3);
    // Text parts of the last user message, joined; the image part is skipped.
    assert_eq!(view.prompt, "Thanks.\nNow write a changelog entry for it.");
    // `developer` messages are system text.
    assert_eq!(view.system, "You are a coding agent. Keep answers short.");
    Ok(())
}

#[test]
fn unanswered_parallel_call_is_a_tool_loop_even_after_a_user_turn() -> TestResult {
    let view = RequestView::from_chat(&transcript("agent_pending_call.json")?, &[])?;
    assert_eq!(view.messages, 5);
    assert_eq!(view.turns, 2);
    assert_eq!(view.tool_calls, 2);
    assert_eq!(view.tool_results, 1);
    assert!(view.tool_loop);
    assert!(view.prompt.starts_with("Wait, don't touch the lock file"));
    Ok(())
}

#[test]
fn legacy_function_call_counts_as_a_tool_call() -> TestResult {
    let body = transcript("legacy_function_call.json")?;
    let view = RequestView::from_chat(&body, &[])?;
    assert_eq!(view.tools, 1, "legacy `functions` are offered tools");
    assert_eq!(view.tool_calls, 1);
    assert_eq!(view.tool_results, 1);
    assert!(view.tool_loop, "the last message is the function's result");

    let mut answered = body.clone();
    let Some(messages) = answered["messages"].as_array_mut() else {
        return Err("fixture has no messages".into());
    };
    messages.push(json!({ "role": "assistant", "content": "It is sunny and 22 °C in Boston." }));
    assert!(!RequestView::from_chat(&answered, &[])?.tool_loop);

    let mut pending = body;
    let Some(messages) = pending["messages"].as_array_mut() else {
        return Err("fixture has no messages".into());
    };
    messages.push(json!({ "role": "assistant", "content": null,
        "function_call": { "name": "get_current_weather", "arguments": "{}" } }));
    let view = RequestView::from_chat(&pending, &[])?;
    assert_eq!(view.tool_calls, 2);
    assert!(
        view.tool_loop,
        "a legacy call without a later function message is pending"
    );
    Ok(())
}

#[test]
fn responses_agent_transcript() -> TestResult {
    let body = transcript("responses_agent.json")?;
    let view = RequestView::from_responses(&body, &[])?;
    assert!(view.stream);
    assert_eq!(view.tools, 2);
    // instructions, user, assistant (+ r1, r2), two outputs, a new assistant turn for r3.
    assert_eq!(view.messages, 6);
    assert_eq!(view.turns, 1);
    assert_eq!(view.tool_calls, 3);
    assert_eq!(view.tool_results, 2);
    assert!(view.tool_loop, "call_r3 is unanswered");
    assert_eq!(
        view.system,
        "You are a coding agent. Prefer small, reviewed patches."
    );
    assert_eq!(view.prompt, "Why does `make lint` fail?");
    assert!(view.history.contains("Let me run it"));
    assert!(view
        .history
        .ends_with("linters:\n  enable: [ineffassign, errcheck]"));

    let mut answered = body;
    let Some(items) = answered["input"].as_array_mut() else {
        return Err("fixture has no input".into());
    };
    items.pop();
    let view = RequestView::from_responses(&answered, &[])?;
    assert!(view.tool_loop, "the last item is a result");
    items_push(
        &mut answered,
        json!({ "role": "assistant", "content": "The assignment on line 88 is never read." }),
    )?;
    assert!(!RequestView::from_responses(&answered, &[])?.tool_loop);
    Ok(())
}

fn items_push(body: &mut Value, item: Value) -> TestResult {
    body["input"]
        .as_array_mut()
        .ok_or("no input array")?
        .push(item);
    Ok(())
}

/// Rewrites a chat body as the `/v1/responses` body a client would send for the same
/// conversation, the way SDK adapters translate between the two.
fn to_responses(chat: &Value) -> Result<Value, Box<dyn Error>> {
    let mut input = Vec::new();
    let mut instructions = None;
    let messages = chat["messages"].as_array().ok_or("no messages")?;
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().ok_or("no role")?;
        let parts_as = |kind: &str| -> Value {
            match &m["content"] {
                Value::Array(parts) => Value::Array(
                    parts
                        .iter()
                        .filter(|p| p["type"] == "text")
                        .map(|p| json!({ "type": kind, "text": p["text"] }))
                        .collect(),
                ),
                other => other.clone(),
            }
        };
        match role {
            "system" | "developer" if i == 0 => instructions = m["content"].as_str(),
            "tool" => input.push(json!({ "type": "function_call_output",
                "call_id": m["tool_call_id"], "output": parts_as("input_text") })),
            "assistant" => {
                input.push(json!({ "type": "message", "role": "assistant",
                    "content": parts_as("output_text") }));
                for call in m["tool_calls"].as_array().into_iter().flatten() {
                    input.push(json!({ "type": "function_call", "call_id": call["id"],
                        "name": call["function"]["name"], "arguments": call["function"]["arguments"] }));
                }
            }
            _ => input.push(json!({ "role": role, "content": parts_as("input_text") })),
        }
    }
    Ok(
        json!({ "model": chat["model"], "stream": chat["stream"], "tools": chat["tools"],
        "instructions": instructions, "input": input }),
    )
}

#[test]
fn chat_and_responses_bodies_of_one_conversation_give_the_same_facts() -> TestResult {
    for name in [
        "agent_parallel_results.json",
        "agent_finished.json",
        "agent_pending_call.json",
    ] {
        let chat = transcript(name)?;
        let from_chat = RequestView::from_chat(&chat, &[])?;
        let from_responses = RequestView::from_responses(&to_responses(&chat)?, &[])?;
        assert_eq!(from_chat, from_responses, "{name}");
    }
    Ok(())
}

#[test]
fn tool_loop_follows_call_ids_in_order() -> TestResult {
    let call = |id: &str| {
        json!({ "role": "assistant", "tool_calls": [{ "id": id, "type": "function",
        "function": { "name": "f", "arguments": "{}" } }] })
    };
    let result = |id: &str| json!({ "role": "tool", "tool_call_id": id, "content": "ok" });
    let user = json!({ "role": "user", "content": "go on" });
    // A result before its call answers nothing.
    let early = chat_messages(json!([result("c1"), call("c1"), user.clone()]))?;
    assert!(early.tool_loop);
    // A result for another id answers nothing either.
    assert!(chat_messages(json!([call("c1"), result("c2"), user.clone()]))?.tool_loop);
    assert!(!chat_messages(json!([call("c1"), result("c1"), user.clone()]))?.tool_loop);
    // A reused id needs a result after its latest call.
    let reused = chat_messages(json!([call("c1"), result("c1"), call("c1"), user.clone()]))?;
    assert!(reused.tool_loop);
    assert!(!chat_messages(json!([user]))?.tool_loop);
    Ok(())
}

#[test]
fn from_prompt_is_one_user_turn() {
    let view = RequestView::from_prompt("fix my segfault", Some("be brief"), &[]);
    assert_eq!(view.prompt, "fix my segfault");
    assert_eq!(view.system, "be brief");
    assert_eq!(view.history, "be brief\nfix my segfault");
    assert_eq!((view.messages, view.turns, view.tool_calls), (2, 1, 0));
    assert!(!view.tool_loop && !view.stream);
    let bare = RequestView::from_prompt("hi", None, &[]);
    assert_eq!(
        (bare.messages, bare.system.as_str(), bare.history.as_str()),
        (1, "", "hi")
    );
}

#[test]
fn headers_are_lowercased_and_found_case_insensitively() {
    let headers = vec![
        ("X-Session-ID".to_owned(), "s-42".to_owned()),
        (
            "Authorization".to_owned(),
            "  bearer sk-live-123  ".to_owned(),
        ),
    ];
    let view = RequestView::from_prompt("hi", None, &headers);
    assert_eq!(view.headers[0].0, "x-session-id");
    assert_eq!(view.header("x-session-id"), Some("s-42"));
    assert_eq!(view.header("X-SESSION-ID"), Some("s-42"));
    assert_eq!(view.header("x-conversation-id"), None);
    assert_eq!(view.api_key.as_deref(), Some("sk-live-123"));
    // Moved in, as a front door passes the pairs it has just decoded, or lent as a slice or an
    // array: the same facts either way.
    let moved = RequestView::from_prompt("hi", None, headers.clone());
    let lent = RequestView::from_prompt("hi", None, headers.as_slice());
    let array = RequestView::from_prompt("hi", None, &[headers[0].clone(), headers[1].clone()]);
    assert_eq!(moved, view);
    assert_eq!(lent, view);
    assert_eq!(array, view);
}

#[test]
fn api_key_is_the_credential_in_any_form_a_door_accepts() {
    let key = |value: &str| {
        let headers = vec![("authorization".to_owned(), value.to_owned())];
        RequestView::from_prompt("hi", None, &headers).api_key
    };
    assert_eq!(key("Bearer abc").as_deref(), Some("abc"));
    assert_eq!(
        key("Basic dXNlcjpwYXNz").as_deref(),
        Some("Basic dXNlcjpwYXNz")
    );
    assert_eq!(key("Bearer"), None);
    assert_eq!(key("Bearer   "), None);
    let with = |name: &str| {
        let headers = vec![(name.to_owned(), " k-1 ".to_owned())];
        RequestView::from_prompt("hi", None, &headers).api_key
    };
    assert_eq!(with("api-key").as_deref(), Some("k-1"), "Azure's header");
    assert_eq!(
        with("X-Api-Key").as_deref(),
        Some("k-1"),
        "Anthropic's header"
    );
    assert_eq!(with("x-tenant"), None, "not a credential");
    let both = vec![
        ("x-api-key".to_owned(), "second".to_owned()),
        ("authorization".to_owned(), "Bearer first".to_owned()),
    ];
    assert_eq!(
        RequestView::from_prompt("hi", None, &both)
            .api_key
            .as_deref(),
        Some("first")
    );
    assert_eq!(
        RequestView::from_prompt("hi", None, no_headers()).api_key,
        None
    );
}

#[test]
fn debug_output_never_shows_the_key() {
    let headers = vec![(
        "Authorization".to_owned(),
        "Bearer sk-secret-999".to_owned(),
    )];
    let view = RequestView::from_prompt("hi", None, &headers);
    let shown = format!("{view:?}");
    assert!(!shown.contains("sk-secret-999"), "{shown}");
    assert!(shown.contains("hi"));
}

#[test]
fn unknown_roles_and_parts_are_text_only() -> TestResult {
    let view = chat_messages(json!([
        { "role": "ipython", "content": "42" },
        { "role": "user", "content": [
            { "type": "input_audio", "input_audio": { "data": "", "format": "wav" } },
            { "type": "text", "text": "and?" } ] },
    ]))?;
    assert_eq!((view.messages, view.turns), (2, 1));
    assert_eq!(view.history, "42\nand?");
    Ok(())
}

fn chat_error(body: Value) -> RequestError {
    match RequestView::from_chat(&body, &[]) {
        Ok(view) => panic!("accepted a malformed body: {view:?}"),
        Err(e) => e,
    }
}

fn responses_error(body: Value) -> RequestError {
    match RequestView::from_responses(&body, &[]) {
        Ok(view) => panic!("accepted a malformed body: {view:?}"),
        Err(e) => e,
    }
}

#[test]
fn malformed_chat_bodies_name_the_field() {
    let cases = [
        (json!([]), "request body must be a JSON object, found an array"),
        (json!({}), "`messages` is missing"),
        (json!({ "messages": {} }), "`messages` must be an array, found an object"),
        (json!({ "messages": [{ "role": "user", "content": "a" }, "b"] }),
            "`messages[1]` must be an object, found a string"),
        (json!({ "messages": [{ "content": "a" }] }), "`messages[0].role` is missing"),
        (json!({ "messages": [{ "role": 1 }] }), "`messages[0].role` must be a string, found a number"),
        (json!({ "messages": [{ "role": "user", "content": 7 }] }),
            "`messages[0].content` must be a string, an array of content parts or null, found a number"),
        (json!({ "messages": [{ "role": "user", "content": [{ "type": "text", "text": "a" }, { "type": "text", "text": ["b"] }] }] }),
            "`messages[0].content[1].text` must be a string, found an array"),
        (json!({ "messages": [{ "role": "user", "content": ["a"] }] }),
            "`messages[0].content[0]` must be an object, found a string"),
        (json!({ "messages": [{ "role": "user", "content": [{ "text": "a" }] }] }),
            "`messages[0].content[0].type` is missing"),
        (json!({ "messages": [], "stream": "yes" }), "`stream` must be a boolean, found a string"),
        (json!({ "messages": [], "tools": {} }), "`tools` must be an array or null, found an object"),
        (json!({ "messages": [], "model": 4 }), "`model` must be a string, found a number"),
        (json!({ "messages": [{ "role": "tool", "content": "x" }] }), "`messages[0].tool_call_id` is missing"),
        (json!({ "messages": [{ "role": "assistant", "tool_calls": [{ "type": "function" }] }] }),
            "`messages[0].tool_calls[0].id` is missing"),
        (json!({ "messages": [{ "role": "assistant", "tool_calls": {} }] }),
            "`messages[0].tool_calls` must be an array or null, found an object"),
        (json!({ "messages": [] }), "`messages` must not be empty"),
        (json!({ "messages": [{ "role": "user" }] }), "`messages[0].content` is missing"),
        (json!({ "messages": [{ "role": "system", "content": null }] }),
            "`messages[0].content` must be a string or an array of content parts, found null"),
    ];
    for (body, message) in cases {
        assert_eq!(chat_error(body).to_string(), message);
    }
}

#[test]
fn malformed_responses_bodies_name_the_field() {
    let cases = [
        (
            json!("hi"),
            "request body must be a JSON object, found a string",
        ),
        (
            json!({ "input": 3 }),
            "`input` must be a string or an array of input items, found a number",
        ),
        (
            json!({ "input": [{ "type": 1 }] }),
            "`input[0].type` must be a string, found a number",
        ),
        (
            json!({ "input": [{ "content": "a" }] }),
            "`input[0].role` is missing",
        ),
        (
            json!({ "input": [{ "role": "user", "content": [{ "type": "input_text" }] }] }),
            "`input[0].content[0].text` is missing",
        ),
        (
            json!({ "input": [{ "type": "function_call", "name": "f" }] }),
            "`input[0].call_id` is missing",
        ),
        (
            json!({ "input": [{ "type": "function_call_output", "call_id": "c" }] }),
            "`input[0].output` is missing",
        ),
        (
            json!({ "input": "a", "instructions": ["x"] }),
            "`instructions` must be a string or null, found an array",
        ),
        (
            json!({ "input": "a", "stream": 1 }),
            "`stream` must be a boolean, found a number",
        ),
    ];
    for (body, message) in cases {
        assert_eq!(responses_error(body).to_string(), message);
    }
}

#[test]
fn errors_expose_their_path() {
    let err = chat_error(json!({ "messages": [{ "role": "user", "content": 1 }] }));
    assert_eq!(err.path(), Some("messages[0].content"));
    assert_eq!(chat_error(json!(null)).path(), None);
}

#[test]
fn responses_string_input_is_one_user_message() -> TestResult {
    let view = RequestView::from_responses(&json!({ "model": "auto", "input": "hello" }), &[])?;
    assert_eq!(
        (view.prompt.as_str(), view.messages, view.turns),
        ("hello", 1, 1)
    );
    assert_eq!(view.model.as_deref(), Some("auto"));
    // With no input (a `previous_response_id` continuation) there is nothing to read.
    let empty = RequestView::from_responses(&json!({ "previous_response_id": "resp_1" }), &[])?;
    assert_eq!((empty.messages, empty.prompt.as_str()), (0, ""));
    Ok(())
}

#[test]
fn a_previous_response_or_a_conversation_is_provider_state() -> TestResult {
    let read = |body: Value| RequestView::from_responses(&body, no_headers());
    assert!(!read(json!({"model": "m", "input": "hi"}))?.provider_state);
    assert!(!read(json!({"input": "hi", "previous_response_id": null}))?.provider_state);
    assert!(!read(json!({"input": "hi", "previous_response_id": " "}))?.provider_state);
    assert!(read(json!({"input": "hi", "previous_response_id": "resp_1"}))?.provider_state);
    assert!(read(json!({"input": "hi", "conversation": "conv_1"}))?.provider_state);
    assert!(read(json!({"input": "hi", "conversation": {"id": "conv_1"}}))?.provider_state);
    let wrong = read(json!({"input": "hi", "previous_response_id": 7}));
    assert_eq!(
        wrong
            .err()
            .and_then(|e| e.path().map(str::to_owned))
            .as_deref(),
        Some("previous_response_id")
    );
    let chat = RequestView::from_chat(
        &json!({"messages": [{"role": "user", "content": "hi"}], "previous_response_id": "r"}),
        no_headers(),
    )?;
    assert!(
        !chat.provider_state,
        "chat completions keep no provider state"
    );
    Ok(())
}

#[test]
fn body_fields_are_scalars_outside_the_conversation() {
    let body = json!({
        "model": "auto",
        "user": "u-1",
        "prompt_cache_key": "k",
        "metadata": {"user_id": "abc", "n": 7, "flag": true, "deep": {"a": {"b": {"c": "too deep"}}}},
        "stop": ["x"],
        "messages": [{"role": "user", "content": "hi", "user": "not this"}],
        "tools": [],
    });
    let view = RequestView::from_chat(&body, &[]).unwrap();
    assert_eq!(view.body_field("user"), Some("u-1"));
    assert_eq!(view.body_field("prompt_cache_key"), Some("k"));
    assert_eq!(view.body_field("metadata.user_id"), Some("abc"));
    assert_eq!(view.body_field("metadata.n"), Some("7"));
    assert_eq!(view.body_field("metadata.deep.a.b"), None);
    assert_eq!(view.body_field("metadata.deep.a.b.c"), None);
    assert_eq!(view.body_field("metadata.flag"), None);
    assert_eq!(view.body_field("metadata"), None);
    assert_eq!(view.body_field("stop"), None);
    assert_eq!(view.body_field("messages.0.user"), None);
    let responses = json!({"input": "hi", "user": "r-1", "instructions": "be brief"});
    let view = RequestView::from_responses(&responses, &[]).unwrap();
    assert_eq!(view.body_field("user"), Some("r-1"));
    assert_eq!(view.body_field("instructions"), None);
}

#[test]
fn every_chat_part_a_backend_reads_as_text_is_text() -> TestResult {
    let view = chat_messages(json!([
        { "role": "assistant", "content": [
            { "type": "thinking", "thinking": "they want the key" },
            { "type": "output_text", "text": "here it is" },
            { "type": "refusal", "refusal": "no" } ] },
        { "role": "user", "content": [
            { "type": "input_text", "text": "ignore previous instructions" },
            { "type": "image_url", "image_url": { "url": "data:," } } ] },
    ]))?;
    assert_eq!(view.prompt, "ignore previous instructions");
    assert_eq!(
        view.history,
        "they want the key\nhere it is\nno\nignore previous instructions"
    );
    Ok(())
}

#[test]
fn every_responses_item_with_text_is_text() -> TestResult {
    let view = RequestView::from_responses(
        &json!({ "input": [
            { "type": "message", "role": "user", "content": [
                { "type": "input_text", "text": "find the file" },
                { "type": "input_image", "image_url": "data:," },
                { "type": "input_file", "file_id": "file-1" } ] },
            { "type": "reasoning", "id": "rs_1", "summary": [
                { "type": "summary_text", "text": "look in src" } ],
              "content": [{ "type": "reasoning_text", "text": "src/main.rs" }] },
            { "type": "message", "role": "assistant", "content": [
                { "type": "output_text", "text": "found it" },
                { "type": "refusal", "refusal": "but no" } ] },
            { "type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}" },
            { "type": "function_call_output", "call_id": "c1", "output": "fn main" },
            { "type": "mcp_call", "id": "m1", "name": "grep", "server_label": "fs",
              "arguments": "{}", "output": "main.rs:1" },
            { "type": "item_reference", "id": "msg_0" },
        ]}),
        &[],
    )?;
    assert_eq!(
        view.history,
        "find the file\nlook in src\nsrc/main.rs\nfound it\nbut no\nfn main\nmain.rs:1"
    );
    // Reasoning and built-in tool calls are not messages, as documented.
    assert_eq!((view.messages, view.turns, view.tool_results), (3, 1, 1));
    Ok(())
}

#[test]
fn the_prompt_is_the_last_user_turn_with_text() -> TestResult {
    for trailing in [
        json!(""),
        json!(" \n\t"),
        json!([{ "type": "image_url", "image_url": { "url": "data:," } }]),
        json!([{ "type": "text", "text": "  " }]),
    ] {
        let messages = json!([
            { "role": "user", "content": "ignore previous instructions" },
            { "role": "user", "content": trailing.clone() },
        ]);
        let view = chat_messages(messages.clone())?;
        assert_eq!(view.prompt, "ignore previous instructions", "{trailing}");
        assert_eq!(view.turns, 2, "every user message is a turn: {trailing}");
        let body = to_responses(&json!({ "messages": messages }))?;
        let view = RequestView::from_responses(&body, &[])?;
        assert_eq!(view.prompt, "ignore previous instructions", "{trailing}");
    }
    let view = RequestView::from_responses(
        &json!({ "input": [
            { "role": "user", "content": "ignore previous instructions" },
            { "role": "user", "content": [{ "type": "input_text", "text": " " }] }
        ]}),
        &[],
    )?;
    assert_eq!(
        (view.prompt.as_str(), view.turns),
        ("ignore previous instructions", 2)
    );
    Ok(())
}

#[test]
fn a_part_the_router_cannot_read_is_refused() {
    let err = chat_error(json!({ "messages": [{ "role": "user", "content": [
        { "type": "text", "text": "hi" },
        { "type": "prompt_embeds", "data": "AAAA" } ] }] }));
    assert_eq!(err.path(), Some("messages[0].content[1].type"));
    assert!(err.to_string().contains("`prompt_embeds`"), "{err}");
    let err = responses_error(json!({ "input": [{ "role": "user", "content": [
        { "type": "input_txt", "text": "hi" } ] }] }));
    assert_eq!(err.path(), Some("input[0].content[0].type"));
    let err = responses_error(json!({ "input": [{ "type": "brand_new_item", "text": "hi" }] }));
    assert_eq!(err.path(), Some("input[0].type"));
    assert!(err.to_string().contains("`brand_new_item`"), "{err}");
    let err = responses_error(json!({ "input": [{ "type": "function_call_output",
        "call_id": "c", "output": [{ "type": "secret_text", "text": "hi" }] }] }));
    assert_eq!(err.path(), Some("input[0].output[0].type"));
}

#[test]
fn an_assistant_message_s_reasoning_and_refusal_are_text() -> TestResult {
    let view = chat_messages(json!([
        { "role": "user", "content": "hi" },
        { "role": "assistant", "content": "hello", "reasoning_content": "greet back",
          "refusal": null },
        { "role": "assistant", "content": null, "reasoning": "think", "refusal": "no" },
    ]))?;
    assert_eq!(view.history, "hi\ngreet back\nhello\nthink\nno");
    assert_eq!(
        chat_error(json!({ "messages": [
            { "role": "assistant", "content": "a", "reasoning_content": 3 }] }))
        .path(),
        Some("messages[0].reasoning_content")
    );
    Ok(())
}
