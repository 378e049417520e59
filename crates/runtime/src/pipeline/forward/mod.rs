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
//! client by the relay (see [`crate::relay::body`]). When the proposed model answers a cache
//! miss, the relay also hands the whole answer to the cache.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::http::request::Parts;
use hyper::{Request, Response, StatusCode};
use src_compiler::failover::{Attempts, End};
use src_compiler::hir::{CheckedPolicy, ModelId};
use src_compiler::request::RequestView;

use crate::anthropic::dialect::Dialect;
use crate::cooldown::{Cooldowns, Verdict};
use crate::headers;
use crate::log::RequestRecord;
use crate::openai::{Api, ApiError};
use crate::otel::key;
use crate::pipeline::answer::answer_error;
use crate::pipeline::continuation::{ChainVault, Continuation};
use crate::pipeline::decide::Plan;
use crate::policy_store::Snapshot;
use crate::relay::body::{ProxyBody, Rewrite};
use crate::relay::completion::Completion;
use crate::relay::counted::Counted;
use crate::relay::rewriting::Rewritten;
use crate::telemetry::{FallbackLabels, Telemetry};
use crate::upstream::{Upstream, UpstreamError};

mod attempt;
pub mod failures;
pub(crate) mod hygiene;
mod relay;

use attempt::{try_candidates, Tried};
use relay::{relay, Answer};

/// Everything about the request the forwarder reads.
pub struct Outgoing<'a> {
    pub api: Api,
    pub parts: &'a Parts,
    pub body: &'a Bytes,
    pub parsed: &'a crate::pipeline::intake::JsonBody,
    pub view: &'a RequestView,
    /// A `/v1/responses` turn continuing a response the router stored: how it is sent to
    /// that response's owner and to any other candidate.
    pub previous: Option<&'a Continuation>,
    /// A `/v1/responses` turn continuing a chain: the vault its earlier turns were redacted
    /// with, which a redacting candidate starts from and another restores its answer with.
    pub chain: Option<&'a ChainVault>,
    /// Runs the detectors a route's `redact` names.
    pub models: &'a dyn crate::hooks::ModelSignals,
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

/// Who made an answer: the typed result every layer above the forwarder reads, instead of the
/// headers it set for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnsweredBy {
    /// The router itself: an error, a refusal, a lost owner kept.
    Router,
    /// A stored answer of the response cache.
    Cache,
    /// This candidate's backend; the answer is relayed as it arrives.
    Upstream(ModelId),
}

/// An answer and who made it.
pub struct Answered {
    pub response: Response<ProxyBody>,
    pub by: AnsweredBy,
    /// The values the answering candidate was sent placeholders for (a route's `redact`).
    pub vault: Option<Arc<src_compiler::pii::Vault>>,
}

impl Answered {
    pub fn router(response: Response<ProxyBody>) -> Answered {
        Answered {
            response,
            by: AnsweredBy::Router,
            vault: None,
        }
    }
}

