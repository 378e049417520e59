//! `POST /v1/messages`: the same steps as chat completions, answered in Anthropic's shape.
//!
//! The driver decides and forwards a Messages request like any other (the request view, the
//! routes, blocks, sessions, cache and fallbacks are the same steps); what is particular to
//! Messages is how each candidate is reached ([`crate::anthropic::dialect`]) and the answers the
//! router writes itself, which the pipeline builds as OpenAI errors and which are rewritten here
//! into Anthropic's envelope with the same status and headers.

use std::time::Instant;

use http_body_util::BodyExt;
use hyper::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Request, Response};

use crate::anthropic::wire;
use crate::door::Plain;
use crate::headers;
use crate::openai::Api;
use crate::pipeline::forward::{Answered, AnsweredBy};
use crate::pipeline::{self, Pipeline};
use crate::relay::body::ProxyBody;

/// The Messages door.
pub struct Messages;

impl Plain for Messages {
    fn api(&self) -> Api {
        Api::Messages
    }

    async fn answer(&self, answered: Answered) -> Response<ProxyBody> {
        match answered.by {
            AnsweredBy::Router => in_anthropic_shape(answered.response).await,
            AnsweredBy::Cache | AnsweredBy::Upstream(_) => answered.response,
        }
    }
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

/// One of the router's own answers (an error or a refusal) rewritten into Anthropic's
/// envelope, with the same status and headers.
async fn in_anthropic_shape(response: Response<ProxyBody>) -> Response<ProxyBody> {
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
        HeaderValue::from_static(headers::APPLICATION_JSON),
    );
    let body = wire::error_from_openai(parts.status, &bytes);
    Response::from_parts(parts, ProxyBody::from(body))
}
