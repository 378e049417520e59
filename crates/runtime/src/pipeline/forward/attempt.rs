//! The send loop: the failover machine ([`Attempts`]) names each candidate, this module builds
//! the candidate's request (its body in the candidate's dialect, the router's headers, a
//! client span), sends it, and tells the machine what came back.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request, Response};
use opentelemetry::trace::SpanKind;
use src_compiler::failover::{Attempts, End, Health, Judged, Next, Unanswered, Why};
use src_compiler::hir::{ModelDef, ModelId};
use src_compiler::pii::Vault;

use crate::anthropic::dialect::{self, Dialect};
use crate::anthropic::to_chat::{ChatForm, Untranslatable};
use crate::cooldown::{Cooldowns, Verdict};
use crate::headers;
use crate::log::RequestRecord;
use crate::openai::{Api, ApiError};
use crate::otel::{key, name, text, Phase, RequestTrace};
use crate::pipeline::continuation::ChainVault;
use crate::pipeline::decide::Plan;
use crate::pipeline::forward::hygiene::client_headers;
use crate::pipeline::forward::{Outgoing, Transport};
use crate::pipeline::intake::JsonBody;
use crate::pipeline::redact::{detected_vault, redact_body, summary, tenant_vault, texts_of_body};
use crate::pipeline::rewrite;
use crate::pipeline::shape::{set_model_headers, ShapeInput, Shaping};
use crate::policy_store::Snapshot;
use crate::upstream::UpstreamError;

/// How the candidates ended.
pub(super) enum Tried<'p, B> {
    /// A candidate's backend answered (the machine's failures are the candidates before it).
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
        /// Whether the simulator's `x-sim-*` account goes on to the client.
        sim_account: bool,
        /// The values the candidate was sent placeholders for (a route's `redact`).
        vault: Option<Arc<Vault>>,
    },
    /// The request could not be rewritten for a candidate (the client's to fix), or a detector
    /// its `redact` names could not read it (so no candidate may be sent it).
    Unbuildable(ApiError),
    /// The attempts ended without an answer.
    Ended(End),
}

/// The machine's failure of a send that got no answer.
pub(super) fn unanswered(err: &UpstreamError) -> Why {
    Why::Upstream {
        kind: match err {
            UpstreamError::Timeout { .. } => Unanswered::Timeout,
            UpstreamError::Connect { .. } | UpstreamError::Exchange { .. } => {
                Unanswered::Unreachable
            }
        },
        reason: err.reason(),
        detail: err.to_string(),
    }
}

/// The cooldown's part in an answer the machine judged: a failure counted now, or a verdict
/// given when its body ends.
pub(crate) fn judge(
    cooldowns: &Arc<Cooldowns>,
    policy: &src_compiler::hir::CheckedPolicy,
    model: &str,
    health: Health,
) -> Option<Verdict> {
    match health {
        Health::Pending => cooldowns.pending(policy, model),
        Health::Failed => {
            cooldowns.failed(policy, model);
            None
        }
        Health::Neutral => None,
    }
}

