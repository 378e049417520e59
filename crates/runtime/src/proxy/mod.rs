//! The request path of `POST /v1/chat/completions` and `POST /v1/responses` (LANGUAGE.md §5):
//! read the body within its limit, extract the request's facts, decide under one policy
//! snapshot, answer from the response cache or forward, and report.
//!
//! Every answer, including errors, carries `x-sr-request-id`, `x-sr-route`, `x-sr-model` and
//! `x-sr-path`, and every request ends in exactly one log line (see [`completion`]).

pub mod body;
pub mod completion;
pub mod decide;
pub mod forward;
pub mod json_edit;
pub mod rewrite;

use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderName, HeaderValue, ALLOW, CONTENT_LENGTH};
use hyper::{Request, Response};
use serde_json::Value;
use src_compiler::hir::BlockId;
use src_compiler::request::{RequestError, RequestView};

use crate::app::App;
use crate::headers::{self, path, NONE_VALUE};
use crate::log::RequestRecord;
use crate::openai::{Api, ApiError};
use crate::telemetry::BlockLabels;
use crate::trace;

use body::ProxyBody;
use completion::Completion;
use decide::{Asked, Decision, Facts};
use forward::Outgoing;

/// Answers one proxied request.
pub async fn handle(
    app: &App,
    api: Api,
    request: Request<Incoming>,
    started: Instant,
) -> Response<ProxyBody> {
    let done = new_completion(app, &request, api.endpoint(), started);
    let (parts, body) = request.into_parts();
    let bytes = match read_body(body, &parts.headers, app.cfg.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(error) => return answer_error(done, error),
    };
    let parsed: Value = match serde_json::from_slice(&bytes) {
        Ok(value) => value,
        Err(err) => return answer_error(done, ApiError::invalid_json(err)),
    };
    let header_pairs = header_pairs(&parts.headers);
    let view = match api {
        Api::Chat => RequestView::from_chat(&parsed, &header_pairs),
        Api::Responses => RequestView::from_responses(&parsed, &header_pairs),
    };
    let view = match view {
        Ok(view) => view,
        Err(err) => return answer_error(done, request_error(&err)),
    };
    decide_and_forward(app, api, &parts, &bytes, &parsed, &view, done).await
}

async fn decide_and_forward(
    app: &App,
    api: Api,
    parts: &hyper::http::request::Parts,
    bytes: &Bytes,
    parsed: &Value,
    view: &RequestView,
    mut done: Completion,
) -> Response<ProxyBody> {
    done.record.stream = view.stream;
    let snapshot = app.store.current();
    done.record.policy_generation = snapshot.generation;
    let routing_started = Instant::now();
    let mut facts = Facts::default();
    let asked = Asked { api, parsed, view };
    let decision = decide::decide(app, &snapshot, asked, &mut facts).await;
    let routing = routing_started.elapsed();
    app.telemetry.routing.observe(routing.as_secs_f64());
    done.record.routing_us = routing.as_secs_f64() * 1e6;
    done.record.skipped_signals = facts.skipped_signals;
    done.record.cache = facts.cache;
    match decision {
        Err(error) => answer_error(done, error),
        Ok(Decision::Refuse {
            block,
            status,
            message,
        }) => {
            let name = snapshot
                .policy()
                .blocks
                .get(block.index())
                .map(|b| b.name.clone())
                .unwrap_or_default();
            app.telemetry
                .blocks
                .get_or_create(&BlockLabels {
                    block: name.clone(),
                    action: "refuse",
                })
                .inc();
            refuse(done, &name, status, message)
        }
        Ok(Decision::Cached(hit)) => {
            count_redirect(app, &snapshot, hit.block);
            crate::cache::replay::respond(done, &snapshot, hit)
        }
        Ok(Decision::Forward(plan)) => {
            count_redirect(app, &snapshot, plan.block);
            let outgoing = Outgoing {
                api,
                parts,
                body: bytes,
                parsed,
                view,
            };
            forward::forward(app, &snapshot, outgoing, *plan, done).await
        }
    }
}

