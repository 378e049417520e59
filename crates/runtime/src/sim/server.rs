//! The simulator's HTTP side: accepting connections, routing the few endpoints, recording
//! requests, and turning plans into responses.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue, ACCEPT, CACHE_CONTROL, CONTENT_TYPE};
use hyper::http::request::Parts;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use super::answer::{generate_whole, send_stream, Answer, Whole};
use super::cache::fnv1a_fields;
use super::config::{SimConfig, SimFaults};
use super::engine::ModelState;
use super::fault::Fault;
use super::log::{ReceivedRequest, RequestLog};
use super::request::{Api, GenerateRequest};
use super::stats::SimMetrics;
use crate::exposition::{self, Format};
use crate::headers::{
    APPLICATION_JSON, SIM_DECODE_MS, SIM_FAULT, SIM_PREFILL_MS, SIM_QUEUE_MS, TEXT_EVENT_STREAM,
};
use crate::metrics::outcome;
use crate::openai::ApiError;

pub(crate) type SimBody = BoxBody<Bytes, io::Error>;

/// Everything the handlers share.
#[derive(Debug)]
pub(crate) struct SimState {
    seed: u64,
    time_scale: f64,
    max_body_bytes: usize,
    /// In configuration order, for `GET /v1/models`.
    order: Vec<String>,
    pub(crate) models: HashMap<String, Arc<ModelState>>,
    pub(crate) log: RequestLog,
    rng: Mutex<StdRng>,
    /// Drawn from the operating system's randomness at start, so no two runs share an id.
    id_salt: u64,
    next_id: AtomicU64,
    metrics: SimMetrics,
}

impl SimState {
    /// Expects a validated configuration.
    pub(crate) fn new(cfg: SimConfig) -> SimState {
        let order = cfg.models.iter().map(|m| m.id.clone()).collect();
        let models = cfg
            .models
            .into_iter()
            .map(|spec| {
                (
                    spec.id.clone(),
                    Arc::new(ModelState::new(spec, &cfg.faults)),
                )
            })
            .collect();
        SimState {
            seed: cfg.seed,
            time_scale: cfg.time_scale,
            max_body_bytes: cfg.max_body_bytes,
            order,
            models,
            log: RequestLog::new(cfg.request_log_limit),
            rng: Mutex::new(StdRng::seed_from_u64(cfg.seed)),
            id_salt: rand::random(),
            next_id: AtomicU64::new(0),
            metrics: SimMetrics::new(),
        }
    }

    fn draw_fault(&self, faults: &SimFaults) -> Fault {
        let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
        Fault::draw(faults, &mut rng)
    }

    /// Never the same twice, across restarts and between simulators (as a provider's ids are
    /// not): clients and routers key stored responses on them, and a response kept from an
    /// earlier run must not be taken for a new one. Answers stay deterministic under the seed;
    /// only their ids are not.
    fn next_id(&self) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let served = self.order.join("\n");
        format!(
            "{:016x}",
            fnv1a_fields(&[
                &self.seed.to_le_bytes(),
                &self.id_salt.to_le_bytes(),
                &n.to_le_bytes(),
                served.as_bytes()
            ])
        )
    }
}

/// Accepts connections until `shutdown` completes; then stops accepting and drops the
/// connections still open (a simulator has nothing worth draining).
pub(crate) async fn run(
    listener: TcpListener,
    state: Arc<SimState>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    // A stream's events are small writes spaced in time: with Nagle's algorithm
                    // each would wait for the client's delayed ACK of the one before (~40 ms),
                    // which no inference server's stream does.
                    let _ = stream.set_nodelay(true);
                    let state = Arc::clone(&state);
                    connections.spawn(async move {
                        let service = hyper::service::service_fn(move |request| {
                            handle(Arc::clone(&state), request)
                        });
                        let served = auto::Builder::new(TokioExecutor::new())
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                        if let Err(error) = served {
                            tracing::debug!(%peer, %error, "simulator connection ended with an error");
                        }
                    });
                }
                Err(error) => {
                    // Running out of descriptors is transient; back off instead of spinning.
                    tracing::warn!(%error, "simulator accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
        }
    }
    connections.shutdown().await;
    Ok(())
}

async fn handle(
    state: Arc<SimState>,
    request: Request<Incoming>,
) -> Result<Response<SimBody>, Infallible> {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    let body = read_body(body, state.max_body_bytes).await;
    // The simulator's own endpoints are not traffic under test.
    if !(path.starts_with("/sim/") || path == "/metrics") {
        state.log.record(ReceivedRequest {
            method: parts.method.to_string(),
            path: parts
                .uri
                .path_and_query()
                .map_or_else(|| path.clone(), |p| p.as_str().to_owned()),
            headers: header_pairs(&parts.headers),
            body: body.clone().unwrap_or_default(),
        });
    }
    let method = parts.method.as_str();
    let response = match (method, path.as_str()) {
        ("GET", "/health") => Ok(json_response(StatusCode::OK, json!({"status": "ok"}))),
        ("GET", "/v1/models") => Ok(list_models(&state)),
        ("GET", "/sim/requests") => Ok(json_response(StatusCode::OK, state.log.to_json())),
        ("DELETE", "/sim/requests") => {
            state.log.clear();
            Ok(json_response(StatusCode::OK, json!({"cleared": true})))
        }
        ("GET", "/metrics") => {
            let accept = parts.headers.get(ACCEPT).and_then(|v| v.to_str().ok());
            Ok(metrics_response(
                &state.metrics.encode(),
                Format::negotiate(accept),
            ))
        }
        ("POST", "/v1/chat/completions") => {
            generate(&state, Api::ChatCompletions, &parts, body).await
        }
        ("POST", "/v1/responses") => generate(&state, Api::Responses, &parts, body).await,
        (
            _,
            "/health"
            | "/v1/models"
            | "/sim/requests"
            | "/metrics"
            | "/v1/chat/completions"
            | "/v1/responses",
        ) => Err(ApiError::method_not_allowed(method, &path)),
        _ => Err(ApiError::not_found(&path)),
    };
    Ok(response.unwrap_or_else(|error| {
        tracing::debug!(%error, %path, "simulator answered with an error");
        error_response(error)
    }))
}

