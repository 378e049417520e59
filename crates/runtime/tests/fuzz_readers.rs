//! Fuzzing the runtime's readers of untrusted bytes (the properties are in
//! `fuzz_support/mod.rs`): the request intake, the usage reader of upstream event streams
//! under every way of cutting the same bytes, and the reader of Envoy's `ext_proc` messages.
//! Inputs: the coverage-guided targets' kept corpora (`fuzz/corpus/{request,sse,extproc}/`),
//! arbitrary bytes, streams made of SSE's own pieces (field names, line ends of all three
//! kinds, `[DONE]`, usage objects) so the reader's every branch is reached, `ext_proc`
//! messages built from header maps of pseudo-headers, valid and invalid names and values, and
//! Responses bodies whose top level the turn reader must read as a `Value` does.
//!
//! `PROPTEST_CASES` raises the case count for a long search.

mod fuzz_support;

use fuzz_support::{check_extproc, check_intake, check_stream, check_turn, pieces, scan};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn cases(ci: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ci)
}

/// The committed corpus of a fuzz target, sorted by path.
fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter_map(|p| Some((p.clone(), std::fs::read(&p).ok()?)))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    assert!(!files.is_empty(), "no corpus under {}", dir.display());
    files
}

/// Pieces of event streams, well formed and not.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    let fixed = prop::sample::select(vec![
        "data: ",
        "data:",
        "data",
        "dataset: x",
        "event: response.completed",
        ": keep-alive",
        "id: 1",
        "retry: 10",
        "\n",
        "\n\n",
        "\r",
        "\r\n",
        "\r\n\r\n",
        "[DONE]",
        " [DONE] ",
        "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}],\"object\":\"chat.completion.chunk\"}",
        "{\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}",
        "{\"usage\":null}",
        "{\"response\":{\"usage\":{\"input_tokens\":9,\"input_tokens_details\":{\"cached_tokens\":8}}}}",
        "\"usage\"",
        "{",
        "}",
        "é",
        "\u{feff}",
    ])
    .prop_map(|s| s.as_bytes().to_vec());
    prop_oneof![
        6 => fixed,
        1 => prop::collection::vec(any::<u8>(), 0..8),
    ]
}

fn stream() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(piece(), 0..40).prop_map(|ps| ps.concat())
}