/// Sends the request to the plan's candidates in the order the failover machine names them,
/// and relays the first answer.
pub async fn forward(
    upstream: &Upstream,
    (telemetry, cooldowns): (&Telemetry, &Arc<Cooldowns>),
    snapshot: &Snapshot,
    request: Outgoing<'_>,
    plan: Plan,
    mut done: Completion,
) -> Answered {
    let policy = snapshot.policy();
    note_plan(&mut done.record, policy, &plan);
    let session_outcomes = plan.session.as_ref().and_then(|s| s.outcomes.clone());
    let fill = plan.cache.as_ref().and_then(|c| c.fill.clone());
    let owner = plan.session.as_ref().and_then(|s| s.owner);
    let mut attempts = Attempts::new(&plan.candidates, request.api.wire(), owner);

    let tried = try_candidates(
        upstream,
        cooldowns,
        snapshot,
        &request,
        (&plan, &mut attempts),
        (&mut done.record, &done.trace),
    )
    .await;
    failures::count(telemetry, policy, &attempts);
    done.record.fallbacks = attempts.fallback_list(policy);
    if !matches!(tried, Tried::Unbuildable(_)) {
        failures::report(session_outcomes.as_deref(), policy, &attempts);
    }
    let owner_name = owner
        .and_then(|o| policy.models.get(o.model.index()))
        .map_or("", |m| m.name.as_str());
    match tried {
        Tried::Unbuildable(error) => Answered::router(answer_error(done, error)),
        Tried::Ended(End::OwnerKept) => {
            if let Some(outcomes) = session_outcomes.as_deref() {
                outcomes.owner_lost(owner_name, None, "fail").await;
            }
            Answered::router(owner_kept(done, owner_name))
        }
        Tried::Ended(End::Exhausted) => {
            let error = failures::exhausted(policy, &attempts);
            Answered::router(answer_error(done, error))
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
            sim_account,
            vault,
        } => {
            span.set(key::STATUS, || i64::from(response.status().as_u16()).into());
            done.upstream = Some(span);
            if let Some(wire) = snapshot.wire.get(model_id.index()) {
                done.answered_by(&wire.upstream_times);
            }
            if let Some(charge) = &mut done.charge {
                charge.answered_by(policy, model_id);
            }
            let mut protection = plan.protection.as_deref();
            if let Some(rule) = attempts.owner_lost().filter(|o| o.model != model_id) {
                let action = rule.action();
                if let Some(outcomes) = session_outcomes.as_deref() {
                    outcomes
                        .owner_lost(owner_name, Some(&model.name), action)
                        .await;
                }
                done.record.switch_reason = Some(headers::switch_reason::OWNER_LOST);
                if action == src_compiler::failover::OBSERVED {
                    done.record.session = Some(headers::session::OBSERVED);
                    protection = Some(headers::switch_reason::OWNER_LOST);
                } else {
                    done.record.session = Some(headers::session::SWITCHED);
                }
                done.record.protection = protection.map(str::to_owned);
            }
            // A redacted request's answer carries placeholders: it is no answer to keep.
            let fill = fill.filter(|f| f.model == model_id && vault.is_none());
            let translated = dialect == Dialect::ChatForMessages;
            // Messages always reports usage; a chat backend may not.
            let counted = translated.then(|| Arc::new(Counted::of_request(&request.view.history)));
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
                counted: counted.clone(),
                sim_account,
                key: snapshot
                    .endpoints
                    .get(model.backend.index())
                    .and_then(crate::backends::Endpoint::key),
            };
            let strip = plan.ask_usage
                && request.api == Api::Chat
                && !translated
                && crate::pipeline::shape::usage_asked(request.parsed.tree()).is_some();
            let response = relay(response, answer, done);
            // The values go back first, so a translation reads the answer the client is owed.
            let response = match vault.clone() {
                Some(vault) => {
                    let sse = response
                        .headers()
                        .get(hyper::header::CONTENT_TYPE)
                        .and_then(|v| v.to_str().ok())
                        .is_some_and(|v| v.starts_with(crate::headers::TEXT_EVENT_STREAM));
                    let (mut parts, body) = response.into_parts();
                    parts.headers.remove(hyper::header::CONTENT_LENGTH);
                    let restore = crate::relay::restore::Restore::new(vault, sse);
                    Response::from_parts(parts, Rewritten::boxed(body, restore))
                }
                None => response,
            };
            let response = if strip {
                response.map(|body| {
                    Rewritten::boxed(body, crate::relay::usage_strip::StripUsage::new())
                })
            } else {
                response
            };
            let response = match counted {
                Some(counted) => crate::anthropic::translate::answer(response, fill, counted).await,
                None => response,
            };
            Answered {
                response,
                by: AnsweredBy::Upstream(model_id),
                vault,
            }
        }
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

/// The one candidate a front door that cannot retry (the external processor) sends the request
/// to: the failover machine asked once, so it skips exactly what the proxy's loop skips (a
/// backend that does not speak the request's API, a model cooling down or too small), counted
/// and described the same way (into `fallbacks`, the record's list); with none left, the error
/// the proxy would answer.
pub fn first_sendable(
    (telemetry, cooldowns): (&Telemetry, &Arc<Cooldowns>),
    policy: &CheckedPolicy,
    (api, candidates): (Api, &[ModelId]),
    view: &RequestView,
    fallbacks: &mut Vec<String>,
) -> Result<(ModelId, Dialect), ApiError> {
    let mut attempts = Attempts::new(candidates, api.wire(), None);
    let next = attempts.next(policy, view, |m| cooldowns.cooling(&m.name));
    failures::count(telemetry, policy, &attempts);
    *fallbacks = attempts.fallback_list(policy);
    match next {
        src_compiler::failover::Next::Send { model, reach } => Ok((model, reach)),
        src_compiler::failover::Next::Done(_) => Err(failures::exhausted(policy, &attempts)),
    }
}

/// The cooldown's part in a relayed answer's `status`, as the proxy judges it (see
/// [`src_compiler::failover::Health`]).
pub fn judge_status(
    cooldowns: &Arc<Cooldowns>,
    policy: &CheckedPolicy,
    model: &str,
    status: StatusCode,
) -> Option<Verdict> {
    attempt::judge(
        cooldowns,
        policy,
        model,
        src_compiler::failover::Health::of(status.as_u16()),
    )
}

#[cfg(test)]
mod tests;
