//! The request path of `POST /v1/responses`: the pipeline's steps (intake, deciding,
//! forwarding) with the router's stored responses around them.
//!
//! Before deciding, a `previous_response_id` is looked up in the tenant's store. A stored one
//! is expanded: the deciding steps see the whole conversation (its `history`, its tool loop),
//! and the forwarder sends the turn as written to the response's owner and expanded to anyone
//! else ([`Continuation`]). An unknown one stays `request.provider_state`, which the session
//! layer's built-in `provider state` hold keeps on its pinned owner. After forwarding, a 200
//! answer is kept ([`capture`](crate::responses_state::capture)) unless the client sent
//! `store: false` or the turn continues a conversation the router does not hold (it could not
//! expand it later).

use std::time::Instant;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderMap, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use serde_json::Value;
use src_compiler::request::RequestView;

use crate::headers::{self, session as state, TEXT_EVENT_STREAM};
use crate::openai::{Api, ApiError};
use crate::pipeline::answer::answer_error;
use crate::pipeline::body::ProxyBody;
use crate::pipeline::decide::Plan;
use crate::pipeline::forward::{self, Outgoing};
use crate::pipeline::{self, intake, Decided, Parsed, Pipeline};
use crate::policy_store::Snapshot;
use crate::responses_state::capture::{Capture, Keep, Producer};
use crate::responses_state::chain::{self, Continuation};
use crate::responses_state::record::StoredResponse;
use crate::responses_state::{ResponseStates, Scope};
use crate::store::failure::{self, Failed, Site};

/// Answers one `POST /v1/responses`.
pub async fn handle(
    pipeline: Pipeline<'_>,
    states: &ResponseStates,
    request: Request<Incoming>,
    started: Instant,
) -> Response<ProxyBody> {
    let api = Api::Responses;
    let done = pipeline::new_completion(pipeline, request.headers(), api.endpoint(), started);
    let (parts, body) = request.into_parts();
    let bytes = match intake::read_body(body, &parts.headers, pipeline.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(error) => return answer_error(done, error),
    };
    let (parsed, view) = match intake::parse(api, &bytes, &parts.headers, &done.trace) {
        Ok(request) => request,
        Err(error) => return answer_error(done, error),
    };
    let snapshot = pipeline.store.current();
    let turn = match prepare(states, &snapshot, &parsed, view, &parts.headers).await {
        Ok(turn) => turn,
        Err(error) => return answer_error(done, error),
    };
    let request = Parsed {
        api,
        parsed: &parsed,
        view: &turn.view,
        headers: &parts.headers,
    };
    let (plan, mut done) = match pipeline::decide_step(pipeline, &snapshot, request, done).await {
        Decided::Answer(response) => return response,
        Decided::Forward { plan, done } => (plan, done),
    };
    if turn.provider_state {
        let word = owner_word(&plan);
        tracing::debug!(previous = word, "a response id the router does not hold");
        done.record.previous = Some(word);
    }
    let outgoing = Outgoing {
        api,
        parts: &parts,
        body: &bytes,
        parsed: &parsed,
        view: &turn.view,
        previous: turn.continuation.as_ref(),
    };
    let response = forward::forward(
        pipeline.upstream,
        (pipeline.telemetry, pipeline.cooldowns),
        &snapshot,
        outgoing,
        *plan,
        *done,
    )
    .await;
    turn.keep(states, &snapshot, response)
}

/// One turn of a conversation, as the router holds it.
struct Turn {
    /// The facts policies read: of the whole conversation when the router expanded it.
    view: RequestView,
    continuation: Option<Continuation>,
    /// The conversation's input up to this turn's answer.
    input: Vec<Value>,
    /// Where the answer is kept; `None` when it is not.
    keep_in: Option<Scope>,
    /// The turn continues a conversation the router does not hold.
    provider_state: bool,
}