#[test]
fn every_kept_stream_holds_the_property() {
    let failures: Vec<String> = corpus("sse")
        .iter()
        .filter_map(|(path, data)| {
            let (sizes, stream) = data.split_at(data.len().min(8));
            check_stream(stream, sizes)
                .err()
                .map(|e| format!("{}: {e}", path.display()))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_kept_request_holds_the_property() {
    let failures: Vec<String> = corpus("request")
        .iter()
        .filter_map(|(path, bytes)| {
            check_intake(bytes)
                .err()
                .map(|e| format!("{}: {e}", path.display()))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn pieces_cover_the_stream_in_order() {
    let stream = b"data: [DONE]\n\n";
    for sizes in [&[][..], &[0], &[1], &[3, 5], &[255]] {
        let cut = pieces(stream, sizes);
        assert_eq!(cut.concat(), stream, "{sizes:?}");
        assert!(cut.iter().all(|p| !p.is_empty()), "{sizes:?}");
    }
    // 14 bytes in pieces of 3, 5, 3 and the last 3.
    assert_eq!(pieces(stream, &[3, 5]).len(), 4);
}

#[test]
fn a_stream_cut_anywhere_keeps_its_usage_and_done() {
    // The reading the properties compare must itself be right, or equal readings mean little.
    let stream = b"data: {\"usage\":{\"prompt_tokens\":3}}\r\n\r\ndata: [DONE]\r";
    for sizes in [&[][..], &[1], &[2, 7]] {
        let reading = scan(pieces(stream, sizes));
        assert_eq!(reading.usage.and_then(|u| u.prompt_tokens), Some(3));
        assert!(reading.done, "{sizes:?}");
        assert_eq!((reading.events, reading.malformed), (2, 0), "{sizes:?}");
    }
}

#[test]
fn every_kept_extproc_message_holds_the_property() {
    let failures: Vec<String> = corpus("extproc")
        .iter()
        .filter_map(|(path, bytes)| {
            check_extproc(bytes)
                .err()
                .map(|e| format!("{}: {e}", path.display()))
        })
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

/// One `ext_proc` header entry: a name (pseudo, ordinary, or one `http` refuses) and a value in
/// `raw_value` or in the older `value`.
fn envoy_header() -> impl Strategy<Value = envoy_types::pb::envoy::config::core::v3::HeaderValue> {
    let key = prop_oneof![
        prop::sample::select(vec![
            ":method",
            ":path",
            ":status",
            ":authority",
            ":scheme",
            "content-type",
            "x-sr-route",
            "x-selected-model",
            "bad name",
            "",
            "X-Upper",
            "\u{e9}t\u{e9}",
        ])
        .prop_map(str::to_owned),
        "[ -~]{0,12}",
    ];
    let value = prop_oneof![
        prop::sample::select(vec![
            "POST",
            "/v1/chat/completions?x=1",
            "/v1/responses",
            "503",
            " 200 ",
            "",
            "a\r\nb",
            "??",
            "/?",
            "text/event-stream",
        ])
        .prop_map(|v| v.as_bytes().to_vec()),
        prop::collection::vec(any::<u8>(), 0..16),
    ];
    (key, value, any::<bool>()).prop_map(|(key, value, raw)| {
        envoy_types::pb::envoy::config::core::v3::HeaderValue {
            key,
            value: if raw {
                String::new()
            } else {
                String::from_utf8_lossy(&value).into_owned()
            },
            raw_value: if raw { value } else { Vec::new() },
        }
    })
}

/// A request or response headers message carrying `headers`, encoded.
fn extproc_message() -> impl Strategy<Value = Vec<u8>> {
    use envoy_types::pb::envoy::config::core::v3::HeaderMap;
    use envoy_types::pb::envoy::service::ext_proc::v3::processing_request::Request;
    use envoy_types::pb::envoy::service::ext_proc::v3::{HttpHeaders, ProcessingRequest};
    use prost::Message as _;
    (prop::collection::vec(envoy_header(), 0..8), any::<bool>()).prop_map(|(headers, response)| {
        let headers = HttpHeaders {
            headers: Some(HeaderMap { headers }),
            ..HttpHeaders::default()
        };
        ProcessingRequest {
            request: Some(if response {
                Request::ResponseHeaders(headers)
            } else {
                Request::RequestHeaders(headers)
            }),
            ..ProcessingRequest::default()
        }
        .encode_to_vec()
    })
}

/// A member value of a Responses body's top level: what the turn reader reads (`store`,
/// `previous_response_id`, `input`) in every kind, and others, written with whitespace, escapes
/// and number notations a re-serialised tree would not keep.
fn turn_value() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "true",
        "false",
        "null",
        "0",
        "1.50",
        "-0",
        "1e3",
        "\"resp_1\"",
        "\"  resp_\\u0031 \"",
        "\"   \"",
        "\"hi \\\"you\\\" \\u00e9\"",
        "[]",
        "[ {\"role\" : \"user\", \"content\" : \"a\"} ]",
        "[{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"ok\"}, \"x\", 2, [ ]]",
        "{\"a\": {\"b\": [1, 2.0]}}",
        "[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"t\\n\"}]},{}]",
    ])
    .prop_map(str::to_owned)
}

/// A Responses body's top level: members in any order, keys repeated and escaped.
fn turn_body() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        "\"store\"",
        "\"previous_response_id\"",
        "\"input\"",
        "\"inp\\u0075t\"",
        "\"model\"",
        "\"instructions\"",
        "\"a\\\"b\"",
    ]);
    (
        prop::collection::vec((key, turn_value()), 0..6),
        prop::sample::select(vec!["", " ", "\n\t"]),
    )
        .prop_map(|(members, space)| {
            let members: Vec<String> = members
                .into_iter()
                .map(|(k, v)| format!("{space}{k}{space}:{space}{v}{space}"))
                .collect();
            format!("{{{}}}", members.join(","))
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(2000)))]

    #[test]
    fn any_extproc_message_reads_its_headers_as_sent(bytes in extproc_message()) {
        if let Err(e) = check_extproc(&bytes) {
            return Err(TestCaseError::fail(format!("{e}\n--- in\n{bytes:?}")));
        }
    }

    #[test]
    fn any_bytes_as_an_extproc_message_are_refused_or_read(
        bytes in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        if let Err(e) = check_extproc(&bytes) {
            return Err(TestCaseError::fail(format!("{e}\n--- in\n{bytes:?}")));
        }
    }

    #[test]
    fn any_stream_reads_the_same_however_it_is_cut(
        stream in stream(),
        sizes in prop::collection::vec(any::<u8>(), 0..8),
    ) {
        if let Err(e) = check_stream(&stream, &sizes) {
            return Err(TestCaseError::fail(format!("{e}\n--- in\n{:?}", String::from_utf8_lossy(&stream))));
        }
    }

    #[test]
    fn any_bytes_read_the_same_however_they_are_cut(
        stream in prop::collection::vec(any::<u8>(), 0..512),
        sizes in prop::collection::vec(any::<u8>(), 0..8),
    ) {
        if let Err(e) = check_stream(&stream, &sizes) {
            return Err(TestCaseError::fail(format!("{e}\n--- in\n{stream:?}")));
        }
    }

    #[test]
    fn a_responses_turn_reads_as_its_value(body in turn_body()) {
        let value = serde_json::from_str::<serde_json::Value>(&body).ok();
        prop_assert!(value.is_some(), "not JSON: {}", body);
        if let Err(e) = check_turn(body.as_bytes(), value.as_ref()) {
            return Err(TestCaseError::fail(format!("{e}\n--- in\n{body}")));
        }
    }

    #[test]
    fn any_body_is_a_request_or_a_client_error(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Err(e) = check_intake(&bytes) {
            return Err(TestCaseError::fail(format!("{e}\n--- in\n{bytes:?}")));
        }
    }
}
