//! `src replay` against real endpoints: `src serve` on the built-in simulator, and tiny canned
//! upstreams for answers a healthy simulator never gives.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a failed step fails the test with its message"
)]

mod support;

use serde_json::Value;
use support::{canned_upstream, repo, src, write, Server};

fn replay(base_url: &str, fixture: &std::path::Path) -> (i32, Value) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.json");
    let output = src()
        .arg("replay")
        .arg(fixture)
        .args(["--base-url", base_url])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("src replay runs");
    let code = output.status.code().expect("an exit code");
    let report = std::fs::read_to_string(&out).unwrap_or_else(|_| {
        panic!(
            "no report; stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (
        code,
        serde_json::from_str(&report).expect("the report is JSON"),
    )
}

fn sessions() -> std::path::PathBuf {
    repo("examples/replay/sessions.json")
}

/// The example session without its `expect` keys, for endpoints that are not a router.
fn bare_sessions(dir: &std::path::Path) -> std::path::PathBuf {
    let mut fixture: Value =
        serde_json::from_str(&std::fs::read_to_string(sessions()).unwrap()).unwrap();
    for turn in fixture["sessions"][0]["turns"].as_array_mut().unwrap() {
        turn.as_object_mut().unwrap().remove("expect");
    }
    write(dir, "bare.json", &fixture.to_string())
}

#[test]
fn a_per_call_policy_that_escalates_inside_a_tool_loop_is_caught() {
    let server = Server::start(&repo("examples/replay/per-call"));
    let (code, report) = replay(&server.base_url(), &sessions());
    assert_eq!(code, 1, "{report:#}");
    let summary = &report["summary"];
    assert_eq!(summary["verified"], true);
    assert_eq!(summary["failed"], 0, "{report:#}");
    assert_eq!(summary["tool_loop_switches"], 1, "{report:#}");
    let turns = report["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 4);
    assert_eq!(turns[0]["x_sr_model"], "small");
    assert_eq!(turns[1]["x_sr_model"], "strong");
    assert_eq!(turns[1]["tool_loop"], true);
    assert_eq!(turns[1]["model"], "Qwen/Qwen3-8B");
    let violations = turns[1]["violations"].as_array().unwrap();
    assert!(
        violations
            .iter()
            .any(|v| v.as_str().unwrap().contains("inside a tool loop")),
        "{violations:?}"
    );
    // The simulator reports its prefix cache, so cached tokens are known.
    assert_eq!(summary["cached_tokens_unknown"], 0);
    assert!(turns[0]["cached_tokens"].is_u64());
}

#[test]
fn the_same_policy_with_a_protect_hold_passes() {
    let server = Server::start(&repo("examples/replay/protected"));
    let (code, report) = replay(&server.base_url(), &sessions());
    assert_eq!(code, 0, "{report:#}");
    let summary = &report["summary"];
    assert_eq!(
        (summary["failed"].as_u64(), summary["violations"].as_u64()),
        (Some(0), Some(0)),
        "{report:#}"
    );
    assert_eq!(summary["tool_loop_switches"], 0);
    let turns = report["turns"].as_array().unwrap();
    assert_eq!(turns[1]["x-sr-session"], "held");
    assert_eq!(turns[1]["x-sr-protection"], "tool call in flight");
    assert_eq!(turns[1]["x_sr_model"], "small");
    // Once the tool loop is over the switch is allowed, and it is not a violation.
    assert_eq!(turns[3]["x_sr_model"], "strong");
    assert_eq!(summary["switches"], 1);
}

#[test]
fn a_truncated_200_answer_makes_every_turn_a_failure() {
    const BODY: &str = r#"{"id":"x","object":"chat.completion","model":"m","choi"#;
    let addr = canned_upstream(BODY, BODY.len());
    let (code, report) = replay(&format!("http://{addr}/v1"), &sessions());
    assert_eq!(code, 1);
    let turns = report["turns"].as_array().unwrap();
    assert!(
        turns.iter().all(|t| t["ok"] == false && t["status"] == 200),
        "{report:#}"
    );
    assert_eq!(report["summary"]["failed"], 4);
    assert_eq!(report["summary"]["ok"], 0);
    // A body cut off below its announced length is a failure too.
    let cut = canned_upstream(BODY, BODY.len() + 100);
    let (code, report) = replay(&format!("http://{cut}/v1"), &sessions());
    assert_eq!(code, 1);
    assert_eq!(report["summary"]["failed"], 4, "{report:#}");
}

#[test]
fn usage_without_prompt_tokens_details_gives_null_cached_tokens() {
    const BODY: &str = r#"{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":40,"completion_tokens":3,"total_tokens":43}}"#;
    let addr = canned_upstream(BODY, BODY.len());
    let dir = tempfile::tempdir().unwrap();
    let (code, report) = replay(&format!("http://{addr}/v1"), &bare_sessions(dir.path()));
    assert_eq!(code, 0, "{report:#}");
    let turns = report["turns"].as_array().unwrap();
    assert!(turns
        .iter()
        .all(|t| t["cached_tokens"].is_null() && t["prompt_tokens"] == 40));
    assert_eq!(report["summary"]["cached_tokens_unknown"], 4);
    assert_eq!(report["summary"]["cached_tokens_known"], 0);
}

#[test]
fn a_streamed_turn_records_ttft_and_needs_done() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = write(
        dir.path(),
        "stream.json",
        r#"{"version": 1, "sessions": [{"id": "s", "turns": [
            {"request": {"model": "auto", "stream": true,
                         "stream_options": {"include_usage": true},
                         "messages": [{"role": "user", "content": "hello"}]}}]}]}"#,
    );
    let server = Server::start(&repo("examples/replay/protected"));
    let (code, report) = replay(&server.base_url(), &fixture);
    assert_eq!(code, 0, "{report:#}");
    let turn = &report["turns"][0];
    assert_eq!(turn["stream"], true);
    assert!(turn["ttft_ms"].is_f64(), "{turn}");
    assert!(turn["completion_tokens"].is_u64(), "{turn}");
    // A stream that is cut off before `[DONE]` is a failure.
    const CUT: &str =
        "data: {\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[]}\n\n";
    let addr = canned_upstream(CUT, CUT.len());
    let (code, report) = replay(&format!("http://{addr}/v1"), &fixture);
    assert_eq!(code, 1);
    assert_eq!(report["turns"][0]["ok"], false, "{report:#}");
}

