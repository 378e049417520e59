//! The `src` binary as users run it: exit codes, output shapes, and files it rewrites.

#![allow(
    clippy::expect_used,
    reason = "helpers outside `#[test]` functions fail the test on an unexpected error"
)]

use assert_cmd::assert::OutputAssertExt;
use predicates::str::contains;
use serde_json::Value;
use std::path::{Path, PathBuf};

mod support;

use support::{repo, src, write, Started};

fn error_with_code<'a>(doc: &'a Value, code: &str) -> &'a Value {
    doc["diagnostics"]
        .as_array()
        .and_then(|ds| ds.iter().find(|d| d["code"] == code))
        .unwrap_or_else(|| panic!("no {code} in {doc}"))
}

/// `src check --format json` fails on `policy` (exit code 1); the one JSON document it prints.
fn failed_check(policy: &Path) -> Value {
    let out = src()
        .args(["check", "--format", "json"])
        .arg(policy)
        .assert()
        .code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout);
    serde_json::from_str(stdout.trim()).expect("exactly one JSON object")
}

const GOOD: &str = r#"backend b { url = "http://127.0.0.1:9/v1" }
model small { backend = b  serves = "s" }
route default { to small }
"#;

#[test]
fn check_passes_a_good_policy() {
    src()
        .args(["check", "--color", "never"])
        .arg(repo("examples/quickstart"))
        .assert()
        .success();
}

#[test]
fn check_exits_1_on_errors_and_reports_json() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "bad.sr",
        "backend b { url = \"http://127.0.0.1:8000/v1\" }\nmodel small { backend = b  serves = \"s\" }\nroute default { to smal }\n",
    );
    let doc = failed_check(&file);
    assert_eq!(doc["errors"], 1);
    let d = error_with_code(&doc, "E011");
    let keys: Vec<&str> = d.as_object().unwrap().keys().map(String::as_str).collect();
    for key in [
        "code",
        "severity",
        "message",
        "file",
        "line",
        "column",
        "end_line",
        "end_column",
        "help",
    ] {
        assert!(keys.contains(&key), "missing key {key} in {d}");
    }
    assert_eq!(d["code"], "E011");
    assert_eq!(d["line"], 3);
    assert_eq!(d["column"], 20);
    assert_eq!(d["end_column"], 24);
    assert!(d["help"].as_str().unwrap().contains("small"));
}

#[test]
fn check_counts_columns_in_characters() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "p.sr",
        "backend b { url = \"u\" }\nmodel small { backend = b  serves = \"s\" }\nsignal s = contains(prompt, [\"é中\"]) and nope\nroute r priority 1 { when s  to small }\nroute default { to small }\n",
    );
    let doc = failed_check(&file);
    let d = error_with_code(&doc, "E011");
    // `nope` starts after 38 characters of line 3 (but more bytes).
    assert_eq!(d["line"], 3);
    assert_eq!(d["column"], 41);
}

#[test]
fn deny_warnings_turns_warnings_into_failure() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "w.sr",
        &format!("{GOOD}signal unused = contains(prompt, [\"x\"])\n"),
    );
    src().arg("check").arg(&file).assert().success();
    src()
        .args(["check", "--deny-warnings"])
        .arg(&file)
        .assert()
        .code(1);
}

#[test]
fn usage_and_io_errors_exit_2() {
    src()
        .args(["check", "/definitely/not/here"])
        .assert()
        .code(2);
    src()
        .args(["check", "--catalog", "nonsense"])
        .arg(repo("examples/quickstart"))
        .assert()
        .code(2);
    src().args(["check", "--no-such-flag"]).assert().code(2);
}

#[test]
fn catalog_override_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = write(
        dir.path(),
        "c.json",
        r#"{"object":"list","data":[{"id":"other"}]}"#,
    );
    src()
        .args(["check", "--color", "never", "--catalog"])
        .arg(format!("dynamo={}", catalog.display()))
        .arg(repo("policies/production"))
        .assert()
        .code(1)
        .stderr(contains("E040"));
}

