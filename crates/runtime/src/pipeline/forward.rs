//! Forwarding (docs/language.md, "What happens to a request", step 6): send the request to the
//! first candidate model that can take it.
//!
//! A model whose `context` is smaller than the request's token count is skipped, as is one whose
//! backend cannot take the request's API (a chat request to an `api = anthropic` backend); a
//! Messages request to an OpenAI backend is sent as a chat completion and its answer translated
//! back ([`crate::anthropic`]). A connect error, a timeout, a 5xx before the first response byte,
//! or a 404 (the model is not served) or a 429 (the model is over its rate limit) while another
//! candidate remains moves on to the next candidate. A model cooling down after repeated failures
//! (`failure.cooldown_after`, see [`crate::cooldown`]) is skipped without being tried. Each
//! candidate is tried once, so a request makes at most as many attempts as it has candidates.
//! When the failed model is the one a session's live pin names, `owner_lost` decides first: stop
//! with a 503 and `Retry-After` (`fail`), or let the fallbacks answer and report the switch
//! (`x-sr-session: switched`, `x-sr-switch-reason: owner-lost`).
//! Once an answer's head has arrived it is relayed as is; a failure after that is told to the
//! client by the relay (see [`crate::pipeline::body`]). When the proposed model answers a cache
//! miss, the relay also hands the whole answer to the cache.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::http::request::Parts;
use hyper::{Request, Response, StatusCode};
use opentelemetry::trace::SpanKind;
use serde_json::Value;
use src_compiler::hir::{CheckedPolicy, ModelDef, ModelId};
use src_compiler::request::RequestView;
use src_dsl::ast::OwnerLost;

use crate::anthropic::dialect::Dialect;
use crate::anthropic::to_chat::{ChatForm, Untranslatable};
use crate::cache::Fill;
use crate::cooldown::{Cooldowns, Verdict};
use crate::headers::{self, path, TEXT_EVENT_STREAM};
use crate::hooks::{OwnerRule, UpstreamOutcomes};
use crate::log::RequestRecord;
use crate::openai::{Api, ApiError};
use crate::otel::{key, name, text, Phase, RequestTrace};
use crate::pipeline::answer::{answer_error, set_sr_headers};
use crate::pipeline::body::{ProxyBody, Relay, Rewrite};
use crate::pipeline::completion::Completion;
use crate::pipeline::decide::Plan;
use crate::pipeline::rewrite;
use crate::pipeline::shape::{over_context, set_model_headers, ShapeInput, Shaping};
use crate::policy_store::Snapshot;
use crate::responses_state::chain::Continuation;
use crate::telemetry::{FallbackLabels, Telemetry};
use crate::upstream::{Upstream, UpstreamError};

/// Client headers that are about the client's connection, not the request, or that the router
/// sets itself. `accept-encoding` is dropped so answers arrive uncompressed: the router reads
/// usage evidence from them.
const NOT_FORWARDED: [&str; 12] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "accept-encoding",
    "expect",
];

/// Upstream answer headers that belong to the upstream connection.
const NOT_RETURNED: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Why a candidate produced no answer.
enum Failure {
    Context {
        tokens: i64,
        context: u64,
    },
    /// The backend does not speak the request's API.
    Unspoken {
        api: &'static str,
    },
    Cooldown {
        left: Duration,
    },
    Upstream(UpstreamError),
    Status(StatusCode),
    Body(String),
}

impl Failure {
    fn reason(&self) -> &'static str {
        match self {
            Failure::Context { .. } => "context",
            Failure::Unspoken { .. } => "api",
            Failure::Cooldown { .. } => "cooldown",
            Failure::Upstream(e) => e.reason(),
            Failure::Status(_) => "status",
            Failure::Body(_) => "body",
        }
    }

    fn describe(&self) -> String {
        match self {
            Failure::Context { tokens, context } => {
                format!("the request has ~{tokens} tokens, over its context of {context}")
            }
            Failure::Unspoken { api } => {
                format!("its backend speaks Anthropic's Messages API, not the {api} API")
            }
            Failure::Cooldown { left } => format!(
                "cooling down after repeated failures ({} left)",
                crate::upstream::human_duration(*left)
            ),
            Failure::Upstream(e) => e.to_string(),
            Failure::Status(s) => format!("the backend answered {}", s.as_u16()),
            Failure::Body(e) => e.clone(),
        }
    }
}

