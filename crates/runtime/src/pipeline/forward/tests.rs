//! The candidate loop against a scripted backend: what is relayed, what moves on, and the
//! error when every candidate fails.

use std::collections::VecDeque;
use std::sync::Mutex;

use http_body_util::BodyExt;
use serde_json::Value;
use src_compiler::hir::RouteId;

use super::*;
use crate::hooks::NoModelSignals;
use crate::pipeline::fakes;
use hyper::header::{HeaderMap, HeaderName};

const POLICY: &str = r#"
backend gpu { url = "http://127.0.0.1:9/v1" }
model small  { backend = gpu  serves = "small-id"  context = 4 }
model strong { backend = gpu  serves = "strong-id" }
model safe   { backend = gpu  serves = "safe-id" }
route coding priority 10 {
  when contains(prompt, ["segfault"])
  to strong else safe
  headers { "x-team" = "platform" }
}
route default { to safe }
"#;

const SMALL: ModelId = ModelId(0);
const STRONG: ModelId = ModelId(1);
const SAFE: ModelId = ModelId(2);

/// What a request the fake sent carried.
#[derive(Debug)]
struct Sent {
    url: String,
    selected: Option<String>,
    team: Option<String>,
    body: Value,
}

/// A backend that answers from a script, one entry per request, and records the requests.
struct Scripted {
    answers: Mutex<VecDeque<Result<u16, UpstreamError>>>,
    sent: Mutex<Vec<Sent>>,
}

impl Scripted {
    fn new(answers: Vec<Result<u16, UpstreamError>>) -> Scripted {
        Scripted {
            answers: Mutex::new(answers.into()),
            sent: Mutex::new(Vec::new()),
        }
    }

    fn sent(&self) -> Vec<Sent> {
        std::mem::take(&mut *self.sent.lock().unwrap())
    }
}

impl Transport for Scripted {
    type Body = ();

    fn send(
        &self,
        request: Request<Full<Bytes>>,
        _timeout: Duration,
    ) -> impl Future<Output = Result<Response<()>, UpstreamError>> + Send {
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let selected = header(headers::SELECTED_MODEL);
        let team = header("x-team");
        let url = request.uri().to_string();
        let answer = self.answers.lock().unwrap().pop_front();
        let sent = &self.sent;
        async move {
            let body = request.into_body().collect().await.unwrap().to_bytes();
            sent.lock().unwrap().push(Sent {
                url,
                selected,
                team,
                body: serde_json::from_slice(&body).unwrap_or_default(),
            });
            match answer.expect("no more scripted answers") {
                Ok(status) => {
                    let mut response = Response::new(());
                    *response.status_mut() = StatusCode::from_u16(status).unwrap();
                    Ok(response)
                }
                Err(err) => Err(err),
            }
        }
    }
}

fn timeout() -> UpstreamError {
    UpstreamError::Timeout {
        url: "http://127.0.0.1:9/v1/chat/completions".into(),
        timeout: Duration::from_secs(1),
    }
}

fn connect() -> UpstreamError {
    UpstreamError::Connect {
        url: "http://127.0.0.1:9/v1/chat/completions".into(),
        detail: "refused".into(),
    }
}

fn plan(route: Option<RouteId>, candidates: Vec<ModelId>) -> Plan {
    Plan {
        route,
        block: None,
        candidates,
        protection: None,
        session: None,
        cache: None,
        ask_usage: false,
        redact: None,
    }
}

/// Tries `plan`'s candidates for a chat request saying `text`; returns the answering model
/// and status (or the error answered) with the failures noted.
async fn attempt(
    transport: &Scripted,
    text: &str,
    plan: &Plan,
) -> (Result<(String, u16), ApiError>, Vec<String>, RequestRecord) {
    attempt_under(POLICY, &Arc::new(Cooldowns::new()), transport, text, plan).await
}