/// Plans and sends the answer to a generation request.
async fn generate(
    state: &SimState,
    api: Api,
    parts: &Parts,
    body: Result<Bytes, ApiError>,
) -> Result<Response<SimBody>, ApiError> {
    let request = GenerateRequest::parse(api, &body?)?;
    let model = state
        .models
        .get(&request.model)
        .ok_or_else(|| ApiError::model_not_found(&request.model))?;
    let fault = match parts.headers.get(SIM_FAULT) {
        Some(value) => {
            let value = value.to_str().map_err(|_| {
                ApiError::bad_request(format!("`{SIM_FAULT}` must be visible ASCII"))
            })?;
            Fault::parse(value, &model.faults)?
        }
        None => state.draw_fault(&model.faults),
    };
    state.metrics.request(&model.spec.id, fault.outcome());
    if let Fault::Error(status) = fault {
        let kind = if status.is_server_error() {
            "server_error"
        } else {
            "invalid_request_error"
        };
        return Err(ApiError::new(
            status,
            kind,
            Some("simulated_fault"),
            format!("simulated failure of `{}`", model.spec.id),
        ));
    }
    let admission = model.admit(state.time_scale).await.inspect_err(|_| {
        state.metrics.request(&model.spec.id, outcome::REJECTED);
    })?;
    if let Fault::Stall(stall) = fault {
        match stall {
            Some(duration) => tokio::time::sleep(duration).await,
            // Never answer; the slot is released when the client gives up and hyper drops us.
            None => std::future::pending::<()>().await,
        }
    }
    let plan = model.plan(state.seed, &request);
    state.metrics.tokens(&model.spec.id, &plan);
    let answer = Answer {
        api,
        id: match api {
            Api::ChatCompletions => format!("chatcmpl-{}", state.next_id()),
            Api::Responses => format!("resp_{}", state.next_id()),
        },
        created: unix_seconds(),
        model: request.model.clone(),
        include_usage: request.include_usage,
        report_cached_tokens: model.spec.report_cached_tokens,
    };
    let timing = [
        (SIM_QUEUE_MS, admission.queue_ms),
        (SIM_PREFILL_MS, plan.prefill_ms),
        (SIM_DECODE_MS, plan.decode_ms()),
    ];
    let (content_type, body) = if request.stream {
        let tokens_per_chunk = model.spec.tokens_per_chunk;
        let body = send_stream(
            answer,
            plan,
            admission,
            fault,
            state.time_scale,
            tokens_per_chunk,
        );
        (TEXT_EVENT_STREAM, body.boxed())
    } else {
        let body = match generate_whole(&answer, &plan, admission, fault, state.time_scale).await {
            Whole::Complete(bytes) => full(bytes),
            Whole::Truncated(body) => body.boxed(),
        };
        (APPLICATION_JSON, body)
    };
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    if request.stream {
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    for (name, ms) in timing {
        if let Ok(value) = HeaderValue::from_str(&format!("{ms:.3}")) {
            headers.insert(name, value);
        }
    }
    Ok(response)
}

async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, ApiError> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<LengthLimitError>() => Err(ApiError::payload_too_large(limit)),
        Err(error) => Err(ApiError::bad_request(format!(
            "the request body could not be read: {error}"
        ))),
    }
}

fn header_pairs(headers: &HeaderMap) -> Vec<(String, String)> {
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

fn list_models(state: &SimState) -> Response<SimBody> {
    let created = unix_seconds();
    let data: Vec<_> = state
        .order
        .iter()
        .map(|id| json!({"id": id, "object": "model", "created": created, "owned_by": "src-sim"}))
        .collect();
    json_response(StatusCode::OK, json!({"object": "list", "data": data}))
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn full(bytes: Bytes) -> SimBody {
    Full::new(bytes).map_err(|never| match never {}).boxed()
}

fn json_response(status: StatusCode, value: serde_json::Value) -> Response<SimBody> {
    let mut response = Response::new(full(Bytes::from(value.to_string())));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(APPLICATION_JSON));
    response
}

/// The simulator's metrics in the format the scraper asked for (as the router's `/metrics`).
fn metrics_response(openmetrics: &str, format: Format) -> Response<SimBody> {
    let text = exposition::render(openmetrics.to_owned(), format);
    let mut response = Response::new(full(Bytes::from(text)));
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    response
}

fn error_response(error: ApiError) -> Response<SimBody> {
    let response: Response<Full<Bytes>> = error.into_response();
    response.map(|body| body.map_err(|never| match never {}).boxed())
}