/// Everything about the request the forwarder reads.
pub struct Outgoing<'a> {
    pub api: Api,
    pub parts: &'a Parts,
    pub body: &'a Bytes,
    pub parsed: &'a Value,
    pub view: &'a RequestView,
    /// A `/v1/responses` turn continuing a response the router stored: how it is sent to
    /// that response's owner and to any other candidate.
    pub previous: Option<&'a Continuation>,
}

/// How a candidate's request reaches its backend: the server's pooled clients, or a fake in
/// tests. `Body` is the answer's body type (hyper's `Incoming` for real connections).
pub trait Transport {
    type Body;

    /// Sends `request`, waiting at most `timeout` for the answer's head.
    fn send(
        &self,
        request: Request<Full<Bytes>>,
        timeout: Duration,
    ) -> impl Future<Output = Result<Response<Self::Body>, UpstreamError>> + Send;
}

impl Transport for Upstream {
    type Body = Incoming;

    fn send(
        &self,
        request: Request<Full<Bytes>>,
        timeout: Duration,
    ) -> impl Future<Output = Result<Response<Incoming>, UpstreamError>> + Send {
        Upstream::send(self, request, timeout)
    }
}

/// Sends the request to the plan's candidates in order and relays the first answer.
pub async fn forward(
    upstream: &Upstream,
    (telemetry, cooldowns): (&Telemetry, &Arc<Cooldowns>),
    snapshot: &Snapshot,
    request: Outgoing<'_>,
    plan: Plan,
    mut done: Completion,
) -> Response<ProxyBody> {
    let policy = snapshot.policy();
    note_plan(&mut done.record, policy, &plan);
    let session_outcomes = plan.session.as_ref().and_then(|s| s.outcomes.clone());
    let fill = plan.cache.as_ref().and_then(|c| c.fill.clone());

    let tried = try_candidates(
        upstream,
        (telemetry, cooldowns),
        snapshot,
        &request,
        &plan,
        (&mut done.record, &done.trace),
    )
    .await;
    let owner = plan.session.as_ref().and_then(|s| s.owner);
    let owner_name = owner
        .and_then(|o| policy.models.get(o.model.index()))
        .map_or("", |m| m.name.as_str());
    let failures = match tried.outcome {
        Tried::Unbuildable(error) => return answer_error(done, error),
        Tried::OwnerKept => {
            done.record.fallbacks = fallback_list(policy, &tried.failures);
            report_failures(session_outcomes.as_deref(), policy, &tried.failures);
            if let Some(outcomes) = session_outcomes.as_deref() {
                outcomes.owner_lost(owner_name, None, "fail").await;
            }
            return owner_kept(done, owner_name);
        }
        Tried::Answered {
            response,
            model_id,
            model,
            sent_at,
            timeout,
            mut span,
            dialect,
            verdict,
        } => {
            span.set(key::STATUS, || i64::from(response.status().as_u16()).into());
            done.upstream = Some(span);
            done.record.fallbacks = fallback_list(policy, &tried.failures);
            report_failures(session_outcomes.as_deref(), policy, &tried.failures);
            let mut protection = plan.protection.as_deref();
            if let Some(rule) = owner.filter(|o| tried.owner_lost && o.model != model_id) {
                let action = owner_lost_action(rule);
                if let Some(outcomes) = session_outcomes.as_deref() {
                    outcomes
                        .owner_lost(owner_name, Some(&model.name), action)
                        .await;
                }
                done.record.switch_reason = Some(headers::switch_reason::OWNER_LOST);
                if action == OBSERVED {
                    done.record.session = Some(headers::session::OBSERVED);
                    protection = Some(headers::switch_reason::OWNER_LOST);
                } else {
                    done.record.session = Some(headers::session::SWITCHED);
                }
                done.record.protection = protection.map(str::to_owned);
            }
            let fill = fill.filter(|f| f.model == model_id);
            let translated = dialect == Dialect::ChatForMessages;
            let answer = Answer {
                sent_at,
                timeout,
                protection,
                model: &model.name,
                outcomes: session_outcomes,
                fill: if translated { None } else { fill.clone() },
                verdict,
                rewrite: translated
                    .then_some(crate::anthropic::from_chat::message_and_usage as Rewrite),
            };
            let response = relay(response, answer, done);
            if translated {
                return crate::anthropic::translate::answer(response, fill).await;
            }
            return response;
        }
        Tried::Exhausted => tried.failures,
    };
    done.record.fallbacks = fallback_list(policy, &failures);
    report_failures(session_outcomes.as_deref(), policy, &failures);
    let error = exhausted(policy, &failures);
    answer_error(done, error)
}