/// [`attempt`] under `policy`, with the cooldowns of `cooldowns`.
async fn attempt_under(
    policy: &str,
    cooldowns: &Arc<Cooldowns>,
    transport: &Scripted,
    text: &str,
    plan: &Plan,
) -> (Result<(String, u16), ApiError>, Vec<String>, RequestRecord) {
    let snapshot = fakes::snapshot(policy, &NoModelSignals).await;
    let body = fakes::user("auto", text);
    let bytes = Bytes::from(body.to_string());
    let view = fakes::chat(&body);
    let (parts, ()) = Request::post("/v1/chat/completions")
        .header("x-client", "kept")
        .body(())
        .unwrap()
        .into_parts();
    let parsed = crate::pipeline::intake::JsonBody::from_value(body);
    let request = Outgoing {
        api: Api::Chat,
        parts: &parts,
        body: &bytes,
        parsed: &parsed,
        view: &view,
        previous: None,
        chain: None,
        models: &NoModelSignals,
    };
    let mut record = RequestRecord {
        request_id: "req-1".into(),
        ..RequestRecord::default()
    };
    let owner = plan.session.as_ref().and_then(|s| s.owner);
    let mut attempts = Attempts::new(&plan.candidates, Api::Chat.wire(), owner);
    let tried = try_candidates(
        transport,
        cooldowns,
        &snapshot,
        &request,
        (plan, &mut attempts),
        (&mut record, &crate::otel::RequestTrace::untraced(None)),
    )
    .await;
    let policy = snapshot.policy();
    let failures = attempts.fallback_list(policy);
    let outcome = match tried {
        Tried::Answered {
            response,
            model,
            verdict,
            ..
        } => {
            // The scripted answers have no body: each ends whole at once.
            if let Some(verdict) = verdict {
                verdict.whole();
            }
            Ok((model.name.clone(), response.status().as_u16()))
        }
        Tried::Unbuildable(error) => Err(error),
        Tried::Ended(End::Exhausted) => Err(failures::exhausted(policy, &attempts)),
        Tried::Ended(End::OwnerKept) => Err(ApiError::service_unavailable("the owner was kept")),
    };
    (outcome, failures, record)
}

#[tokio::test]
async fn the_first_candidate_that_answers_is_relayed_with_its_served_id() {
    let transport = Scripted::new(vec![Ok(200)]);
    let plan = plan(Some(RouteId(0)), vec![STRONG, SAFE]);
    let (outcome, failures, record) = attempt(&transport, "a segfault", &plan).await;
    assert_eq!(outcome, Ok(("strong".into(), 200)));
    assert!(failures.is_empty());
    assert_eq!(record.model.as_deref(), Some("strong"));
    assert_eq!(record.served.as_deref(), Some("strong-id"));
    assert_eq!(record.backend.as_deref(), Some("gpu"));
    let sent = transport.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].url, "http://127.0.0.1:9/v1/chat/completions");
    assert_eq!(sent[0].selected.as_deref(), Some("strong-id"));
    assert_eq!(
        sent[0].team.as_deref(),
        Some("platform"),
        "the route's headers"
    );
    assert_eq!(sent[0].body["model"], "strong-id");
}

#[tokio::test]
async fn a_5xx_or_an_unreachable_backend_moves_on_in_order() {
    let transport = Scripted::new(vec![Ok(503), Err(connect()), Ok(200)]);
    let plan = plan(None, vec![STRONG, SAFE, STRONG]);
    let (outcome, failures, _) = attempt(&transport, "hello", &plan).await;
    assert_eq!(outcome, Ok(("strong".into(), 200)));
    assert_eq!(failures, ["strong:status", "safe:connect"]);
    let served: Vec<_> = transport.sent().into_iter().map(|s| s.selected).collect();
    assert_eq!(
        served,
        [Some("strong-id"), Some("safe-id"), Some("strong-id")].map(|s| s.map(String::from))
    );
}

#[tokio::test]
async fn a_404_moves_on_while_a_model_remains_and_passes_through_after_the_last() {
    let transport = Scripted::new(vec![Ok(404), Ok(404)]);
    let plan = plan(None, vec![STRONG, SAFE]);
    let (outcome, failures, _) = attempt(&transport, "hello", &plan).await;
    assert_eq!(outcome, Ok(("safe".into(), 404)));
    assert_eq!(failures, ["strong:status"]);
}

