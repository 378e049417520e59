//! A `/v1/responses` turn continuing a conversation the router stored: how it is sent to the
//! stored response's owner (as the client wrote it) and to any other candidate (expanded). Under a
//! policy that redacts, a turn continuing a chain carries its vault ([`ChainVault`]).

use std::sync::Arc;

use bytes::Bytes;
use hyper::StatusCode;
use src_compiler::pii::Vault;

use crate::openai::ApiError;

use crate::pipeline::json_edit::NotAnObject;
use crate::pipeline::rewrite;
use crate::policy_store::ModelWire;

/// How a turn continuing a stored response is sent: as the client wrote it to the response's
/// owner, expanded to anyone else.
#[derive(Debug, Clone, PartialEq)]
pub struct Continuation {
    /// The backend (policy name) and served id that produced the previous response.
    pub backend: String,
    pub served: String,
    /// The expanded body.
    expanded: Bytes,
}

impl Continuation {
    /// The continuation of a response `backend` produced as `served`, expanded to `expanded`.
    pub fn new(backend: String, served: String, expanded: Bytes) -> Continuation {
        Continuation {
            backend,
            served,
            expanded,
        }
    }

    /// Whether a candidate on `backend` sent as `served` produced the previous response.
    pub fn owned_by(&self, backend: &str, served: &str) -> bool {
        self.backend == backend && self.served == served
    }

    /// Whether a candidate on `backend` sent as `served` is sent the expanded conversation rather
    /// than the turn as written. A redacting route always expands: its backend's own copy of the
    /// conversation holds earlier turns' placeholders, numbered afresh by each request's vault, so
    /// a value of this turn could take a placeholder an earlier turn gave another value, and the
    /// answer would be restored with the wrong one. Expanded, one vault numbers every turn.
    pub fn expands_for(&self, backend: &str, served: &str, redacts: bool) -> bool {
        redacts || !self.owned_by(backend, served)
    }

    /// The expanded body as one candidate is sent it (its served id as `model`).
    pub fn body(&self, wire: &ModelWire) -> Result<Vec<u8>, NotAnObject> {
        rewrite::build_body(&self.expanded, &[], &wire.served_json)
    }
}

/// A `/v1/responses` turn continuing a chain under a policy that redacts: the values the chain's
/// earlier turns were sent placeholders for. The backend's copy of the conversation holds those
/// placeholders, so a redacting route numbers this turn's values after them rather than afresh,
/// and a route without `redact` restores the answer with them. A turn continuing state only the
/// backend holds (`request.provider_state`) carries it found or lost; one continuing a response
/// the router stored, only found (expanded, it can be numbered afresh).
#[derive(Debug, Clone)]
pub enum ChainVault {
    /// The chain's vault, opened.
    Found(Arc<Vault>),
    /// The router holds no vault for the response `previous` (expired, sealed by a router with
    /// another key, or the chain started outside this router fleet).
    Lost { previous: String },
}

impl ChainVault {
    /// The vault a redacting candidate starts from; a lost one is refused (409), since numbering
    /// afresh would give a placeholder the backend has read as one value to another.
    pub fn start(&self) -> Result<Vault, ApiError> {
        match self {
            ChainVault::Found(vault) => Ok(Vault::clone(vault)),
            ChainVault::Lost { previous } => {
                tracing::warn!(
                    previous = %previous,
                    "a redacting route cannot continue a response whose placeholders the router no longer holds"
                );
                Err(lost(previous))
            }
        }
    }
}

impl ChainVault {
    /// The chain's vault, when found: a turn on a route that does not redact still carries it
    /// on (its answer may name an earlier turn's placeholder, and a later redacting turn
    /// numbers after it).
    pub fn found(&self) -> Option<Arc<Vault>> {
        match self {
            ChainVault::Found(vault) => Some(Arc::clone(vault)),
            ChainVault::Lost { .. } => None,
        }
    }
}

/// The refusal of a turn whose chain's vault is gone: the client resends the conversation.
pub fn lost(previous: &str) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "invalid_request_error",
        Some(LOST_CODE),
        format!(
            "the router no longer holds the placeholders of the conversation before `{previous}` \
             (expired, or kept by another router), and this route redacts: resend the whole \
             conversation in `input` without `previous_response_id`"
        ),
    )
    .with_param("previous_response_id")
}

/// The error code of [`lost`].
pub const LOST_CODE: &str = "redaction_chain_lost";
