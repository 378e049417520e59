//! An Envoy `ext_proc` v3 client for tests: one gRPC processing stream per HTTP request, as
//! Envoy opens them, the messages Envoy sends (request headers with their bytes in
//! `raw_value`, a buffered or full-duplex body, response headers) and readers of the
//! processor's answers (header and body mutations, immediate responses).

use std::collections::HashMap;
use std::net::SocketAddr;

use envoy_types::pb::envoy::config::core::v3::{HeaderMap, HeaderValue};
use envoy_types::pb::envoy::extensions::filters::http::ext_proc::v3::processing_mode::BodySendMode;
use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_client::ExternalProcessorClient;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    body_mutation, processing_request, processing_response, CommonResponse, HeaderMutation,
    HttpBody, HttpHeaders, ImmediateResponse, ProcessingRequest, ProcessingResponse,
    ProtocolConfiguration, StreamedBodyResponse,
};
use serde_json::Value;
use tokio::sync::mpsc;
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

use crate::TestResult;

/// One processing stream, as Envoy opens one per HTTP request.
pub struct Stream {
    pub send: mpsc::Sender<ProcessingRequest>,
    pub answers: Streaming<ProcessingResponse>,
}

impl Stream {
    pub async fn open(addr: SocketAddr) -> TestResult<Stream> {
        let mut client = ExternalProcessorClient::connect(format!("http://{addr}")).await?;
        let (send, outgoing) = mpsc::channel(4);
        let answers = client
            .process(ReceiverStream::new(outgoing))
            .await?
            .into_inner();
        Ok(Stream { send, answers })
    }

    pub async fn ask(&mut self, request: processing_request::Request) -> TestResult<Reply> {
        self.tell(ProcessingRequest {
            request: Some(request),
            ..ProcessingRequest::default()
        })
        .await?;
        self.answer().await
    }

    /// Sends without waiting for an answer, as Envoy does in full duplex.
    pub async fn tell(&mut self, message: ProcessingRequest) -> TestResult {
        self.send.send(message).await?;
        Ok(())
    }

    pub async fn answer(&mut self) -> TestResult<Reply> {
        let answer = self.answers.message().await?.ok_or("the stream ended")?;
        answer
            .response
            .map(Reply)
            .ok_or_else(|| "an empty answer".into())
    }
}

/// A message as Envoy sends it with the body `FULL_DUPLEX_STREAMED`; `first` carries the
/// mode, as the stream's first message does.
pub fn duplex(request: processing_request::Request, first: bool) -> ProcessingRequest {
    ProcessingRequest {
        request: Some(request),
        protocol_config: first.then(|| ProtocolConfiguration {
            request_body_mode: BodySendMode::FullDuplexStreamed as i32,
            ..ProtocolConfiguration::default()
        }),
        ..ProcessingRequest::default()
    }
}

/// A first message (`request`) stating the body modes Envoy was configured with.
pub fn configured(
    request: processing_request::Request,
    request_body: BodySendMode,
    response_body: BodySendMode,
) -> ProcessingRequest {
    ProcessingRequest {
        request: Some(request),
        protocol_config: Some(ProtocolConfiguration {
            request_body_mode: request_body as i32,
            response_body_mode: response_body as i32,
            ..ProtocolConfiguration::default()
        }),
        ..ProcessingRequest::default()
    }
}

/// A chunk of the answer's body, as Envoy sends it with `response_body_mode: STREAMED`.
pub fn response_chunk(bytes: &[u8], end_of_stream: bool) -> processing_request::Request {
    processing_request::Request::ResponseBody(HttpBody {
        body: bytes.to_vec(),
        end_of_stream,
        ..HttpBody::default()
    })
}

pub fn chunk(bytes: &[u8], end_of_stream: bool) -> processing_request::Request {
    processing_request::Request::RequestBody(HttpBody {
        body: bytes.to_vec(),
        end_of_stream,
        ..HttpBody::default()
    })
}

pub struct Reply(pub processing_response::Response);

impl Reply {
    pub fn common(&self) -> TestResult<&CommonResponse> {
        let common = match &self.0 {
            processing_response::Response::RequestHeaders(h)
            | processing_response::Response::ResponseHeaders(h) => h.response.as_ref(),
            processing_response::Response::RequestBody(b)
            | processing_response::Response::ResponseBody(b) => b.response.as_ref(),
            other => return Err(format!("not a continue: {other:?}").into()),
        };
        common.ok_or_else(|| "no common response".into())
    }

