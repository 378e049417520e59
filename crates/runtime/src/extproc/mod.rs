//! The Envoy front door: Envoy's external processing API (`ext_proc` v3 over gRPC), served beside
//! the HTTP listeners from the same [`App`] (policy store and hot reload, sessions, models, the
//! response cache and metrics).
//!
//! Each gRPC stream is one HTTP request passing through the gateway; an [`Exchange`] answers its
//! messages with the shared pipeline steps. Envoy must send the request body (`BUFFERED`, or
//! `FULL_DUPLEX_STREAMED` to save a round trip) and the response headers. The response body is
//! read only where Envoy sends it (`response_body_mode: STREAMED`, for token and cost budgets:
//! [`metered`]); otherwise streamed answers flow untouched (see `deploy/envoy/`).

pub mod exchange;
pub mod metered;
pub mod wire;

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_server::{
    ExternalProcessor, ExternalProcessorServer,
};
use envoy_types::pb::envoy::service::ext_proc::v3::{ProcessingRequest, ProcessingResponse};
use tonic::codegen::tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};

use crate::app::App;
use crate::openai::Api;
pub use exchange::Exchange;

/// Whether the external processor decides requests of `api` (on `POST` to its path). Messages
/// is not decided here yet: its candidates on OpenAI backends need an answer translated back,
/// and the processor never sees the answer's body; a gateway sends Messages to the router's
/// own HTTP listener instead (`src manifest --format envoy` does).
pub fn decides(api: Api) -> bool {
    api != Api::Messages
}

/// The gRPC service: one [`Exchange`] per stream.
#[derive(Clone)]
pub(crate) struct Processor {
    app: Arc<App>,
}

#[tonic::async_trait]
impl ExternalProcessor for Processor {
    type ProcessStream = Answers;

    async fn process(
        &self,
        request: Request<Streaming<ProcessingRequest>>,
    ) -> Result<Response<Self::ProcessStream>, Status> {
        let turn = Turn {
            inbound: request.into_inner(),
            exchange: Exchange::new(),
            app: Arc::clone(&self.app),
        };
        Ok(Response::new(Answers {
            ready: VecDeque::new(),
            next: Some(Box::pin(turn.next())),
        }))
    }
}

/// What one stream carries from message to message.
struct Turn {
    inbound: Streaming<ProcessingRequest>,
    exchange: Exchange,
    app: Arc<App>,
}

impl Turn {
    /// Reads the next message and answers it (with none, one or several answers); `None` once
    /// Envoy ends the stream. A stream error is Envoy going away (the request ended or was
    /// reset); the exchange's report covers the request either way.
    async fn next(mut self) -> Option<(Vec<ProcessingResponse>, Turn)> {
        let message = self.inbound.message().await.ok()??;
        let replies = self
            .exchange
            .step((self.app.pipeline(), &self.app.responses), message)
            .await;
        Some((replies, self))
    }
}

type Answering = Pin<Box<dyn Future<Output = Option<(Vec<ProcessingResponse>, Turn)>> + Send>>;

/// The answers of one stream, each made while the server's stream task polls for it: the
/// exchange runs in the task that writes its answers, so a message is read, decided and
/// answered without waking another task on the way.
pub struct Answers {
    ready: VecDeque<ProcessingResponse>,
    next: Option<Answering>,
}

impl Stream for Answers {
    type Item = Result<ProcessingResponse, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some(reply) = self.ready.pop_front() {
                return Poll::Ready(Some(Ok(reply)));
            }
            let Some(next) = self.next.as_mut() else {
                return Poll::Ready(None);
            };
            match next.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some((replies, turn))) => {
                    self.ready.extend(replies);
                    self.next = Some(Box::pin(turn.next()));
                }
                Poll::Ready(None) => {
                    self.next = None;
                }
            }
        }
    }
}

/// The gRPC service of the external processor over `app`, one [`Exchange`] per stream. The
/// server serves each connection to it on one serving shard (`server::processor`).
pub(crate) fn service(app: Arc<App>) -> ExternalProcessorServer<Processor> {
    ExternalProcessorServer::new(Processor { app })
}
