//! `POST /v1/chat/completions`: the driver's steps and nothing more.

use hyper::Response;

use crate::door::Plain;
use crate::openai::Api;
use crate::pipeline::forward::Answered;
use crate::relay::body::ProxyBody;

/// The chat completions door.
pub struct Chat;

impl Plain for Chat {
    fn api(&self) -> Api {
        Api::Chat
    }

    async fn answer(&self, answered: Answered) -> Response<ProxyBody> {
        answered.response
    }
}
