//! `src explain` and `src serve` drive the compiler's one request procedure, so they must agree
//! on every request: the same block, route, model and order of models to try.
//!
//! Each request is explained (`src explain --request --format json`) and sent twice to a real
//! `src serve` on the built-in simulator: once as it is (the block, route and model answer in
//! `x-sr-block`, `x-sr-route`, `x-sr-model`), and once with `x-sim-fault: error=503`, so that
//! every model fails and `x-sr-fallbacks` lists the whole order tried. The requests are every
//! `test` case of the decision corpus that serve can answer (no `given`: serve computes every
//! signal itself; no model-backed signals: serve here has no model files), and a generated set
//! over blocks with and without `to`, named models, aliases, unknown models and fallbacks.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a failed step fails the test with its message"
)]

use assert_cmd::cargo::CommandCargoExt;
use serde_json::{json, Value};
use src_compiler::hir::TestInputDef;
use src_compiler::{check, load, CheckOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One request to explain and serve.
struct Case {
    name: String,
    body: Value,
    headers: Vec<(String, String)>,
}

/// A policy directory and the requests to send it.
struct Suite {
    name: String,
    dir: tempfile::TempDir,
    cases: Vec<Case>,
}

/// What either front door decided, in a form both can say.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    block: Option<String>,
    route: Option<String>,
    model: Option<String>,
    /// The models in the order they would be tried.
    tried: Vec<String>,
    /// The HTTP status of an error (a refusal's status, 404 for an unknown model).
    error: Option<u16>,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The policy text with every backend simulated (the corpus points its backends nowhere).
fn simulated(text: &str) -> String {
    text.lines()
        .map(|line| {
            if line.trim_start().starts_with("backend ") && line.contains('{') {
                line.replacen('{', "{ simulated = true ", 1)
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn corpus_suites() -> Vec<Suite> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("tests/corpus/decide"))
        .expect("the decision corpus exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "sr"))
        .collect();
    files.sort();
    let mut suites = Vec::new();
    for file in files {
        let checked = check(load(&file).expect("loads"), &CheckOptions::default())
            .policy
            .expect("the corpus policy checks");
        if !(checked.classifiers.is_empty()
            && checked.guards.is_empty()
            && checked.encoders.is_empty())
        {
            continue;
        }
        let router = checked
            .router
            .names
            .first()
            .cloned()
            .expect("a router name");
        let cases: Vec<Case> = checked
            .tests
            .iter()
            .filter(|t| t.givens.is_empty())
            .map(|t| {
                let mut body = match &t.input {
                    TestInputDef::Prompt(prompt) => {
                        json!({"messages": [{"role": "user", "content": prompt}]})
                    }
                    TestInputDef::Messages(Value::Array(messages)) => {
                        json!({ "messages": messages })
                    }
                    TestInputDef::Messages(other) => other.clone(),
                };
                if let (Some(system), Some(messages)) = (
                    &t.system,
                    body.get_mut("messages").and_then(Value::as_array_mut),
                ) {
                    messages.insert(0, json!({"role": "system", "content": system}));
                }
                if body.get("model").is_none() {
                    body["model"] = json!(router);
                }
                Case {
                    name: t.name.clone(),
                    body,
                    headers: t.headers.clone(),
                }
            })
            .collect();
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&file).expect("reads");
        let dir = tempfile::tempdir().expect("a temp dir");
        std::fs::write(dir.path().join("policy.sr"), simulated(&text)).expect("writes");
        // Fixture files that cases read live beside the corpus.
        let fixtures = repo().join("tests/corpus/decide/fixtures");
        let copied = dir.path().join("fixtures");
        std::fs::create_dir_all(&copied).expect("mkdir");
        for entry in std::fs::read_dir(fixtures).expect("fixtures") {
            let path = entry.expect("entry").path();
            std::fs::copy(&path, copied.join(path.file_name().unwrap())).expect("copies");
        }
        suites.push(Suite {
            name: stem,
            dir,
            cases,
        });
    }
    suites
}

const GENERATED: &str = r#"
backend sim { url = "http://127.0.0.1:9/v1"  simulated = true }
model small  { backend = sim  serves = "org/small" }
model strong { backend = sim  serves = "org/strong"  aliases = ["big"] }
model coder  { backend = sim  serves = "org/coder" }
model safe   { backend = sim  serves = "org/safe" }

signal secret = matches(prompt, "sk-[A-Za-z0-9]{8,}")
signal loud   = count(prompt, "[A-Z]{4,}") >= 2
signal code   = contains(prompt, ["segfault", "compile error"])
signal maths  = contains(prompt, ["integral"])

block credential { when secret  status = 422  message = "remove the key" }
block shouting   { when loud  to safe }

route coding priority 20 { when code  to strong else coder, small }
route algebra priority 10 { when maths  to coder else strong }
route default { to small }
"#;

fn generated_suites() -> Vec<Suite> {
    let prompts = [
        "segfault in main",
        "the integral of x squared",
        "hello there",
        "my key is sk-ABCDEFGH1234",
        "HELP ME NOW PLEASE",
        "segfault: HELP ME NOW",
    ];
    let models = ["auto", "strong", "big", "coder", "gpt-unknown"];
    let mut suites = Vec::new();
    for (name, failure) in [
        ("generated_closed", ""),
        ("generated_open", "failure { backend = open }\n"),
    ] {
        let dir = tempfile::tempdir().expect("a temp dir");
        std::fs::write(
            dir.path().join("policy.sr"),
            format!("{GENERATED}{failure}"),
        )
        .expect("writes");
        let mut cases = Vec::new();
        for prompt in prompts {
            for model in models {
                cases.push(Case {
                    name: format!("{model}: {prompt}"),
                    body: json!({"model": model, "messages": [{"role": "user", "content": prompt}]}),
                    headers: vec![],
                });
            }
        }
        suites.push(Suite {
            name: name.into(),
            dir,
            cases,
        });
    }
    suites
}

fn explain(policy: &Path, case: &Case) -> Outcome {
    let request = tempfile::NamedTempFile::new().expect("a temp file");
    std::fs::write(request.path(), case.body.to_string()).expect("writes");
    let mut command = Command::cargo_bin("src").expect("the src binary is built");
    command
        .arg("explain")
        .arg(policy)
        .arg("--request")
        .arg(request.path());
    for (k, v) in &case.headers {
        command.arg("--header").arg(format!("{k}={v}"));
    }
    let output = command.args(["--format", "json"]).output().expect("runs");
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("which the policy does not declare"),
            "src explain failed: {stderr}"
        );
        return Outcome {
            block: None,
            route: None,
            model: None,
            tried: vec![],
            error: Some(404),
        };
    }
    let doc: Value = serde_json::from_slice(&output.stdout).expect("explain prints JSON");
    let text = |k: &str| doc[k].as_str().map(String::from);
    let block = text("blocked");
    let refused = block.is_some() && doc["model"].is_null();
    Outcome {
        error: refused.then_some(0),
        block,
        route: text("route"),
        model: text("model"),
        tried: doc["candidates"]
            .as_array()
            .expect("candidates")
            .iter()
            .map(|m| m.as_str().expect("a model name").to_string())
            .collect(),
    }
}

/// `src serve` on free ports, stopped when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(policy: &Path) -> Server {
        let mut child = Command::cargo_bin("src")
            .expect("the src binary is built")
            .arg("serve")
            .arg(policy)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--admin",
                "127.0.0.1:0",
                "--no-watch",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("src serve starts");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let mut seen = Vec::new();
        let addr = loop {
            let Some(Ok(line)) = lines.next() else {
                let _ = child.kill();
                panic!("src serve stopped before serving: {seen:?}");
            };
            if let Some(addr) = serde_json::from_str::<Value>(&line)
                .ok()
                .and_then(|v| v["fields"]["listen"].as_str().map(String::from))
            {
                break addr.parse().expect("a socket address");
            }
            seen.push(line);
        };
        // Keep reading the request log so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Server { child, addr }
    }

    /// Sends one chat completion; answers the status and the response headers.
    fn send(&self, case: &Case, extra: &[(&str, &str)]) -> (u16, Vec<(String, String)>) {
        let body = case.body.to_string();
        let mut request = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n",
            self.addr,
            body.len()
        );
        for (k, v) in case
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(extra.iter().copied())
        {
            request.push_str(&format!("{k}: {v}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(&body);
        let mut stream = TcpStream::connect(self.addr).expect("connects");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        stream.write_all(request.as_bytes()).expect("sends");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).expect("reads the answer");
        let answer = String::from_utf8_lossy(&answer);
        let head = answer.split("\r\n\r\n").next().unwrap_or_default();
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .expect("a status line");
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        (status, headers)
    }

    fn outcome(&self, case: &Case) -> Outcome {
        let header = |headers: &[(String, String)], name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .filter(|v| v != "-")
        };
        let (status, headers) = self.send(case, &[]);
        let block = header(&headers, "x-sr-block");
        let refused = block.is_some() && !(200..300).contains(&status);
        if status == 404 {
            return Outcome {
                block: None,
                route: None,
                model: None,
                tried: vec![],
                error: Some(404),
            };
        }
        assert!(
            (200..300).contains(&status) || refused,
            "{}: src serve answered {status}",
            case.name
        );
        let (_, failed) = self.send(case, &[("x-sim-fault", "error=503")]);
        let tried = if refused {
            vec![]
        } else {
            header(&failed, "x-sr-fallbacks")
                // `model:why` for each model that failed, in the order tried.
                .map(|v| {
                    v.split(',')
                        .map(|f| f.split(':').next().unwrap_or_default().to_string())
                        .collect()
                })
                .unwrap_or_default()
        };
        Outcome {
            error: refused.then_some(0),
            route: if block.is_some() {
                None
            } else {
                header(&headers, "x-sr-route")
            },
            model: if refused {
                None
            } else {
                header(&headers, "x-sr-model")
            },
            block,
            tried,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn explain_and_serve_decide_every_request_alike() {
    let suites: Vec<Suite> = corpus_suites()
        .into_iter()
        .chain(generated_suites())
        .collect();
    assert!(suites.len() >= 6, "the corpus lost its served policies");
    let mut compared = 0;
    let mut disagreements = Vec::new();
    let mut fallbacks_seen = 0;
    for suite in &suites {
        let server = Server::start(suite.dir.path());
        for case in &suite.cases {
            let explained = explain(suite.dir.path(), case);
            let served = server.outcome(case);
            if explained.tried.len() > 1 {
                fallbacks_seen += 1;
            }
            if explained != served {
                disagreements.push(format!(
                    "{}::{}\n  explain: {explained:?}\n  serve:   {served:?}",
                    suite.name, case.name
                ));
            }
            compared += 1;
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} of {compared} requests decided differently:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
    assert!(compared >= 60, "only {compared} requests compared");
    assert!(fallbacks_seen > 0, "no request had models to fall back on");
}
