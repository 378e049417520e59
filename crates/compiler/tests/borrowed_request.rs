//! The borrowed chat, Messages and Responses readers against the `Value` ones (the property is
//! `check_borrowed` in `fuzz_support/request.rs`), on chat, Messages and Responses bodies
//! written every way JSON allows one to be written:
//! keys repeated (the last one counts), keys and strings with `\u` escapes, whitespace between
//! every token, numbers in every notation and out of range, and bodies cut or spoiled so that
//! both readers must refuse them.
//!
//! `PROPTEST_CASES` raises the case count for a long search.

mod fuzz_support;

use fuzz_support::corpus;
use fuzz_support::request::{check_borrowed, headers};
use proptest::prelude::*;
use src_compiler::request::{Borrowed, RequestView};

/// Whitespace JSON allows between tokens.
fn ws() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["", "", "", " ", "\n", "\t ", "\r\n  "])
}

/// `text` as a JSON string: plain (serde_json's own escapes), or every character escaped.
fn string(text: &str, escaped: bool) -> String {
    if !escaped {
        return serde_json::to_string(text).unwrap_or_default();
    }
    let mut out = String::from("\"");
    for unit in text.encode_utf16() {
        out.push_str(&format!("\\u{unit:04x}"));
    }
    out.push('"');
    out
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "user",
            "system",
            "developer",
            "assistant",
            "tool",
            "function",
            "ipython",
            "text",
            "input_text",
            "image_url",
            "audio",
            "call_1",
            "auto",
            "my service panics with this stack trace",
            "  ",
            "",
            "中文 🦀",
            "a\"quote\\ and\nnewline",
        ])
        .prop_map(str::to_owned),
        ".{0,10}",
    ]
}

/// A JSON string, plainly written or escaped.
fn json_string() -> impl Strategy<Value = String> {
    (text(), prop::bool::weighted(0.2)).prop_map(|(t, e)| string(&t, e))
}

fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just("false".to_owned()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|n| serde_json::Value::from(n).to_string()),
        prop::sample::select(vec![
            "-0", "1.5e3", "1E-2", "0.10", "1e999", "-1e400", "2.0"
        ])
        .prop_map(str::to_owned),
        json_string(),
    ]
}

/// An object of `members`, each written `key: value`; keys may repeat.
fn object(members: Vec<(String, bool, String)>, spaces: Vec<&'static str>) -> String {
    let mut out = String::from("{");
    for (i, (key, escaped, value)) in members.iter().enumerate() {
        let space = spaces.get(i % spaces.len().max(1)).copied().unwrap_or("");
        if i > 0 {
            out.push(',');
        }
        out.push_str(space);
        out.push_str(&string(key, *escaped));
        out.push_str(space);
        out.push(':');
        out.push_str(value);
        out.push_str(space);
    }
    out.push('}');
    out
}

fn array(items: Vec<String>, space: &str) -> String {
    format!("[{space}{}{space}]", items.join(&format!(",{space}")))
}

/// Any JSON value, keys from the chat API's own names so that members repeat.
fn json() -> impl Strategy<Value = String> {
    scalar().prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            (prop::collection::vec(inner.clone(), 0..5), ws()).prop_map(|(v, s)| array(v, s)),
            (
                prop::collection::vec((key(), any::<bool>(), inner), 0..5),
                prop::collection::vec(ws(), 1..3),
            )
                .prop_map(|(m, s)| object(m, s)),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "role",
        "content",
        "type",
        "text",
        "name",
        "tool_calls",
        "tool_call_id",
        "function_call",
        "id",
        "reasoning",
        "refusal",
        "user_id",
        "tool_use_id",
        "source",
        "data",
        "input",
    ])
    .prop_map(str::to_owned)
}

/// A content part: mostly text parts, sometimes media or an unknown type.
fn part() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec![
            "text",
            "text",
            "input_text",
            "image_url",
            "image_url",
            "mystery",
        ]),
        json_string(),
        prop::option::weighted(0.2, json()),
        prop::collection::vec(ws(), 1..2),
    )
        .prop_map(|(kind, text, extra, spaces)| {
            let mut members = vec![
                ("type".to_owned(), false, string(kind, false)),
                ("text".to_owned(), false, text),
            ];
            if let Some(extra) = extra {
                members.push(("text".to_owned(), true, extra));
            }
            object(members, spaces)
        })
}

