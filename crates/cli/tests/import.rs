//! `src import` as users run it: each fixture (a LiteLLM config, vLLM Semantic Router recipes)
//! becomes a policy that `src check`, `src test` (both engines) and `src fmt --check` accept,
//! with what was not translated in MIGRATION.md by file and line, secrets left as environment
//! references, and bad input refused with a clear message and exit code.

#![allow(
    clippy::expect_used,
    reason = "helpers outside `#[test]` functions fail the test on an unexpected error"
)]

use assert_cmd::Command;
use predicates::str::contains;
use std::path::{Path, PathBuf};

fn src() -> Command {
    Command::cargo_bin("src").expect("the src binary is built")
}

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import")
        .join(path)
}

/// Every file under `dir`, with its text.
fn files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read the output") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            let text = std::fs::read_to_string(&path).expect("read an output file");
            out.push((path, text));
        }
    }
    out
}

/// Imports `args` into a fresh directory, expecting `code`; returns the directory and stderr.
fn import(args: &[&str], code: i32) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("out");
    let assert = src()
        .arg("import")
        .args(args)
        .arg("--out")
        .arg(&out)
        .assert()
        .code(code);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    (dir, stderr)
}

/// The output checks, its tests pass on both engines (and there are some), and it is formatted.
fn verified(out: &Path, tests: usize) {
    src().arg("check").arg(out).assert().success();
    src()
        .arg("test")
        .arg(out)
        .assert()
        .success()
        .stdout(contains(format!("{} passed, 0 failed", tests * 2)));
    src().args(["fmt", "--check"]).arg(out).assert().success();
}

#[test]
fn a_litellm_config_becomes_a_checked_policy_whose_tests_pass() {
    let config = fixture("litellm/config.yaml");
    let (dir, stderr) = import(&["litellm", config.to_str().expect("utf-8 path")], 0);
    let out = dir.path().join("out");
    // One test per model name and per alias: fast-chat, smart, gpt-4, claude, local.
    verified(&out, 5);
    let policy = std::fs::read_to_string(out.join("policy.sr")).expect("policy.sr");
    // Deployments of one name: the first, then the others and the fallback names, in order.
    assert!(
        policy.contains(
            "to qwen_qwen3_0_6b else qwen_qwen3_0_6b_2, gpt_4o, claude_3_5_sonnet_20241022"
        ),
        "{policy}"
    );
    assert!(policy.contains("when body(\"model\") == \"smart\" or body(\"model\") == \"gpt-4\""));
    assert!(
        policy.contains("url = \"http://127.0.0.1:11434/v1\""),
        "ollama gets its /v1"
    );
    assert!(policy.contains("api = anthropic"));
    assert!(policy.contains("cooldown_after = 2"));
    assert!(policy.contains("cooldown = 45s"));
    assert!(policy.contains("context = 32000"));
    assert!(policy.contains("timeout = 90s"));
    // Keys are environment references: named ones as written, the provider's default when
    // none is given, and a made-up name for a literal key.
    assert!(policy.contains("api_key = env(\"VLLM_KEY\")"));
    assert!(policy.contains("api_key = env(\"OPENAI_API_KEY\")"));
    assert!(policy.contains("api_key = env(\"CLAUDE_API_KEY\")"));
    let migration = std::fs::read_to_string(out.join("MIGRATION.md")).expect("MIGRATION.md");
    for (line, what) in [
        (8, "litellm_params.rpm"),
        (27, "api_key"),
        (34, "bedrock-claude"),
        (40, "embedder"),
        (41, "openai/*"),
        (46, "missing-group"),
        (49, "num_retries"),
        (53, "routing_strategy"),
        (57, "redis_password"),
        (60, "master_key"),
        (62, "environment_variables"),
    ] {
        let at = format!("config.yaml:{line}");
        let row = migration
            .lines()
            .find(|l| l.contains(&at) && l.contains(what))
            .unwrap_or_else(|| panic!("no `{what}` at {at} in MIGRATION.md:\n{migration}"));
        assert!(stderr.contains(&at), "{at} not on stderr: {stderr}");
        assert!(
            row.split('|').count() >= 4,
            "a table row with a reason: {row}"
        );
    }
    assert!(migration.contains("10 passed, 0 failed"), "{migration}");
}

#[test]
fn secrets_never_appear_as_values() {
    let config = fixture("litellm/config.yaml");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("out");
    let assert = src()
        .args(["import", "litellm"])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let output = assert.get_output();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let written = files(&out);
    assert!(written.len() >= 3, "policy, report and request files");
    // Every literal secret of the fixture is marked `never-copy`.
    let source = std::fs::read_to_string(&config).expect("the fixture");
    let secrets: Vec<&str> = source
        .split_whitespace()
        .filter(|w| w.contains("never-copy"))
        .collect();
    assert_eq!(secrets.len(), 5, "the fixture holds five literal secrets");
    for secret in secrets {
        assert!(!said.contains(secret), "`{secret}` printed");
        for (path, text) in &written {
            assert!(!text.contains(secret), "`{secret}` in {}", path.display());
        }
    }
}

#[test]
fn bad_input_is_refused_with_a_reason() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let missing = dir.path().join("missing.yaml");
    let no_list = dir.path().join("no_list.yaml");
    std::fs::write(&no_list, "router_settings:\n  num_retries: 2\n").expect("write");
    let broken = dir.path().join("broken.yaml");
    std::fs::write(&broken, "model_list: [\n").expect("write");
    let empty = dir.path().join("empty.yaml");
    std::fs::write(&empty, "model_list: []\n").expect("write");
    let nameless = dir.path().join("nameless.yaml");
    std::fs::write(
        &nameless,
        "model_list:\n  - litellm_params:\n      model: openai/gpt-4o\n",
    )
    .expect("write");
    for (file, message) in [
        (&missing, "cannot read"),
        (&no_list, "no `model_list`"),
        (&broken, "is not valid YAML"),
        (&empty, "empty.yaml:1: `model_list` is empty"),
        (
            &nameless,
            "nameless.yaml:2: a `model_list` entry has no `model_name`",
        ),
    ] {
        src()
            .args(["import", "litellm"])
            .arg(file)
            .arg("--out")
            .arg(dir.path().join("out"))
            .assert()
            .code(2)
            .stderr(contains(message));
    }
    // An output directory that holds files is not overwritten without --force.
    let full = dir.path().join("full");
    std::fs::create_dir(&full).expect("mkdir");
    std::fs::write(full.join("keep.txt"), "mine").expect("write");
    let config = fixture("litellm/config.yaml");
    src()
        .args(["import", "litellm"])
        .arg(&config)
        .arg("--out")
        .arg(&full)
        .assert()
        .code(2)
        .stderr(contains("is not empty"));
    src()
        .args(["import", "litellm"])
        .arg(&config)
        .arg("--out")
        .arg(&full)
        .arg("--force")
        .assert()
        .success();
    assert!(full.join("keep.txt").exists() && full.join("policy.sr").exists());
}
