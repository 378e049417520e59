//! `POST /v1/responses`: the driver's steps (intake, deciding, forwarding) with the router's
//! stored responses around them.
//!
//! Before deciding, a `previous_response_id` is looked up in the tenant's store. A stored one
//! is expanded: the deciding steps see the whole conversation (its `history`, its tool loop),
//! and the forwarder sends the turn as written to the response's owner and expanded to anyone
//! else ([`Continuation`](crate::pipeline::continuation::Continuation)). An unknown one stays `request.provider_state`, which the session
//! layer's built-in `provider state` hold keeps on its pinned owner. A stored one also names the
//! conversation for the session identity (`body("conversation")`: its first response's id). After forwarding, a 200
//! answer is kept ([`capture`](crate::responses_state::capture)) unless the client sent
//! `store: false` or the turn continues a conversation the router does not hold (it could not
//! expand it later).
//!
//! The door reads what it needs of the body (`previous_response_id`, `store`, the input items)
//! from its raw top level ([`TurnBody`]), never from a `serde_json::Value`: the items are kept
//! and a continued turn expanded as JSON text, spliced, and the expanded turn's facts are read
//! through the compiler's borrowed tree, as the intake reads every body's.

use http_body_util::BodyExt;
use hyper::header::CONTENT_TYPE;
use hyper::{Response, StatusCode};
use src_compiler::hir::ModelId;
use src_compiler::request::{Borrowed, RequestView};

use crate::door::{Door, Intake, Prepared};
use crate::headers::{self, session as state, TEXT_EVENT_STREAM};
use crate::openai::{Api, ApiError};
use crate::pipeline::decide::Plan;
use crate::pipeline::forward::{Answered, AnsweredBy};
use crate::pipeline::intake;
use crate::policy_store::Snapshot;
use crate::relay::body::ProxyBody;
use crate::relay::completion::Completion;
use crate::responses_state::capture::{Capture, Keep, Producer};
use crate::responses_state::chain;
use crate::responses_state::record::StoredResponse;
use crate::responses_state::turn::{Item, TurnBody};
use crate::responses_state::{ResponseStates, Scope};
use crate::store::failure::{self, Failed, Site};

/// The Responses door, over the router's stored conversations.
pub struct Responses<'s> {
    pub states: &'s ResponseStates,
}

impl Door for Responses<'_> {
    type Turn = Turn;

    fn api(&self) -> Api {
        Api::Responses
    }

    async fn prepare<'a>(
        &'a self,
        snapshot: &'a Snapshot,
        request: Intake<'a>,
    ) -> Result<Prepared<Turn>, ApiError> {
        prepare(self.states, snapshot, request).await
    }

    fn decided(&self, turn: &Turn, plan: &Plan, done: &mut Completion) {
        if turn.provider_state {
            let word = owner_word(plan);
            tracing::debug!(previous = word, "a response id the router does not hold");
            done.record.previous = Some(word);
        }
    }

    async fn finish<'a>(
        &'a self,
        snapshot: &'a Snapshot,
        turn: Option<Turn>,
        answered: Answered,
    ) -> Response<ProxyBody> {
        match (turn, answered.by) {
            (Some(turn), AnsweredBy::Upstream(model)) => {
                turn.keep(self.states, snapshot, model, answered.response)
            }
            _ => answered.response,
        }
    }
}

/// One turn of a conversation, as the router holds it.
pub struct Turn {
    /// The conversation's input up to this turn's answer, each item as JSON text.
    input: Vec<Item>,
    /// Where the answer is kept; `None` when it is not.
    keep_in: Option<Scope>,
    /// The turn continues a conversation the router does not hold.
    provider_state: bool,
    /// The first response of the conversation this turn continues.
    conversation: Option<String>,
}

