//! Which handler answers which method and path, on the API listener and on the admin listener.
//!
//! The table is small and fixed, so it is a `match`; a path that exists answers 405 (with
//! `allow`) for a method it does not take, and any other path 404, both OpenAI-style (an
//! endpoint of OpenAI's or Anthropic's API the router does not serve says so, in its API's
//! shape: [`surface`]).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCEPT, ALLOW, AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};

use crate::app::App;
use crate::console;
use crate::door;
use crate::exposition::Format;
use crate::headers::APPLICATION_JSON;
use crate::openai::{Api, ApiError};
use crate::pipeline::{self, intake};
use crate::relay::body::ProxyBody;
use crate::responses_state;
use crate::server::surface::{self, MODEL_PREFIX};
use crate::server::{admin, admin_guard, outcome_access};

/// The OpenAI-compatible listener.
pub async fn api(app: Arc<App>, request: Request<Incoming>) -> Response<ProxyBody> {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    if let Some(api) = door::proxied(&path) {
        let pipeline = app.pipeline();
        return match (api, &method) {
            (Api::Chat, &Method::POST) => {
                door::run(pipeline, &door::chat::Chat, request, started).await
            }
            (Api::Responses, &Method::POST) => {
                let responses = door::responses::Responses {
                    states: &app.responses,
                };
                door::run(pipeline, &responses, request, started).await
            }
            (Api::Messages, &Method::POST) => {
                door::run(pipeline, &door::messages::Messages, request, started).await
            }
            (Api::Messages, _) => door::messages::refuse_method(pipeline, &request, started).await,
            (Api::Chat | Api::Responses, _) => {
                pipeline::refuse_method(pipeline, &request, started, "POST")
            }
        };
    }
    match (path.as_str(), &method) {
        ("/v1/router/outcomes", &Method::POST) => outcomes(&app, request).await,
        ("/v1/router/outcomes", _) => not_allowed(&method, &path, "POST"),
        ("/v1/models", &Method::GET | &Method::HEAD) => {
            let snapshot = app.store.current();
            json(StatusCode::OK, surface::models_answer(&snapshot))
        }
        (p, &Method::GET | &Method::HEAD) if p.starts_with(MODEL_PREFIX) => {
            let snapshot = app.store.current();
            let id = p.strip_prefix(MODEL_PREFIX).unwrap_or_default();
            match surface::model_answer(&snapshot, id) {
                Ok(entry) => json(StatusCode::OK, entry),
                Err(error) => error.into_response(),
            }
        }
        (p, _) if p.starts_with(MODEL_PREFIX) => not_allowed(&method, &path, "GET, HEAD"),
        ("/healthz", &Method::GET | &Method::HEAD) => {
            json(StatusCode::OK, Bytes::from_static(b"{\"status\":\"ok\"}"))
        }
        // Clients (and load balancers) learn whether to send traffic here, not which backend
        // is down or where it lives: the report is the admin listener's.
        ("/readyz", &Method::GET | &Method::HEAD) => readyz(&app, false),
        ("/metrics", &Method::GET | &Method::HEAD) if app.cfg.metrics_on_api => {
            metrics(&app, &request)
        }
        ("/v1/models" | "/healthz" | "/readyz", _) => not_allowed(&method, &path, "GET, HEAD"),
        ("/metrics", _) if app.cfg.metrics_on_api => not_allowed(&method, &path, "GET, HEAD"),
        (p, _) if p.starts_with(responses_state::endpoints::PREFIX) => {
            let snapshot = app.store.current();
            let query = request.uri().query();
            responses_state::endpoints::answer(
                &app.responses,
                &snapshot,
                &method,
                &path,
                query,
                request.headers(),
            )
            .await
        }
        _ => surface::absent(&method, &path)
            .unwrap_or_else(|| ApiError::not_found(&path).into_response()),
    }
}

