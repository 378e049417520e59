//! `src check POLICY --envoy FILE`: the policy against the Envoy config that deploys it, with the
//! shipped `deploy/envoy/` configs and variants of them.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a failed step fails the test with its message"
)]

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn shipped(name: &str) -> PathBuf {
    repo().join("deploy/envoy").join(name)
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
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.sr"), format!("{MODELS}{text}")).unwrap();
    let models = dir.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    for name in ["shield", "domain"] {
        let from = repo().join("tests/corpus/check/fixtures/models").join(name);
        std::fs::create_dir_all(models.join(name)).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, models.join(name).join(path.file_name().unwrap())).unwrap();
        }
    }
    dir
}

/// `src check --format json`: the exit code and the codes of the diagnostics, in order.
fn check(dir: &Path, envoy: &Path, env: &[(&str, &str)], extra: &[&str]) -> (i32, Vec<Value>) {
    let mut command = Command::cargo_bin("src").unwrap();
    command
        .env_remove("SRC_MODEL_TIMEOUT_MS")
        .envs(env.iter().copied())
        .args(["check", "--format", "json"])
        .arg(dir)
        .arg("--envoy")
        .arg(envoy)
        .args(extra);
    let output = command.output().unwrap();
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
    let file = dir.path().join("envoy.yaml");
    std::fs::write(&file, config).unwrap();
    let (_, found) = check(dir.path(), &file, &[], &[]);
    assert_eq!(codes(&found), Vec::<&str>::new());
}

#[test]
fn a_config_without_ext_proc_is_unusable_input() {
    let dir = policy("route default { to small }\n");
    let file = dir.path().join("plain.yaml");
    std::fs::write(&file, "static_resources: { listeners: [] }\n").unwrap();
    let output = Command::cargo_bin("src")
        .unwrap()
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