fn content() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => json_string(),
        3 => (prop::collection::vec(part(), 0..3), ws()).prop_map(|(p, s)| array(p, s)),
        1 => json(),
    ]
}

/// A chat message: a role, content, sometimes tool calls, a result's id, reasoning, and any
/// other member, in any order and sometimes twice.
fn message() -> impl Strategy<Value = String> {
    let role = prop_oneof![
        12 => prop::sample::select(vec!["user", "user", "system", "assistant", "tool", "developer", "function", "ipython"])
            .prop_map(|r| string(r, false)),
        1 => json(),
    ];
    let calls = prop::collection::vec(
        (json_string(), ws()).prop_map(|(id, s)| object(vec![("id".into(), false, id)], vec![s])),
        0..3,
    )
    .prop_map(|calls| array(calls, ""));
    (
        role,
        prop::option::weighted(0.9, content()),
        prop::option::of(calls),
        prop::option::weighted(0.7, json_string()),
        prop::option::weighted(0.15, (key(), json())),
        prop::option::weighted(0.3, role_again()),
        any::<u64>(),
        prop::collection::vec(ws(), 1..3),
    )
        .prop_map(
            |(role, content, calls, answers, extra, again, order, spaces)| {
                let mut members = vec![("role".to_owned(), order % 5 == 0, role)];
                if let Some(content) = content {
                    members.push(("content".into(), false, content));
                }
                if let Some(calls) = calls {
                    members.push(("tool_calls".into(), false, calls));
                }
                if let Some(id) = answers {
                    members.push(("tool_call_id".into(), false, id));
                }
                if let Some((key, value)) = extra {
                    members.push((key, false, value));
                }
                if let Some(role) = again {
                    members.push(("role".into(), false, role));
                }
                let len = members.len();
                members.rotate_left(usize::try_from(order).unwrap_or(0) % len);
                object(members, spaces)
            },
        )
}

fn role_again() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["user", "assistant", "tool"]).prop_map(|r| string(r, false))
}

/// A chat body: `model`, `messages`, the optional top-level fields, any others (nested objects
/// for `body(..)`), sometimes repeated, in any order.
fn body() -> impl Strategy<Value = String> {
    let top = prop_oneof![
        3 => (Just("model"), json_string()),
        1 => (Just("model"), scalar()),
        2 => (Just("stream"), prop::sample::select(vec!["true", "false", "null", "1"]).prop_map(str::to_owned)),
        2 => (Just("tools"), (prop::collection::vec(json(), 0..3), ws()).prop_map(|(t, s)| array(t, s))),
        1 => (Just("tools"), json()),
        1 => (Just("functions"), json()),
        3 => (Just("temperature"), scalar()),
        3 => (Just("metadata"), json()),
        3 => (Just("user"), json_string()),
    ];
    (
        prop::collection::vec(message(), 1..5),
        prop::collection::vec((top, any::<bool>()), 0..5),
        any::<bool>(),
        prop::collection::vec(ws(), 1..3),
        any::<usize>(),
    )
        .prop_map(|(messages, others, messages_last, spaces, at)| {
            let mut members: Vec<(String, bool, String)> = others
                .into_iter()
                .map(|((k, v), escaped)| (k.to_owned(), escaped, v))
                .collect();
            let messages = ("messages".to_owned(), false, array(messages, ""));
            if messages_last {
                members.push(messages);
            } else {
                members.insert(at % (members.len() + 1), messages);
            }
            object(members, spaces)
        })
}

