//! The answers the router writes itself: an error, a block's refusal, and a stored answer of the
//! response cache. Each one sets the routing headers and reports the request (its log line and
//! metrics) by consuming its [`Completion`].
//!
//! Every answer, including errors, carries `x-sr-request-id`, `x-sr-route`, `x-sr-model` and
//! `x-sr-path`; [`set_sr_headers`] is also what a relayed upstream answer gets.

use hyper::header::{HeaderMap, HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use crate::headers::{self, path, APPLICATION_JSON, NONE_VALUE, TEXT_EVENT_STREAM};
use crate::log::RequestRecord;
use crate::openai::ApiError;
use crate::pipeline::body::ProxyBody;
use crate::pipeline::cache_step::CachedAnswer;
use crate::pipeline::completion::Completion;
use crate::policy_store::Snapshot;

/// A block's refusal: its status, message and name.
pub fn refuse(
    mut done: Completion,
    block: &str,
    status: u16,
    message: String,
) -> Response<ProxyBody> {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::FORBIDDEN);
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
pub fn answer_error(mut done: Completion, error: ApiError) -> Response<ProxyBody> {
    let status = error.status.as_u16();
    let message = error.body.error.message.clone();
    let mut response: Response<ProxyBody> = error.into_response();
    done.record.path = path::ERROR;
    set_sr_headers(response.headers_mut(), &done.record, None);
    done.finish(status, path::ERROR, Some(message));
    response
}

/// The answer to a request the cache answered: the stored body as it was stored (status 200,
/// the stored usage, no prefix-cache evidence added), or its replay as an event stream; reports
/// it (path `cache`).
pub fn cached(mut done: Completion, snapshot: &Snapshot, hit: CachedAnswer) -> Response<ProxyBody> {
    let policy = snapshot.policy();
    let model = policy.models.get(hit.model.index());
    done.record.route = hit
        .route
        .and_then(|r| policy.routes.get(r.index()))
        .map(|r| r.name.clone());
    done.record.block = hit
        .block
        .and_then(|b| policy.blocks.get(b.index()))
        .map(|b| b.name.clone());
    done.record.model = model.map(|m| m.name.clone());
    done.record.served = model.map(|m| m.serves.clone());
    done.record.cache = Some(headers::cache::HIT);
    done.record.cache_score = Some(f64::from(hit.score));
    done.record.status = 200;
    done.record.path = path::CACHE;
    let mut response = Response::new(ProxyBody::from(hit.body));
    let headers = response.headers_mut();
    let content_type = if hit.sse {
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        TEXT_EVENT_STREAM
    } else {
        APPLICATION_JSON
    };
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    set_sr_headers(headers, &done.record, done.record.model.as_deref());
    if let Ok(score) = HeaderValue::from_str(&format!("{:.3}", hit.score)) {
        headers.insert(HeaderName::from_static(headers::SR_CACHE_SCORE), score);
    }
    done.finish(200, path::CACHE, None);
    response
}

/// `x-sr-request-id`, `x-sr-route`, `x-sr-model`, `x-sr-path`, and when they apply
/// `x-sr-block`, `x-sr-fallbacks`, `x-sr-session` and `x-sr-cache`.
pub fn set_sr_headers(headers: &mut HeaderMap, record: &RequestRecord, model: Option<&str>) {
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
