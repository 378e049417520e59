//! `src serve --record` and `src whatif`: traffic recorded by a real server, decided again
//! offline under the same and under changed policies.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a failed step fails the test with its message"
)]

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::{Child, Stdio};
use support::{repo, src, write};

/// `src serve --record DIR` on free ports.
struct Recording {
    child: Child,
    base_url: String,
}

impl Recording {
    fn start(policy: &Path, dir: &Path) -> Recording {
        use std::io::BufRead;
        let mut child = src()
            .arg("serve")
            .arg(policy)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--admin",
                "127.0.0.1:0",
                "--no-watch",
            ])
            .arg("--record")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = loop {
            let line = lines.next().expect("src serve logs its address").unwrap();
            if let Some(addr) = serde_json::from_str::<Value>(&line)
                .ok()
                .and_then(|v| v["fields"]["listen"].as_str().map(String::from))
            {
                break addr;
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Recording {
            child,
            base_url: format!("http://{addr}/v1"),
        }
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn recorded_lines(dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        lines.extend(text.lines().map(String::from));
    }
    lines
}

/// Records the example session (sent with an API key) through the protected policy.
fn record(dir: &Path) {
    let server = Recording::start(&repo("examples/replay/protected"), dir);
    let status = src()
        .arg("replay")
        .arg(repo("examples/replay/sessions.json"))
        .args(["--base-url", &server.base_url])
        .args(["--header", "authorization=Bearer sk-recorded-secret"])
        .args(["--header", "x-api-key=key-recorded-secret"])
        .output()
        .unwrap()
        .status;
    assert!(status.success());
    // The writer thread appends behind the answers; wait for it (bounded).
    for _ in 0..400 {
        if recorded_lines(dir).len() >= 4 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    assert_eq!(recorded_lines(dir).len(), 4);
}

fn whatif(dir: &Path, policy: &Path) -> (i32, Value) {
    let output = src()
        .arg("whatif")
        .arg(dir)
        .arg("--policy")
        .arg(policy)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("no report: {}", String::from_utf8_lossy(&output.stderr)));
    (output.status.code().unwrap(), report)
}

#[test]
fn a_recording_never_holds_credentials() {
    let dir = tempfile::tempdir().unwrap();
    record(dir.path());
    let lines = recorded_lines(dir.path());
    assert!(
        lines.iter().all(|l| !l.contains("recorded-secret")),
        "{lines:?}"
    );
    let first: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(first["decision"]["model"], "small");
    assert_eq!(first["signals"]["trouble"], false);
    let second: Value = serde_json::from_str(&lines[1]).unwrap();
    assert_eq!(second["session"]["state"], "held");
    assert_eq!(second["session"]["protection"], "tool call in flight");
}

#[test]
fn the_same_policy_changes_nothing_and_a_changed_one_reports_exactly_its_changes() {
    let dir = tempfile::tempdir().unwrap();
    record(dir.path());
    let (code, same) = whatif(dir.path(), &repo("examples/replay/protected"));
    assert_eq!(code, 0, "{same:#}");
    assert_eq!(
        (same["records"].as_u64(), same["changed"].as_u64()),
        (Some(4), Some(0))
    );
    assert!(same["undecided"].as_array().unwrap().is_empty());

    // Without the pin, the two tool-loop calls the hold kept on `small` go to `strong`.
    let (code, per_call) = whatif(dir.path(), &repo("examples/replay/per-call"));
    assert_eq!(code, 1, "{per_call:#}");
    assert_eq!(per_call["changed_records"], serde_json::json!([1, 2]));
    let changes = per_call["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{per_call:#}");
    assert_eq!(changes[0]["count"], 2);
    assert_eq!(changes[0]["from"]["model"], "small");
    assert_eq!(changes[0]["to"]["model"], "strong");
    assert_eq!(changes[0]["to"]["route"], "debugging");
    assert_eq!(per_call["continuity"]["switches_mid_tool_loop"], 2);
    assert_eq!(
        per_call["continuity"]["sessions_broken"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // A new block refuses every call whose history shows a traceback.
    let policy_dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(repo("examples/replay/protected/policy.sr")).unwrap();
    write(
        policy_dir.path(),
        "policy.sr",
        &format!("{text}\nblock tracebacks {{\n  when trouble\n  status = 422\n}}\n"),
    );
    let (code, blocked) = whatif(dir.path(), policy_dir.path());
    assert_eq!(code, 0, "{blocked:#}");
    assert_eq!(blocked["changed_records"], serde_json::json!([1, 2, 3]));
    assert_eq!(blocked["new_blocks"], 3);
}