/// Counts a `block ... to MODEL` redirect.
fn count_redirect(app: &App, snapshot: &crate::policy_store::Snapshot, block: Option<BlockId>) {
    if let Some(block) = block.and_then(|b| snapshot.policy().blocks.get(b.index())) {
        app.telemetry
            .blocks
            .get_or_create(&BlockLabels {
                block: block.name.clone(),
                action: "redirect",
            })
            .inc();
    }
}

fn new_completion(
    app: &App,
    request: &Request<Incoming>,
    endpoint: &str,
    started: Instant,
) -> Completion {
    let client_id = request
        .headers()
        .get(headers::REQUEST_ID)
        .and_then(|v| v.to_str().ok());
    Completion::new(
        app.telemetry.clone(),
        app.components.log.clone(),
        trace::request_id(client_id),
        endpoint,
        started,
    )
}

/// 405 on a proxied path, reported like any other request.
pub fn refuse_method(
    app: &App,
    request: &Request<Incoming>,
    started: Instant,
    allow: &'static str,
) -> Response<ProxyBody> {
    let done = new_completion(app, request, request.uri().path(), started);
    let mut response = answer_error(
        done,
        ApiError::method_not_allowed(request.method().as_str(), request.uri().path()),
    );
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    response
}

/// Reads the whole body, refusing with 413 as soon as it is known to exceed `limit` (from
/// `content-length`, or while reading a body of unknown length): nothing beyond the limit is
/// buffered.
pub(crate) async fn read_body(
    body: Incoming,
    headers: &HeaderMap,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::payload_too_large(limit));
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(err) if err.is::<http_body_util::LengthLimitError>() => {
            Err(ApiError::payload_too_large(limit))
        }
        Err(err) => Err(ApiError::bad_request(format!(
            "cannot read the request body: {}",
            crate::upstream::error_chain(err.as_ref())
        ))),
    }
}

pub(crate) fn header_pairs(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect()
}

fn request_error(err: &RequestError) -> ApiError {
    let error = ApiError::bad_request(err.to_string());
    match err.path() {
        Some(path) => error.with_param(path),
        None => error,
    }
}

/// A block's refusal: its status, message and name.
fn refuse(mut done: Completion, block: &str, status: u16, message: String) -> Response<ProxyBody> {
    let status = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::FORBIDDEN);
    done.record.block = Some(block.to_owned());
    done.record.route = Some(block.to_owned());
    let error = ApiError::new(status, "policy_violation", Some(block), message);
    let mut response: Response<ProxyBody> = error.into_response();
    let headers = response.headers_mut();
    done.record.path = path::BLOCKED;
    set_sr_headers(headers, &done.record, None);
    done.finish(status.as_u16(), path::BLOCKED, None);
    response
}

/// An error answer with the routing headers, reported.
pub(crate) fn answer_error(mut done: Completion, error: ApiError) -> Response<ProxyBody> {
    let status = error.status.as_u16();
    let message = error.body.error.message.clone();
    let mut response: Response<ProxyBody> = error.into_response();
    done.record.path = path::ERROR;
    set_sr_headers(response.headers_mut(), &done.record, None);
    done.finish(status, path::ERROR, Some(message));
    response
}

/// `x-sr-request-id`, `x-sr-route`, `x-sr-model`, `x-sr-path`, and when they apply
/// `x-sr-block`, `x-sr-fallbacks`, `x-sr-session` and `x-sr-cache`.
pub(crate) fn set_sr_headers(headers: &mut HeaderMap, record: &RequestRecord, model: Option<&str>) {
    let mut set = |name: &'static str, value: &str| {
        if let Ok(v) = HeaderValue::from_str(value) {
            headers.insert(HeaderName::from_static(name), v);
        }
    };
    set(headers::SR_REQUEST_ID, &record.request_id);
    set(
        headers::SR_ROUTE,
        record.route.as_deref().unwrap_or(NONE_VALUE),
    );
    set(headers::SR_MODEL, model.unwrap_or(NONE_VALUE));
    set(headers::SR_PATH, record.path);
    if let Some(block) = &record.block {
        set(headers::SR_BLOCK, block);
    }
    if !record.fallbacks.is_empty() {
        set(headers::SR_FALLBACKS, &record.fallbacks.join(","));
    }
    if let Some(session) = record.session {
        set(headers::SR_SESSION, session);
    }
    if let Some(cache) = record.cache {
        set(headers::SR_CACHE, cache);
    }
}