/// Tries the plan's candidates in the order `attempts` names them, noting in `record` the model
/// each attempt went to. Each attempt is a client span of `trace`, and the `traceparent` it sends
/// names that span.
pub(super) async fn try_candidates<'p, T: Transport>(
    transport: &T,
    cooldowns: &Arc<Cooldowns>,
    snapshot: &'p Snapshot,
    request: &Outgoing<'_>,
    (plan, attempts): (&Plan, &mut Attempts<'_>),
    (record, trace): (&mut RequestRecord, &RequestTrace),
) -> Tried<'p, T::Body> {
    let policy = snapshot.policy();
    let route = plan.route.and_then(|r| policy.routes.get(r.index()));
    let identity = plan.session.as_ref().and_then(|s| s.identity.as_deref());
    let shaping = Shaping::new(ShapeInput {
        api: request.api,
        original: request.body,
        parsed: request.parsed,
        trace,
        request_id: &record.request_id,
        route,
        session_identity: identity,
        ask_usage: plan.ask_usage,
    });
    let chat_form = chat_form(request, plan, snapshot);
    // Only a route's plugins edit the chat form as JSON; without them each candidate's body is
    // the form's bytes with its served id.
    let edited_form = match (&chat_form, route) {
        (Some(Ok(form)), Some(route)) if rewrite::has_plugins(route) => {
            Some(JsonBody::written(form.with_model(request.parsed.tree())))
        }
        _ => None,
    };
    let chat_shaping = edited_form.as_ref().map(|form| {
        Shaping::new(ShapeInput {
            api: Api::Chat,
            original: form.bytes(),
            parsed: form,
            trace,
            request_id: &record.request_id,
            route,
            session_identity: identity,
            ask_usage: plan.ask_usage,
        })
    });
    let mut base_headers = client_headers(&request.parts.headers);
    for (name, value) in shaping.router_headers() {
        base_headers.insert(name.clone(), value.clone());
    }

    loop {
        let cooling = |m: &ModelDef| cooldowns.cooling(&m.name);
        let (model_id, dialect) = match attempts.next(policy, request.view, cooling) {
            Next::Send { model, reach } => (model, reach),
            Next::Done(end) => return Tried::Ended(end),
        };
        let (Some(model), Some(wire)) = (
            policy.models.get(model_id.index()),
            snapshot.wire.get(model_id.index()),
        ) else {
            attempts.failed(model_id, Why::Body("the model has no wire form".into()));
            continue;
        };
        let Some(endpoint) = snapshot.endpoints.get(model.backend.index()) else {
            attempts.failed(
                model_id,
                Why::Body("the model's backend has no endpoint".into()),
            );
            continue;
        };
        let moved = request
            .previous
            .filter(|p| p.expands_for(&endpoint.name, &model.serves, plan.redact.is_some()));
        let shaped = match (dialect, &chat_form, &chat_shaping) {
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
            Err(err) => return Tried::Unbuildable(ApiError::bad_request(err)),
        };
        let (body, vault) = match &plan.redact {
            Some(redact) => {
                let mut vault = tenant_vault(policy, request.view);
                match request.chain.map(ChainVault::start) {
                    Some(Ok(earlier)) => vault.go_on_from(&earlier),
                    Some(Err(refused)) => return Tried::Unbuildable(refused),
                    None => {}
                }
                // A detector's failure is no candidate's: none can be sent the raw text.
                if !redact.detectors().is_empty() {
                    let tenant = crate::session::identity::tenant(policy, request.view);
                    let found = detected_vault(
                        texts_of_body(&body),
                        redact,
                        (request.models, policy),
                        &tenant,
                    )
                    .await;
                    match found {
                        Ok(found) => vault.detect_as(found),
                        Err(error) => return Tried::Unbuildable(error),
                    };
                }
                let redacted = redact_body(&body, redact, &mut vault).unwrap_or(body);
                record.redacted = summary(&vault);
                (redacted, Some(Arc::new(vault)))
            }
            // The chain's placeholders are the backend's still: its answer gets their values.
            None => (body, request.chain.and_then(ChainVault::found)),
        };
        let built = endpoint
            .uri(dialect::suffix(dialect, request.api))
            .map_err(|err| err.to_string())
            .and_then(|uri| {
                Request::post(uri)
                    .body(Full::new(Bytes::from(body)))
                    .map_err(|err| err.to_string())
            });
        let mut upstream = match built {
            Ok(r) => r,
            Err(err) => {
                let why = Why::Body(format!("cannot build the upstream request: {err}"));
                attempts.failed(model_id, why);
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
        dialect::set_headers(headers, dialect, endpoint);
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
            Ok(response) => {
                let status = response.status();
                match attempts.answered(model_id, status.as_u16()) {
                    Judged::MovesOn => {
                        drop(response);
                        cooldowns.failed(policy, &model.name);
                        span.set(key::STATUS, || i64::from(status.as_u16()).into());
                        span.set(key::FALLBACK_REASON, || "status".into());
                        span.fail(|| format!("the backend answered {}", status.as_u16()));
                        span.end();
                    }
                    Judged::Answer(health) => {
                        return Tried::Answered {
                            verdict: judge(cooldowns, policy, &model.name, health),
                            response,
                            model_id,
                            model,
                            sent_at,
                            timeout: endpoint.timeout,
                            span,
                            dialect,
                            sim_account: endpoint.relays_sim_account,
                            vault,
                        };
                    }
                }
            }
            Err(err) => {
                cooldowns.failed(policy, &model.name);
                span.set(key::FALLBACK_REASON, || err.reason().into());
                span.fail(|| err.to_string());
                span.end();
                attempts.failed(model_id, unanswered(&err));
            }
        }
    }
}

/// The chat completions form of a Messages request, when one of the plan's candidates is on an
/// OpenAI backend; the error says why the request has none.
fn chat_form<'r>(
    request: &Outgoing<'r>,
    plan: &Plan,
    snapshot: &Snapshot,
) -> Option<&'r Result<ChatForm, Untranslatable>> {
    // Only a Messages request is ever translated.
    if request.api != Api::Messages {
        return None;
    }
    let policy = snapshot.policy();
    let translated = plan.candidates.iter().any(|id| {
        policy
            .models
            .get(id.index())
            .and_then(|m| snapshot.endpoints.get(m.backend.index()))
            .is_some_and(|e| dialect::of(request.api, e.api) == Dialect::ChatForMessages)
    });
    if !translated {
        return None;
    }
    Some(request.parsed.chat_form())
}
