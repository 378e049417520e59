//! The requests both front doors are compared on, and what `src explain` decides for each: every
//! `test` case of the decision corpus that serve can answer (no `given`: serve computes every
//! signal itself; no model-backed signals: serve here has no model files), and a generated set
//! over blocks with and without `to`, named models, aliases, unknown models and fallbacks; and
//! the tally of the comparisons, which fails on any disagreement.

#![allow(
    dead_code,
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "each comparison uses the part of the support it needs; a failed step fails the test"
)]

use crate::support::{copy_files, policy_dir, repo, src};
use serde_json::{json, Value};
use src_compiler::hir::TestInputDef;
use src_compiler::{check, load, CheckOptions};
use std::path::{Path, PathBuf};

/// One request to explain and serve.
pub struct Case {
    pub name: String,
    pub body: Value,
    pub headers: Vec<(String, String)>,
}

/// A policy directory and the requests to send it.
pub struct Suite {
    pub name: String,
    pub dir: tempfile::TempDir,
    pub cases: Vec<Case>,
}

/// What either front door decided, in a form both can say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub block: Option<String>,
    pub route: Option<String>,
    pub model: Option<String>,
    /// The models in the order they would be tried.
    pub tried: Vec<String>,
    /// The HTTP status of an error (a refusal's status, 404 for an unknown model).
    pub error: Option<u16>,
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

pub fn corpus_suites() -> Vec<Suite> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo("tests/corpus/decide"))
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
        let dir = policy_dir(&simulated(&text));
        // Fixture files that cases read live beside the corpus.
        copy_files(
            &repo("tests/corpus/decide/fixtures"),
            &dir.path().join("fixtures"),
        );
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

pub fn generated_suites() -> Vec<Suite> {
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
        let dir = policy_dir(&format!("{GENERATED}{failure}"));
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

pub fn explain(policy: &Path, case: &Case) -> Outcome {
    let request = tempfile::NamedTempFile::new().expect("a temp file");
    std::fs::write(request.path(), case.body.to_string()).expect("writes");
    let mut command = src();
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
        let error = if stderr.contains("which the policy does not declare") {
            404
        } else if stderr.contains("is not a valid request") {
            400
        } else {
            panic!("src explain failed: {stderr}")
        };
        return Outcome {
            block: None,
            route: None,
            model: None,
            tried: vec![],
            error: Some(error),
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

/// Every suite: the corpus's and the generated ones.
pub fn all_suites() -> Vec<Suite> {
    let suites: Vec<Suite> = corpus_suites()
        .into_iter()
        .chain(generated_suites())
        .collect();
    assert!(suites.len() >= 6, "the corpus lost its served policies");
    suites
}

/// What explain and one front door decided for each request, compared.
pub struct Tally {
    /// The door's name in a disagreement's report.
    door: &'static str,
    pub compared: usize,
    disagreements: Vec<String>,
}

impl Tally {
    pub fn new(door: &'static str) -> Tally {
        Tally {
            door,
            compared: 0,
            disagreements: Vec::new(),
        }
    }

    /// Counts one request of `suite`, and keeps it when the door decided otherwise.
    pub fn compare(&mut self, suite: &Suite, case: &Case, explained: &Outcome, served: &Outcome) {
        if explained != served {
            let door = format!("{}:", self.door);
            self.disagreements.push(format!(
                "{}::{}\n  explain: {explained:?}\n  {door:<9}{served:?}",
                suite.name, case.name
            ));
        }
        self.compared += 1;
    }

    /// Fails on any disagreement, or when too few requests were compared to mean anything.
    pub fn assert_agreed(&self) {
        let compared = self.compared;
        assert!(
            self.disagreements.is_empty(),
            "{} of {compared} requests decided differently:\n{}",
            self.disagreements.len(),
            self.disagreements.join("\n")
        );
        assert!(compared >= 60, "only {compared} requests compared");
    }
}