/// A Messages content block: text, tool calls and results, documents, thinking, media, or a
/// type the router cannot read; members in any order, sometimes repeated.
fn block() -> impl Strategy<Value = String> {
    let document = (
        json_string(),
        prop::sample::select(vec!["text", "content", "base64"]),
    )
        .prop_map(|(data, source)| {
            object(
                vec![
                    ("type".into(), false, string(source, false)),
                    ("data".into(), false, data.clone()),
                    ("content".into(), false, data),
                ],
                vec![""],
            )
        });
    (
        prop::sample::select(vec![
            "text",
            "text",
            "tool_use",
            "tool_result",
            "document",
            "thinking",
            "image",
            "redacted_thinking",
            "search_result",
            "mystery",
        ]),
        json_string(),
        prop::option::weighted(
            0.3,
            prop_oneof![
                json_string(),
                (prop::collection::vec(part(), 0..3), ws()).prop_map(|(p, s)| array(p, s)),
                json()
            ],
        ),
        prop::option::weighted(0.3, document),
        prop::option::weighted(0.2, (key(), json())),
        any::<u64>(),
        prop::collection::vec(ws(), 1..2),
    )
        .prop_map(|(kind, text, content, source, extra, order, spaces)| {
            let mut members = vec![
                ("type".to_owned(), order % 7 == 0, string(kind, false)),
                ("text".to_owned(), false, text.clone()),
                ("thinking".to_owned(), false, text.clone()),
                ("id".to_owned(), false, text.clone()),
                ("tool_use_id".to_owned(), false, text.clone()),
                ("title".to_owned(), false, text),
            ];
            if let Some(content) = content {
                members.push(("content".into(), false, content));
            }
            if let Some(source) = source {
                members.push(("source".into(), false, source));
            }
            if let Some((key, value)) = extra {
                members.push((key, false, value));
            }
            let len = members.len();
            members.rotate_left(usize::try_from(order).unwrap_or(0) % len);
            object(members, spaces)
        })
}

/// A Messages turn: a role and content (a string, or blocks), sometimes something else.
fn turn() -> impl Strategy<Value = String> {
    let content = prop_oneof![
        3 => json_string(),
        6 => (prop::collection::vec(block(), 0..4), ws()).prop_map(|(b, s)| array(b, s)),
        1 => json(),
    ];
    (
        prop::sample::select(vec!["user", "user", "assistant", "system"])
            .prop_map(|r| string(r, false)),
        prop::option::weighted(0.95, content),
        prop::option::weighted(0.1, (key(), json())),
        any::<bool>(),
        prop::collection::vec(ws(), 1..2),
    )
        .prop_map(|(role, content, extra, content_first, spaces)| {
            let mut members = vec![("role".to_owned(), false, role)];
            if let Some(content) = content {
                members.push(("content".into(), false, content));
            }
            if let Some((key, value)) = extra {
                members.push((key, false, value));
            }
            if content_first {
                members.reverse();
            }
            object(members, spaces)
        })
}

/// A Messages body: `max_tokens`, `messages`, `system` as a string or blocks, `metadata`, and
/// the other top-level fields, in any order.
fn messages_body() -> impl Strategy<Value = String> {
    let top = prop_oneof![
        3 => (Just("model"), json_string()),
        1 => (Just("max_tokens"), prop::sample::select(vec!["-1", "1.5", "\"8\"", "null"]).prop_map(str::to_owned)),
        2 => (Just("system"), json_string()),
        2 => (Just("system"), (prop::collection::vec(part(), 0..3), ws()).prop_map(|(p, s)| array(p, s))),
        1 => (Just("system"), json()),
        2 => (Just("stream"), prop::sample::select(vec!["true", "false", "null", "1"]).prop_map(str::to_owned)),
        2 => (Just("metadata"), prop_oneof![json_string().prop_map(|id| format!("{{\"user_id\":{id}}}")), json()]),
        2 => (Just("tools"), (prop::collection::vec(json(), 0..3), ws()).prop_map(|(t, s)| array(t, s))),
        2 => (Just("temperature"), scalar()),
    ];
    (
        prop::collection::vec(turn(), 0..5),
        prop::collection::vec((top, any::<bool>()), 0..5),
        prop::sample::select(vec!["8", "1024", "0"]),
        any::<usize>(),
        prop::collection::vec(ws(), 1..3),
    )
        .prop_map(|(turns, others, max_tokens, at, spaces)| {
            let mut members: Vec<(String, bool, String)> = others
                .into_iter()
                .map(|((k, v), escaped)| (k.to_owned(), escaped, v))
                .collect();
            members.insert(
                at % (members.len() + 1),
                ("max_tokens".to_owned(), false, max_tokens.to_owned()),
            );
            let turns = ("messages".to_owned(), false, array(turns, ""));
            members.insert(at % (members.len() + 1), turns);
            object(members, spaces)
        })
}

