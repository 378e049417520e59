//! A translated candidate's answer turned from chat completions into Messages on its way to
//! the client, after the relay has read its usage and timed it.
//!
//! An event stream is rewritten frame by frame ([`StreamTranslator`]), never buffered. A JSON
//! answer must be whole to be rewritten, so it is read to its end first (the relay still logs
//! it when it ends); an error answer keeps its status and gets Anthropic's error envelope. Only
//! the rewritten answer goes to the response cache, so a Messages hit always replays a
//! Messages answer.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Body;
use hyper::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use crate::anthropic::from_chat;
use crate::anthropic::stream::StreamTranslator;
use crate::anthropic::wire;
use crate::cache::Fill;
use crate::headers::{APPLICATION_JSON, TEXT_EVENT_STREAM};
use crate::relay::body::{BoxError, ProxyBody};
use crate::relay::counted::Counted;
use crate::relay::rewriting::{Rewriter, Rewritten};

/// The Messages form of a relayed chat answer; `fill`, when set, receives a whole 200 answer.
/// `counted` is the router's count of the request, which the answer's text is added to; the
/// relay inside `response` logs the same counts.
pub async fn answer(
    response: Response<ProxyBody>,
    fill: Option<Fill>,
    counted: Arc<Counted>,
) -> Response<ProxyBody> {
    let (mut parts, mut body) = response.into_parts();
    parts.headers.remove(CONTENT_LENGTH);
    let sse = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(TEXT_EVENT_STREAM));
    if sse && parts.status.is_success() {
        let translated = Translating(StreamTranslator::new(counted));
        return Response::from_parts(parts, Rewritten::boxed(body, translated));
    }
    let bytes = match whole(&mut body).await {
        Ok(bytes) => bytes,
        Err(err) => {
            parts.status = StatusCode::BAD_GATEWAY;
            let message = format!("the backend's answer broke off: {err}");
            return json(parts, wire::error_body(StatusCode::BAD_GATEWAY, &message));
        }
    };
    if !parts.status.is_success() {
        let status = parts.status;
        return json(parts, wire::error_from_openai(status, &bytes));
    }
    // The relay has rewritten the answer as it read its usage; an answer it did not keep (too
    // large to read) is rewritten here.
    let rewritten = match &mut body {
        ProxyBody::Relay(relay) => relay.take_rewritten(),
        _ => None,
    };
    let Some(body) = rewritten.or_else(|| from_chat::message(&bytes, &counted)) else {
        parts.status = StatusCode::BAD_GATEWAY;
        let body = wire::error_body(
            StatusCode::BAD_GATEWAY,
            "the backend's answer is not a chat completion",
        );
        return json(parts, body);
    };
    if let (Some(fill), StatusCode::OK) = (fill, parts.status) {
        fill.offer(vec![body.clone()], body.len(), false);
    }
    json(parts, body)
}

/// The whole body, read up to its end: a sized body ends with its last byte, without waiting
/// for the upstream connection to say so (as the relay does for a chat answer).
async fn whole(body: &mut ProxyBody) -> Result<Bytes, BoxError> {
    let mut first: Option<Bytes> = None;
    let mut rest = BytesMut::new();
    while !body.is_end_stream() {
        let Some(frame) = body.frame().await else {
            break;
        };
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        match &first {
            None => first = Some(data),
            Some(head) => {
                if rest.is_empty() {
                    rest.extend_from_slice(head);
                }
                rest.extend_from_slice(&data);
            }
        }
    }
    Ok(if rest.is_empty() {
        first.unwrap_or_default()
    } else {
        rest.freeze()
    })
}

fn json(mut parts: hyper::http::response::Parts, body: Bytes) -> Response<ProxyBody> {
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static(APPLICATION_JSON));
    Response::from_parts(parts, ProxyBody::from(body))
}

/// A chat event stream read as a Messages one.
struct Translating(StreamTranslator);

impl Rewriter for Translating {
    fn feed(&mut self, data: &Bytes) -> Bytes {
        self.0.feed(data)
    }

    fn finish(&mut self) -> Bytes {
        self.0.finish()
    }
}
