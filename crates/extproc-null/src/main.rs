//! `extproc-null ADDR [--workers N]`: an Envoy `ext_proc` v3 server that lets every message through unchanged,
//! on the same tonic server, listener settings and tokio runtime as `src serve --extproc`. What
//! Envoy's filter costs with it is the floor under the router's own figures
//! (`scripts/bench/extproc.sh`, docs/benchmarks.md).
//!
//! Each message is answered at once: headers and trailers with an empty `CONTINUE`, a buffered
//! body likewise, and a `FULL_DUPLEX_STREAMED` body chunk (the mode Envoy states on a stream's
//! first message) with the same bytes, since in that mode Envoy sends on only what it is
//! answered.

use std::pin::Pin;
use std::process::ExitCode;
use std::task::{Context, Poll};

use envoy_types::pb::envoy::extensions::filters::http::ext_proc::v3::processing_mode::BodySendMode;
use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_server::{
    ExternalProcessor, ExternalProcessorServer,
};
use envoy_types::pb::envoy::service::ext_proc::v3::{
    body_mutation, processing_request::Request as Message, processing_response::Response as Answer,
    BodyMutation, BodyResponse, CommonResponse, HeadersResponse, HttpBody, ProcessingRequest,
    ProcessingResponse, StreamedBodyResponse, TrailersResponse,
};
use tonic::codegen::tokio_stream::Stream;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status, Streaming};

struct Null;

#[tonic::async_trait]
impl ExternalProcessor for Null {
    type ProcessStream = Answers;

    async fn process(
        &self,
        request: Request<Streaming<ProcessingRequest>>,
    ) -> Result<Response<Self::ProcessStream>, Status> {
        Ok(Response::new(Answers {
            inbound: request.into_inner(),
            duplex: false,
        }))
    }
}

/// One stream's answers, one per message, made as the server polls for them.
struct Answers {
    inbound: Streaming<ProcessingRequest>,
    duplex: bool,
}

impl Stream for Answers {
    type Item = Result<ProcessingResponse, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let message = match Pin::new(&mut self.inbound).poll_next(cx) {
            Poll::Ready(Some(Ok(message))) => message,
            // Envoy going away ends the stream, as it does the router's.
            Poll::Ready(Some(Err(_)) | None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        if let Some(config) = &message.protocol_config {
            self.duplex = config.request_body_mode == BodySendMode::FullDuplexStreamed as i32;
        }
        let answer = answer(message.request, self.duplex);
        Poll::Ready(Some(Ok(ProcessingResponse {
            response: Some(answer),
            ..ProcessingResponse::default()
        })))
    }
}

fn answer(message: Option<Message>, duplex: bool) -> Answer {
    let headers = || HeadersResponse {
        response: Some(CommonResponse::default()),
    };
    let body = |mutation| BodyResponse {
        response: Some(CommonResponse {
            body_mutation: mutation,
            ..CommonResponse::default()
        }),
    };
    match message {
        Some(Message::RequestBody(HttpBody {
            body: bytes,
            end_of_stream,
            ..
        })) if duplex => Answer::RequestBody(body(Some(BodyMutation {
            mutation: Some(body_mutation::Mutation::StreamedResponse(
                StreamedBodyResponse {
                    body: bytes,
                    end_of_stream,
                    ..StreamedBodyResponse::default()
                },
            )),
        }))),
        Some(Message::RequestBody(_)) => Answer::RequestBody(body(None)),
        Some(Message::RequestTrailers(_)) => Answer::RequestTrailers(TrailersResponse::default()),
        Some(Message::ResponseHeaders(_)) => Answer::ResponseHeaders(headers()),
        Some(Message::ResponseBody(_)) => Answer::ResponseBody(body(None)),
        Some(Message::ResponseTrailers(_)) => Answer::ResponseTrailers(TrailersResponse::default()),
        Some(Message::RequestHeaders(_)) | None => Answer::RequestHeaders(headers()),
    }
}

/// `ADDR [--workers N]`: the address, and the runtime's worker threads when given (N ≥ 1).
fn parse_args(args: &[String]) -> Option<(&str, Option<usize>)> {
    match args {
        [addr] if addr.contains(':') => Some((addr, None)),
        [addr, flag, n] if addr.contains(':') && flag == "--workers" => match n.parse::<usize>() {
            Ok(n) if n > 0 => Some((addr, Some(n))),
            _ => None,
        },
        _ => None,
    }
}

fn usage() -> ExitCode {
    eprintln!("usage: extproc-null ADDR [--workers N] (e.g. 127.0.0.1:8803 or localhost:8803)");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    // `HOST:PORT` too: the listener resolves a host name as `src serve --extproc` does.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((addr, workers)) = parse_args(&args) else {
        return usage();
    };
    // `--workers` as `src serve` has it: the runtime's worker threads, one per core by default.
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = workers {
        builder.worker_threads(n);
    }
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("extproc-null: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
        tonic::transport::Server::builder()
            .add_service(ExternalProcessorServer::new(Null))
            .serve_with_incoming(incoming)
            .await
            .map_err(std::io::Error::other)
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("extproc-null: {err}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_args;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|a| (*a).to_owned()).collect()
    }

    #[test]
    fn an_address_alone_or_with_a_worker_count() {
        assert_eq!(
            parse_args(&args(&["127.0.0.1:8803"])),
            Some(("127.0.0.1:8803", None))
        );
        assert_eq!(
            parse_args(&args(&["localhost:8803", "--workers", "1"])),
            Some(("localhost:8803", Some(1)))
        );
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            &[][..],
            &["8803"][..],
            &["127.0.0.1:8803", "--workers"][..],
            &["127.0.0.1:8803", "--workers", "0"][..],
            &["127.0.0.1:8803", "--workers", "two"][..],
            &["127.0.0.1:8803", "--threads", "1"][..],
        ] {
            assert_eq!(parse_args(&args(bad)), None, "{bad:?}");
        }
    }
}