/// A Responses input item: a message, a function call or its output, reasoning, a built-in
/// tool's call or output, a reference, or a type the router cannot read; members in any order,
/// sometimes repeated, sometimes of the wrong kind.
fn input_item() -> impl Strategy<Value = String> {
    let kind = prop_oneof![
        12 => prop::sample::select(vec![
            "message",
            "message",
            "function_call",
            "function_call_output",
            "custom_tool_call_output",
            "reasoning",
            "mcp_call",
            "file_search_call",
            "shell_call_output",
            "item_reference",
            "web_search_call",
            "mystery",
        ])
        .prop_map(|k| string(k, false)),
        1 => json(),
    ];
    let parts = |kinds: Vec<&'static str>| {
        (
            prop::collection::vec((prop::sample::select(kinds), json_string()), 0..3),
            ws(),
        )
            .prop_map(|(parts, s)| {
                let parts = parts
                    .into_iter()
                    .map(|(kind, text)| {
                        object(
                            vec![
                                ("type".into(), false, string(kind, false)),
                                ("text".into(), false, text),
                            ],
                            vec![""],
                        )
                    })
                    .collect();
                array(parts, s)
            })
    };
    let entries = (prop::collection::vec(json_string(), 0..3), ws()).prop_map(|(texts, s)| {
        let entries = texts
            .into_iter()
            .map(|t| {
                object(
                    vec![
                        ("text".into(), false, t.clone()),
                        ("stdout".into(), false, t),
                    ],
                    vec![""],
                )
            })
            .collect();
        array(entries, s)
    });
    (
        prop::option::weighted(0.9, kind),
        prop::option::weighted(0.8, role_again()),
        prop::option::weighted(0.8, content()),
        prop::option::weighted(0.5, json_string()),
        prop::option::weighted(
            0.4,
            prop_oneof![
                json_string(),
                parts(vec!["input_text", "output_text", "input_image", "mystery"]),
                json()
            ],
        ),
        prop::option::weighted(0.3, parts(vec!["summary_text", "reasoning_text", "text"])),
        prop::option::weighted(0.2, entries),
        prop::option::weighted(0.15, (key(), json())),
        any::<u64>(),
        prop::collection::vec(ws(), 1..3),
    )
        .prop_map(
            |(kind, role, content, call_id, output, summary, results, extra, order, spaces)| {
                let mut members = Vec::new();
                if let Some(kind) = kind {
                    members.push(("type".to_owned(), order % 7 == 0, kind));
                }
                if let Some(role) = role {
                    members.push(("role".into(), false, role));
                }
                if let Some(content) = content {
                    members.push(("content".into(), false, content));
                }
                if let Some(id) = call_id {
                    members.push(("call_id".into(), false, id));
                }
                if let Some(output) = output {
                    members.push(("output".into(), false, output));
                }
                if let Some(summary) = summary {
                    members.push(("summary".into(), false, summary));
                }
                if let Some(results) = results {
                    let key = if order % 2 == 0 { "results" } else { "output" };
                    members.push((key.into(), false, results));
                }
                if let Some((key, value)) = extra {
                    members.push((key, false, value));
                }
                let len = members.len().max(1);
                members.rotate_left(usize::try_from(order).unwrap_or(0) % len);
                object(members, spaces)
            },
        )
}

/// A Responses body: `input` as a string or items, `instructions`, `previous_response_id`,
/// `conversation`, `store` and the other top-level fields, in any order and sometimes repeated.
fn responses_body() -> impl Strategy<Value = String> {
    let top = prop_oneof![
        3 => (Just("model"), json_string()),
        3 => (Just("instructions"), json_string()),
        1 => (Just("instructions"), json()),
        2 => (Just("previous_response_id"), json_string()),
        1 => (Just("previous_response_id"), json()),
        1 => (Just("conversation"), prop_oneof![json_string(), json()]),
        2 => (Just("store"), prop::sample::select(vec!["true", "false", "null", "0"]).prop_map(str::to_owned)),
        2 => (Just("stream"), prop::sample::select(vec!["true", "false", "null", "1"]).prop_map(str::to_owned)),
        2 => (Just("tools"), (prop::collection::vec(json(), 0..3), ws()).prop_map(|(t, s)| array(t, s))),
        2 => (Just("temperature"), scalar()),
        2 => (Just("metadata"), json()),
        1 => (Just("input"), json_string()),
    ];
    let input = prop_oneof![
        3 => json_string(),
        8 => (prop::collection::vec(input_item(), 0..5), ws()).prop_map(|(i, s)| array(i, s)),
        1 => json(),
    ];
    (
        prop::option::weighted(0.95, input),
        prop::collection::vec((top, any::<bool>()), 0..5),
        any::<usize>(),
        prop::collection::vec(ws(), 1..3),
    )
        .prop_map(|(input, others, at, spaces)| {
            let mut members: Vec<(String, bool, String)> = others
                .into_iter()
                .map(|((k, v), escaped)| (k.to_owned(), escaped, v))
                .collect();
            if let Some(input) = input {
                members.insert(at % (members.len() + 1), ("input".to_owned(), false, input));
            }
            object(members, spaces)
        })
}