#[tokio::test]
async fn other_4xx_answers_are_the_client_s_and_pass_through() {
    let transport = Scripted::new(vec![Ok(400)]);
    let plan = plan(None, vec![STRONG, SAFE]);
    let (outcome, _, _) = attempt(&transport, "hello", &plan).await;
    assert_eq!(outcome, Ok(("strong".into(), 400)));
}

#[tokio::test]
async fn a_request_longer_than_a_model_s_context_skips_it_unsent() {
    let transport = Scripted::new(vec![Ok(200)]);
    let plan = plan(None, vec![SMALL, STRONG]);
    let (outcome, failures, _) =
        attempt(&transport, "a prompt well over four tokens long", &plan).await;
    assert_eq!(outcome, Ok(("strong".into(), 200)));
    assert_eq!(failures, ["small:context"]);
    assert_eq!(transport.sent().len(), 1);
}

#[tokio::test]
async fn a_request_that_fits_no_context_is_the_client_s_400() {
    let transport = Scripted::new(vec![]);
    let plan = plan(None, vec![SMALL]);
    let (outcome, _, _) = attempt(&transport, "a prompt well over four tokens long", &plan).await;
    let error = outcome.expect_err("no model can take it");
    assert_eq!(error.status.as_u16(), 400);
    assert_eq!(
        error.body.error.code.as_deref(),
        Some("context_length_exceeded")
    );
}

#[tokio::test]
async fn when_every_candidate_fails_the_last_failure_names_the_status() {
    let cases = [
        (vec![Ok(503), Err(timeout())], 504),
        (vec![Err(timeout()), Err(connect())], 502),
        (vec![Err(connect()), Ok(500)], 503),
    ];
    for (answers, status) in cases {
        let transport = Scripted::new(answers);
        let plan = plan(None, vec![STRONG, SAFE]);
        let (outcome, failures, _) = attempt(&transport, "hello", &plan).await;
        let error = outcome.expect_err("every candidate failed");
        assert_eq!(error.status.as_u16(), status, "{failures:?}");
        assert_eq!(failures.len(), 2);
    }
}

#[tokio::test]
async fn a_model_failing_cooldown_after_times_in_a_row_is_skipped_unsent() {
    let policy = format!("{POLICY}\nfailure {{ cooldown_after = 2  cooldown = 1h }}");
    let cooldowns = Arc::new(Cooldowns::new());
    let plan = plan(None, vec![STRONG, SAFE]);
    let run = |answers| {
        let transport = Scripted::new(answers);
        let policy = policy.clone();
        let cooldowns = Arc::clone(&cooldowns);
        let plan = plan.clone();
        async move {
            let (outcome, failures, _) =
                attempt_under(&policy, &cooldowns, &transport, "hello", &plan).await;
            (outcome.map(|(m, _)| m), failures, transport.sent().len())
        }
    };
    // A failure, then a success: the count starts again.
    let (_, failures, _) = run(vec![Ok(503), Ok(200)]).await;
    assert_eq!(failures, ["strong:status"]);
    let (outcome, _, _) = run(vec![Ok(200)]).await;
    assert_eq!(outcome.ok().as_deref(), Some("strong"));
    assert_eq!(cooldowns.cooling("strong"), None);
    // Two in a row (a 5xx, a timeout) start the cooldown.
    let (outcome, _, _) = run(vec![Ok(500), Ok(200)]).await;
    assert_eq!(outcome.ok().as_deref(), Some("safe"));
    assert_eq!(
        cooldowns.cooling("strong"),
        None,
        "one failure is not enough"
    );
    let (_, failures, _) = run(vec![Err(timeout()), Ok(200)]).await;
    assert_eq!(failures, ["strong:timeout"]);
    assert!(cooldowns.cooling("strong").is_some());
    // Now `strong` is skipped without a request: only `safe` is sent one.
    let (outcome, failures, sent) = run(vec![Ok(200)]).await;
    assert_eq!(outcome.ok().as_deref(), Some("safe"));
    assert_eq!(failures, ["strong:cooldown"]);
    assert_eq!(sent, 1);
    let report = cooldowns.report();
    assert_eq!(report[0]["model"], "strong", "{report}");
    assert_eq!(report[0]["source"], "local");
}

