//! The front-door driver: every door that proxies a request (chat completions, Responses,
//! Messages, and the external processor) goes through the same steps here, so that none of them
//! reads a body, decides or forwards by rules of its own.
//!
//! A [`Door`] says only what is particular to it: the API its requests are in, what it does
//! before deciding ([`Door::prepare`]: Responses expands a stored conversation), what it notes
//! once the plan is known ([`Door::decided`]), and how it answers ([`Door::finish`]: Messages
//! rewrites the router's own answers into Anthropic's envelope, Responses keeps an answer for the
//! next turn); a door that keeps nothing between the two is a [`Plain`] one. The driver owns the
//! rest:
//!
//! 1. the body, read within its size and time bounds ([`intake::read_body_within`]): a client
//!    that stops sending gets a 408 on every door;
//! 2. the request view ([`intake::parse`]);
//! 3. the door's preparation, then the deciding steps ([`decide_step`]);
//! 4. the forwarder and its failover machine ([`forward::forward`]).
//!
//! Between the steps, results are typed ([`Answered`] says who made an answer), never headers
//! read back. The external processor cannot forward, so it runs steps 2 and 3 with [`decide`]
//! and asks the failover machine for one candidate itself.
//!
//! - [`chat`]: `POST /v1/chat/completions`.
//! - [`responses`]: `POST /v1/responses`, with the router's stored conversations around it.
//! - [`messages`]: `POST /v1/messages`, answered in Anthropic's shape.

pub mod chat;
pub mod messages;
pub mod responses;

use std::future::Future;
use std::time::Instant;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::HeaderMap;
use hyper::{Request, Response};
use src_compiler::request::RequestView;

use crate::anthropic::dialect::{self, Dialect};
use crate::openai::{Api, ApiError};
use crate::pipeline::answer::answer_error;
use crate::pipeline::continuation::{ChainVault, Continuation};
use crate::pipeline::decide::Plan;
use crate::pipeline::forward::{self, Answered, Outgoing};
use crate::pipeline::intake::{ChatFormNow, JsonBody};
use crate::pipeline::{decide_step, intake, new_completion, Decided, Parsed, Pipeline};
use crate::policy_store::Snapshot;
use crate::relay::body::ProxyBody;
use crate::relay::completion::Completion;

/// The paths the router proxies, each with the API its requests are in: the one table the HTTP
/// listener and the external processor both read.
pub const PROXIED: [(&str, Api); 3] = [
    ("/v1/chat/completions", Api::Chat),
    ("/v1/responses", Api::Responses),
    ("/v1/messages", Api::Messages),
];

/// The API of a proxied `path` (any method: a method other than POST is the listener's 405).
pub fn proxied(path: &str) -> Option<Api> {
    PROXIED
        .iter()
        .find(|(p, _)| *p == path)
        .map(|&(_, api)| api)
}

/// The `door` label of a request the HTTP proxy took for `api`.
pub fn label(api: Api) -> &'static str {
    match api {
        Api::Chat => crate::metrics::door::CHAT,
        Api::Responses => crate::metrics::door::RESPONSES,
        Api::Messages => crate::metrics::door::MESSAGES,
    }
}

/// What one front door adds to the driver's steps.
pub trait Door: Sync {
    /// What the door keeps from before deciding until its answer.
    type Turn: Send;

    /// The API the door's requests are in.
    fn api(&self) -> Api;

    /// Before deciding: the facts the deciding steps read, how the request continues a
    /// stored conversation, and what the door keeps. An error is answered as the router's own.
    fn prepare<'a>(
        &'a self,
        snapshot: &'a Snapshot,
        request: Intake<'a>,
    ) -> impl Future<Output = Result<Prepared<Self::Turn>, ApiError>> + Send + 'a;

    /// Once the plan is known, before it is forwarded.
    fn decided(&self, _turn: &Self::Turn, _plan: &Plan, _done: &mut Completion) {}

    /// The door's answer to the client: `turn` is `None` when the request ended before the
    /// door prepared it.
    fn finish<'a>(
        &'a self,
        snapshot: &'a Snapshot,
        turn: Option<Self::Turn>,
        answered: Answered,
    ) -> impl Future<Output = Response<ProxyBody>> + Send + 'a;
}

/// A door that keeps nothing from before deciding until its answer (chat, Messages): it names
/// its API and may reshape the answer; the request goes to the deciding steps as it came.
pub trait Plain: Sync {
    fn api(&self) -> Api;

