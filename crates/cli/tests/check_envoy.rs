//! `src check POLICY --envoy FILE`: the policy against the Envoy config that deploys it, with the
//! shipped `deploy/envoy/` configs and variants of them.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a failed step fails the test with its message"
)]

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use support::{copy_files, manifest_text, policy_dir, repo, src, write};

fn shipped(name: &str) -> PathBuf {
    repo("deploy/envoy").join(name)
}

/// The quickstart's models, which the shipped configs route.
const MODELS: &str = r#"
backend gpu { url = "http://127.0.0.1:8000/v1" }
model small  { backend = gpu  serves = "Qwen/Qwen3-0.6B" }
model strong { backend = gpu  serves = "Qwen/Qwen3-8B" }
"#;

/// A policy in a directory holding the checker's fixture models (a guard `shield`, a
/// classifier `domain`).
fn policy(text: &str) -> tempfile::TempDir {
    let dir = policy_dir(&format!("{MODELS}{text}"));
    for name in ["shield", "domain"] {
        copy_files(
            &repo("tests/corpus/check/fixtures/models").join(name),
            &dir.path().join("models").join(name),
        );
    }
    dir
}

/// `src check --format json`: the exit code and the codes of the diagnostics, in order.
fn check(dir: &Path, envoy: &Path, env: &[(&str, &str)], extra: &[&str]) -> (i32, Vec<Value>) {
    let output = src()
        .env_remove("SRC_MODEL_TIMEOUT_MS")
        .envs(env.iter().copied())
        .args(["check", "--format", "json"])
        .arg(dir)
        .arg("--envoy")
        .arg(envoy)
        .args(extra)
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    let diagnostics = doc["diagnostics"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|d| d["code"].as_str().is_some_and(|c| c.starts_with("W02")))
        .collect();
    (output.status.code().unwrap_or(-1), diagnostics)
}

fn codes(diagnostics: &[Value]) -> Vec<&str> {
    diagnostics
        .iter()
        .filter_map(|d| d["code"].as_str())
        .collect()
}

#[test]
fn a_block_behind_a_fail_open_gateway_is_warned_about() {
    let dir = policy(
        r#"
signal secret = matches(prompt, "sk-[A-Za-z0-9]{8,}")
block credential { when secret  status = 422 }
route default { to small }
"#,
    );
    let (code, found) = check(dir.path(), &shipped("fail-open.yaml"), &[], &[]);
    assert_eq!(code, 0, "warnings alone pass: {found:?}");
    assert_eq!(codes(&found), ["W020"]);
    let message = found[0]["message"].as_str().unwrap();
    assert!(message.contains("block `credential`"), "{message}");
    assert!(found[0]["help"]
        .as_str()
        .unwrap()
        .contains("failure_mode_allow: false"));

    let (code, _) = check(
        dir.path(),
        &shipped("fail-open.yaml"),
        &[],
        &["--deny-warnings"],
    );
    assert_eq!(code, 1);
    let (code, found) = check(dir.path(), &shipped("fail-closed.yaml"), &[], &[]);
    assert_eq!((code, codes(&found)), (0, vec![]));
}

#[test]
fn a_rule_on_the_caller_needs_fail_closed_too_and_plain_routing_does_not() {
    let dir = policy(
        r#"
route acme priority 10 { when header("x-tenant") == "acme"  to strong }
route default { to small }
"#,
    );
    let (_, found) = check(dir.path(), &shipped("fail-open.yaml"), &[], &[]);
    assert_eq!(codes(&found), ["W020"]);
    assert!(found[0]["message"]
        .as_str()
        .unwrap()
        .contains("route `acme`"));

    let dir = policy(
        r#"
route coding priority 10 { when contains(prompt, ["segfault"])  to strong }
route default { to small }
"#,
    );
    let (_, found) = check(dir.path(), &shipped("fail-open.yaml"), &[], &[]);
    assert_eq!(codes(&found), Vec::<&str>::new());
}

#[test]
fn model_signals_longer_than_the_message_timeout_are_warned_about() {
    let dir = policy(
        r#"
guard shield { path = "models/shield" }
signal attack = shield(prompt)
block jailbreak { when attack > 0.8 }
route default { to small }
"#,
    );
    // One model round of up to 2 s (the default model timeout) against Envoy's 200 ms.
    let (_, found) = check(dir.path(), &shipped("fail-closed.yaml"), &[], &[]);
    assert_eq!(codes(&found), ["W021"], "{found:?}");
    let message = found[0]["message"].as_str().unwrap();
    assert!(
        message.contains("2000 ms") && message.contains("200 ms"),
        "{message}"
    );

    let (_, found) = check(
        dir.path(),
        &shipped("fail-closed.yaml"),
        &[("SRC_MODEL_TIMEOUT_MS", "150")],
        &[],
    );
    assert_eq!(codes(&found), Vec::<&str>::new());

    // A longer timeout in the config (protobuf's object form) is enough too.
    let config = std::fs::read_to_string(shipped("fail-closed.yaml"))
        .unwrap()
        .replace(
            "message_timeout: \"0.200s\"",
            "message_timeout: { seconds: 3 }",
        );
    assert!(config.contains("{ seconds: 3 }"));
    let file = write(dir.path(), "envoy.yaml", &config);
    let (_, found) = check(dir.path(), &file, &[], &[]);
    assert_eq!(codes(&found), Vec::<&str>::new());
}