/// The `owner_lost` action an answering fallback was reached under.
const OBSERVED: &str = "observed";

fn owner_lost_action(rule: OwnerRule) -> &'static str {
    match rule.on_loss {
        OwnerLost::Fail => OBSERVED,
        OwnerLost::Fallback => "fallback",
        OwnerLost::Move => "move",
    }
}

/// The answer when the pinned model failed a call that `owner_lost = fail` keeps on it: 503 with
/// `Retry-After`, so the agent retries on the same owner rather than hand its task to another.
fn owner_kept(done: Completion, owner: &str) -> Response<ProxyBody> {
    let error = ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "server_error",
        Some("owner_lost"),
        format!(
            "the session's model `{owner}` is unavailable, and this call may not move to another \
             model; retry"
        ),
    );
    let mut response = answer_error(done, error);
    response.headers_mut().insert(
        hyper::header::RETRY_AFTER,
        HeaderValue::from_static(OWNER_RETRY_AFTER_S),
    );
    response
}

/// Seconds an agent waits before retrying a call its lost owner must answer: a backend restarts
/// or a Dynamo frontend finds another worker of the same model within seconds.
const OWNER_RETRY_AFTER_S: &str = "1";

/// Notes in `record` what decided the plan: its route, block, session state, `protect` hold
/// and cache score (the model is noted per attempt).
pub fn note_plan(record: &mut RequestRecord, policy: &CheckedPolicy, plan: &Plan) {
    record.route = plan
        .route
        .and_then(|r| policy.routes.get(r.index()))
        .map(|r| r.name.clone());
    record.block = plan
        .block
        .and_then(|b| policy.blocks.get(b.index()))
        .map(|b| b.name.clone());
    record.session = plan.session.as_ref().map(|s| s.state);
    record.protection.clone_from(&plan.protection);
    record.cache_score = plan.cache.as_ref().and_then(|c| c.score).map(f64::from);
}

/// The answer to a request longer than every eligible model's context; `detail` names them.
pub fn too_long(detail: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        Some("context_length_exceeded"),
        format!("the request is longer than every eligible model's context ({detail})"),
    )
}

/// Counts a candidate skipped or failed, under `reason`.
pub fn count_fallback(telemetry: &Telemetry, model: &str, reason: &'static str) {
    telemetry
        .fallbacks
        .get_or_create(&FallbackLabels {
            from: model.to_owned(),
            reason,
        })
        .inc();
}

/// The first of `candidates` a front door that cannot retry (the external processor) may send
/// the request to: a model cooling down or too small for the request is skipped, counted and
/// described as [`forward`]'s loop does (into `fallbacks`, the record's list); with none left,
/// the error the proxy would answer.
pub fn first_sendable(
    (telemetry, cooldowns): (&Telemetry, &Arc<Cooldowns>),
    policy: &CheckedPolicy,
    candidates: &[ModelId],
    view: &RequestView,
    fallbacks: &mut Vec<String>,
) -> Result<ModelId, ApiError> {
    let mut tokens = None;
    let mut failures: Vec<(ModelId, Failure)> = Vec::new();
    for &id in candidates {
        let Some(model) = policy.models.get(id.index()) else {
            continue;
        };
        let failure = if let Some(left) = cooldowns.cooling(&model.name) {
            Failure::Cooldown { left }
        } else if let Some((tokens, context)) = over_context(model, view, &mut tokens) {
            Failure::Context { tokens, context }
        } else {
            *fallbacks = fallback_list(policy, &failures);
            return Ok(id);
        };
        note_fallback(telemetry, &model.name, failure, id, &mut failures);
    }
    *fallbacks = fallback_list(policy, &failures);
    Err(exhausted(policy, &failures))
}

/// How the candidates ended.
enum Tried<'p, B> {
    /// A candidate's backend answered (`failures` are the candidates before it).
    Answered {
        response: Response<B>,
        model_id: ModelId,
        model: &'p ModelDef,
        sent_at: Instant,
        /// The backend's `timeout`, which also bounds a silence within the answer.
        timeout: Duration,
        /// The attempt's span, ended when the relay ends.
        span: Phase,
        /// How the request reached the backend (whether the answer is to be translated).
        dialect: Dialect,
        /// The cooldown's verdict, given when the answer's body ends.
        verdict: Option<Verdict>,
    },
    /// The request could not be rewritten for a candidate: the client's to fix.
    Unbuildable(ApiError),
    /// The session's pinned model failed the call, and `owner_lost = fail` keeps it there.
    OwnerKept,
    /// Every candidate failed.
    Exhausted,
}

