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
//! expand it later). On a policy that redacts, every answer's vault is kept under its id either
//! way (empty where the chain starts and its route redacted nothing), and a turn continuing a
//! response carries the vault kept under its `previous_response_id`
//! ([`crate::responses_state::vault`]): one continuing state only the backend holds, found or
//! lost; one continuing a stored response, only when found (its owner's copy holds the
//! placeholders earlier turns were sent, so an answer to the turn sent as written is restored
//! with it).
//!
//! The door reads what it needs of the body (`previous_response_id`, `store`, the input items)
//! from its raw top level ([`TurnBody`]), never from a `serde_json::Value`: the items are kept
//! and a continued turn expanded as JSON text, spliced, and the expanded turn's facts are read
//! through the compiler's borrowed tree, as the intake reads every body's.

use std::sync::Arc;

use http_body_util::BodyExt;
use hyper::header::CONTENT_TYPE;
use hyper::{Response, StatusCode};
use src_compiler::hir::ModelId;
use src_compiler::pii::Vault;
use src_compiler::request::{Borrowed, RequestView};

use crate::door::{Door, Intake, Prepared};
use crate::headers::{self, session as state, TEXT_EVENT_STREAM};
use crate::openai::{Api, ApiError};
use crate::pipeline::continuation::ChainVault;
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
use crate::responses_state::vault::{self, KeepVault};
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
        // Boxed: the stored conversation's look-ups are the largest state before deciding, and
        // inline they would size every door's decision (the external processor's future is
        // the largest of its three doors').
        Box::pin(prepare(self.states, snapshot, request)).await
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
                turn.keep(self.states, snapshot, model, answered)
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
    /// Where a redacted answer's vault is kept; `None` when the tenant has no store.
    vault_in: Option<Scope>,
    /// The turn continues a conversation the router does not hold.
    provider_state: bool,
    /// The first response of the conversation this turn continues.
    conversation: Option<String>,
    /// No `previous_response_id`: the chain starts here, with no placeholder sent, so an answer
    /// no route redacted keeps an empty vault. A turn continuing a chain carried its vault when
    /// found ([`Prepared::chain`]); without one, its answer keeps none.
    starts: bool,
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
    // Read only where a store may keep or continue the turn, or where a redacting policy looks
    // up the vault of the chain it continues. The body was read as JSON already: only a body
    // whose top level is no object is none, and the intake refused that.
    let reads = scope.is_some() || (view.provider_state && vault::redacts(policy));
    let body = reads.then(|| TurnBody::parse(parsed.bytes())).flatten();
    let stores = body.as_ref().and_then(TurnBody::store) != Some(false);
    let provider_state = view.provider_state;
    let previous_id = body.as_ref().and_then(TurnBody::previous_response_id);
    let previous_id = previous_id.as_deref();
    // A turn the router cannot expand continues the backend's copy, placeholders and all.
    let as_written = async |view: RequestView| Prepared {
        chain: chain_vault(states, (policy, scope.as_ref()), &view, previous_id).await,
        view,
        previous: None,
        turn: Turn {
            input: match (&body, &scope) {
                (Some(body), Some(_)) => body.input_items(),
                _ => Vec::new(),
            },
            keep_in: scope
                .clone()
                .filter(|_| stores && !provider_state && body.is_some()),
            vault_in: scope.clone(),
            provider_state,
            conversation: None,
            starts: previous_id.is_none(),
        },
    };
    let (Some(body), Some(id), Some(found_in)) = (&body, previous_id, scope.clone()) else {
        return Ok(as_written(view).await);
    };
    let previous = match found_in
        .store
        .get(&found_in.tenant, id, states.now_ms())
        .await
    {
        Ok(Some(bytes)) => match StoredResponse::decode(&bytes) {
            Ok(previous) => previous,
            Err(err) => {
                tracing::warn!(%err, id, "a stored response is unreadable; its id is the provider's");
                return Ok(as_written(view).await);
            }
        },
        Ok(None) => return Ok(as_written(view).await),
        Err(err) => {
            let site = Site {
                store: "response",
                kind: found_in.store.kind(),
                op: "get",
            };
            return match failure::judge(policy.failure.store, site, err) {
                Failed::Skip(_) => Ok(as_written(view).await),
                Failed::Refuse(refusal) => Err(ApiError::service_unavailable(refusal.message())),
            };
        }
    };
    let history = chain::history(&previous, body);
    let expanded = chain::expanded_body(body, &history);
    // Spliced from JSON texts, so JSON; a key the borrowed tree leaves to a `Value` (serde_json's
    // own markers) cannot be expanded, and the turn goes as written.
    let Some(tree) = Borrowed::parse(&expanded) else {
        return Ok(as_written(view).await);
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
    let chain = stored_vault(states, policy, &found_in, id).await;
    Ok(Prepared {
        previous: Some(chain::continuation(&previous, expanded)),
        chain,
        turn: Turn {
            input: history,
            vault_in: Some(found_in.clone()),
            keep_in: Some(found_in).filter(|_| stores && !provider_state),
            provider_state,
            conversation: Some(conversation),
            starts: false,
        },
        view,
    })
}