async fn prepare(
    states: &ResponseStates,
    snapshot: &Snapshot,
    request: Intake<'_>,
) -> Result<Prepared<Turn>, ApiError> {
    let Intake {
        parsed,
        view,
        headers,
    } = request;
    let policy = snapshot.policy();
    // A keyless client under `anonymous = isolate` neither keeps nor continues stored responses:
    // its `previous_response_id` is then the provider's, as an unknown id is.
    let scope = match states.scope(policy, &view) {
        _ if crate::session::identity::isolated(policy, &view) => None,
        Ok(scope) => Some(scope),
        Err(err) => {
            tracing::warn!(%err, "the response store is unavailable");
            None
        }
    };
    // Read only where a store may keep or continue the turn. The body was read as JSON
    // already: only a body whose top level is no object is none, and the intake refused that.
    let body = scope.as_ref().and_then(|_| TurnBody::parse(parsed.bytes()));
    let stores = body.as_ref().and_then(TurnBody::store) != Some(false);
    let provider_state = view.provider_state;
    let as_written = |view| Prepared {
        view,
        previous: None,
        turn: Turn {
            input: body.as_ref().map(TurnBody::input_items).unwrap_or_default(),
            keep_in: scope
                .clone()
                .filter(|_| stores && !provider_state && body.is_some()),
            provider_state,
            conversation: None,
        },
    };
    let Some(body) = &body else {
        return Ok(as_written(view));
    };
    let (Some(id), Some(found_in)) = (body.previous_response_id(), scope.clone()) else {
        return Ok(as_written(view));
    };
    let id = id.as_ref();
    let previous = match found_in
        .store
        .get(&found_in.tenant, id, states.now_ms())
        .await
    {
        Ok(Some(bytes)) => match StoredResponse::decode(&bytes) {
            Ok(previous) => previous,
            Err(err) => {
                tracing::warn!(%err, id, "a stored response is unreadable; its id is the provider's");
                return Ok(as_written(view));
            }
        },
        Ok(None) => return Ok(as_written(view)),
        Err(err) => {
            let site = Site {
                store: "response",
                kind: found_in.store.kind(),
                op: "get",
            };
            return match failure::judge(policy.failure.store, site, err) {
                Failed::Skip(_) => Ok(as_written(view)),
                Failed::Refuse(refusal) => Err(ApiError::service_unavailable(refusal.message())),
            };
        }
    };
    let history = chain::history(&previous, body);
    let expanded = chain::expanded_body(body, &history);
    // Spliced from JSON texts, so JSON; a key the borrowed tree leaves to a `Value` (serde_json's
    // own markers) cannot be expanded, and the turn goes as written.
    let Some(tree) = Borrowed::parse(&expanded) else {
        return Ok(as_written(view));
    };
    let mut view =
        RequestView::from_responses(&tree, intake::header_pairs(headers)).map_err(|err| {
            ApiError::bad_request(format!(
                "the stored conversation `{id}` cannot continue: {err}"
            ))
        })?;
    drop(tree);
    let conversation = previous.conversation().to_owned();
    name_conversation(&mut view, &conversation);
    let provider_state = view.provider_state;
    Ok(Prepared {
        previous: Some(chain::continuation(&previous, expanded)),
        turn: Turn {
            input: history,
            keep_in: Some(found_in).filter(|_| stores && !provider_state),
            provider_state,
            conversation: Some(conversation),
        },
        view,
    })
}

/// A turn continuing a response the router holds reads as naming its conversation: `body
/// ("conversation")` is the id of the conversation's first response, the same on every turn
/// (each turn's `previous_response_id` is another), unless the body names a conversation itself.
fn name_conversation(view: &mut RequestView, first: &str) {
    let named = ["conversation", "conversation.id"]
        .iter()
        .any(|path| view.body_field(path).is_some());
    if !named {
        view.body_fields
            .push(("conversation".to_owned(), first.to_owned()));
    }
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
    /// The answer `model` made, kept once it has ended whole when it is a 200.
    fn keep(
        self,
        states: &ResponseStates,
        snapshot: &Snapshot,
        model: ModelId,
        response: Response<ProxyBody>,
    ) -> Response<ProxyBody> {
        let Some(scope) = self.keep_in else {
            return response;
        };
        if response.status() != StatusCode::OK {
            return response;
        }
        let Some(producer) = producer(snapshot, model) else {
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
            conversation: self.conversation,
            ttl_ms: options.ttl_ms,
            max_bytes: options.max_entry_bytes,
            clock: states.clock(),
        };
        let (parts, body) = response.into_parts();
        let body = ProxyBody::Boxed(Capture::new(body, sse, keep).boxed_unsync());
        Response::from_parts(parts, body)
    }
}

/// The backend, served id and name of the model that answered.
fn producer(snapshot: &Snapshot, model: ModelId) -> Option<Producer> {
    let model = snapshot.policy().models.get(model.index())?;
    let endpoint = snapshot.endpoints.get(model.backend.index())?;
    Some(Producer {
        backend: endpoint.name.clone(),
        served: model.serves.clone(),
        model: model.name.clone(),
    })
}