/// What trying the candidates came to, and why the ones that did not answer did not.
struct Attempts<'p, B> {
    outcome: Tried<'p, B>,
    failures: Vec<(ModelId, Failure)>,
    /// The session's pinned model failed the call upstream, and the fallbacks were let on.
    owner_lost: bool,
}

/// Tries the plan's candidates in order, noting in `record` the model each attempt went to. Each
/// attempt is a client span of `trace`, and the `traceparent` it sends names that span.
async fn try_candidates<'p, T: Transport>(
    transport: &T,
    (telemetry, cooldowns): (&Telemetry, &Arc<Cooldowns>),
    snapshot: &'p Snapshot,
    request: &Outgoing<'_>,
    plan: &Plan,
    (record, trace): (&mut RequestRecord, &RequestTrace),
) -> Attempts<'p, T::Body> {
    let policy = snapshot.policy();
    let route = plan.route.and_then(|r| policy.routes.get(r.index()));
    let shaping = Shaping::new(ShapeInput {
        api: request.api,
        original: request.body,
        parsed: request.parsed,
        trace,
        request_id: &record.request_id,
        route,
        session_identity: plan.session.as_ref().and_then(|s| s.identity.as_deref()),
    });
    let chat_form = chat_form(request, plan, snapshot);
    // Only a route's plugins edit the chat form as JSON; without them each candidate's body is
    // the form's bytes with its served id.
    let edited_form = match (&chat_form, route) {
        (Some(Ok(form)), Some(route)) if rewrite::has_plugins(route) => {
            let original = form.with_model(request.parsed);
            let parsed: Value = serde_json::from_slice(&original).unwrap_or_default();
            Some((original, parsed))
        }
        _ => None,
    };
    let chat_shaping = edited_form.as_ref().map(|(original, parsed)| {
        Shaping::new(ShapeInput {
            api: Api::Chat,
            original,
            parsed,
            trace,
            request_id: &record.request_id,
            route,
            session_identity: plan.session.as_ref().and_then(|s| s.identity.as_deref()),
        })
    });
    let mut base_headers = client_headers(&request.parts.headers);
    for (name, value) in shaping.router_headers() {
        base_headers.insert(name.clone(), value.clone());
    }
    let mut tokens: Option<i64> = None;
    let mut failures: Vec<(ModelId, Failure)> = Vec::new();
    let owner = plan.session.as_ref().and_then(|s| s.owner);
    let mut owner_lost = false;

    for (tried, &model_id) in plan.candidates.iter().enumerate() {
        let more = tried + 1 < plan.candidates.len();
        let Some(model) = policy.models.get(model_id.index()) else {
            continue;
        };
        let (Some(endpoint), Some(wire)) = (
            snapshot.endpoints.get(model.backend.index()),
            snapshot.wire.get(model_id.index()),
        ) else {
            continue;
        };
        if let Some(left) = cooldowns.cooling(&model.name) {
            let failure = Failure::Cooldown { left };
            note_fallback(telemetry, &model.name, failure, model_id, &mut failures);
            continue;
        }
        if let Some((tokens, context)) = over_context(model, request.view, &mut tokens) {
            note_fallback(
                telemetry,
                &model.name,
                Failure::Context { tokens, context },
                model_id,
                &mut failures,
            );
            continue;
        }
        let dialect = Dialect::of(request.api, endpoint.api);
        let moved = request
            .previous
            .filter(|p| !p.owned_by(&endpoint.name, &model.serves));
        let shaped = match (dialect, &chat_form, &chat_shaping) {
            (Dialect::Unspoken, _, _) => {
                let failure = Failure::Unspoken {
                    api: request.api.endpoint(),
                };
                note_fallback(telemetry, &model.name, failure, model_id, &mut failures);
                continue;
            }
            (Dialect::ChatForMessages, Some(Err(err)), _) => Err(err.to_string()),
            (Dialect::ChatForMessages, _, Some(chat)) => chat.body(wire).map_err(|e| e.to_string()),
            (Dialect::ChatForMessages, Some(Ok(form)), None) => Ok(form.body(&wire.served_json)),
            _ => moved
                .map_or_else(|| shaping.body(wire), |p| p.body(wire))
                .map_err(|e| e.to_string()),
        };
        if request.previous.is_some() {
            record.previous = Some(if moved.is_some() {
                headers::previous::EXPANDED
            } else {
                headers::previous::CONTINUED
            });
        }
        let body = match shaped {
            Ok(body) => body,
            Err(err) => {
                return Attempts {
                    outcome: Tried::Unbuildable(ApiError::bad_request(err)),
                    failures,
                    owner_lost,
                }
            }
        };
        let mut upstream = match Request::post(endpoint.url(dialect.suffix(request.api)))
            .body(Full::new(Bytes::from(body)))
        {
            Ok(r) => r,
            Err(err) => {
                let failure = Failure::Body(format!("cannot build the upstream request: {err}"));
                note_fallback(telemetry, &model.name, failure, model_id, &mut failures);
                continue;
            }
        };
        let headers = upstream.headers_mut();
        headers.clone_from(&base_headers);
        if let Some(host) = &endpoint.host {
            // A `host` the route sets itself wins, as it would with the client's own.
            headers
                .entry(hyper::header::HOST)
                .or_insert_with(|| host.clone());
        }
        set_model_headers(headers, wire, endpoint);
        crate::anthropic::dialect::set_headers(headers, dialect, endpoint);
        record.model = Some(model.name.clone());
        record.served = Some(model.serves.clone());
        record.backend = Some(endpoint.name.clone());
        let mut span = trace.phase_at(name::UPSTREAM, SpanKind::Client, None);
        if span.is_on() {
            span.set(key::MODEL, || text(&model.name));
            span.set(key::SERVED, || text(&model.serves));
            span.set(key::BACKEND, || text(&endpoint.name));
        }
        if let Ok(v) = HeaderValue::from_str(&trace.traceparent(&span)) {
            headers.insert(HeaderName::from_static(headers::TRACEPARENT), v);
        }

        let sent_at = Instant::now();
        match transport.send(upstream, endpoint.timeout).await {
            Ok(response) if moves_on(response.status(), more) => {
                let status = response.status();
                drop(response);
                cooldowns.failed(policy, &model.name);
                span.set(key::STATUS, || i64::from(status.as_u16()).into());
                span.set(key::FALLBACK_REASON, || "status".into());
                span.fail(|| format!("the backend answered {}", status.as_u16()));
                span.end();
                note_fallback(
                    telemetry,
                    &model.name,
                    Failure::Status(status),
                    model_id,
                    &mut failures,
                );
                if let Some(kept) = lose_owner(owner, model_id, more, &mut owner_lost) {
                    return Attempts {
                        outcome: kept,
                        failures,
                        owner_lost,
                    };
                }
            }
            Ok(response) => {
                let verdict = judge_status(cooldowns, policy, &model.name, response.status());
                return Attempts {
                    outcome: Tried::Answered {
                        response,
                        model_id,
                        model,
                        sent_at,
                        timeout: endpoint.timeout,
                        span,
                        dialect,
                        verdict,
                    },
                    failures,
                    owner_lost,
                };
            }
            Err(err) => {
                cooldowns.failed(policy, &model.name);
                span.set(key::FALLBACK_REASON, || err.reason().into());
                span.fail(|| err.to_string());
                span.end();
                note_fallback(
                    telemetry,
                    &model.name,
                    Failure::Upstream(err),
                    model_id,
                    &mut failures,
                );
                if let Some(kept) = lose_owner(owner, model_id, more, &mut owner_lost) {
                    return Attempts {
                        outcome: kept,
                        failures,
                        owner_lost,
                    };
                }
            }
        }
    }
    Attempts {
        outcome: Tried::Exhausted,
        failures,
        owner_lost,
    }
}

