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
use crate::pipeline::cache_step::CachedAnswer;
use crate::policy_store::Snapshot;
use crate::relay::body::ProxyBody;
use crate::relay::completion::Completion;

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

/// A request over a budget that refuses (`exceeded = reject`): 429 with `Retry-After`, in the
/// OpenAI shape (`rate_limit_exceeded`); the Messages door answers it in its own
/// (`rate_limit_error`).
pub fn over_budget(
    mut done: Completion,
    message: String,
    retry_after_s: u64,
) -> Response<ProxyBody> {
    let error = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limit_exceeded",
        Some("rate_limit_exceeded"),
        message.clone(),
    );
    let mut response: Response<ProxyBody> = error.into_response();
    done.record.path = path::ERROR;
    set_sr_headers(response.headers_mut(), &done.record, None);
    if let Ok(v) = HeaderValue::from_str(&retry_after_s.to_string()) {
        response.headers_mut().insert(hyper::header::RETRY_AFTER, v);
    }
    done.finish(
        StatusCode::TOO_MANY_REQUESTS.as_u16(),
        path::ERROR,
        Some(message),
    );
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
    // Names made at compile time: `from_static` outside a constant checks its text on every call.
    const REQUEST_ID: HeaderName = HeaderName::from_static(headers::SR_REQUEST_ID);
    const ROUTE: HeaderName = HeaderName::from_static(headers::SR_ROUTE);
    const MODEL: HeaderName = HeaderName::from_static(headers::SR_MODEL);
    const PATH: HeaderName = HeaderName::from_static(headers::SR_PATH);
    const BLOCK: HeaderName = HeaderName::from_static(headers::SR_BLOCK);
    const FALLBACKS: HeaderName = HeaderName::from_static(headers::SR_FALLBACKS);
    const SESSION: HeaderName = HeaderName::from_static(headers::SR_SESSION);
    const SWITCH_REASON: HeaderName = HeaderName::from_static(headers::SR_SWITCH_REASON);
    const CACHE: HeaderName = HeaderName::from_static(headers::SR_CACHE);
    const PREVIOUS: HeaderName = HeaderName::from_static(headers::SR_PREVIOUS);
    const BUDGET: HeaderName = HeaderName::from_static(headers::SR_BUDGET);
    let mut put = |name: HeaderName, value: Option<HeaderValue>| {
        if let Some(value) = value {
            headers.insert(name, value);
        }
    };
    put(REQUEST_ID, copied(&record.request_id));
    put(
        ROUTE,
        record
            .route
            .as_deref()
            .map_or_else(|| word(NONE_VALUE), copied),
    );
    put(MODEL, model.map_or_else(|| word(NONE_VALUE), copied));
    put(PATH, word(record.path));
    if let Some(block) = &record.block {
        put(BLOCK, copied(block));
    }
    if !record.fallbacks.is_empty() {
        put(FALLBACKS, copied(&record.fallbacks.join(",")));
    }
    if let Some(session) = record.session {
        put(SESSION, word(session));
    }
    if let Some(reason) = record.switch_reason {
        put(SWITCH_REASON, word(reason));
    }
    if let Some(cache) = record.cache {
        put(CACHE, word(cache));
    }
    if let Some(previous) = record.previous {
        put(PREVIOUS, word(previous));
    }
    if let Some(budget) = &record.budget {
        put(BUDGET, copied(budget));
    }
}

/// A header value copied from text a request made.
fn copied(value: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(value).ok()
}