#[test]
fn a_malformed_fixture_is_refused_with_its_json_path() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = write(
        dir.path(),
        "bad.json",
        r#"{"version": 1, "sessions": [{"id": "s", "turns": [
            {"request": {"model": "auto", "messages": [{"role": "user", "content": 3}]}}]}]}"#,
    );
    let output = src()
        .arg("replay")
        .arg(&fixture)
        .args(["--base-url", "http://127.0.0.1:9/v1"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("sessions[0].turns[0].request.messages[0].content"),
        "{stderr}"
    );
}

#[test]
fn a_dry_run_sends_nothing_and_claims_no_continuity() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plan.json");
    let output = src()
        .arg("replay")
        .arg(sessions())
        .args(["--dry-run", "--session-prefix", "p-"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("p-ci-parser"), "{stdout}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(report["summary"]["verified"], false);
    assert!(report["summary"]["switches"].is_null());
    assert!(report["summary"]["violations"].is_null());
    assert_eq!(report["summary"]["planned_turns"], 4);
}

#[test]
fn responses_turns_are_sent_to_the_responses_api_and_judged_as_responses() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = write(
        dir.path(),
        "responses.json",
        r#"{"version": 1, "sessions": [{"id": "r", "turns": [
            {"api": "responses", "request": {"model": "auto", "input": "hello there"},
             "expect": {"model": "small"}},
            {"api": "responses", "request": {"model": "auto", "stream": true, "input": "and again"}}]}]}"#,
    );
    let server = Server::start(&repo("examples/replay/protected"));
    let (code, report) = replay(&server.base_url(), &fixture);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["turns"][0]["model"], "Qwen/Qwen3-0.6B");
    assert_eq!(report["turns"][1]["ok"], true);
    assert_eq!(report["turns"][1]["x_sr_model"], "small");
    // A chat completion is not an answer to a Responses request.
    const CHAT: &str = r#"{"object":"chat.completion","model":"m","choices":[{"message":{"role":"assistant","content":"x"}}]}"#;
    let addr = canned_upstream(CHAT, CHAT.len());
    let (code, report) = replay(&format!("http://{addr}/v1"), &fixture);
    assert_eq!(code, 1);
    assert_eq!(report["summary"]["failed"], 2, "{report:#}");
}