    /// The door's answer to the client.
    fn answer(&self, answered: Answered) -> impl Future<Output = Response<ProxyBody>> + Send;
}

impl<D: Plain> Door for D {
    type Turn = ();

    fn api(&self) -> Api {
        Plain::api(self)
    }

    async fn prepare<'a>(
        &'a self,
        _snapshot: &'a Snapshot,
        request: Intake<'a>,
    ) -> Result<Prepared<()>, ApiError> {
        Ok(request.as_it_came())
    }

    async fn finish<'a>(
        &'a self,
        _snapshot: &'a Snapshot,
        _turn: Option<()>,
        answered: Answered,
    ) -> Response<ProxyBody> {
        self.answer(answered).await
    }
}

/// A parsed request, as a door's [`Door::prepare`] sees it.
pub struct Intake<'a> {
    pub parsed: &'a JsonBody,
    pub view: RequestView,
    pub headers: &'a HeaderMap,
}

impl Intake<'_> {
    /// The request as it came, with nothing kept: what a door without a preparation does.
    pub fn as_it_came(self) -> Prepared<()> {
        Prepared {
            view: self.view,
            previous: None,
            chain: None,
            turn: (),
        }
    }
}

/// What a door made of a parsed request before deciding.
pub struct Prepared<T> {
    /// The facts the deciding steps read.
    pub view: RequestView,
    /// The stored conversation the request continues, when the router holds it.
    pub previous: Option<Continuation>,
    /// The vault of the chain the request continues, under a policy that redacts: a
    /// backend-held chain's found or lost, a stored response's when found.
    pub chain: Option<ChainVault>,
    pub turn: T,
}

/// A decided request the router is to forward.
pub struct ToForward<T> {
    pub parsed: JsonBody,
    pub view: RequestView,
    pub previous: Option<Continuation>,
    pub chain: Option<ChainVault>,
    pub turn: T,
    pub plan: Box<Plan>,
    pub done: Box<Completion>,
}

/// Where [`decide`] left a request.
#[allow(
    clippy::large_enum_variant,
    reason = "made once a request and taken apart at once: boxing it would add an allocation to every forwarded request"
)]
pub enum Settled<T> {
    /// The router answered it itself; `turn` when the door had prepared it.
    Answer(Answered, Option<T>),
    Forward(ToForward<T>),
}

/// Answers one request through `door`: the body, the decision, the forward, the door's answer.
pub async fn run<D: Door>(
    pipeline: Pipeline<'_>,
    door: &D,
    request: Request<Incoming>,
    started: Instant,
) -> Response<ProxyBody> {
    let api = door.api();
    // Boxed from the start: the deciding steps pass the request's record down by value, and
    // each `async` step keeps what it was passed in its own state, so inline it would be
    // copied into every step's future (and the plan carries it boxed anyway).
    let done = Box::new(
        new_completion(pipeline, request.headers(), api.endpoint(), started).through(label(api)),
    );
    let (parts, body) = request.into_parts();
    let limit = (pipeline.max_body_bytes, pipeline.body_read_timeout);
    let read = intake::read_body_within(body, &parts.headers, limit).await;
    let snapshot = pipeline.store.current();
    let bytes = match read {
        Ok(bytes) => bytes,
        Err(error) => {
            let answered = Answered::router(answer_error(*done, error));
            return door.finish(&snapshot, None, answered).await;
        }
    };
    let forwarding = match decide(pipeline, door, &snapshot, (&parts.headers, &bytes), done).await {
        Settled::Answer(answered, turn) => return door.finish(&snapshot, turn, answered).await,
        Settled::Forward(forwarding) => forwarding,
    };
    let ToForward {
        parsed,
        view,
        previous,
        chain,
        turn,
        plan,
        done,
    } = forwarding;
    let outgoing = Outgoing {
        api,
        parts: &parts,
        body: &bytes,
        parsed: &parsed,
        view: &view,
        previous: previous.as_ref(),
        chain: chain.as_ref(),
        models: pipeline.models,
    };
    let answered = forward::forward(
        pipeline.upstream,
        (pipeline.telemetry, pipeline.cooldowns),
        &snapshot,
        outgoing,
        *plan,
        *done,
    )
    .await;
    door.finish(&snapshot, Some(turn), answered).await
}