/// A header value of one of the router's own words: its bytes are used where they are, not
/// copied into an allocation of their own.
fn word(value: &'static str) -> Option<HeaderValue> {
    HeaderValue::from_maybe_shared(bytes::Bytes::from_static(value.as_bytes())).ok()
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http_body_util::BodyExt;
    use src_compiler::hir::{ModelId, RouteId};

    use super::*;
    use crate::hooks::NoModelSignals;
    use crate::pipeline::fakes;

    fn header<'a>(response: &'a Response<ProxyBody>, name: &str) -> Option<&'a str> {
        response.headers().get(name).and_then(|v| v.to_str().ok())
    }

    async fn body(response: Response<ProxyBody>) -> Bytes {
        match response.into_body().collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(err) => panic!("a local answer's body cannot fail: {err}"),
        }
    }

    #[tokio::test]
    async fn an_error_carries_the_routing_headers_and_is_reported_once() {
        let (done, lines) = fakes::completion();
        let response = answer_error(done, ApiError::bad_request("no"));
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert_eq!(header(&response, headers::SR_REQUEST_ID), Some("req-1"));
        assert_eq!(header(&response, headers::SR_ROUTE), Some(NONE_VALUE));
        assert_eq!(header(&response, headers::SR_MODEL), Some(NONE_VALUE));
        assert_eq!(header(&response, headers::SR_PATH), Some(path::ERROR));
        let lines = fakes::lines(&lines);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(lines[0]["fields"]["status"], 400);
        assert_eq!(lines[0]["fields"]["error"], "no");
    }

    #[tokio::test]
    async fn a_refusal_names_its_block() {
        let (done, lines) = fakes::completion();
        let response = refuse(done, "leaked_secret", 422, "remove it".into());
        assert_eq!(response.status().as_u16(), 422);
        assert_eq!(header(&response, headers::SR_BLOCK), Some("leaked_secret"));
        assert_eq!(header(&response, headers::SR_ROUTE), Some("leaked_secret"));
        assert_eq!(header(&response, headers::SR_PATH), Some(path::BLOCKED));
        let answer: serde_json::Value =
            serde_json::from_slice(&body(response).await).unwrap_or_default();
        assert_eq!(answer["error"]["type"], "policy_violation");
        assert_eq!(answer["error"]["code"], "leaked_secret");
        assert_eq!(answer["error"]["message"], "remove it");
        assert_eq!(fakes::lines(&lines)[0]["fields"]["status"], 422);
    }

    #[tokio::test]
    async fn a_status_that_is_no_status_refuses_with_403() {
        let (done, _) = fakes::completion();
        let response = refuse(done, "b", 1000, "no".into());
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
    }

    #[tokio::test]
    async fn a_cache_hit_answers_the_stored_body_as_the_proposed_model() {
        let snapshot = fakes::snapshot(
            r#"
backend gpu { url = "http://127.0.0.1:9/v1" }
model small { backend = gpu  serves = "small-id" }
route default { to small }
"#,
            &NoModelSignals,
        )
        .await;
        let stored = Bytes::from_static(br#"{"object":"chat.completion","choices":[]}"#);
        let hit = CachedAnswer {
            route: Some(RouteId(0)),
            block: None,
            model: ModelId(0),
            body: stored.clone(),
            sse: false,
            score: 0.9512,
        };
        let (done, lines) = fakes::completion();
        let response = cached(done, &snapshot, hit.clone());
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            header(&response, CONTENT_TYPE.as_str()),
            Some(APPLICATION_JSON)
        );
        assert_eq!(header(&response, headers::SR_ROUTE), Some("default"));
        assert_eq!(header(&response, headers::SR_MODEL), Some("small"));
        assert_eq!(header(&response, headers::SR_PATH), Some(path::CACHE));
        assert_eq!(
            header(&response, headers::SR_CACHE),
            Some(headers::cache::HIT)
        );
        assert_eq!(header(&response, headers::SR_CACHE_SCORE), Some("0.951"));
        assert_eq!(body(response).await, stored);
        let line = &fakes::lines(&lines)[0]["fields"];
        assert_eq!(line["path"], path::CACHE);
        assert_eq!(line["model"], "small");

        let (done, _) = fakes::completion();
        let response = cached(done, &snapshot, CachedAnswer { sse: true, ..hit });
        assert_eq!(
            header(&response, CONTENT_TYPE.as_str()),
            Some(TEXT_EVENT_STREAM)
        );
        assert_eq!(header(&response, CACHE_CONTROL.as_str()), Some("no-cache"));
    }
}
