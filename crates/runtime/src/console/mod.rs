//! The operator console on the admin listener: a page (`GET /`, its script and stylesheet
//! embedded in the binary, no network needed) and the small JSON/SSE API it reads, which
//! scripts may read too.
//!
//! - [`assets`]: the page's files, served without the admin token (they hold no data; the page
//!   asks for the token and sends it with every API call).
//! - [`sse`]: the stream of decisions ([`crate::watch::live`]), free when nobody watches.
//! - counts: requests per route and model over the last minute and hour
//!   ([`crate::watch::counts`]).
//! - [`picture`]: the policy as blocks → routes → models → backends.
//! - [`explain`]: the explain box, the compiler's explainer on the loaded policy.
//! - [`health`]: probes, reload history, model latency, cache hit ratio.
//! - sessions: the pins of the policy's store, listed by the session layer, with their recent
//!   decisions ([`crate::watch::recent`]).
//! - [`budgets`]: one tenant's budgets, what it used of each in the current window.
//!
//! What the request path keeps for these pages (the feed, the counts, who sent a request) is
//! the [`crate::watch`] module's, below the pipeline; the console itself sits above the server's
//! state ([`App`]) it reads. API paths are under [`API_PREFIX`]; each answers the admin API's
//! error shape.

pub mod assets;
pub mod budgets;
pub mod explain;
pub mod health;
pub mod picture;
pub mod sse;

use std::sync::Arc;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use tokio::sync::watch;

use crate::app::App;
use crate::headers::APPLICATION_JSON;
use crate::openai::ApiError;
use crate::pipeline::intake;
use crate::relay::body::ProxyBody;
use crate::watch::{counts, live};

/// Where the console's API lives on the admin listener.
pub const API_PREFIX: &str = "/v1/console/";

/// Limit on an explain body: a pasted request.
const MAX_EXPLAIN_BYTES: usize = 1 << 20;

/// Answers a console API path (the caller has checked the admin token).
pub async fn api(app: &App, request: Request<Incoming>) -> Response<ProxyBody> {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let get = matches!(method, Method::GET | Method::HEAD);
    match path.trim_start_matches(API_PREFIX) {
        "live" if get => sse::stream(&app.telemetry.live),
        "counts" if get => json(
            app.telemetry
                .counts
                .report(&app.telemetry.encode_requests())
                .to_string(),
        ),
        "policy" if get => json(picture::picture(&app.store.current()).to_string()),
        "health" if get => json(health::report(app).to_string()),
        "sessions" if get => sessions(app, request.uri().query()).await,
        "budgets" if get => match budgets::listing(app, request.uri().query()).await {
            Ok(answer) => json(answer.to_string()),
            Err(error) => error.into_response(),
        },
        "live" | "counts" | "policy" | "health" | "sessions" | "budgets" => {
            not_allowed(&method, &path, "GET, HEAD")
        }
        "explain" if method == Method::POST => explain_box(app, request).await,
        "explain" => not_allowed(&method, &path, "POST"),
        _ => ApiError::not_found(&path).into_response(),
    }
}

/// Pins listed when the query does not say (`?limit=N`, at most [`MAX_PINS`]).
const DEFAULT_PINS: usize = 200;
const MAX_PINS: usize = 2000;

async fn sessions(app: &App, query: Option<&str>) -> Response<ProxyBody> {
    let limit = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| pair.strip_prefix("limit="))
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(DEFAULT_PINS)
        .clamp(1, MAX_PINS);
    let snapshot = app.store.current();
    match app
        .components
        .sessions
        .list_pins(snapshot.policy(), limit)
        .await
    {
        Ok(mut answer) => {
            with_recent_decisions(&mut answer, &app.telemetry.live);
            json(answer.to_string())
        }
        Err(error) => error.into_response(),
    }
}

/// Adds to each listed pin its session's recent decisions, kept since a page connected.
fn with_recent_decisions(listing: &mut serde_json::Value, live: &live::LiveFeed) {
    let Some(tenants) = listing
        .get_mut("tenants")
        .and_then(serde_json::Value::as_object_mut)
    else {
        return;
    };
    for (tenant, pins) in tenants.iter_mut() {
        for pin in pins.as_array_mut().into_iter().flatten() {
            let Some(id) = pin.get("id").and_then(serde_json::Value::as_str) else {
                continue;
            };
            let decisions = serde_json::to_value(live.recent(tenant, id)).unwrap_or_default();
            if let Some(pin) = pin.as_object_mut() {
                pin.insert("decisions".into(), decisions);
            }
        }
    }
}

async fn explain_box(app: &App, request: Request<Incoming>) -> Response<ProxyBody> {
    let (parts, body) = request.into_parts();
    let limit = (MAX_EXPLAIN_BYTES, app.cfg.limits.body_read_timeout);
    let bytes = match intake::read_body_within(body, &parts.headers, limit).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response(),
    };
    let models = Arc::clone(&app.components.models);
    match explain::answer(app.store.current(), models, &bytes).await {
        Ok(answer) => json(answer.to_string()),
        Err(error) => error.into_response(),
    }
}

/// Samples the request counters every [`counts::EVERY`] until `stop` changes.
pub async fn sample_loop(app: Arc<App>, mut stop: watch::Receiver<bool>) {
    loop {
        app.telemetry
            .counts
            .sample(&app.telemetry.encode_requests());
        tokio::select! {
            _ = tokio::time::sleep(counts::EVERY) => {}
            _ = stop.changed() => return,
        }
    }
}

fn json(body: String) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::from(Bytes::from(body)));
    *response.status_mut() = StatusCode::OK;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(APPLICATION_JSON));
    response
}

fn not_allowed(method: &Method, path: &str, allow: &'static str) -> Response<ProxyBody> {
    let mut response: Response<ProxyBody> =
        ApiError::method_not_allowed(method.as_str(), path).into_response();
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    response
}
