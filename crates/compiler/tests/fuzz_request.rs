//! Fuzzing the request reader: any bytes as a chat completions body and as a responses body
//! are refused with a reason or decided, never a panic (the property is in
//! `fuzz_support/request.rs`). Inputs: the coverage-guided target's kept corpus
//! (`fuzz/corpus/request/`), arbitrary bytes, and JSON built from the two APIs' own field names
//! and shapes, which gets past the JSON parser into the reader and the decision.
//!
//! `PROPTEST_CASES` raises the case count for a long search.

mod fuzz_support;

use fuzz_support::corpus;
use fuzz_support::request::{check_body, compiled};
use proptest::prelude::*;
use serde_json::{Map, Value};
use src_compiler::CompiledPolicy;
use std::sync::OnceLock;

/// The shipped example policies that check on this machine, compiled once.
fn policies() -> &'static [CompiledPolicy] {
    static POLICIES: OnceLock<Vec<CompiledPolicy>> = OnceLock::new();
    POLICIES.get_or_init(|| {
        let root = corpus::root();
        [
            "examples/quickstart",
            "examples/guarded",
            "policies/production",
        ]
        .iter()
        .filter_map(|dir| compiled(&root.join(dir)))
        .collect()
    })
}

/// Keys of chat and responses bodies, their messages, items and content parts.
const KEYS: &[&str] = &[
    "model",
    "messages",
    "input",
    "instructions",
    "tools",
    "stream",
    "role",
    "content",
    "type",
    "text",
    "name",
    "tool_calls",
    "tool_call_id",
    "function_call",
    "call_id",
    "output",
    "arguments",
    "function",
    "id",
    "refusal",
    "image_url",
];

/// Values those keys take, and some they should not.
const WORDS: &[&str] = &[
    "auto",
    "small",
    "strong",
    "user",
    "assistant",
    "system",
    "developer",
    "tool",
    "function",
    "message",
    "text",
    "input_text",
    "output_text",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "reasoning",
    "item_reference",
    "image_url",
    "refusal",
    "my service panics with this stack trace",
    "",
    "中文",
];

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(WORDS).prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 96, 6, |inner| {
        prop_oneof![
            2 => prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            3 => prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(
                |pairs| {
                    let map: Map<String, Value> =
                        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
                    Value::Object(map)
                }
            ),
        ]
    })
}

/// A body with the outline of a request (an object with `model` and `messages` or `input`),
/// whose insides are random.
fn body() -> impl Strategy<Value = Value> {
    (
        prop::option::of(prop::sample::select(WORDS)),
        prop::collection::vec(json(), 0..5),
        json(),
        any::<bool>(),
        json(),
    )
        .prop_map(|(model, messages, input, chat, extra)| {
            let mut map = Map::new();
            if let Some(model) = model {
                map.insert("model".into(), model.into());
            }
            if chat {
                map.insert("messages".into(), Value::Array(messages));
            } else {
                map.insert("input".into(), input);
            }
            if let Value::Object(extra) = extra {
                for (k, v) in extra {
                    map.entry(k).or_insert(v);
                }
            }
            Value::Object(map)
        })
}

fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    check_body(bytes, policies()).map_err(|e| {
        TestCaseError::fail(format!("{e}\n--- in\n{}", String::from_utf8_lossy(bytes)))
    })
}

#[test]
fn the_example_policies_compile() {
    assert!(
        !policies().is_empty(),
        "no example policy checks, so no request is decided"
    );
}

#[test]
fn every_kept_fuzz_input_holds_the_property() {
    let inputs = corpus::of_target("request");
    assert!(!inputs.is_empty(), "fuzz/corpus/request is empty");
    let failures: Vec<String> = inputs
        .iter()
        .filter_map(|(path, bytes)| {
            check_body(bytes, policies())
                .err()
                .map(|e| format!("{}: {e}", path.display()))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn generated_bodies_are_mostly_read() {
    // Most generated bodies must get past the reader, or the property test would only see
    // refusals and never a decision.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = body();
    let mut read = 0;
    for _ in 0..400 {
        let Ok(tree) = strategy.new_tree(&mut runner) else {
            continue;
        };
        let body = tree.current();
        let chat = src_compiler::request::RequestView::from_chat(&body, &[]).is_ok();
        let responses = src_compiler::request::RequestView::from_responses(&body, &[]).is_ok();
        read += usize::from(chat || responses);
    }
    assert!(read >= 40, "only {read} of 400 generated bodies were read");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(corpus::cases(2000)))]

    #[test]
    fn any_bytes_are_refused_or_decided(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        check(&bytes)?;
    }

    #[test]
    fn request_shaped_json_is_refused_or_decided(body in body()) {
        check(body.to_string().as_bytes())?;
    }

    #[test]
    fn any_json_is_refused_or_decided(value in json()) {
        check(value.to_string().as_bytes())?;
    }
}
