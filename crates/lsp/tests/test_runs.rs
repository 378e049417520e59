//! `src.runTests` runs off the server thread: requests sent during a run are answered before
//! it ends, and cancelling it or shutting the server down answers it at once.
//!
//! A run hook holds each run until the test lets it go, so "during a run" is a fact, not a
//! matter of timing: were the run on the server thread, the hook would block that thread and
//! the hover below would never be answered.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "helpers outside `#[test]` functions fail the test on an unexpected error"
)]

mod support;

use crossbeam_channel::{Receiver, Sender};
use lsp_server::ErrorCode;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use support::{utf16_position, Client};

const PROVIDERS: &str = r#"backend sim { url = "http://127.0.0.1:8000/v1"  simulated = true }
model small  { backend = sim  serves = "Qwen/Qwen3-0.6B" }
model strong { backend = sim  serves = "Qwen/Qwen3-8B" }
"#;

const ROUTING: &str = r#"signal code_talk = contains(prompt, ["segfault"])
route coding priority 10 { when code_talk  to strong }
route default { to small }
test crash { prompt = "segfault"  expect coding model strong }
test chat { prompt = "hello"  expect default }
"#;

const WAIT: Duration = Duration::from_secs(30);

/// A server whose test runs each wait for a release; `started` hears of each run as it starts.
struct Gated {
    client: Client,
    started: Receiver<()>,
    release: Sender<()>,
}

fn gated() -> Gated {
    let (started_tx, started) = crossbeam_channel::unbounded();
    let (release, released) = crossbeam_channel::unbounded::<()>();
    let hook = move || {
        let _ = started_tx.send(());
        // Returns when released, or when the test is over and the sender gone.
        let _ = released.recv();
    };
    let config = src_lsp::Config {
        run_hook: Some(src_lsp::RunHook(Arc::new(hook))),
        ..Default::default()
    };
    let client = Client::start_with(
        &[("providers.sr", PROVIDERS), ("routing.sr", ROUTING)],
        json!({}),
        config,
    );
    Gated {
        client,
        started,
        release,
    }
}

fn run_all(c: &mut Client) -> lsp_server::RequestId {
    let uri = c.uri("routing.sr");
    c.send_request(
        "workspace/executeCommand",
        json!({"command": "src.runTests", "arguments": [uri]}),
    )
}

#[test]
fn requests_are_answered_while_the_tests_run() {
    let Gated {
        client: mut c,
        started,
        release,
    } = gated();
    c.open("routing.sr", ROUTING);
    let _ = c.diagnostics("routing.sr");

    let run = run_all(&mut c);
    started.recv_timeout(WAIT).expect("the run starts");
    let at = ROUTING.find("to strong").unwrap() + 4;
    let hover = c.request(
        "textDocument/hover",
        c.at("routing.sr", utf16_position(ROUTING, at)),
    );
    assert!(
        hover["contents"]["value"]
            .as_str()
            .unwrap()
            .contains("Qwen/Qwen3-8B"),
        "{hover}"
    );
    let completion = c.request(
        "textDocument/completion",
        c.at("routing.sr", utf16_position(ROUTING, at)),
    );
    assert!(completion.as_array().is_some_and(|a| !a.is_empty()));
    assert!(
        !c.responses.iter().any(|r| r.id == run),
        "the run answered before it was let go"
    );

    release.send(()).unwrap();
    let result = c.response(&run).response_result.expect("the run succeeds");
    assert_eq!(
        (result["passed"].as_u64(), result["failed"].as_u64()),
        (Some(4), Some(0)),
        "{result}"
    );
    let shown: Vec<&str> = c
        .inbox
        .iter()
        .filter(|n| n.method == "window/showMessage")
        .filter_map(|n| n.params["message"].as_str())
        .collect();
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(shown[0].contains("4 passed, 0 failed"), "{shown:?}");
    c.shutdown();
}

#[test]
fn shutdown_answers_a_run_in_flight_and_exit_does_not_wait_for_it() {
    let Gated {
        client: mut c,
        started,
        release,
    } = gated();
    c.open("routing.sr", ROUTING);
    let run = run_all(&mut c);
    started.recv_timeout(WAIT).expect("the run starts");

    let shutdown = c.request_raw("shutdown", serde_json::Value::Null);
    assert!(shutdown.response_result.is_ok(), "{shutdown:?}");
    let answer = c.response(&run);
    let error = answer.response_result.expect_err("the run is cancelled");
    assert_eq!(error.code, ErrorCode::RequestCanceled as i32);
    // The server thread ends while the run is still held.
    c.exit();
    drop(release);
}

#[test]
fn a_cancelled_run_is_answered_at_once() {
    let Gated {
        client: mut c,
        started,
        release,
    } = gated();
    c.open("routing.sr", ROUTING);
    let run = run_all(&mut c);
    started.recv_timeout(WAIT).expect("the run starts");
    let id: i32 = run.to_string().parse().unwrap();
    c.notify("$/cancelRequest", json!({ "id": id }));
    let answer = c.response(&run);
    let error = answer.response_result.expect_err("the run is cancelled");
    assert_eq!(error.code, ErrorCode::RequestCanceled as i32);

    // A later run still works.
    release.send(()).unwrap();
    let again = run_all(&mut c);
    started.recv_timeout(WAIT).expect("the second run starts");
    release.send(()).unwrap();
    let result = c
        .response(&again)
        .response_result
        .expect("the run succeeds");
    assert_eq!(result["passed"].as_u64(), Some(4), "{result}");
    assert!(
        !c.responses.iter().any(|r| r.id == run),
        "a cancelled run was answered twice"
    );
    c.shutdown();
}
