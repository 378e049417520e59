//! One HTTP request seen through Envoy's external processing stream, phase by phase, driving the
//! same front doors as the HTTP proxy: [`door::decide_or_answer`] parses, prepares (a Responses
//! turn continuing a stored conversation is expanded) and decides (and makes the router's own
//! answers), the failover machine names the one candidate to send ([`first_sendable`]),
//! [`shape`](crate::pipeline::shape) builds what it is sent, and the request's [`Completion`]
//! reports it once the response's status is known.
//!
//! - request headers: a proxied path (`POST /v1/chat/completions`, `POST /v1/responses`) is
//!   remembered; headers only the router may set are removed from what goes upstream; other
//!   paths pass through untouched.
//! - request body: the decision. A forward becomes a body mutation and header mutations; an
//!   error, a refusal or a cache hit becomes an immediate response.
//!   - `BUFFERED`: Envoy sends the body whole after the headers' answer; the headers are
//!     answered at once and the decision rides on the body's answer.
//!   - `FULL_DUPLEX_STREAMED` (told in the stream's first message): Envoy sends the headers and
//!     the body's chunks without waiting, so nothing is answered until the body is whole; then
//!     the headers' answer carries the decision's header mutations and the body's answer the
//!     new body. One round trip instead of two.
//! - response headers: the `x-sr-*` decision headers are added; the status is reported (Envoy's
//!   own answer when the upstream reset or could not be reached: its 502, 503 or 504), a 5xx
//!   is told to the session layer, and the status counts towards the model's cooldown, as the
//!   proxy does. The time to these headers is the only upstream time the processor sees.
//! - response body, where Envoy sends it (`response_body_mode: STREAMED`, told in the stream's
//!   first message): a request under token or cost budgets is charged the usage its answer
//!   reports ([`Metered`]); a streamed chat answer is asked for it as through the proxy
//!   (`stream_options.include_usage`) and that extra chunk is taken out of what the client gets.
//!   Where Envoy does not send it, such a request is charged the router's estimate of its
//!   prompt once the answer's headers arrive, and its usage is never asked for (the chunk would
//!   reach the client).
//!
//! A stream Envoy drops before the request is reported is reported by what the processor was
//! doing: dropped while it decided, Envoy stopped waiting for it (its `message_timeout`: the
//! request went on undecided or was refused by Envoy, as `failure_mode_allow` says), recorded
//! as [`GATEWAY_GAVE_UP`]; dropped while the request was sent, before the answer's headers,
//! the client went away (499).
//!
//! An external processor cannot retry: the first candidate that fits the request's context and is
//! not cooling down is the one sent; the gateway's retry policy stands in for `else` fallbacks.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use envoy_types::pb::envoy::extensions::filters::http::ext_proc::v3::processing_mode::BodySendMode;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    processing_request::Request as Message, HttpBody, HttpHeaders, ProcessingRequest,
    ProcessingResponse,
};
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_LENGTH, DATE};
use hyper::Method;

use crate::door::chat::Chat;
use crate::door::messages::Messages;
use crate::door::responses::Responses;
use crate::door::{self, ToForward};
use crate::extproc::metered::Metered;
use crate::extproc::wire::{self, Phase};
use crate::headers::{self, path};
use crate::hooks::UpstreamOutcomes;
use crate::openai::{Api, ApiError};
use crate::pipeline::answer::{answer_error, set_sr_headers};
use crate::pipeline::forward::hygiene::returned;
use crate::pipeline::forward::{first_sendable, judge_status, note_plan};
use crate::pipeline::shape::{dropped_credentials, set_model_headers, ShapeInput, Shaping};
use crate::pipeline::{new_completion, Pipeline};
use crate::relay::completion::{Completion, CLIENT_CLOSED};
use crate::responses_state::ResponseStates;

/// Status recorded for a request whose stream Envoy dropped while the router decided it.
pub const GATEWAY_GAVE_UP: u16 = 504;

const GAVE_UP: &str = "the gateway stopped waiting for the router's decision (its \
                       message_timeout, unless the client left meanwhile); the request went on \
                       undecided or was refused by the gateway";
const LEFT_WHILE_SENT: &str =
    "the client went away before the upstream answer's headers reached the gateway";

/// Where one request stands.
enum Stage {
    /// Nothing seen yet.
    Fresh,
    /// A proxied request whose headers have arrived.
    Asked(Box<Arrived>),
    /// Not a request the router decides: every phase passes it through.
    Passing,
    /// Sent upstream as `model`; waiting for the response's headers.
    Sent(Box<Sent>),
    /// Reported; the answer's body is read for the usage it charges.
    Relaying(Box<Metered>),
    /// Answered or reported.
    Over,
}