    pub fn immediate(&self) -> TestResult<&ImmediateResponse> {
        match &self.0 {
            processing_response::Response::ImmediateResponse(i) => Ok(i),
            other => Err(format!("not an immediate response: {other:?}").into()),
        }
    }

    pub fn streamed(&self) -> TestResult<&StreamedBodyResponse> {
        match self
            .common()?
            .body_mutation
            .as_ref()
            .and_then(|b| b.mutation.as_ref())
        {
            Some(body_mutation::Mutation::StreamedResponse(streamed)) => Ok(streamed),
            other => Err(format!("no streamed body: {other:?}").into()),
        }
    }

    pub fn set_headers(&self) -> TestResult<HashMap<String, String>> {
        Ok(set(self.common()?.header_mutation.as_ref()))
    }

    pub fn removed(&self) -> TestResult<Vec<String>> {
        Ok(self
            .common()?
            .header_mutation
            .as_ref()
            .map(|m| m.remove_headers.clone())
            .unwrap_or_default())
    }

    /// The bytes a body chunk is replaced by; `None` when it goes on unchanged.
    pub fn replaced(&self) -> TestResult<Option<Vec<u8>>> {
        match self
            .common()?
            .body_mutation
            .as_ref()
            .and_then(|b| b.mutation.as_ref())
        {
            Some(body_mutation::Mutation::Body(bytes)) => Ok(Some(bytes.clone())),
            None => Ok(None),
            other => Err(format!("not a replaced body: {other:?}").into()),
        }
    }

    pub fn body(&self) -> TestResult<Value> {
        match self
            .common()?
            .body_mutation
            .as_ref()
            .and_then(|b| b.mutation.as_ref())
        {
            Some(body_mutation::Mutation::Body(bytes)) => Ok(serde_json::from_slice(bytes)?),
            other => Err(format!("no body mutation: {other:?}").into()),
        }
    }
}

pub fn set(mutation: Option<&HeaderMutation>) -> HashMap<String, String> {
    mutation
        .into_iter()
        .flat_map(|m| &m.set_headers)
        .filter_map(|o| o.header.as_ref())
        .map(|h| {
            (
                h.key.clone(),
                String::from_utf8_lossy(&h.raw_value).into_owned(),
            )
        })
        .collect()
}

/// Headers as Envoy 1.40 sends them: bytes in `raw_value`, `value` empty.
pub fn headers(pairs: &[(&str, &str)], end_of_stream: bool) -> processing_request::Request {
    headers_of(pairs, end_of_stream, true)
}

pub fn headers_of(
    pairs: &[(&str, &str)],
    end_of_stream: bool,
    raw: bool,
) -> processing_request::Request {
    processing_request::Request::RequestHeaders(HttpHeaders {
        headers: Some(HeaderMap {
            headers: pairs
                .iter()
                .map(|(k, v)| HeaderValue {
                    key: (*k).into(),
                    value: if raw { String::new() } else { (*v).into() },
                    raw_value: if raw {
                        v.as_bytes().to_vec()
                    } else {
                        Vec::new()
                    },
                })
                .collect(),
        }),
        end_of_stream,
        ..HttpHeaders::default()
    })
}

pub fn post(path: &str) -> Vec<(&str, &str)> {
    vec![
        (":method", "POST"),
        (":path", path),
        (":authority", "gateway"),
        ("content-type", "application/json"),
    ]
}

pub fn body(value: &Value) -> processing_request::Request {
    processing_request::Request::RequestBody(HttpBody {
        body: value.to_string().into_bytes(),
        end_of_stream: true,
        ..HttpBody::default()
    })
}

pub fn response_headers(status: &str) -> processing_request::Request {
    response_headers_with(status, &[])
}

/// [`response_headers`] with the backend's own headers too.
pub fn response_headers_with(status: &str, pairs: &[(&str, &str)]) -> processing_request::Request {
    let status = HeaderValue {
        key: ":status".into(),
        raw_value: status.as_bytes().to_vec(),
        ..HeaderValue::default()
    };
    let others = pairs.iter().map(|(k, v)| HeaderValue {
        key: (*k).into(),
        raw_value: v.as_bytes().to_vec(),
        ..HeaderValue::default()
    });
    processing_request::Request::ResponseHeaders(HttpHeaders {
        headers: Some(HeaderMap {
            headers: std::iter::once(status).chain(others).collect(),
        }),
        ..HttpHeaders::default()
    })
}