/// A one-thread HTTP server answering every request with `status` and `body`; records the
/// request heads it saw. Real sockets, so `--live` goes through the router's own HTTP client.
fn serve_answers(status: u16, body: &'static str) -> (String, std::sync::mpsc::Receiver<String>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (seen, heads) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let _ = seen.send(String::from_utf8_lossy(&head).into_owned());
            let answer = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    (format!("http://{addr}/v1"), heads)
}

fn live_policy(dir: &Path, url: &str, serves: &str) -> PathBuf {
    write(
        dir,
        "live.sr",
        &format!(
            "backend b {{ url = \"{url}\"  catalog = \"missing.json\"  api_key = env(\"SRC_LIVE_TEST_KEY\") }}\n\
             model small {{ backend = b  serves = \"{serves}\" }}\n\
             route default {{ to small }}\n"
        ),
    )
}

#[test]
fn check_live_asks_the_backend_for_its_catalog() {
    let (url, heads) = serve_answers(
        200,
        r#"{"object":"list","data":[{"id":"tiny-a"},{"id":"tiny-b"}]}"#,
    );
    let dir = tempfile::tempdir().unwrap();
    // The declared catalog file does not exist: --live does not read it.
    let file = live_policy(dir.path(), &url, "tiny-a");
    src()
        .env("SRC_LIVE_TEST_KEY", "sk-live")
        .args(["check", "--live", "--color", "never"])
        .arg(&file)
        .assert()
        .success();
    let head = heads.recv().expect("the backend was asked");
    assert!(head.starts_with("GET /v1/models "), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("authorization: bearer sk-live"),
        "{head}"
    );

    let file = live_policy(dir.path(), &url, "tiny-c");
    let out = src()
        .args(["check", "--live", "--format", "json"])
        .arg(&file)
        .assert()
        .code(1);
    let doc: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(
        error_with_code(&doc, "E040")["help"],
        "did you mean `tiny-a`?"
    );
    // The human report names where the catalog came from.
    src()
        .args(["check", "--live", "--color", "never"])
        .arg(&file)
        .assert()
        .code(1)
        .stderr(contains(format!("not in `{url}/models`")));
}

#[test]
fn check_live_reports_a_backend_that_cannot_answer() {
    let (url, _heads) = serve_answers(503, "{}");
    let dir = tempfile::tempdir().unwrap();
    let file = live_policy(dir.path(), &url, "tiny-a");
    let out = src()
        .args(["check", "--live", "--format", "json"])
        .arg(&file)
        .assert()
        .code(1);
    let doc: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let e041 = error_with_code(&doc, "E041");
    assert!(
        e041["message"].as_str().unwrap().contains("answered 503"),
        "{e041}"
    );
}

#[test]
fn fmt_check_lists_files_and_fmt_rewrites_them() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "messy.sr",
        "route   default{to small}\nmodel small{backend=b serves=\"s\"}\nbackend b{url=\"u\"}\n",
    );
    src()
        .args(["fmt", "--check"])
        .arg(dir.path())
        .assert()
        .code(1)
        .stdout(contains("messy.sr"));
    src().arg("fmt").arg(dir.path()).assert().success();
    let once = std::fs::read_to_string(&file).unwrap();
    assert!(once.contains("route default {\n  to small\n}"), "{once}");
    src()
        .args(["fmt", "--check"])
        .arg(dir.path())
        .assert()
        .success();
}

#[test]
fn test_command_reports_failures_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "t.sr",
        &format!(
            "{GOOD}model big {{ backend = b  serves = \"l\" }}\nroute code priority 1 {{ when contains(prompt, [\"rust\"])  to big }}\n\
             test right {{ prompt = \"rust\"  expect code model big }}\n\
             test wrong {{ prompt = \"hello\"  expect code }}\n"
        ),
    );
    src()
        .arg("test")
        .arg(&file)
        .assert()
        .code(1)
        .stdout(contains("2 passed, 2 failed"))
        .stdout(contains("`wrong`"));
}