async fn prepare(
    states: &ResponseStates,
    snapshot: &Snapshot,
    parsed: &Value,
    view: RequestView,
    headers: &HeaderMap,
) -> Result<Turn, ApiError> {
    let policy = snapshot.policy();
    let stores = parsed.get("store").and_then(Value::as_bool) != Some(false);
    let scope = match states.scope(policy, &view) {
        Ok(scope) => Some(scope),
        Err(err) => {
            tracing::warn!(%err, "the response store is unavailable");
            None
        }
    };
    let provider_state = view.provider_state;
    let mut turn = Turn {
        input: chain::input_items(parsed),
        continuation: None,
        keep_in: scope.clone().filter(|_| stores && !provider_state),
        provider_state,
        view,
    };
    let previous_id = parsed
        .get("previous_response_id")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|id| !id.is_empty());
    let (Some(id), Some(scope)) = (previous_id, scope) else {
        return Ok(turn);
    };
    let previous = match scope.store.get(&scope.tenant, id, states.now_ms()).await {
        Ok(Some(bytes)) => match StoredResponse::decode(&bytes) {
            Ok(previous) => previous,
            Err(err) => {
                tracing::warn!(%err, id, "a stored response is unreadable; its id is the provider's");
                return Ok(turn);
            }
        },
        Ok(None) => return Ok(turn),
        Err(err) => {
            let site = Site {
                store: "response",
                kind: scope.store.kind(),
                op: "get",
            };
            return match failure::judge(policy.failure.store, site, err) {
                Failed::Skip(_) => Ok(turn),
                Failed::Refuse(refusal) => Err(ApiError::service_unavailable(refusal.message())),
            };
        }
    };
    let history = chain::history(&previous, parsed);
    let Some(expanded) = chain::expanded_body(parsed, history.clone()) else {
        return Ok(turn);
    };
    turn.view =
        RequestView::from_responses(&expanded, intake::header_pairs(headers)).map_err(|err| {
            ApiError::bad_request(format!(
                "the stored conversation `{id}` cannot continue: {err}"
            ))
        })?;
    turn.provider_state = turn.view.provider_state;
    turn.keep_in = Some(scope).filter(|_| stores && !turn.provider_state);
    turn.continuation = Some(Continuation::new(&previous, &expanded));
    turn.input = history;
    Ok(turn)
}

/// Whether a turn the router cannot expand went to a presumed owner: the session's pin (kept,
/// or proposed anyway), or nobody known.
fn owner_word(plan: &Plan) -> &'static str {
    match plan.session.as_ref().map(|s| s.state) {
        Some(state::PINNED | state::HELD) => headers::previous::PROVIDER,
        _ => headers::previous::UNOWNED,
    }
}

impl Turn {
    /// The answer, kept once it has ended whole when it is a 200 from an upstream model.
    fn keep(
        self,
        states: &ResponseStates,
        snapshot: &Snapshot,
        response: Response<ProxyBody>,
    ) -> Response<ProxyBody> {
        let Some(scope) = self.keep_in else {
            return response;
        };
        if response.status() != StatusCode::OK {
            return response;
        }
        let Some(producer) = producer(snapshot, response.headers()) else {
            return response;
        };
        let sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with(TEXT_EVENT_STREAM));
        let options = states.options();
        let keep = Keep {
            scope,
            producer,
            input: self.input,
            ttl_ms: options.ttl_ms,
            max_bytes: options.max_entry_bytes,
            clock: states.clock(),
        };
        let (parts, body) = response.into_parts();
        let body = ProxyBody::Boxed(Capture::new(body, sse, keep).boxed_unsync());
        Response::from_parts(parts, body)
    }
}

/// The model that answered, from the relayed answer's `x-sr-model` and `x-sr-path`.
fn producer(snapshot: &Snapshot, answer: &HeaderMap) -> Option<Producer> {
    let read = |name: &str| answer.get(name).and_then(|v| v.to_str().ok());
    if read(headers::SR_PATH) != Some(headers::path::UPSTREAM) {
        return None;
    }
    let policy = snapshot.policy();
    let id = policy.model_by_name(read(headers::SR_MODEL)?)?;
    let model = policy.models.get(id.index())?;
    let endpoint = snapshot.endpoints.get(model.backend.index())?;
    Some(Producer {
        backend: endpoint.name.clone(),
        served: model.serves.clone(),
        model: model.name.clone(),
    })
}
