//! Fakes for the pipeline's unit tests: a policy compiled from text into a snapshot (its
//! backends are never contacted), a scripted model runtime, a scripted session layer, and a
//! request completion whose log line is kept in memory. Nothing here binds a socket.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;
use src_compiler::request::RequestView;
use src_compiler::EngineKind;

use crate::backends::SimPool;
use crate::hooks::{BoxFuture, ModelSignals, SessionInput, SessionOutcome, Sessions};
use crate::log::RequestLog;
use crate::policy_store::{compile_policy, Snapshot};
use crate::relay::completion::Completion;
use crate::telemetry::Telemetry;

pub use crate::fakes::Scripted;

/// Compiles `source` (one `policy.sr`) and attaches its backends, which must not be simulated.
pub async fn snapshot(source: &str, models: &dyn ModelSignals) -> Snapshot {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("policy.sr");
    std::fs::write(&path, source).expect("the policy is written");
    let compiled = match compile_policy(&path, EngineKind::Interp, models) {
        Ok(compiled) => compiled,
        Err(failure) => panic!("the test policy does not compile: {}", failure.human()),
    };
    match Snapshot::build(compiled, 1, &SimPool::new(), Duration::from_secs(5), 1.0).await {
        Ok(snapshot) => snapshot,
        Err(failure) => panic!("the test policy's backends: {}", failure.human()),
    }
}

/// A chat request's facts: `body` with the given headers.
pub fn chat(body: &Value) -> RequestView {
    RequestView::from_chat(body, &[]).expect("a valid chat request")
}

/// A chat body naming `model` with one user message.
pub fn user(model: &str, text: &str) -> Value {
    serde_json::json!({"model": model, "messages": [{"role": "user", "content": text}]})
}

/// What the session layer was asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    pub route: Option<String>,
    pub proposed: String,
}

/// A session layer that answers one fixed outcome and records what it was asked.
pub struct FixedSessions {
    pub outcome: SessionOutcome,
    asked: Mutex<Vec<Asked>>,
}

impl FixedSessions {
    pub fn new(outcome: SessionOutcome) -> FixedSessions {
        FixedSessions {
            outcome,
            asked: Mutex::new(Vec::new()),
        }
    }

    pub fn asked(&self) -> Vec<Asked> {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Sessions for FixedSessions {
    fn after_route<'a>(&'a self, input: SessionInput<'a>) -> BoxFuture<'a, SessionOutcome> {
        let policy = input.policy;
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Asked {
                route: input.route.map(|r| policy.routes[r.index()].name.clone()),
                proposed: policy.models[input.proposed.index()].name.clone(),
            });
        Box::pin(std::future::ready(self.outcome.clone()))
    }
}

/// A request's completion whose log lines land in the returned list.
pub fn completion() -> (Completion, Arc<Mutex<Vec<Value>>>) {
    let (log, lines) = RequestLog::memory();
    let done = Completion::new(
        Arc::new(Telemetry::new()),
        log,
        "req-1".into(),
        "chat",
        Instant::now(),
    );
    (done, lines)
}

/// The log lines written so far.
pub fn lines(lines: &Mutex<Vec<Value>>) -> Vec<Value> {
    lines.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

/// A policy with a memory `cache`: `skip when` the prompt says "today", route `fresh` (the news)
/// with `cache = off`, the default to `small`.
pub const CACHED_POLICY: &str = r#"
backend gpu { url = "http://127.0.0.1:9/v1" }
model small  { backend = gpu  serves = "small-id" }
model strong { backend = gpu  serves = "strong-id" }
encoder minilm { path = "models/minilm" }
cache {
  encoder = minilm
  threshold = 0.9
  store = memory
  skip when contains(prompt, ["today"])
}
route fresh priority 10 { when contains(prompt, ["news"])  to strong  cache = off }
route default { to small }
"#;
