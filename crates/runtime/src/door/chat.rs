//! `POST /v1/chat/completions`: the driver's steps and nothing more.

use hyper::Response;

use crate::door::{Door, Intake, Prepared};
use crate::openai::{Api, ApiError};
use crate::pipeline::forward::Answered;
use crate::policy_store::Snapshot;
use crate::relay::body::ProxyBody;

/// The chat completions door.
pub struct Chat;

impl Door for Chat {
    type Turn = ();

    fn api(&self) -> Api {
        Api::Chat
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
        answered.response
    }
}