/// The pinned model `failed` the call upstream with `more` candidates left: under `owner_lost =
/// fail` (enforced) the call stops there; otherwise the fallbacks go on, and `lost` says so.
fn lose_owner<'p, B>(
    owner: Option<OwnerRule>,
    failed: ModelId,
    more: bool,
    lost: &mut bool,
) -> Option<Tried<'p, B>> {
    let rule = owner.filter(|o| o.model == failed && more)?;
    if rule.on_loss == OwnerLost::Fail && !rule.observe {
        return Some(Tried::OwnerKept);
    }
    *lost = true;
    None
}

/// The chat completions form of a Messages request, when one of the plan's candidates is on an
/// OpenAI backend; the error says why the request has none.
fn chat_form(
    request: &Outgoing<'_>,
    plan: &Plan,
    snapshot: &Snapshot,
) -> Option<Result<ChatForm, Untranslatable>> {
    let policy = snapshot.policy();
    let translated = plan.candidates.iter().any(|id| {
        policy
            .models
            .get(id.index())
            .and_then(|m| snapshot.endpoints.get(m.backend.index()))
            .is_some_and(|e| Dialect::of(request.api, e.api) == Dialect::ChatForMessages)
    });
    if !translated {
        return None;
    }
    Some(ChatForm::new(request.parsed))
}