/// The steps every door shares between a whole body and a plan: the request view, the door's
/// preparation, the deciding steps under `snapshot`.
pub async fn decide<D: Door>(
    pipeline: Pipeline<'_>,
    door: &D,
    snapshot: &Snapshot,
    (headers, bytes): (&HeaderMap, &Bytes),
    done: Box<Completion>,
) -> Settled<D::Turn> {
    let api = door.api();
    let chat_form = chat_form_now(api, snapshot);
    let (parsed, view) = match intake::parse(api, bytes, headers, &done.trace, chat_form) {
        Ok(request) => request,
        Err(error) => return Settled::Answer(Answered::router(answer_error(*done, error)), None),
    };
    let asked = Intake {
        parsed: &parsed,
        view,
        headers,
    };
    let prepared = match door.prepare(snapshot, asked).await {
        Ok(prepared) => prepared,
        Err(error) => return Settled::Answer(Answered::router(answer_error(*done, error)), None),
    };
    let Prepared {
        view,
        previous,
        chain,
        turn,
    } = prepared;
    let request = Parsed {
        api,
        parsed: &parsed,
        view: &view,
        headers,
    };
    match decide_step(pipeline, snapshot, request, done).await {
        Decided::Answer(answered) => Settled::Answer(answered, Some(turn)),
        Decided::Forward { plan, mut done } => {
            door.decided(&turn, &plan, &mut done);
            Settled::Forward(ToForward {
                parsed,
                view,
                previous,
                chain,
                turn,
                plan,
                done,
            })
        }
    }
}

/// Whether a request's chat form is made as its body is read: a Messages request under a policy
/// with a backend that speaks only chat may be translated for it.
fn chat_form_now(api: Api, snapshot: &Snapshot) -> ChatFormNow {
    let translated = api == Api::Messages
        && snapshot
            .endpoints
            .iter()
            .any(|e| dialect::of(api, e.api) == Dialect::ChatForMessages);
    if translated {
        ChatFormNow::Yes
    } else {
        ChatFormNow::No
    }
}

/// [`decide`] for a door that forwards elsewhere (the external processor): a request the
/// router answers itself is answered in the door's shape, with what the door keeps dropped.
pub async fn decide_or_answer<D: Door>(
    pipeline: Pipeline<'_>,
    door: &D,
    snapshot: &Snapshot,
    whole: (&HeaderMap, &Bytes),
    done: Box<Completion>,
) -> Result<ToForward<()>, Response<ProxyBody>> {
    match decide(pipeline, door, snapshot, whole, done).await {
        // Boxed: only a request the router answers itself runs it.
        Settled::Answer(answered, turn) => {
            Err(Box::pin(door.finish(snapshot, turn, answered)).await)
        }
        Settled::Forward(t) => Ok(ToForward {
            parsed: t.parsed,
            view: t.view,
            previous: t.previous,
            chain: t.chain,
            turn: (),
            plan: t.plan,
            done: t.done,
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::mem::size_of;

    use super::*;
    use crate::door::chat::Chat;
    use crate::door::responses::Responses;

    /// The size of the future `f` returns, without calling it.
    fn future_of<A, B, C, D, F: Future>(_: &impl Fn(A, B, C, D) -> F) -> usize {
        size_of::<F>()
    }

    fn future_of5<A, B, C, D, E, F: Future>(_: &impl Fn(A, B, C, D, E) -> F) -> usize {
        size_of::<F>()
    }

    /// Each deciding step keeps what it was passed in its own future, beside the future of the
    /// step it awaits; a request record passed by value would be copied into every one of them
    /// (and every door moves the decision's future whole). Passed boxed, a step's future
    /// grows over the one it awaits by less than one record.
    #[test]
    fn the_deciding_steps_nest_without_a_record_each() {
        let record = size_of::<Completion>();
        let decide_step = future_of(&crate::pipeline::decide_step);
        let chat = future_of5(&decide::<Chat>);
        let answering = future_of5(&decide_or_answer::<Chat>);
        let responses = future_of5(&decide_or_answer::<Responses<'static>>);
        let inner = future_of(&crate::pipeline::decide::decide);
        eprintln!(
            "bytes: record {record}, decide {inner}, decide_step {decide_step}, door {chat}, \
             decide_or_answer {answering} (Responses {responses})"
        );
        for (step, size, awaited) in [
            ("decide_step", decide_step, inner),
            ("the door's decide", chat, decide_step),
            ("decide_or_answer", answering, chat),
        ] {
            assert!(
                size < awaited + record,
                "{step}'s future ({size} bytes) holds a request record ({record} bytes) beside \
                 the one it awaits ({awaited} bytes)"
            );
        }
    }
}