#[test]
fn explain_prints_the_decision_as_json() {
    let out = src()
        .args([
            "explain",
            "--format",
            "json",
            "--prompt",
            "my service panics with this stack trace",
        ])
        .arg(repo("examples/quickstart"))
        .assert()
        .success();
    let doc: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(doc["route"], "coding");
    assert_eq!(doc["model"], "strong");
    assert_eq!(doc["serves"], "Qwen/Qwen3-8B");
    assert_eq!(doc["blocked"], Value::Null);
    assert_eq!(doc["signals"]["code_talk"], true);
    // The first route decided: the token count was never needed.
    assert_eq!(doc["signals"]["long_chat"], Value::Null);
    assert!(doc["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s == "long_chat"));
}

/// The text output names the types a decision redacts, as the JSON's `redact` does, and says
/// nothing of redaction where the decision redacts nothing.
#[test]
fn explain_text_says_what_the_decision_redacts() {
    let explain = |format: &str, prompt: &str| {
        let out = src()
            .args(["explain", "--format", format, "--prompt", prompt])
            .arg(repo("examples/personal-data"))
            .assert()
            .success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    };
    let contact = "draft a reply to maria.garcia@example.com, phone +34 912 345 678";
    let text = explain("human", contact);
    assert!(text.starts_with("route `contact_details`"), "{text}");
    assert!(
        text.contains("\n  redacts before sending: email, phone\n"),
        "{text}"
    );
    let doc: Value = serde_json::from_str(&explain("json", contact)).unwrap();
    assert_eq!(doc["redact"], serde_json::json!(["email", "phone"]));

    let plain = explain("human", "summarise the release notes of version 1.2.3");
    assert!(plain.starts_with("route `default`"), "{plain}");
    assert!(!plain.contains("redacts"), "{plain}");
}

#[test]
fn explain_names_missing_givens() {
    src()
        .args(["explain", "--prompt", "hello"])
        .arg(repo("policies/production"))
        .assert()
        .code(2)
        .stderr(contains("--given attack="));
}

/// A Messages body's top-level `system` and its `tool_use`/`tool_result` history decide as the
/// `/v1/messages` door decides them, told from the body alone or with `--api`.
#[test]
fn explain_reads_a_messages_body_as_the_messages_door_does() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "p.sr",
        r#"backend b { url = "http://127.0.0.1:9/v1" }
model small { backend = b  serves = "s" }
model big   { backend = b  serves = "g" }
signal reviewer = contains(system, ["review code"])
route coding priority 10 { when reviewer or request.tool_loop to big }
route default { to small }
"#,
    );
    let explain = |body: &Value, extra: &[&str]| -> Value {
        let file = dir.path().join("request.json");
        std::fs::write(&file, body.to_string()).unwrap();
        let out = src()
            .args(["explain", "--format", "json", "--request"])
            .arg(&file)
            .args(extra)
            .arg(dir.path().join("p.sr"))
            .assert()
            .success();
        serde_json::from_slice(&out.get_output().stdout).unwrap()
    };
    let system = serde_json::json!({"model": "auto", "max_tokens": 64,
        "system": "you review code", "messages": [{"role": "user", "content": "look"}]});
    assert_eq!(explain(&system, &[])["route"], "coding");
    assert_eq!(explain(&system, &["--api", "messages"])["route"], "coding");
    assert_eq!(
        explain(&system, &["--api", "chat"])["route"],
        "default",
        "read as chat, the top-level system is not there"
    );
    let tool_loop = serde_json::json!({"model": "auto", "max_tokens": 64, "messages": [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a b"}]}
    ]});
    assert_eq!(explain(&tool_loop, &[])["route"], "coding");
}

