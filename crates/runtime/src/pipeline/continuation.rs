//! A `/v1/responses` turn continuing a conversation the router stored: how it is sent to the
//! stored response's owner (as the client wrote it) and to any other candidate (expanded).

use bytes::Bytes;

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