/// A body spoiled: cut short, a byte changed, or something appended.
fn spoiled() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![body(), messages_body(), responses_body()],
        any::<usize>(),
        any::<u8>(),
        0..3u8,
    )
        .prop_map(|(body, at, byte, how)| {
            let mut bytes = body.into_bytes();
            let at = at % (bytes.len() + 1);
            match how {
                0 => bytes.truncate(at),
                1 => {
                    if let Some(b) = bytes.get_mut(at) {
                        *b = byte;
                    }
                }
                _ => bytes.extend_from_slice(b",}"),
            }
            bytes
        })
}

fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    check_borrowed(bytes).map_err(|e| {
        TestCaseError::fail(format!("{e}\n--- in\n{}", String::from_utf8_lossy(bytes)))
    })
}

#[test]
fn generated_bodies_are_often_read() {
    // Most written bodies must be read as chat requests, or the property would compare only
    // two refusals.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = body();
    let mut read = 0;
    for _ in 0..400 {
        let Ok(tree) = strategy.new_tree(&mut runner) else {
            continue;
        };
        let text = tree.current();
        let Some(body) = Borrowed::parse(text.as_bytes()) else {
            continue;
        };
        read += usize::from(RequestView::from_chat(&body, headers()).is_ok());
    }
    assert!(read >= 80, "only {read} of 400 generated bodies were read");
}

#[test]
fn generated_messages_bodies_are_often_read() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = messages_body();
    let mut read = 0;
    for _ in 0..400 {
        let Ok(tree) = strategy.new_tree(&mut runner) else {
            continue;
        };
        let text = tree.current();
        let Some(body) = Borrowed::parse(text.as_bytes()) else {
            continue;
        };
        read += usize::from(RequestView::from_messages(&body, headers()).is_ok());
    }
    assert!(
        read >= 80,
        "only {read} of 400 generated Messages bodies were read"
    );
}

#[test]
fn generated_responses_bodies_are_often_read() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = responses_body();
    let (mut read, mut items) = (0, 0);
    for _ in 0..400 {
        let Ok(tree) = strategy.new_tree(&mut runner) else {
            continue;
        };
        let text = tree.current();
        let Some(body) = Borrowed::parse(text.as_bytes()) else {
            continue;
        };
        if let Ok(view) = RequestView::from_responses(&body, headers()) {
            read += 1;
            items += usize::from(view.messages > 1 || view.tool_calls > 0);
        }
    }
    assert!(
        read >= 80,
        "only {read} of 400 generated Responses bodies were read"
    );
    assert!(items >= 20, "only {items} read bodies had items beyond one");
}

#[test]
fn a_repeated_key_counts_its_last_value() {
    let body =
        br#"{"messages":[{"role":"assistant","content":"a","role":"user"}],"model":1,"model":"m"}"#;
    let borrowed = Borrowed::parse(body).expect("JSON");
    let view = RequestView::from_chat(&borrowed, headers()).expect("a chat body");
    assert_eq!((view.prompt.as_str(), view.turns), ("a", 1));
    assert_eq!(view.model.as_deref(), Some("m"));
    assert!(check_borrowed(body).is_ok());
}

#[test]
fn every_kept_fuzz_input_reads_alike() {
    let inputs = corpus::of_target("request");
    assert!(!inputs.is_empty(), "fuzz/corpus/request is empty");
    for (path, bytes) in inputs {
        check_borrowed(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(corpus::cases(1000)))]

    #[test]
    fn written_bodies_read_alike(body in body()) {
        check(body.as_bytes())?;
    }

    #[test]
    fn written_messages_bodies_read_alike(body in messages_body()) {
        check(body.as_bytes())?;
    }

    #[test]
    fn written_responses_bodies_read_alike(body in responses_body()) {
        check(body.as_bytes())?;
    }

    #[test]
    fn spoiled_bodies_read_alike(bytes in spoiled()) {
        check(&bytes)?;
    }
}