/// The admin listener.
pub async fn admin(app: Arc<App>, request: Request<Incoming>) -> Response<ProxyBody> {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let authority = request.uri().authority().map(|a| a.as_str());
    if let Some(refusal) =
        admin_guard::refuse(request.headers(), authority, &method, &app.cfg.admin_hosts)
    {
        return refusal.into_response();
    }
    if let Some(page) = console::assets::lookup(&method, &path) {
        return page;
    }
    // Scrapers and liveness probes carry no token; neither answer holds anything secret.
    match (path.as_str(), &method) {
        ("/metrics", &Method::GET | &Method::HEAD) => return metrics(&app, &request),
        ("/healthz", &Method::GET | &Method::HEAD) => {
            return json(StatusCode::OK, Bytes::from_static(b"{\"status\":\"ok\"}"))
        }
        _ => {}
    }
    if let Some(token) = &app.cfg.admin_token {
        let given = request.headers().get(AUTHORIZATION).map(|v| v.as_bytes());
        if !token.admits(given) {
            let mut answer: Response<ProxyBody> = ApiError::unauthorized(
                "the admin API needs `Authorization: Bearer <SRC_ADMIN_TOKEN>`",
            )
            .into_response();
            answer
                .headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return answer;
        }
    }
    match (path.as_str(), &method) {
        ("/v1/router/policy", &Method::GET | &Method::HEAD) => json(
            StatusCode::OK,
            Bytes::from(admin::policy_report(&app).to_string()),
        ),
        ("/readyz", &Method::GET | &Method::HEAD) => readyz(&app, true),
        ("/v1/router/policy" | "/healthz" | "/readyz" | "/metrics", _) => {
            not_allowed(&method, &path, "GET, HEAD")
        }
        (p, _) if p.starts_with(console::API_PREFIX) => console::api(&app, request).await,
        _ => ApiError::not_found(&path).into_response(),
    }
}

/// `/readyz`: the status code says ready (200) or not (503); `detailed` adds the report (each
/// backend's URL and probe result, the routes that cannot be served), for the admin listener.
fn readyz(app: &App, detailed: bool) -> Response<ProxyBody> {
    let snapshot = app.store.current();
    let (ready, report) = app.readiness.report(&snapshot);
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = if detailed {
        report.to_string()
    } else if ready {
        "{\"status\":\"ready\"}".to_owned()
    } else {
        "{\"status\":\"not_ready\"}".to_owned()
    };
    json(status, Bytes::from(body))
}

/// `GET /metrics` in the format the scraper asked for.
fn metrics(app: &App, request: &Request<Incoming>) -> Response<ProxyBody> {
    let accept = request.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
    let format = Format::negotiate(accept);
    let mut response = Response::new(ProxyBody::from(app.telemetry.encode(format)));
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    response
}

/// Limit on an outcome report's body: a few short fields.
const MAX_OUTCOME_BYTES: usize = 16 << 10;

/// `POST /v1/router/outcomes`, answered by the session layer under the current policy.
async fn outcomes(app: &App, request: Request<Incoming>) -> Response<ProxyBody> {
    let (parts, body) = request.into_parts();
    if let Err(error) =
        outcome_access::admit(app.store.current().policy(), &app.cfg, &parts.headers)
    {
        return error.into_response();
    }
    let limit = (MAX_OUTCOME_BYTES, app.cfg.limits.body_read_timeout);
    let bytes = match intake::read_body_within(body, &parts.headers, limit).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response(),
    };
    let headers = intake::header_pairs(&parts.headers);
    let snapshot = app.store.current();
    match app
        .components
        .sessions
        .record_outcome(snapshot.policy(), &headers, &bytes)
        .await
    {
        Ok(answer) => json(StatusCode::OK, Bytes::from(answer.to_string())),
        Err(error) => error.into_response(),
    }
}

fn json(status: StatusCode, body: Bytes) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::from(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(APPLICATION_JSON));
    response
}

pub(crate) fn not_allowed(method: &Method, path: &str, allow: &'static str) -> Response<ProxyBody> {
    let mut response: Response<ProxyBody> =
        ApiError::method_not_allowed(method.as_str(), path).into_response();
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    response
}