#[test]
fn a_config_without_ext_proc_is_unusable_input() {
    let dir = policy("route default { to small }\n");
    let file = write(
        dir.path(),
        "plain.yaml",
        "static_resources: { listeners: [] }\n",
    );
    let output = src()
        .arg("check")
        .arg(dir.path())
        .arg("--envoy")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no `envoy.filters.http.ext_proc`"));
}

#[test]
fn one_warning_per_filter_names_the_first_route_over_and_the_longest_wait() {
    let dir = policy(
        r#"
guard shield { path = "models/shield" }
classifier domain { path = "models/domain"  labels = [math, code, law, other] }
signal attack = shield(prompt)
signal topic = domain(prompt)
block jailbreak { when attack > 0.8 }
route maths priority 10 { when topic is math  to strong }
route default { to small }
"#,
    );
    let (_, found) = check(dir.path(), &shipped("fail-closed.yaml"), &[], &[]);
    assert_eq!(codes(&found), ["W021"], "{found:?}");
    let message = found[0]["message"].as_str().unwrap();
    assert!(
        message.contains("route `maths` can wait 4000 ms"),
        "{message}"
    );
    let help = found[0]["help"].as_str().unwrap();
    assert!(help.contains("at least 4.2s"), "{help}");
}

const TWO_BACKENDS: &str = r#"
backend fast { url = "http://127.0.0.1:8001/v1" }
backend big  { url = "http://127.0.0.1:8002/v1" }
model small  { backend = fast  serves = "org/small" }
model strong { backend = big   serves = "org/strong" }
route coding priority 10 { when contains(prompt, ["segfault"])  to strong }
route default { to small }
"#;

/// What `src manifest --format envoy` writes for the policy in `dir`, at `dir/NAME`, edited.
fn manifest(dir: &Path, name: &str, edit: impl Fn(String) -> String) -> PathBuf {
    write(dir, name, &edit(manifest_text(dir, "envoy", &[])))
}

#[test]
fn a_route_to_another_backend_or_to_none_is_warned_about() {
    let dir = policy_dir(TWO_BACKENDS);
    let generated = manifest(dir.path(), "generated.yaml", |t| t);
    let (code, found) = check(dir.path(), &generated, &[], &[]);
    assert_eq!((code, codes(&found)), (0, vec![]), "{found:?}");

    // `strong`'s route sent to `fast`'s cluster.
    let swapped = manifest(dir.path(), "swapped.yaml", |t| {
        assert_eq!(t.matches("cluster: backend_big\n").count(), 1, "{t}");
        t.replace("cluster: backend_big\n", "cluster: backend_fast\n")
    });
    let (code, found) = check(dir.path(), &swapped, &[], &[]);
    assert_eq!(code, 0, "warnings alone pass: {found:?}");
    assert_eq!(codes(&found), ["W022"], "{found:?}");
    let message = found[0]["message"].as_str().unwrap();
    for part in [
        "model `strong`",
        "`org/strong` on backend `big`",
        "route `big/org/strong`",
        "cluster `backend_fast` reaches 127.0.0.1:8001 (backend `fast`)",
        "not 127.0.0.1:8002",
    ] {
        assert!(message.contains(part), "`{part}` missing from: {message}");
    }
    assert!(found[0]["help"]
        .as_str()
        .unwrap()
        .contains("`x-selected-model: org/strong`"));
    let (code, _) = check(dir.path(), &swapped, &[], &["--deny-warnings"]);
    assert_eq!(code, 1);

    // No route for `strong`'s served id: the fail-closed fallthrough answers it.
    let unrouted = manifest(dir.path(), "unrouted.yaml", |t| {
        t.replace("exact: org/strong", "exact: org/other")
    });
    let (_, found) = check(dir.path(), &unrouted, &[], &[]);
    assert_eq!(codes(&found), ["W022"], "{found:?}");
    let message = found[0]["message"].as_str().unwrap();
    assert!(
        message.contains("route `unrouted`") && message.contains("Envoy answers itself (404)"),
        "{message}"
    );
}