/// The vault of the backend-held chain a turn continues, when the policy redacts.
async fn chain_vault(
    states: &ResponseStates,
    (policy, scope): (&src_compiler::hir::CheckedPolicy, Option<&Scope>),
    view: &RequestView,
    previous: Option<&str>,
) -> Option<ChainVault> {
    match previous {
        Some(id) if view.provider_state && vault::redacts(policy) => {
            Some(vault::find(states, scope, id).await)
        }
        _ => None,
    }
}

/// The vault kept under the stored response `id` a turn continues, when the policy redacts and
/// one is found. The owner's copy of the conversation holds the placeholders earlier turns were
/// sent, so a route without `redact` restores the owner's answer with it, and a redacting route
/// numbers after it. None found refuses nothing, unlike a backend-held chain's: a redacting route
/// sends this turn expanded and numbers it afresh.
async fn stored_vault(
    states: &ResponseStates,
    policy: &src_compiler::hir::CheckedPolicy,
    scope: &Scope,
    id: &str,
) -> Option<ChainVault> {
    if !vault::redacts(policy) {
        return None;
    }
    vault::find(states, Some(scope), id)
        .await
        .found()
        .map(ChainVault::Found)
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
    /// The answer `model` made, kept once it has ended whole when it is a 200, with the vault
    /// it was redacted with.
    fn keep(
        self,
        states: &ResponseStates,
        snapshot: &Snapshot,
        model: ModelId,
        answered: Answered,
    ) -> Response<ProxyBody> {
        let Answered {
            response, vault, ..
        } = answered;
        if response.status() != StatusCode::OK {
            return response;
        }
        let options = states.options();
        // The vault the candidate was sent with, or the chain's it carried on. A route without
        // `redact` starting a chain on a policy that redacts elsewhere keeps an empty one, so a
        // later redacting turn does not find the chain lost.
        let vault = vault.or_else(|| {
            (self.starts && vault::redacts(snapshot.policy())).then(|| Arc::new(Vault::new()))
        });
        let seal = match (vault, self.vault_in, states.vault_key()) {
            (Some(vault), Some(scope), Some(key)) => Some(KeepVault {
                scope,
                key: Arc::clone(key),
                vault,
                ttl_ms: options.ttl_ms,
                clock: states.clock(),
            }),
            _ => None,
        };
        let keep = match (self.keep_in, producer(snapshot, model)) {
            (Some(scope), Some(producer)) => Some(Keep {
                scope,
                producer,
                input: self.input,
                conversation: self.conversation,
                ttl_ms: options.ttl_ms,
                max_bytes: options.max_entry_bytes,
                clock: states.clock(),
            }),
            _ => None,
        };
        if keep.is_none() && seal.is_none() {
            return response;
        }
        let sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with(TEXT_EVENT_STREAM));
        let (parts, body) = response.into_parts();
        let capture = Capture::new(body, sse, (keep, seal), options.max_entry_bytes);
        let body = ProxyBody::Boxed(capture.boxed_unsync());
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