/// `src explain` runs the names example's detector (models/pii_ner, as scripts/models.sh builds
/// it; ORT_DYLIB_PATH as scripts/test.sh sets it) and decides as `src serve` does, on both
/// engines: a prompt naming a person stays in-house, a support ticket naming one is refused, a
/// draft goes out with the detector's types redacted, and a prompt naming none goes out.
#[test]
fn explain_runs_a_detector() {
    let explain = |engine: &str, prompt: &str, headers: &[&str]| {
        let mut cmd = src();
        cmd.args([
            "explain", "--format", "json", "--engine", engine, "--prompt", prompt,
        ]);
        for h in headers {
            cmd.args(["--header", h]);
        }
        let out = cmd
            .arg(repo("examples/personal-data/names"))
            .assert()
            .success();
        serde_json::from_slice::<Value>(&out.get_output().stdout).unwrap()
    };
    for engine in ["interp", "jit"] {
        let named = explain(engine, "Can you email David Miller about the invoice?", &[]);
        assert_eq!(named["route"], "people_and_places", "{named}");
        assert_eq!(named["signals"]["names"], true, "{named}");
        let ticket = explain(
            engine,
            "Can you email David Miller about the invoice?",
            &["x-channel=support"],
        );
        assert_eq!(ticket["blocked"], "named_in_ticket", "{ticket}");
        let draft = explain(
            engine,
            "Can you email David Miller about the invoice?",
            &["x-channel=drafts"],
        );
        assert_eq!(draft["route"], "drafts", "{draft}");
        assert_eq!(
            draft["redact"],
            serde_json::json!(["email", "people.PERSON", "people.LOCATION"]),
            "{draft}"
        );
        let plain = explain(
            engine,
            "can you refactor this function to use iterators?",
            &[],
        );
        assert_eq!(plain["route"], "default", "{plain}");
        assert_eq!(plain["signals"]["names"], false, "{plain}");
    }
}

#[test]
fn explain_engines_agree() {
    let run = |engine: &str| {
        let out = src()
            .args([
                "explain", "--format", "json", "--engine", engine, "--prompt", "x",
            ])
            .args(["--given", "attack=0.95", "--given", "topic=math"])
            .arg(repo("policies/production"))
            .assert()
            .success();
        serde_json::from_slice::<Value>(&out.get_output().stdout).unwrap()
    };
    let (a, b) = (run("interp"), run("jit"));
    assert_eq!(a, b);
    assert_eq!(a["blocked"], "jailbreak");
    assert_eq!(a["model"], "safe");
}

/// A model directory with `config_of`'s `config.json` and tokenizer but `graph_of`'s graph,
/// declared by `policy(path)`: `src check` opens the graph and refuses it (E060, whose message
/// holds `says`), while the same declaration of `config_of` itself checks.
fn a_graph_unlike_its_declaration_is_refused(
    config_of: &str,
    graph_of: &str,
    policy: impl Fn(&str) -> String,
    says: &str,
) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let models = repo("models");
    let broken = dir.path().join("broken");
    std::fs::create_dir(&broken).expect("mkdir");
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(models.join(config_of).join(f), broken.join(f)).expect("a model's file");
    }
    std::fs::copy(
        models.join(graph_of).join("model.onnx"),
        broken.join("model.onnx"),
    )
    .expect("a model's graph");
    let bad = write(dir.path(), "bad.sr", &policy("broken"));
    let doc = failed_check(&bad);
    let d = error_with_code(&doc, "E060");
    let message = d["message"].as_str().expect("a message");
    assert!(message.contains(says), "{d}");
    let good = write(
        dir.path(),
        "good.sr",
        &policy(&models.join(config_of).display().to_string()),
    );
    src().arg("check").arg(&good).assert().success();
}

#[test]
fn check_verifies_onnx_graphs_against_their_declaration() {
    // Needs ORT_DYLIB_PATH and the models from scripts/models.sh, as scripts/test.sh provides.
    // A classifier directory whose config.json is right but whose graph is the encoder's: only
    // opening the graph tells.
    let policy = |path: &str| {
        format!(
            "{GOOD}classifier c {{ path = \"{path}\"  labels = [math, code, law, other] }}\n\
             signal topic = c(prompt)\nblock b {{ when topic is law }}\n"
        )
    };
    a_graph_unlike_its_declaration_is_refused("domain", "minilm", policy, "`c`");
}