#[tokio::test]
async fn when_every_candidate_cools_down_the_answer_is_503_naming_the_cooldown() {
    let policy = format!("{POLICY}\nfailure {{ cooldown_after = 1 }}");
    let cooldowns = Arc::new(Cooldowns::new());
    let plan = plan(None, vec![STRONG, SAFE]);
    let transport = Scripted::new(vec![Ok(502), Err(connect())]);
    let (_, failures, _) = attempt_under(&policy, &cooldowns, &transport, "hello", &plan).await;
    assert_eq!(failures, ["strong:status", "safe:connect"]);
    let transport = Scripted::new(vec![]);
    let (outcome, failures, _) =
        attempt_under(&policy, &cooldowns, &transport, "hello", &plan).await;
    assert_eq!(failures, ["strong:cooldown", "safe:cooldown"]);
    let error = outcome.expect_err("nothing may answer");
    assert_eq!(error.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        error.body.error.message.contains("cooling down"),
        "{}",
        error.body.error.message
    );
    assert_eq!(transport.sent().len(), 0);
}

#[tokio::test]
async fn without_a_cooldown_failures_never_skip_a_model() {
    let cooldowns = Arc::new(Cooldowns::new());
    let plan = plan(None, vec![STRONG, SAFE]);
    for _ in 0..5 {
        let transport = Scripted::new(vec![Ok(503), Ok(200)]);
        let (outcome, _, _) = attempt_under(POLICY, &cooldowns, &transport, "hello", &plan).await;
        assert_eq!(outcome, Ok(("safe".into(), 200)));
        assert_eq!(transport.sent().len(), 2);
    }
    assert_eq!(cooldowns.cooling("strong"), None);
}

#[tokio::test]
async fn a_429_moves_on_while_a_model_remains_and_passes_through_after_the_last() {
    let transport = Scripted::new(vec![Ok(429), Ok(429)]);
    let plan = plan(None, vec![STRONG, SAFE]);
    let (outcome, failures, _) = attempt(&transport, "hello", &plan).await;
    assert_eq!(outcome, Ok(("safe".into(), 429)));
    assert_eq!(failures, ["strong:status"]);
}

#[test]
fn an_answer_keeps_only_the_headers_a_client_reads() {
    let mut headers = HeaderMap::new();
    for (name, value) in [
        ("content-type", "application/json"),
        ("connection", "keep-alive, X-Ratelimit-Hop"),
        ("keep-alive", "timeout=5"),
        ("transfer-encoding", "chunked"),
        ("x-ratelimit-hop", "private to the connection"),
        ("x-ratelimit-remaining-requests", "59"),
        ("x-ratelimit-reset-tokens", "6ms"),
        ("server", "uvicorn"),
        ("x-ratelimit-reset-tokens", "7ms"),
        ("retry-after", "2"),
        ("x-should-retry", "false"),
        ("x-request-id", "req-1"),
        ("request-id", "req_011"),
        ("openai-processing-ms", "31"),
        ("anthropic-ratelimit-tokens-remaining", "9000"),
        ("server", "uvicorn"),
        ("x-sim-prefill-ms", "1.5"),
        ("set-cookie", "backend=1"),
        ("x-envoy-upstream-service-time", "3"),
        ("via", "1.1 gpu-node"),
        ("x-request-cost", "3"),
    ] {
        headers.append(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    let with_account = hygiene::returned_headers(headers.clone(), true);
    assert!(
        with_account.contains_key("x-sim-prefill-ms"),
        "a simulator that relays its account keeps it"
    );
    assert!(!with_account.contains_key("server"));
    let headers = hygiene::returned_headers(headers, false);
    // Every value of a kept name, in order.
    let resets: Vec<&[u8]> = headers
        .get_all("x-ratelimit-reset-tokens")
        .iter()
        .map(HeaderValue::as_bytes)
        .collect();
    assert_eq!(resets, [&b"6ms"[..], b"7ms"]);
    let mut left: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
    left.sort_unstable();
    assert_eq!(
        left,
        [
            "anthropic-ratelimit-tokens-remaining",
            "content-type",
            "openai-processing-ms",
            "request-id",
            "retry-after",
            "x-ratelimit-remaining-requests",
            "x-ratelimit-reset-tokens",
            "x-request-id",
            "x-should-retry"
        ]
    );
}
