//! The door matrix: every request case under `tests/corpus/requests/` is sent through every
//! front door that applies (chat completions, Responses, Messages, and the Envoy external
//! processor on the chat and Responses paths) of a real `src serve`, whose backends are
//! recording upstreams on `127.0.0.1` scripted by the case; each door's answer must be what the
//! case expects, and `src explain` (the compiler's [`explain`]) must agree with what serve did.
//!
//! A case is a JSON file: a chat-shaped `request` (translated for each door) or a `raw` body
//! sent as is, the `upstreams` it scripts, the `doors` it runs on and what it `expect`s; its
//! policy is the `.sr` file of the same name, else the folder's `policy.sr`. In the policy,
//! `{upstream.NAME}` is the URL of a recording upstream named `NAME` (by convention the name
//! of the backend it plays). Each (case, door) pair is its own test, named
//! `FOLDER/CASE::DOOR`. See docs/testing.md for the format.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a failed step fails the test with its message"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Failed, Trial};
use serde::Deserialize;
use serde_json::Value;
use src_compiler::explain::{explain, ExplainError, ModelAnswers, ModelsUnavailable};
use src_compiler::hir::CheckedPolicy;
use src_compiler::{check, compile, load, CheckOptions, CompiledPolicy, EngineKind};
use src_dsl::ast::BackendApi;
use src_testkit::doors::{Door, Outcome};
use src_testkit::models::sample;
use src_testkit::upstream::{canned, Seen, Upstream};
use src_testkit::{Router, TestResult, PATIENCE};

/// The environment variable the corpus policies name for Anthropic backends' `api_key`.
const ANTHROPIC_KEY_ENV: &str = "SRC_TEST_ANTHROPIC_KEY";

/// One case file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    /// What the case shows, for the reader.
    #[allow(dead_code, reason = "documentation in the case file")]
    about: Option<String>,
    /// A chat completion request, translated for each door.
    request: Option<Value>,
    /// Bytes sent as the body to every door, as they are (for malformed requests).
    raw: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// How each named upstream answers (by default `200` with a small valid answer).
    #[serde(default)]
    upstreams: BTreeMap<String, Script>,
    /// Send the request once first and wait until its answer is stored in the response cache;
    /// `expect` is about the second time. (Through the external processor, which only reads
    /// the cache, the first time goes through the proxy door of the same API.)
    #[serde(default)]
    twice: bool,
    /// The doors to run on (`chat`, `responses`, `messages`, `extproc-chat`,
    /// `extproc-responses`); all of them by default.
    doors: Option<Vec<String>>,
    expect: Expect,
    /// What differs by door, over `expect`.
    #[serde(default)]
    per_door: BTreeMap<String, Expect>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
    #[serde(default = "ok")]
    status: u16,
}

fn ok() -> u16 {
    200
}

/// What a door must answer; an absent field is not checked, a `null` one must be absent.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    status: Option<u16>,
    #[serde(default, deserialize_with = "some")]
    route: Option<Option<String>>,
    #[serde(default, deserialize_with = "some")]
    model: Option<Option<String>>,
    #[serde(default, deserialize_with = "some")]
    block: Option<Option<String>>,
    /// The backends that got the request, in order (the last one answered).
    tried: Option<Vec<String>>,
    #[serde(default, deserialize_with = "some")]
    fallbacks: Option<Option<String>>,
    /// The error type, in the door's own error shape.
    #[serde(default, deserialize_with = "some")]
    error: Option<Option<String>>,
    /// `src explain`'s models to try, in order.
    candidates: Option<Vec<String>>,
    /// Other headers of the answer.
    headers: Headers,
    /// The `model` of the body the backend got (the served id).
    sent_model: Option<String>,
    /// Headers of the request the backend got.
    sent_headers: Headers,
}

/// Keeps an explicit `null` apart from an absent field.
fn some<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

impl Expect {
    fn over(&self, door: &Expect) -> Expect {
        Expect {
            status: door.status.or(self.status),
            route: door.route.clone().or_else(|| self.route.clone()),
            model: door.model.clone().or_else(|| self.model.clone()),
            block: door.block.clone().or_else(|| self.block.clone()),
            tried: door.tried.clone().or_else(|| self.tried.clone()),
            fallbacks: door.fallbacks.clone().or_else(|| self.fallbacks.clone()),
            error: door.error.clone().or_else(|| self.error.clone()),
            candidates: door.candidates.clone().or_else(|| self.candidates.clone()),
            headers: merged(&self.headers, &door.headers),
            sent_model: door.sent_model.clone().or_else(|| self.sent_model.clone()),
            sent_headers: merged(&self.sent_headers, &door.sent_headers),
        }
    }
}

/// Expected headers: `null` for "absent".
type Headers = Option<BTreeMap<String, Option<String>>>;