#[test]
fn check_verifies_a_detector_graph() {
    // Needs ORT_DYLIB_PATH and the models from scripts/models.sh, as scripts/test.sh provides.
    // A detector directory whose config.json has BIO labels but whose graph is a classifier's
    // (`logits` per text, not per token): only opening the graph tells.
    let policy = |path: &str| {
        format!(
            "{GOOD}detector d {{ path = \"{path}\"  entities = [PERSON] }}\n\
             signal names = d(prompt, [PERSON])\nblock b {{ when names }}\n"
        )
    };
    a_graph_unlike_its_declaration_is_refused(
        "pii_ner",
        "domain",
        policy,
        "[batch, tokens, labels]",
    );
}

/// A reload that fails logs one valid JSON line (no key twice) saying why, and every line the
/// server wrote around it is valid too (checked when the server stops).
#[test]
fn a_failed_reload_logs_one_valid_json_line() {
    let dir = tempfile::tempdir().unwrap();
    let policy = std::fs::read_to_string(repo("examples/quickstart/policy.sr")).unwrap();
    write(dir.path(), "policy.sr", &policy);
    let server = support::Server::start_with(dir.path(), &[]);
    write(
        dir.path(),
        "policy.sr",
        &policy.replacen("route default", "route default default", 1),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let failed = loop {
        if let Some(line) = server
            .log()
            .into_iter()
            .find(|l| l.contains("policy reload failed"))
        {
            break line;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no failed reload logged: {:?}",
            server.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    src_testkit::log_lines::check(&failed).unwrap();
    let doc: Value = serde_json::from_str(&failed).unwrap();
    assert_eq!(doc["level"], "ERROR");
    assert!(
        doc["fields"]["error"]
            .as_str()
            .is_some_and(|e| !e.is_empty()),
        "{failed}"
    );
    assert!(doc["fields"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("previous policy keeps serving")));
}

#[test]
fn serve_takes_a_request_log_volume_and_refuses_one_it_does_not_know() {
    src()
        .args(["serve", "--help"])
        .assert()
        .success()
        .stdout(contains("--request-log <VOLUME>"))
        .stdout(contains("sample:N"));
    let dir = tempfile::tempdir().unwrap();
    let policy = write(dir.path(), "p.sr", GOOD);
    src()
        .args(["serve", "--request-log", "sometimes"])
        .arg(&policy)
        .assert()
        .code(2)
        .stderr(contains("`sometimes` is not a request log volume"));
}

/// A tree of two policies below one root: `a/` (good) and `b/nested/` (with one test).
fn policy_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("a")).expect("policy a");
    std::fs::create_dir_all(dir.path().join("b/nested")).expect("policy b/nested");
    write(&dir.path().join("a"), "main.sr", GOOD);
    write(
        &dir.path().join("b/nested"),
        "main.sr",
        &format!("{GOOD}test plain {{ prompt = \"hi\"  expect default }}\n"),
    );
    dir
}

#[test]
fn check_and_test_find_the_policies_below_a_directory() {
    let dir = policy_tree();
    src()
        .args(["check", "--color", "never"])
        .arg(dir.path())
        .assert()
        .success()
        .stderr(contains("ok: 2 policies checked"));
    src()
        .arg("test")
        .arg(dir.path())
        .assert()
        .success()
        .stdout(contains("2 passed, 0 failed"));
    // An error in a nested policy fails the check of the root.
    write(
        &dir.path().join("b/nested"),
        "broken.sr",
        "route r { to nowhere }\n",
    );
    src()
        .args(["check", "--color", "never"])
        .arg(dir.path())
        .assert()
        .code(1)
        .stderr(contains("nowhere"));
    // A root without any `.sr` file is still an error.
    let empty = tempfile::tempdir().unwrap();
    src()
        .arg("check")
        .arg(empty.path())
        .assert()
        .code(2)
        .stderr(contains("holds no `.sr` files"));
}

#[test]
fn a_catalog_for_an_undeclared_backend_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = write(dir.path(), "c.json", r#"{"object":"list","data":[]}"#);
    src()
        .args(["check", "--color", "never", "--catalog"])
        .arg(format!("dynamoo={}", catalog.display()))
        .arg(repo("policies/production"))
        .assert()
        .code(2)
        .stderr(contains("backend `dynamoo`"))
        .stderr(contains("did you mean `dynamo`?"));
    src()
        .args(["check", "--color", "never", "--catalog"])
        .arg(format!("elsewhere={}", catalog.display()))
        .arg(repo("policies/production"))
        .assert()
        .code(2)
        .stderr(contains("`dynamo`, `vllm_code`"));
}

#[test]
fn names_given_on_the_command_line_get_a_did_you_mean() {
    let dir = tempfile::tempdir().unwrap();
    let labelled = write(
        dir.path(),
        "l.jsonl",
        "{\"prompt\": \"hi\", \"route\": \"default\"}\n",
    );
    src()
        .args(["explain", "--prompt", "hi", "--given", "atack=0.1"])
        .arg(repo("policies/production"))
        .assert()
        .code(2)
        .stderr(contains("did you mean `attack`?"));
    src()
        .args(["calibrate", "--signal", "code_tak", "--labelled"])
        .arg(&labelled)
        .arg(repo("policies/production"))
        .assert()
        .code(2)
        .stderr(contains("did you mean `code_talk`?"));
    // `--live` asks every backend, so a catalog file would be ignored: refused instead.
    src()
        .args(["check", "--live", "--catalog"])
        .arg(format!("dynamo={}", labelled.display()))
        .arg(repo("policies/production"))
        .assert()
        .code(2)
        .stderr(contains("cannot be used with"));
}

/// Runs `src ARGS` with the chosen stream piped, reads one byte of it and closes it, as
/// `src .. | head -c1` does; returns the byte and how the command ended.
fn close_after_a_byte(args: &[&std::ffi::OsStr], stderr: bool) -> (u8, std::process::Output) {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = src()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("src starts");
    let out: Box<dyn Read> = Box::new(child.stdout.take().expect("piped standard output"));
    let err: Box<dyn Read> = Box::new(child.stderr.take().expect("piped standard error"));
    let (mut closed, mut kept) = if stderr { (err, out) } else { (out, err) };
    let mut byte = [0u8; 1];
    closed.read_exact(&mut byte).expect("one byte of output");
    drop(closed);
    let mut rest = Vec::new();
    kept.read_to_end(&mut rest).expect("the other stream");
    let mut out = child.wait_with_output().expect("src ends");
    if stderr {
        out.stdout = rest;
    } else {
        out.stderr = rest;
    }
    (byte[0], out)
}

/// A policy whose explanation, IR listing and diagnostics are each far longer than a pipe's
/// buffer, so that writing them meets the closed pipe; and one whose test report is.
fn long_output_policies(dir: &Path) -> (PathBuf, PathBuf) {
    let mut text = GOOD.to_string();
    for i in 0..600 {
        text.push_str(&format!(
            "signal s{i} = contains(prompt, [\"word{i}\"])\nsignal unused{i} = contains(prompt, [\"x\"])\n\
             route r{i} priority {} {{ when s{i}  to small }}\n",
            i + 1
        ));
    }
    let mut tests =
        format!("{GOOD}route code priority 1 {{ when contains(prompt, [\"rust\"])  to small }}\n");
    for i in 0..1000 {
        tests.push_str(&format!("test t{i} {{ prompt = \"none\"  expect code }}\n"));
    }
    (write(dir, "long.sr", &text), write(dir, "tests.sr", &tests))
}

#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let (policy, tests) = long_output_policies(dir.path());
    let (p, t) = (policy.as_os_str(), tests.as_os_str());
    let runs: [(&[&std::ffi::OsStr], bool); 4] = [
        (
            &[
                "explain".as_ref(),
                p,
                "--engine".as_ref(),
                "interp".as_ref(),
                "--ir".as_ref(),
                "--prompt".as_ref(),
                "hello".as_ref(),
            ],
            false,
        ),
        (
            &["test".as_ref(), t, "--engine".as_ref(), "interp".as_ref()],
            false,
        ),
        (
            &["check".as_ref(), p, "--format".as_ref(), "sarif".as_ref()],
            false,
        ),
        // Unused signals, warned about on standard error (`2>&1 | head`).
        (
            &["check".as_ref(), "--color".as_ref(), "never".as_ref(), p],
            true,
        ),
    ];
    for (args, stderr) in runs {
        let (byte, out) = close_after_a_byte(args, stderr);
        assert_ne!(byte, 0, "{args:?}");
        let other = String::from_utf8_lossy(if stderr { &out.stdout } else { &out.stderr });
        assert!(!other.contains("panicked"), "{args:?}: {other}");
        assert!(other.is_empty(), "{args:?}: nothing else is said: {other}");
        assert_eq!(out.status.code(), Some(141), "{args:?}");
    }
}

