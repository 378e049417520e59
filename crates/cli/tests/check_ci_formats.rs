//! `src check --format github|sarif`: the same diagnostics as `--format json`, as GitHub
//! workflow commands and as a SARIF 2.1.0 log that the official schema accepts (validated by the
//! `jsonschema` package in `.cache/venv-sarif`, installed by scripts/setup.sh).

#![allow(
    clippy::expect_used,
    reason = "helpers outside `#[test]` functions fail the test on an unexpected error"
)]

mod support;

use serde_json::Value;
use std::path::PathBuf;
use support::{repo, src};

/// A policy with two errors (an unknown model, a `fuzzy` threshold out of range after a multi-byte
/// character on its line) and a warning (an unused signal).
const POLICY: &str = "backend b { url = \"http://127.0.0.1:9/v1\" }
model small { backend = b  serves = \"s\" }
signal unused = contains(prompt, [\"x\"])
signal hurry = fuzzy(prompt, [\"ürgent\"], 80)
route urgent priority 10 { when hurry  to strong }
route default { to small }
";

/// Runs `src check --format FORMAT` on the policy (in a directory whose name needs escaping);
/// returns the directory, the file and standard output.
fn check(format: &str) -> (tempfile::TempDir, PathBuf, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let sub = dir.path().join("a,b:c");
    std::fs::create_dir(&sub).expect("subdirectory");
    let file = sub.join("policy.sr");
    std::fs::write(&file, POLICY).expect("write policy");
    let out = src()
        .args(["check", "--color", "never", "--format", format])
        .arg(&file)
        .output()
        .expect("src runs");
    assert_eq!(out.status.code(), Some(1), "errors fail the check");
    let stdout = String::from_utf8(out.stdout).expect("utf-8 output");
    (dir, file, stdout)
}

/// `(code, severity, line, column, end_line, end_column)` of each diagnostic of `--format json`.
fn json_positions() -> Vec<(String, String, u64, u64, u64, u64)> {
    let (_dir, _file, out) = check("json");
    let doc: Value = serde_json::from_str(&out).expect("json output");
    let list = doc["diagnostics"].as_array().expect("diagnostics");
    list.iter()
        .map(|d| {
            let n = |k: &str| d[k].as_u64().expect("a position");
            (
                d["code"].as_str().expect("code").to_string(),
                d["severity"].as_str().expect("severity").to_string(),
                n("line"),
                n("column"),
                n("end_line"),
                n("end_column"),
            )
        })
        .collect()
}

#[test]
fn github_commands_carry_the_json_positions() {
    let expected = json_positions();
    let codes: Vec<&str> = expected.iter().map(|e| e.0.as_str()).collect();
    for code in ["E011", "E027", "W001"] {
        assert!(codes.contains(&code), "{code} in {codes:?}");
    }
    let (_dir, file, out) = check("github");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), expected.len(), "{out}");
    let escaped_file = file
        .display()
        .to_string()
        .replace(':', "%3A")
        .replace(',', "%2C");
    for (line, (code, severity, l, c, el, ec)) in lines.iter().zip(&expected) {
        let want = format!(
            "::{severity} file={escaped_file},line={l},col={c},endLine={el},endColumn={ec},title={code}::"
        );
        assert!(
            line.starts_with(&want),
            "{line}\n  does not start with\n{want}"
        );
        let message = &line[want.len()..];
        assert!(!message.contains('\n'), "one line per command");
        if *code == "E027" {
            assert!(message.contains("%0Ahelp: "), "the help follows: {message}");
        }
    }
}

fn python() -> PathBuf {
    let python = repo(".cache/venv-sarif/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run scripts/setup.sh",
        python.display()
    );
    python
}

/// Validates `log` against the shipped SARIF 2.1.0 schema; the validator's complaint on failure.
fn validate(log: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("log.sarif");
    std::fs::write(&path, log).expect("write log");
    let script = "import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft4Validator.check_schema(schema)
errors = list(jsonschema.Draft4Validator(schema).iter_errors(json.load(open(sys.argv[2]))))
for e in errors:
    print(list(e.absolute_path), e.message)
sys.exit(1 if errors else 0)
";
    let out = std::process::Command::new(python())
        .arg("-c")
        .arg(script)
        .arg(repo("crates/cli/tests/data/sarif-schema-2.1.0.json"))
        .arg(&path)
        .output()
        .expect("python runs");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

#[test]
fn sarif_log_is_valid_and_carries_the_json_positions() {
    let expected = json_positions();
    let (_dir, _file, out) = check("sarif");
    if let Err(problems) = validate(&out) {
        panic!("the SARIF log does not fit the schema:\n{problems}\n{out}");
    }
    let log: Value = serde_json::from_str(&out).expect("json output");
    assert_eq!(log["version"], "2.1.0");
    let run = &log["runs"][0];
    assert_eq!(run["columnKind"], "unicodeCodePoints");
    let rules = run["tool"]["driver"]["rules"].as_array().expect("rules");
    let results = run["results"].as_array().expect("results");
    assert_eq!(results.len(), expected.len());
    for (r, (code, severity, l, c, el, ec)) in results.iter().zip(&expected) {
        assert_eq!(r["ruleId"], code.as_str());
        assert_eq!(r["level"], severity.as_str());
        let index = r["ruleIndex"].as_u64().expect("rule index") as usize;
        assert_eq!(rules[index]["id"], code.as_str());
        let help = rules[index]["help"]["text"].as_str().expect("help");
        assert!(help.contains("docs/diagnostics.md#"), "{help}");
        let location = &r["locations"][0]["physicalLocation"];
        let uri = location["artifactLocation"]["uri"].as_str().expect("uri");
        assert!(
            uri.starts_with("file:///") && uri.ends_with("/a,b:c/policy.sr"),
            "{uri}"
        );
        let region = &location["region"];
        let got: Vec<Option<u64>> = ["startLine", "startColumn", "endLine", "endColumn"]
            .iter()
            .map(|k| region[*k].as_u64())
            .collect();
        assert_eq!(got, [l, c, el, ec].map(|n| Some(*n)).to_vec());
    }
}

#[test]
fn the_schema_check_can_fail() {
    let (_dir, _file, out) = check("sarif");
    let mut log: Value = serde_json::from_str(&out).expect("json output");
    log["runs"][0]["results"][0]["level"] = Value::from("fatal");
    let broken = serde_json::to_string(&log).expect("serialise");
    assert!(validate(&broken).is_err(), "an unknown level is rejected");
}

#[test]
fn clean_policies_give_empty_reports() {
    let out = src()
        .args(["check", "--format", "sarif"])
        .arg(repo("examples/quickstart"))
        .output()
        .expect("src runs");
    assert!(out.status.success());
    let log: Value = serde_json::from_slice(&out.stdout).expect("json output");
    assert_eq!(log["runs"][0]["results"], Value::Array(Vec::new()));
    let out = src()
        .args(["check", "--format", "github"])
        .arg(repo("examples/quickstart"))
        .output()
        .expect("src runs");
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
}

/// The arguments of the README's CI step (`run: src check policies/ --format github ...`).
fn readme_ci_step() -> Vec<String> {
    let readme = std::fs::read_to_string(repo("README.md")).expect("the README");
    let line = readme
        .lines()
        .find_map(|l| l.trim().strip_prefix("run: src check "))
        .filter(|l| l.contains("--format github"))
        .expect("the README shows the CI step");
    line.split_whitespace().map(str::to_string).collect()
}

#[test]
fn the_readme_ci_step_checks_the_repository_policies() {
    let args = readme_ci_step();
    assert!(args.contains(&"--deny-warnings".to_string()), "{args:?}");
    let out = src()
        .arg("check")
        .args(&args)
        .current_dir(repo(""))
        .output()
        .expect("src runs");
    let stdout = String::from_utf8(out.stdout).expect("utf-8 output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.is_empty(), "everything is an annotation: {stderr}");
    // The policies below `policies/` are found, and all they are warned about is the model
    // directories this repository does not ship (docs/models.md builds them).
    let lines: Vec<&str> = stdout.lines().collect();
    for line in &lines {
        assert!(
            line.starts_with("::warning file=policies/production/") && line.contains("title=W006"),
            "{line}"
        );
    }
    let model_dirs = ["models/domain", "models/prompt_guard"];
    let missing: Vec<&str> = model_dirs
        .iter()
        .copied()
        .filter(|d| !repo("policies/production").join(d).is_dir())
        .collect();
    assert_eq!(lines.len(), missing.len(), "{stdout}");
    let expected = if missing.is_empty() { Some(0) } else { Some(1) };
    assert_eq!(out.status.code(), expected, "{stdout}");
}

#[test]
fn every_problem_below_a_directory_is_an_annotation() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    for (sub, text) in [
        ("good", "backend b { url = \"http://127.0.0.1:9/v1\" }\nmodel small { backend = b  serves = \"s\" }\nroute default { to small }\n".as_bytes()),
        ("deep/bad", POLICY.as_bytes()),
        ("latin1", b"# caf\xe9\n".as_slice()),
    ] {
        std::fs::create_dir_all(root.join(sub)).expect("subdirectory");
        std::fs::write(root.join(sub).join("main.sr"), text).expect("write policy");
    }
    let out = src()
        .args(["check", "--format", "github"])
        .arg(root)
        .arg(root.join("missing"))
        .output()
        .expect("src runs");
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unreadable policy is an I/O error"
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).expect("utf-8 output");
    for line in stdout.lines() {
        assert!(
            line.starts_with("::error file=") || line.starts_with("::warning file="),
            "{line}"
        );
        assert!(line.contains(",line=") && line.contains(",col="), "{line}");
    }
    let bad = root.join("deep/bad/main.sr").display().to_string();
    let errors_in_bad = stdout
        .lines()
        .filter(|l| l.starts_with(&format!("::error file={bad},")))
        .count();
    assert_eq!(errors_in_bad, 2, "{stdout}");
    let latin1 = root.join("latin1/main.sr").display().to_string();
    assert!(
        stdout.contains(&format!("::error file={latin1},line=1,col=1,"))
            && stdout.contains("not UTF-8"),
        "{stdout}"
    );
    let missing = root.join("missing").display().to_string();
    assert!(
        stdout.contains(&format!("::error file={missing},line=1,col=1,")),
        "{stdout}"
    );
}
