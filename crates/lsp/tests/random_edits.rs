//! Random edits never stop the server: insertions and deletions of policy tokens at random
//! positions (including positions inside UTF-16 surrogate pairs and past the end), each followed
//! by every kind of request at a random position, which must all be answered without error.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "helpers outside `#[test]` functions fail the test on an unexpected error"
)]

mod support;

use lsp_types::Position;
use proptest::prelude::*;
use serde_json::json;
use support::Client;

const START: &str = "# é中😀\nclassifier domain { path = \"m\"  labels = [math, code] }\nsignal topic = domain(prompt)\nroute r priority 1 { when topic is math and contains(prompt, [\"😀\"])  to small }\nroute default { to small }\nmodel small { backend = b  serves = \"x\" }\nbackend b { url = \"http://h\" simulated = true }\ntest t { prompt = \"é\"  given topic = math  expect r }\n";

const TOKENS: &[&str] = &[
    "route", "signal", "{", "}", "(", ")", "[", "]", "=", "==", "\"", "#", "when", "to", "is",
    "in", "else", "priority", "😀", "é", "中", "\n", " ", "topic", "domain", "2k", "10m", ",", ".",
    "request.", "??", "test", "expect", "given", "\\", "-", "0.5",
];

#[derive(Debug, Clone)]
enum Edit {
    /// Insert a token at (line, UTF-16 column), both possibly out of range.
    Insert(u32, u32, usize),
    /// Delete `len` UTF-16 units from (line, column).
    Delete(u32, u32, u32),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (0u32..12, 0u32..90, 0..TOKENS.len()).prop_map(|(l, c, t)| Edit::Insert(l, c, t)),
        (0u32..12, 0u32..90, 1u32..6).prop_map(|(l, c, n)| Edit::Delete(l, c, n)),
    ]
}

const REQUESTS: &[&str] = &[
    "textDocument/hover",
    "textDocument/definition",
    "textDocument/completion",
    "textDocument/references",
    "textDocument/prepareRename",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn the_server_answers_every_request_after_any_edit(
        edits in prop::collection::vec((edit(), 0u32..12, 0u32..90), 1..12)
    ) {
        let mut c = Client::start(&[]);
        c.open("p.sr", START);
        let uri = c.uri("p.sr");
        for (version, (e, line, col)) in edits.into_iter().enumerate() {
            let change = match e {
                Edit::Insert(l, ch, t) => json!({
                    "range": {"start": Position::new(l, ch), "end": Position::new(l, ch)},
                    "text": TOKENS[t],
                }),
                Edit::Delete(l, ch, n) => json!({
                    "range": {"start": Position::new(l, ch), "end": Position::new(l, ch + n)},
                    "text": "",
                }),
            };
            c.notify("textDocument/didChange", json!({
                "textDocument": {"uri": uri, "version": version as i32 + 2},
                "contentChanges": [change],
            }));
            let at = c.at("p.sr", Position::new(line, col));
            for method in REQUESTS {
                let mut params = at.clone();
                if *method == "textDocument/references" {
                    params["context"] = json!({"includeDeclaration": true});
                }
                let r = c.request_raw(method, params);
                prop_assert!(r.response_result.is_ok(), "{method} failed: {r:?}");
            }
            let doc = json!({"textDocument": {"uri": uri}});
            for method in ["textDocument/documentSymbol", "textDocument/codeLens"] {
                let r = c.request_raw(method, doc.clone());
                prop_assert!(r.response_result.is_ok(), "{method} failed: {r:?}");
            }
            let mut format = doc.clone();
            format["options"] = json!({"tabSize": 2, "insertSpaces": true});
            let r = c.request_raw("textDocument/formatting", format);
            prop_assert!(r.response_result.is_ok(), "formatting failed: {r:?}");
            let mut actions = doc.clone();
            actions["range"] = json!({"start": Position::new(0, 0), "end": Position::new(line, col)});
            actions["context"] = json!({"diagnostics": []});
            let r = c.request_raw("textDocument/codeAction", actions);
            prop_assert!(r.response_result.is_ok(), "codeAction failed: {r:?}");
            let mut rename = at.clone();
            rename["newName"] = json!("fresh_name");
            // A rename may be refused (nothing there) but must be answered.
            let _ = c.request_raw("textDocument/rename", rename);
        }
        // The last change is checked and published too.
        let _ = c.diagnostics("p.sr");
        c.shutdown();
    }
}