/// Starts `src ARGS` and reads its standard error until a line holds `needle`; returns that line
/// (`None` when the command ended first) and the still running child, for the caller to stop.
fn start_until(args: &[&str], needle: &str) -> (Option<String>, std::process::Child) {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    let Started { child, found, .. } = support::start_until(&args, |line| {
        line.contains(needle).then(|| line.to_string())
    });
    (found, child)
}

#[test]
fn address_flags_take_host_names() {
    let (line, mut sim) = start_until(
        &["sim", "--listen", "localhost:0"],
        "simulated OpenAI backend on",
    );
    let line = line.expect("the simulator says where it listens");
    let addr = line
        .rsplit("http://")
        .next()
        .and_then(|rest| rest.strip_suffix("/v1"))
        .expect("an address")
        .to_string();
    assert!(
        !addr.ends_with(":0"),
        "the bound port, not the one asked for: {line}"
    );
    let reached = std::net::TcpStream::connect(&addr);
    sim.kill().expect("the simulator stops");
    sim.wait().expect("the simulator ends");
    reached.expect("the simulator listens where it says");

    let policy = repo("examples/quickstart");
    let policy = policy.to_str().expect("a UTF-8 path");
    let (line, mut serve) = start_until(
        &[
            "serve",
            policy,
            "--listen",
            "localhost:0",
            "--admin",
            "localhost:0",
            "--no-watch",
        ],
        "\"serving\"",
    );
    serve.kill().expect("the server stops");
    serve.wait().expect("the server ends");
    let line = line.expect("the server starts");
    assert!(line.contains("\"listen\""), "{line}");
}

#[test]
fn an_address_in_use_is_named_once() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let addr = taken.local_addr().expect("its address").to_string();
    let policy = repo("examples/quickstart");
    for args in [
        vec![
            "serve".as_ref(),
            policy.as_os_str(),
            "--listen".as_ref(),
            addr.as_ref(),
            "--admin".as_ref(),
            "127.0.0.1:0".as_ref(),
        ],
        vec!["sim".as_ref(), "--listen".as_ref(), addr.as_ref()],
    ] {
        let out = src().args(&args).output().expect("src runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let said = stderr
            .lines()
            .find(|l| l.starts_with("error:"))
            .unwrap_or_else(|| panic!("an error line: {stderr}"));
        assert!(
            said.ends_with(&format!(
                "cannot listen on {addr}: the address is already in use"
            )),
            "{said}"
        );
        assert_eq!(said.matches("in use").count(), 1, "{said}");
    }
}
