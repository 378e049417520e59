//! The Envoy front door: Envoy's external processing API (`ext_proc` v3 over gRPC), served beside
//! the HTTP listeners from the same [`App`] (policy store and hot reload, sessions, models, the
//! response cache and metrics).
//!
//! Each gRPC stream is one HTTP request passing through the gateway; an [`Exchange`] answers its
//! messages with the shared pipeline steps. Envoy must send the request body `BUFFERED` and the
//! response headers; the response body is never asked for, so streamed answers flow untouched
//! (see `deploy/envoy/`).

pub mod exchange;
pub mod wire;

use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_server::{
    ExternalProcessor, ExternalProcessorServer,
};
use envoy_types::pb::envoy::service::ext_proc::v3::{ProcessingRequest, ProcessingResponse};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status, Streaming};

use crate::app::App;
pub use exchange::Exchange;

/// Streams still open after shutdown was asked for get this long (Envoy keeps its HTTP/2
/// connection to the processor open for as long as it may).
const DRAIN: Duration = Duration::from_secs(10);

/// The gRPC service: one [`Exchange`] per stream.
#[derive(Clone)]
struct Processor {
    app: Arc<App>,
}

#[tonic::async_trait]
impl ExternalProcessor for Processor {
    type ProcessStream = ReceiverStream<Result<ProcessingResponse, Status>>;

    async fn process(
        &self,
        request: Request<Streaming<ProcessingRequest>>,
    ) -> Result<Response<Self::ProcessStream>, Status> {
        let mut inbound = request.into_inner();
        // One answer per message, and Envoy waits for each: a small buffer is enough.
        let (replies, stream) = mpsc::channel(4);
        let app = Arc::clone(&self.app);
        tokio::spawn(async move {
            let mut exchange = Exchange::new();
            // A stream error is Envoy going away (the request ended or was reset); the
            // exchange's report covers the request either way.
            while let Ok(Some(message)) = inbound.message().await {
                let reply = exchange.step(app.pipeline(), message).await;
                if replies.send(Ok(reply)).await.is_err() {
                    break;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(stream)))
    }
}

/// Serves the external processor on `listener` until `stop` changes, then drains open streams
/// for a bounded time.
pub async fn serve(listener: TcpListener, app: Arc<App>, mut stop: watch::Receiver<bool>) {
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let (stopping, mut stopping_rx) = watch::channel(false);
    let server = tonic::transport::Server::builder()
        .add_service(ExternalProcessorServer::new(Processor { app }))
        .serve_with_incoming_shutdown(incoming, async move {
            let _ = stopping_rx.changed().await;
        });
    tokio::pin!(server);
    tokio::select! {
        result = &mut server => return report(result),
        _ = stop.changed() => {}
    }
    let _ = stopping.send(true);
    match tokio::time::timeout(DRAIN, server).await {
        Ok(result) => report(result),
        Err(_) => tracing::warn!("external processing streams still open after the drain period"),
    }
}

fn report(result: Result<(), tonic::transport::Error>) {
    if let Err(err) = result {
        tracing::warn!(%err, "the external processor stopped");
    }
}