/// Whether an upstream answer with `status` sends the request on to the next model: any 5xx,
/// and a 404 or a 429 while another model remains. A 404 says the backend does not serve the
/// model (NVIDIA Dynamo answers it once a model's last worker is gone) and a 429 that the model
/// is over its rate limit, neither of which the next model need share; other 4xx answers are
/// about the request and pass through. With no model left, the 404 or 429 passes through too
/// (with its `retry-after`): the client sees that the model is not served, or when to retry.
fn moves_on(status: StatusCode, more: bool) -> bool {
    status.is_server_error()
        || (matches!(
            status,
            StatusCode::NOT_FOUND | StatusCode::TOO_MANY_REQUESTS
        ) && more)
}

/// Counts an answer that did not move on towards the model's cooldown: a 404 or 429 from the
/// last model is a failure, other 4xx neither (they are about the request); below 400 the
/// answer is judged when its body ends, by the returned verdict (a stream that breaks off in
/// the middle is a failure, not a success).
pub fn judge_status(
    cooldowns: &Arc<Cooldowns>,
    policy: &CheckedPolicy,
    model: &str,
    status: StatusCode,
) -> Option<Verdict> {
    if status.as_u16() < 400 {
        return cooldowns.pending(policy, model);
    }
    if matches!(
        status,
        StatusCode::NOT_FOUND | StatusCode::TOO_MANY_REQUESTS
    ) || status.is_server_error()
    {
        cooldowns.failed(policy, model);
    }
    None
}

/// Tells the session layer which models failed the call upstream (a context skip or a request
/// the router could not build is no fault of the model).
fn report_failures(
    outcomes: Option<&dyn UpstreamOutcomes>,
    policy: &CheckedPolicy,
    failures: &[(ModelId, Failure)],
) {
    let Some(outcomes) = outcomes else {
        return;
    };
    for (id, failure) in failures {
        if let (Failure::Status(_) | Failure::Upstream(_), Some(model)) =
            (failure, policy.models.get(id.index()))
        {
            outcomes.failed(&model.name, failure.reason());
        }
    }
}

fn note_fallback(
    telemetry: &Telemetry,
    model: &str,
    failure: Failure,
    id: ModelId,
    failures: &mut Vec<(ModelId, Failure)>,
) {
    count_fallback(telemetry, model, failure.reason());
    tracing::debug!(model, reason = failure.reason(), detail = %failure.describe(), "trying the next model");
    failures.push((id, failure));
}

fn fallback_list(policy: &CheckedPolicy, failures: &[(ModelId, Failure)]) -> Vec<String> {
    failures
        .iter()
        .filter_map(|(id, f)| {
            policy
                .models
                .get(id.index())
                .map(|m| format!("{}:{}", m.name, f.reason()))
        })
        .collect()
}

/// The answer when every candidate failed: 400 when the request fits no model's context or no
/// model's backend speaks its API, else
/// the kind of the last failure (504 timeout, 502 unreachable or broken, 503 backend errors).
fn exhausted(policy: &CheckedPolicy, failures: &[(ModelId, Failure)]) -> ApiError {
    let detail = failures
        .iter()
        .map(|(id, f)| {
            let name = policy
                .models
                .get(id.index())
                .map_or("?", |m| m.name.as_str());
            format!("`{name}`: {}", f.describe())
        })
        .collect::<Vec<_>>()
        .join("; ");
    if !failures.is_empty()
        && failures
            .iter()
            .all(|(_, f)| matches!(f, Failure::Context { .. }))
    {
        return too_long(&detail);
    }
    if failures
        .iter()
        .any(|(_, f)| matches!(f, Failure::Unspoken { .. }))
        && failures
            .iter()
            .all(|(_, f)| matches!(f, Failure::Context { .. } | Failure::Unspoken { .. }))
    {
        return ApiError::bad_request(format!(
            "no eligible model's backend speaks this API ({detail})"
        ));
    }
    let message = format!("no backend could answer ({detail})");
    match failures
        .iter()
        .rev()
        .find(|(_, f)| !matches!(f, Failure::Context { .. }))
    {
        Some((_, Failure::Upstream(UpstreamError::Timeout { .. }))) => {
            ApiError::gateway_timeout(message)
        }
        Some((_, Failure::Upstream(_) | Failure::Body(_))) => ApiError::bad_gateway(message),
        _ => ApiError::service_unavailable(message),
    }
}