fn merged(base: &Headers, over: &Headers) -> Headers {
    match (base, over) {
        (Some(a), Some(b)) => Some(
            a.iter()
                .chain(b)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        (a, b) => b.clone().or_else(|| a.clone()),
    }
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus/requests")
}

/// Every `.json` case under `dir`, sorted.
fn cases(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(cases(&path));
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The policy of a case: `NAME.sr` beside `NAME.json`, else the folder's `policy.sr`.
fn policy_of(case: &Path) -> PathBuf {
    let own = case.with_extension("sr");
    if own.is_file() {
        own
    } else {
        case.with_file_name("policy.sr")
    }
}

fn main() {
    std::env::set_var(ANTHROPIC_KEY_ENV, "sk-ant-corpus");
    let args = Arguments::from_args();
    let root = corpus();
    let found = cases(&root);
    let count = found.len();
    let mut trials = vec![Trial::test("corpus_is_present", move || {
        if count >= 6 {
            Ok(())
        } else {
            Err(format!("only {count} request cases under tests/corpus/requests").into())
        }
    })];
    for path in found {
        let name = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .with_extension("")
            .display()
            .to_string();
        let case = match read_case(&path) {
            Ok(case) => case,
            Err(e) => {
                let message = format!("{}: {e}", path.display());
                trials.push(Trial::test(name, move || Err(message.into())));
                continue;
            }
        };
        let doors: Vec<String> = case
            .doors
            .clone()
            .unwrap_or_else(|| Door::ALL.iter().map(|d| d.name().to_owned()).collect());
        for door_name in doors {
            let trial_name = format!("{name}::{door_name}");
            let (case, policy) = (case.clone(), policy_of(&path));
            trials.push(Trial::test(trial_name, move || {
                let door = Door::by_name(&door_name)
                    .ok_or_else(|| Failed::from(format!("no door `{door_name}`")))?;
                run(&case, &policy, door).map_err(|e| Failed::from(e.to_string()))
            }));
        }
    }
    libtest_mimic::run(&args, trials).exit();
}

fn read_case(path: &Path) -> TestResult<Case> {
    let case: Case = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    if case.request.is_some() == case.raw.is_some() {
        return Err("give exactly one of `request` and `raw`".into());
    }
    for door in case.per_door.keys().chain(case.doors.iter().flatten()) {
        if Door::by_name(door).is_none() {
            return Err(format!("no door `{door}`").into());
        }
    }
    Ok(case)
}

fn run(case: &Case, policy: &Path, door: Door) -> TestResult {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run_async(case, policy, door))
}

async fn run_async(case: &Case, policy: &Path, door: Door) -> TestResult {
    let text = std::fs::read_to_string(policy)
        .map_err(|e| format!("cannot read `{}`: {e}", policy.display()))?;
    // One recording upstream per `{upstream.NAME}` of the policy; `{models}` is the
    // repository's `models/` (built by `scripts/models.sh`).
    let mut upstreams = BTreeMap::new();
    let mut filled = text.clone();
    if text.contains("{models}") {
        src_testkit::models::load_library()?;
        filled = src_testkit::models::with_models(&text)?;
    }
    for name in placeholders(&text) {
        let status = case.upstreams.get(&name).map_or(200, |s| s.status);
        let label = name.clone();
        let upstream = Upstream::start(move |seen| canned(&label, status, seen)).await?;
        filled = filled.replace(&format!("{{upstream.{name}}}"), &upstream.url);
        upstreams.insert(name, upstream);
    }
    if let Some(unknown) = case.upstreams.keys().find(|n| !upstreams.contains_key(*n)) {
        return Err(format!(
            "the case scripts upstream `{unknown}`, which the policy does not name"
        )
        .into());
    }
    let router = Router::start_with(&filled, |cfg| {
        if door.is_extproc() {
            cfg.extproc = Some(([127, 0, 0, 1], 0).into());
        }
    })
    .await?;

    let body = match (&case.request, &case.raw) {
        (Some(request), _) => door.body(request).to_string().into_bytes(),
        (None, Some(raw)) => raw.clone().into_bytes(),
        (None, None) => return Err("no request".into()),
    };
    let headers: Vec<(String, String)> = case.headers.clone().into_iter().collect();
    if case.twice {
        // The external processor reads the cache but never fills it (it does not see the
        // answer's body): the first time goes through the proxy door of the same API.
        let filler = match door {
            Door::ExtprocChat => Door::Chat,
            Door::ExtprocResponses => Door::Responses,
            other => other,
        };
        let first = filler.send(&router, &body, &headers).await?;
        if first.status != 200 {
            return Err(format!(
                "the first request answered {}: {}",
                first.status, first.body
            )
            .into());
        }
        stored(&router).await?;
        upstreams.values().for_each(Upstream::clear);
    }
    let outcome = door.send(&router, &body, &headers).await?;
    let tried = tried(door, &outcome, &upstreams);
    let sent = sent(&outcome, &upstreams);
    let expect = match case.per_door.get(door.name()) {
        Some(over) => case.expect.over(over),
        None => case.expect.clone(),
    };
    let context = || {
        format!(
            "{} answered {} {}, headers {:?}, tried {tried:?}",
            door.name(),
            outcome.status,
            outcome.body,
            outcome.headers
        )
    };
    check_expect(&expect, &outcome, &tried, sent.as_ref())
        .map_err(|e| format!("{e}\n  {}", context()))?;

    let compiled = compile_policy(router.policy_path().parent().ok_or("no policy dir")?)?;
    agree(
        &compiled,
        door,
        &body,
        &headers,
        &outcome,
        expect.candidates.as_deref(),
    )
    .map_err(|e| format!("`src explain` disagrees: {e}\n  {}", context()))?;
    router.server.shutdown().await?;
    Ok(())
}

/// Waits until the response cache has stored an answer.
async fn stored(router: &Router) -> TestResult {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let metrics = router.admin_get("/metrics").await?.text();
        if sample(&metrics, "src_cache_stores_total", "result=\"stored\"") >= 1.0 {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err("the first answer was never stored in the cache".into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// The `NAME`s of `{upstream.NAME}` in `text`, each once.
fn placeholders(text: &str) -> Vec<String> {
    let mut names: Vec<String> = text
        .split("{upstream.")
        .skip(1)
        .filter_map(|rest| rest.split_once('}').map(|(name, _)| name.to_owned()))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The backends that got the request: for the proxy, the upstreams that saw a `POST`, in
/// order of arrival; for the external processor (which sends nothing itself), the backend it
/// told Envoy to use.
fn tried(door: Door, outcome: &Outcome, upstreams: &BTreeMap<String, Upstream>) -> Vec<String> {
    if door.is_extproc() {
        return outcome
            .upstream
            .iter()
            .filter_map(|(headers, _)| headers.get("x-sr-backend").cloned())
            .collect();
    }
    let mut posts: Vec<(Seen, &String)> = upstreams
        .iter()
        .flat_map(|(name, u)| u.posts().into_iter().map(move |s| (s, name)))
        .collect();
    posts.sort_by_key(|(s, _)| s.seq);
    posts.into_iter().map(|(_, name)| name.clone()).collect()
}

/// What the backend got: the headers and body of the last `POST` an upstream saw, or what the
/// processor would have Envoy send.
fn sent(
    outcome: &Outcome,
    upstreams: &BTreeMap<String, Upstream>,
) -> Option<(BTreeMap<String, String>, Value)> {
    if outcome.upstream.is_some() {
        return outcome.upstream.clone();
    }
    let last = upstreams
        .values()
        .flat_map(Upstream::posts)
        .max_by_key(|s| s.seq)?;
    let headers = last
        .headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    Some((headers, last.body))
}

fn check_expect(
    expect: &Expect,
    outcome: &Outcome,
    tried: &[String],
    sent: Option<&(BTreeMap<String, String>, Value)>,
) -> TestResult {
    let mut wrong = Vec::new();
    if let Some(status) = expect.status {
        if outcome.status != status {
            wrong.push(format!("status {} (expected {status})", outcome.status));
        }
    }
    let headers = [
        ("x-sr-route", &expect.route),
        ("x-sr-model", &expect.model),
        ("x-sr-block", &expect.block),
        ("x-sr-fallbacks", &expect.fallbacks),
    ];
    for (name, want) in headers {
        if let Some(want) = want {
            let got = outcome.header(name);
            if got != want.as_deref() {
                wrong.push(format!("`{name}` {got:?} (expected {want:?})"));
            }
        }
    }
    for (name, want) in expect.headers.iter().flatten() {
        let got = outcome.headers.get(name).map(String::as_str);
        if got != want.as_deref() {
            wrong.push(format!("`{name}` {got:?} (expected {want:?})"));
        }
    }
    if let Some(want) = &expect.sent_model {
        let got = sent.and_then(|(_, body)| body["model"].as_str());
        if got != Some(want.as_str()) {
            wrong.push(format!("the backend got model {got:?} (expected {want:?})"));
        }
    }
    for (name, want) in expect.sent_headers.iter().flatten() {
        let got = sent
            .and_then(|(headers, _)| headers.get(name))
            .map(String::as_str);
        if got != want.as_deref() {
            wrong.push(format!(
                "the backend got `{name}` {got:?} (expected {want:?})"
            ));
        }
    }
    if let Some(want) = &expect.error {
        if outcome.error.as_deref() != want.as_deref() {
            wrong.push(format!("error {:?} (expected {want:?})", outcome.error));
        }
    }
    if let Some(want) = &expect.tried {
        if tried != want.as_slice() {
            wrong.push(format!("tried {tried:?} (expected {want:?})"));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("; ").into())
    }
}

fn compile_policy(dir: &Path) -> TestResult<CompiledPolicy> {
    let outcome = check(load(dir)?, &CheckOptions::default());
    let checked = outcome.policy.ok_or("the policy does not check")?;
    Ok(compile(checked, EngineKind::Interp)?)
}

/// No model-backed signals in the corpus: a case that needs one fails here.
struct NoModels;

impl ModelAnswers for NoModels {
    fn answer(
        &mut self,
        _: &CheckedPolicy,
        _: &[src_compiler::eval::ModelCall],
    ) -> Result<Vec<src_compiler::eval::ModelResult>, ModelsUnavailable> {
        Err(ModelsUnavailable::CannotRun(
            "the request corpus runs no models".into(),
        ))
    }
}

/// `src explain` on the request as this door reads it must reach what serve did: the same
/// block and route, and the model served must be the first of explain's candidates that this
/// door can reach (a chat or Responses request skips Anthropic backends) and that did not fail
/// (`x-sr-fallbacks`). A request serve refused as malformed cannot be explained either, nor
/// one naming a model the policy does not declare.
fn agree(
    policy: &CompiledPolicy,
    door: Door,
    body: &[u8],
    headers: &[(String, String)],
    outcome: &Outcome,
    candidates: Option<&[String]>,
) -> TestResult {
    let lowered: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
        .collect();
    let view = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|json| door.view(&json, &lowered).ok());
    let Some(view) = view else {
        if outcome.status == 400 {
            return Ok(());
        }
        return Err(format!(
            "explain cannot read the request, serve answered {}",
            outcome.status
        )
        .into());
    };
    let explained = match explain(policy, &view, door.wire(), &[], &mut NoModels) {
        Ok(explained) => explained,
        // A model the policy does not declare: serve's 404.
        Err(ExplainError::UnknownModel(_)) if outcome.status == 404 => return Ok(()),
        Err(e) => {
            return Err(format!("explain failed ({e}), serve answered {}", outcome.status).into())
        }
    };
    let names = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_str().map(str::to_owned))
            .collect()
    };
    let explained_candidates = names(&explained["candidates"]);
    if let Some(want) = candidates {
        if explained_candidates != want {
            return Err(format!("candidates {explained_candidates:?} (expected {want:?})").into());
        }
    }
    let blocked = explained["blocked"].as_str();
    if blocked != outcome.header("x-sr-block") {
        return Err(format!(
            "explain blocks {blocked:?}, serve {:?}",
            outcome.header("x-sr-block")
        )
        .into());
    }
    if outcome.status != 200 {
        return Ok(());
    }
    let route = explained["route"].as_str();
    if route != outcome.header("x-sr-route") {
        return Err(format!(
            "explain routes {route:?}, serve {:?}",
            outcome.header("x-sr-route")
        )
        .into());
    }
    let failed: Vec<&str> = outcome
        .header("x-sr-fallbacks")
        .into_iter()
        .flat_map(|f| f.split(','))
        .map(|f| f.trim().split(':').next().unwrap_or_default())
        .collect();
    // What explain's failover machine skipped (a backend that does not speak this door's API):
    // serve skips the same; the first left that did not fail upstream is the one that answered.
    let unsendable: Vec<String> = names(&explained["unsendable"])
        .into_iter()
        .map(|f| f.split(':').next().unwrap_or_default().to_owned())
        .collect();
    let checked = &policy.checked;
    let reachable = |name: &str| {
        checked
            .models
            .iter()
            .find(|m| m.name == name)
            .is_some_and(|m| {
                checked.backends[m.backend.index()].api != BackendApi::Anthropic
                    || door.reaches_anthropic()
            })
    };
    for name in &explained_candidates {
        if reachable(name) == unsendable.contains(name) {
            return Err(format!(
                "explain says `{name}` is {}sendable on this door",
                if reachable(name) { "un" } else { "" }
            )
            .into());
        }
    }
    let none_failed_upstream = failed.iter().all(|f| unsendable.iter().any(|u| u == f));
    if none_failed_upstream && explained["model"].as_str() != outcome.header("x-sr-model") {
        return Err(format!(
            "explain sends to {:?}, serve chose {:?}",
            explained["model"],
            outcome.header("x-sr-model")
        )
        .into());
    }
    let first = explained_candidates
        .iter()
        .find(|m| !unsendable.contains(m) && !failed.contains(&m.as_str()));
    if first.map(String::as_str) != outcome.header("x-sr-model") {
        return Err(format!(
            "of explain's candidates {explained_candidates:?} this door would serve {first:?}, serve chose {:?}",
            outcome.header("x-sr-model")
        )
        .into());
    }
    Ok(())
}