/// A proxied request's headers, until its body arrives.
struct Arrived {
    api: Api,
    headers: HeaderMap,
    done: Box<Completion>,
    /// Full duplex: the client's router-only headers, removed with the decision's answer.
    remove: Vec<String>,
    /// Full duplex: the body's chunks so far.
    body: Vec<u8>,
}

/// What the decision made of a request.
enum Outcome {
    /// The router's own answer (an error, a refusal, a cache hit).
    Answer(ProcessingResponse),
    /// Go on upstream with this body, these headers set and these removed.
    Forward {
        body: Vec<u8>,
        set: HeaderMap,
        remove: Vec<String>,
    },
}

/// Which message completed the request, and so which answers the decision owes.
#[derive(Clone, Copy)]
enum Whole {
    /// Headers with `end_of_stream`: no body follows.
    Headers,
    /// A body message with `end_of_stream`, or a full duplex body over the size limit.
    Body,
    /// Trailers after a full duplex body.
    Trailers,
}

/// A forwarded request, until its response's status is known.
struct Sent {
    done: Completion,
    model: String,
    sent_at: Instant,
    outcomes: Option<Arc<dyn UpstreamOutcomes>>,
    /// The router asked for the answer's usage chunk, which the client is not to see.
    strip: bool,
}

/// What a request's decision is made with: the pipeline, and the stored conversations the
/// Responses door continues.
#[derive(Clone, Copy)]
struct Doors<'a> {
    pipeline: Pipeline<'a>,
    states: &'a ResponseStates,
}

/// One request's processing stream.
pub struct Exchange {
    stage: Stage,
    /// Envoy sends the request body `FULL_DUPLEX_STREAMED`.
    duplex: bool,
    /// Envoy sends the response body (`STREAMED` or `BUFFERED`).
    sees_answers: bool,
}

impl Default for Exchange {
    fn default() -> Self {
        Exchange::new()
    }
}

impl Exchange {
    pub fn new() -> Exchange {
        Exchange {
            stage: Stage::Fresh,
            duplex: false,
            sees_answers: false,
        }
    }

