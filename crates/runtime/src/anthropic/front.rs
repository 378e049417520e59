//! `POST /v1/messages`: the same request pipeline as chat completions, answered in Anthropic's
//! shape.
//!
//! The pipeline decides and forwards a Messages request like any other (the request view, the
//! routes, blocks, sessions, cache and fallbacks are the same steps); what is particular to
//! Messages is how each candidate is reached ([`super::dialect`]) and the answers the router
//! writes itself, which the pipeline builds as OpenAI errors and which are rewritten here into
//! Anthropic's envelope with the same status and headers.

use std::time::Instant;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Request, Response};

use crate::anthropic::wire;
use crate::headers::{self, path};
use crate::openai::Api;
use crate::pipeline::{self, body::ProxyBody, Pipeline};

/// Answers one `POST /v1/messages`.
pub async fn handle(
    pipeline: Pipeline<'_>,
    request: Request<Incoming>,
    started: Instant,
) -> Response<ProxyBody> {
    let response = pipeline::handle(pipeline, Api::Messages, request, started).await;
    in_anthropic_shape(response).await
}

/// Any method but POST on `/v1/messages`: 405, in Anthropic's shape.
pub async fn refuse_method<B>(
    pipeline: Pipeline<'_>,
    request: &Request<B>,
    started: Instant,
) -> Response<ProxyBody> {
    let response = pipeline::refuse_method(pipeline, request, started, "POST");
    in_anthropic_shape(response).await
}

/// The router's own error answers (`x-sr-path` `error` or `blocked`) rewritten into
/// Anthropic's envelope; every other answer as it is.
async fn in_anthropic_shape(response: Response<ProxyBody>) -> Response<ProxyBody> {
    let own = response
        .headers()
        .get(headers::SR_PATH)
        .is_some_and(|p| p == path::ERROR || p == path::BLOCKED);
    if !own {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // The router's own answers are small bodies already in memory.
    let bytes = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    parts.headers.remove(CONTENT_LENGTH);
    parts.headers.insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(headers::APPLICATION_JSON),
    );
    let body = wire::error_from_openai(parts.status, &bytes);
    Response::from_parts(parts, ProxyBody::from(body))
}