/// Whether `connection` lists `name` as a hop-by-hop header of this connection (RFC 9110 §7.6.1).
fn named_by_connection(headers: &HeaderMap, name: &HeaderName) -> bool {
    headers
        .get_all(hyper::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case(name.as_str()))
}

/// Client headers minus hop-by-hop ones (`proxy-*` included), those only the router sets, and
/// `cookie` (a browser session for the router's host means nothing to a backend). The router's
/// own are added over them.
fn client_headers(client: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(client.len() + 6);
    for (name, value) in client {
        let lower = name.as_str();
        if !NOT_FORWARDED.contains(&lower)
            && !lower.starts_with("proxy-")
            && lower != "cookie"
            && !headers::router_owned(lower)
            && !named_by_connection(client, name)
        {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// Removes from an upstream answer's headers those about the upstream connection: the
/// [`NOT_RETURNED`] names and any the `connection` header lists.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let listed: Vec<HeaderName> = headers
        .get_all(hyper::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|token| HeaderName::from_bytes(token.trim().as_bytes()).ok())
        .collect();
    for name in listed {
        headers.remove(name);
    }
    for name in NOT_RETURNED {
        if headers.contains_key(name) {
            headers.remove(name);
        }
    }
}

/// What the relay of an upstream answer needs besides the answer.
struct Answer<'a> {
    sent_at: Instant,
    timeout: Duration,
    protection: Option<&'a str>,
    model: &'a str,
    outcomes: Option<Arc<dyn UpstreamOutcomes>>,
    /// Set when this answer, once whole, goes into the response cache.
    fill: Option<Fill>,
    verdict: Option<Verdict>,
    /// Set when a whole JSON answer is rewritten for the client (a translated one).
    rewrite: Option<Rewrite>,
}

fn relay(
    upstream: Response<Incoming>,
    answer: Answer<'_>,
    mut done: Completion,
) -> Response<ProxyBody> {
    let Answer {
        sent_at,
        timeout,
        protection,
        model,
        outcomes,
        fill,
        verdict,
        rewrite,
    } = answer;
    let (mut parts, body) = upstream.into_parts();
    let sse = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(TEXT_EVENT_STREAM));
    done.record.status = parts.status.as_u16();
    done.record.path = path::UPSTREAM;
    // The upstream's header map is the answer's: only the hop-by-hop names leave it, so the
    // common answer (none of them) is relayed without copying a header.
    strip_hop_by_hop(&mut parts.headers);
    let mut response = Response::new(ProxyBody::Full(Full::new(Bytes::new())));
    *response.status_mut() = parts.status;
    *response.headers_mut() = parts.headers;
    let headers = response.headers_mut();
    if sse {
        // The relay may end a failed stream with an error event of its own.
        headers.remove(hyper::header::CONTENT_LENGTH);
    }
    set_sr_headers(headers, &done.record, Some(model));
    if let Some(protection) = protection.and_then(|p| HeaderValue::from_str(p).ok()) {
        headers.insert(HeaderName::from_static(headers::SR_PROTECTION), protection);
    }
    let mut relay = Relay::new(body, sse, sent_at, done).with_idle_timeout(timeout);
    if let Some(outcomes) = outcomes {
        relay = relay.with_outcomes(outcomes, model);
    }
    if let Some(fill) = fill {
        relay = relay.with_cache(fill);
    }
    if let Some(verdict) = verdict {
        relay = relay.with_verdict(verdict);
    }
    if let Some(rewrite) = rewrite {
        relay = relay.with_rewrite(rewrite);
    }
    *response.body_mut() = ProxyBody::Relay(Box::new(relay));
    response
}

#[cfg(test)]
mod tests;