    /// Answers one message of the stream. Every message gets exactly one answer, in order; in
    /// full duplex the request's messages are answered together once its body is whole, so a
    /// message may get none now and a later one several.
    pub async fn step(
        &mut self,
        (pipeline, states): (Pipeline<'_>, &ResponseStates),
        message: ProcessingRequest,
    ) -> Vec<ProcessingResponse> {
        let doors = Doors { pipeline, states };
        // Envoy states its body mode on the stream's first message.
        if let Some(config) = &message.protocol_config {
            self.duplex = config.request_body_mode == BodySendMode::FullDuplexStreamed as i32;
            self.sees_answers = [BodySendMode::Streamed, BodySendMode::Buffered]
                .iter()
                .any(|mode| config.response_body_mode == *mode as i32);
        }
        match message.request {
            Some(Message::RequestHeaders(headers)) => self.request_headers(doors, headers).await,
            Some(Message::RequestBody(body)) => self.request_body(doors, body).await,
            Some(Message::RequestTrailers(_)) => self.request_trailers(doors).await,
            Some(Message::ResponseHeaders(headers)) => {
                vec![self.response_headers(doors.pipeline, &headers)]
            }
            Some(Message::ResponseBody(body)) => vec![self.response_body(&body)],
            Some(Message::ResponseTrailers(_)) => {
                if let Stage::Relaying(metered) = &mut self.stage {
                    metered.end();
                }
                vec![wire::unchanged(Phase::ResponseTrailers)]
            }
            // A message with no phase asks nothing; answering it as headers keeps the stream
            // one answer per message.
            None => vec![wire::unchanged(Phase::RequestHeaders)],
        }
    }

    async fn request_headers(
        &mut self,
        doors: Doors<'_>,
        message: HttpHeaders,
    ) -> Vec<ProcessingResponse> {
        let pipeline = doors.pipeline;
        let started = Instant::now();
        let read = wire::read_headers(message.headers.as_ref());
        let remove = untrusted(&read.map);
        let decided = door::proxied(&read.path)
            .filter(|api| super::decides(*api) && read.method == Method::POST.as_str());
        let api = match decided {
            Some(api) => api,
            None => {
                self.stage = Stage::Passing;
                return vec![wire::request_headers(wire::mutation(
                    &HeaderMap::new(),
                    remove,
                ))];
            }
        };
        let done = new_completion(pipeline, &read.map, api.endpoint(), started).through_extproc();
        // Buffered, the removal goes with this answer; in full duplex, with the decision's.
        let (now, later) = if self.duplex {
            (Vec::new(), remove)
        } else {
            (remove, Vec::new())
        };
        self.stage = Stage::Asked(Box::new(Arrived {
            api,
            headers: read.map,
            done: Box::new(done),
            remove: later,
            body: Vec::new(),
        }));
        if message.end_of_stream {
            // No body will follow: decide on an empty one, as the proxy does (a 400).
            return self.decided(doors, Whole::Headers, now).await;
        }
        if self.duplex {
            return Vec::new();
        }
        vec![wire::request_headers(wire::mutation(
            &HeaderMap::new(),
            now,
        ))]
    }

    async fn request_body(
        &mut self,
        doors: Doors<'_>,
        message: HttpBody,
    ) -> Vec<ProcessingResponse> {
        let Stage::Asked(arrived) = &mut self.stage else {
            // In full duplex Envoy sends on only what it is answered: a body the router does
            // not decide goes back as it came.
            if self.duplex {
                return vec![wire::streamed_body(message.body, message.end_of_stream)];
            }
            return vec![wire::unchanged(Phase::RequestBody)];
        };
        if !self.duplex {
            arrived.body = message.body;
            return self.decided(doors, Whole::Body, Vec::new()).await;
        }
        // A body in one chunk (the common case) is kept as it came, not copied.
        if arrived.body.is_empty() {
            arrived.body = message.body;
        } else {
            arrived.body.extend_from_slice(&message.body);
        }
        // Over the limit there is no need to wait for the rest: the answer is a 413.
        if message.end_of_stream || arrived.body.len() > doors.pipeline.max_body_bytes {
            return self.decided(doors, Whole::Body, Vec::new()).await;
        }
        Vec::new()
    }

    async fn request_trailers(&mut self, doors: Doors<'_>) -> Vec<ProcessingResponse> {
        if self.duplex && matches!(self.stage, Stage::Asked(_)) {
            return self.decided(doors, Whole::Trailers, Vec::new()).await;
        }
        vec![wire::unchanged(Phase::RequestTrailers)]
    }

    /// The decision on the whole request, as the answers its messages are owed. `remove` is
    /// a headers-phase removal not yet sent.
    async fn decided(
        &mut self,
        doors: Doors<'_>,
        whole: Whole,
        remove: Vec<String>,
    ) -> Vec<ProcessingResponse> {
        let Stage::Asked(arrived) = std::mem::replace(&mut self.stage, Stage::Over) else {
            return vec![wire::unchanged(Phase::RequestBody)];
        };
        let mut arrived = *arrived;
        arrived.done.if_abandoned(GATEWAY_GAVE_UP, GAVE_UP);
        let mut remove = remove;
        remove.append(&mut arrived.remove);
        // The decision's future (the deciding steps, the answers the router writes itself) is
        // the largest state of a stream's answering by far; kept inline, every message's
        // answering future, which the stream boxes and moves once a message, would carry and
        // copy all of it, kilobytes a message. Boxed here, it is built and moved once a request.
        let decision = Box::pin(self.decide(doors, arrived)).await;
        let (body, set) = match decision {
            Outcome::Answer(answer) => return vec![answer],
            Outcome::Forward {
                body,
                set,
                remove: mut dropped,
            } => {
                remove.append(&mut dropped);
                (body, set)
            }
        };
        match (self.duplex, whole) {
            // The body is replaced only where one was sent.
            (_, Whole::Headers) => {
                vec![wire::request_headers_rerouted(wire::mutation(&set, remove))]
            }
            (false, _) => vec![wire::request_body(body, wire::mutation(&set, remove))],
            (true, Whole::Body) => vec![
                wire::request_headers_rerouted(wire::mutation(&set, remove)),
                wire::streamed_body(body, true),
            ],
            (true, Whole::Trailers) => vec![
                wire::request_headers_rerouted(wire::mutation(&set, remove)),
                wire::streamed_body(body, false),
                wire::unchanged(Phase::RequestTrailers),
            ],
        }
    }

    /// The decision on the whole body, and what Envoy is to do with the request.
    async fn decide(&mut self, doors: Doors<'_>, arrived: Arrived) -> Outcome {
        let pipeline = doors.pipeline;
        let Arrived {
            api,
            headers,
            done,
            body,
            ..
        } = arrived;
        let bytes = Bytes::from(body);
        if bytes.len() > pipeline.max_body_bytes {
            let error = ApiError::payload_too_large(pipeline.max_body_bytes);
            return Outcome::Answer(wire::immediate(answer_error(*done, error)).await);
        }
        let snapshot = pipeline.store.current();
        let whole = (&headers, &bytes);
        let settled = match api {
            Api::Chat => door::decide_or_answer(pipeline, &Chat, &snapshot, whole, done).await,
            Api::Responses => {
                let door = Responses {
                    states: doors.states,
                };
                door::decide_or_answer(pipeline, &door, &snapshot, whole, done).await
            }
            Api::Messages => {
                door::decide_or_answer(pipeline, &Messages, &snapshot, whole, done).await
            }
        };
        let forwarding = match settled {
            Ok(forwarding) => forwarding,
            Err(answer) => return Outcome::Answer(wire::immediate(answer).await),
        };
        let ToForward {
            parsed,
            view,
            previous,
            plan,
            done,
            ..
        } = forwarding;
        let mut done = *done;
        note_plan(&mut done.record, snapshot.policy(), &plan);
        let model_id = match first_sendable(
            (pipeline.telemetry, pipeline.cooldowns),
            snapshot.policy(),
            (api, &plan.candidates),
            &view,
            &mut done.record.fallbacks,
        ) {
            Ok((id, _native)) => id,
            Err(error) => return Outcome::Answer(wire::immediate(answer_error(done, error)).await),
        };
        let route = plan
            .route
            .and_then(|r| snapshot.policy().routes.get(r.index()));
        let shaping = Shaping::new(ShapeInput {
            api,
            original: &bytes,
            parsed: &parsed,
            trace: &done.trace,
            request_id: &done.record.request_id,
            route,
            session_identity: plan.session.as_ref().and_then(|s| s.identity.as_deref()),
            // Only where the processor sees the answer can the chunk asked for be taken out.
            ask_usage: plan.ask_usage && self.sees_answers,
        });
        let strip = plan.ask_usage
            && self.sees_answers
            && api == Api::Chat
            && crate::pipeline::shape::usage_asked(parsed.tree()).is_some();
        let policy = snapshot.policy();
        let (Some(model), Some(wire_model)) = (
            policy.models.get(model_id.index()),
            snapshot.wire.get(model_id.index()),
        ) else {
            let error = ApiError::internal("the plan names a model the policy lacks");
            return Outcome::Answer(wire::immediate(answer_error(done, error)).await);
        };
        let Some(endpoint) = snapshot.endpoints.get(model.backend.index()) else {
            let error = ApiError::internal("the model's backend is missing");
            return Outcome::Answer(wire::immediate(answer_error(done, error)).await);
        };
        // A turn continuing a conversation the router stored goes as written to its owner and
        // expanded to any other model (and always when the route redacts), as the proxy sends it.
        let moved = previous
            .as_ref()
            .filter(|p| p.expands_for(&endpoint.name, &model.serves, plan.redact.is_some()));
        if previous.is_some() {
            done.record.previous = Some(if moved.is_some() {
                headers::previous::EXPANDED
            } else {
                headers::previous::CONTINUED
            });
        }
        let body = match moved.map_or_else(|| shaping.body(wire_model), |p| p.body(wire_model)) {
            Ok(body) => body,
            Err(err) => {
                let error = ApiError::bad_request(err.to_string());
                return Outcome::Answer(wire::immediate(answer_error(done, error)).await);
            }
        };
        // The gateway relays the answer itself, so its placeholders stay: the backend still
        // never reads the values.
        let body = match &plan.redact {
            Some(redact) => {
                use crate::pipeline::redact::{detected_vault, tenant_vault, texts_of_body};
                let mut vault = tenant_vault(policy, &view);
                if !redact.detectors().is_empty() {
                    let tenant = crate::session::identity::tenant(policy, &view);
                    let texts = texts_of_body(&body);
                    let models = (pipeline.models, policy);
                    // Boxed: only a route that redacts with detectors runs it.
                    match Box::pin(detected_vault(texts, redact, models, &tenant)).await {
                        Ok(found) => vault.detect_as(found),
                        Err(error) => {
                            return Outcome::Answer(
                                wire::immediate(answer_error(done, error)).await,
                            )
                        }
                    };
                }
                let redacted = crate::pipeline::redact::redact_body(&body, redact, &mut vault);
                done.record.redacted = crate::pipeline::redact::summary(&vault);
                redacted.unwrap_or(body)
            }
            None => body,
        };
        let mut set = shaping.router_headers().clone();
        set_model_headers(&mut set, wire_model, endpoint);
        set.insert(
            HeaderName::from_static(headers::GATEWAY_MODEL_NAME),
            wire_model.served_header.clone(),
        );
        if let Ok(backend) = HeaderValue::from_str(&endpoint.name) {
            set.insert(HeaderName::from_static(headers::SR_BACKEND), backend);
        }
        set.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
        done.record.model = Some(model.name.clone());
        done.record.served = Some(model.serves.clone());
        done.record.backend = Some(endpoint.name.clone());
        done.if_abandoned(CLIENT_CLOSED, LEFT_WHILE_SENT);
        self.stage = Stage::Sent(Box::new(Sent {
            done,
            model: model.name.clone(),
            sent_at: Instant::now(),
            outcomes: plan.session.as_ref().and_then(|s| s.outcomes.clone()),
            strip,
        }));
        // The client's router-only headers are removed beside these, which overwrite, and the
        // client's credentials go where the chosen backend drops them.
        let remove = dropped_credentials(endpoint)
            .into_iter()
            .map(str::to_owned)
            .collect();
        Outcome::Forward { body, set, remove }
    }

    fn response_headers(
        &mut self,
        pipeline: Pipeline<'_>,
        message: &HttpHeaders,
    ) -> ProcessingResponse {
        let Stage::Sent(sent) = std::mem::replace(&mut self.stage, Stage::Over) else {
            return wire::unchanged(Phase::ResponseHeaders);
        };
        let Sent {
            mut done,
            model,
            sent_at,
            outcomes,
            strip,
        } = *sent;
        let answer = wire::read_headers(message.headers.as_ref());
        let status = answer.status.unwrap_or(0);
        done.record.status = status;
        done.record.path = path::UPSTREAM;
        let mut set = HeaderMap::new();
        set_sr_headers(&mut set, &done.record, Some(&model));
        if let Some(protection) = done
            .record
            .protection
            .as_deref()
            .and_then(|p| HeaderValue::from_str(p).ok())
        {
            set.insert(HeaderName::from_static(headers::SR_PROTECTION), protection);
        }
        // The proxy blames a model for a 5xx (it would have moved on to the next one); an
        // external processor sees the same status, so the session layer and the model's
        // cooldown hear the same.
        if (500..600).contains(&status) {
            if let Some(outcomes) = &outcomes {
                outcomes.failed(&model, "status");
            }
        }
        if let Ok(code) = hyper::StatusCode::from_u16(status) {
            let snapshot = pipeline.store.current();
            // The processor never sees the answer's body (the gateway relays it), so an answer
            // below 400 counts as whole once its head is here.
            if let Some(verdict) = judge_status(pipeline.cooldowns, snapshot.policy(), &model, code)
            {
                verdict.whole();
            }
        }
        if let Some(mut charge) = done.charge.take() {
            let snapshot = pipeline.store.current();
            if let Some(id) = snapshot.policy().model_by_name(&model) {
                charge.answered_by(snapshot.policy(), id);
            }
            let events = answer
                .map
                .get(hyper::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with(headers::TEXT_EVENT_STREAM));
            let metered = Metered::new(charge, events, strip);
            // Where no body will be shown, dropping it charges the estimate now.
            if self.sees_answers {
                self.stage = Stage::Relaying(Box::new(metered));
            }
        }
        done.finish_at_head(sent_at.elapsed());
        // The gateway relays the backend's answer: what the proxy would not hand a client
        // leaves it here too. `date` stays, the gateway's to keep as HTTP wants it.
        let remove = answer
            .map
            .keys()
            .filter(|name| !returned(name) && *name != DATE && !set.contains_key(*name))
            .map(|name| name.as_str().to_owned())
            .collect();
        wire::response_headers(wire::mutation(&set, remove))
    }

    /// A chunk of the answer: read for its usage, and answered at once (without the usage chunk
    /// the router asked for).
    fn response_body(&mut self, message: &HttpBody) -> ProcessingResponse {
        let Stage::Relaying(metered) = &mut self.stage else {
            return wire::unchanged(Phase::ResponseBody);
        };
        let replaced = metered.chunk(&message.body, message.end_of_stream);
        if message.end_of_stream {
            self.stage = Stage::Over;
        }
        match replaced {
            Some(body) => wire::response_body_replaced(body.to_vec()),
            None => wire::unchanged(Phase::ResponseBody),
        }
    }
}

/// The client's headers that only the router may set, and its cookies (never a backend's).
fn untrusted(client: &HeaderMap) -> Vec<String> {
    let mut names: Vec<String> = client
        .keys()
        .map(|name| name.as_str())
        .filter(|name| headers::router_owned(name) || *name == "cookie")
        .map(str::to_owned)
        .collect();
    names.dedup();
    names
}
