//! Envoy's `ext_proc` v3 messages, read and written in the `http` types the pipeline speaks:
//! the headers Envoy sends (bytes in `raw_value`, pseudo-headers apart), and the header
//! mutations, body mutation and immediate response the processor answers with.

use envoy_types::pb::envoy::config::core::v3::header_value_option::HeaderAppendAction;
use envoy_types::pb::envoy::config::core::v3::{
    HeaderMap as EnvoyHeaders, HeaderValue as EnvoyHeader, HeaderValueOption,
};
use envoy_types::pb::envoy::r#type::v3::HttpStatus;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    body_mutation, processing_response, BodyMutation, BodyResponse, CommonResponse, HeaderMutation,
    HeadersResponse, ImmediateResponse, ProcessingResponse, StreamedBodyResponse,
};
use http_body_util::BodyExt;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::Response;

use crate::relay::body::ProxyBody;

/// The headers of one message: the pseudo-headers Envoy reports, and the rest.
#[derive(Debug, Default)]
pub struct Headers {
    pub method: String,
    /// `:path` without its query string.
    pub path: String,
    /// `:status`, on the response's headers.
    pub status: Option<u16>,
    pub map: HeaderMap,
}

/// Reads Envoy's headers. A value comes in `raw_value` (Envoy's current form) or, from older
/// data planes, in `value`; a name or value `http` cannot hold is left out (no request the
/// router decides depends on one).
pub fn read_headers(headers: Option<&EnvoyHeaders>) -> Headers {
    let mut out = Headers::default();
    for header in headers.into_iter().flat_map(|h| &h.headers) {
        let value: &[u8] = if header.raw_value.is_empty() {
            header.value.as_bytes()
        } else {
            &header.raw_value
        };
        let text = || String::from_utf8_lossy(value).into_owned();
        match header.key.as_str() {
            ":method" => out.method = text(),
            ":path" => {
                let path = text();
                out.path = path.split('?').next().unwrap_or_default().to_owned();
            }
            ":status" => out.status = text().trim().parse().ok(),
            key if key.starts_with(':') => {}
            key => {
                if let (Ok(name), Ok(value)) = (
                    HeaderName::from_bytes(key.as_bytes()),
                    HeaderValue::from_bytes(value),
                ) {
                    out.map.append(name, value);
                }
            }
        }
    }
    out
}

/// A mutation that sets (overwriting) every header of `set` and removes `remove`.
pub fn mutation(set: &HeaderMap, remove: Vec<String>) -> HeaderMutation {
    HeaderMutation {
        set_headers: set
            .iter()
            .map(|(name, value)| HeaderValueOption {
                header: Some(EnvoyHeader {
                    key: name.as_str().to_owned(),
                    raw_value: value.as_bytes().to_vec(),
                    ..EnvoyHeader::default()
                }),
                append_action: HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
                ..HeaderValueOption::default()
            })
            .collect(),
        remove_headers: remove,
    }
}

/// Go on with the request's headers, mutated.
pub fn request_headers(header_mutation: HeaderMutation) -> ProcessingResponse {
    reply(processing_response::Response::RequestHeaders(
        HeadersResponse {
            response: Some(CommonResponse {
                header_mutation: Some(header_mutation),
                ..CommonResponse::default()
            }),
        },
    ))
}

/// Go on with the request's headers, mutated, and match the route again on them (full duplex:
/// the decision's headers ride on the headers' answer).
pub fn request_headers_rerouted(header_mutation: HeaderMutation) -> ProcessingResponse {
    reply(processing_response::Response::RequestHeaders(
        HeadersResponse {
            response: Some(CommonResponse {
                header_mutation: Some(header_mutation),
                clear_route_cache: true,
                ..CommonResponse::default()
            }),
        },
    ))
}

/// A full duplex body's answer: `body` is what goes on, `end_of_stream` when it is the last.
pub fn streamed_body(body: Vec<u8>, end_of_stream: bool) -> ProcessingResponse {
    reply(processing_response::Response::RequestBody(BodyResponse {
        response: Some(CommonResponse {
            body_mutation: Some(BodyMutation {
                mutation: Some(body_mutation::Mutation::StreamedResponse(
                    StreamedBodyResponse {
                        body,
                        end_of_stream,
                        ..StreamedBodyResponse::default()
                    },
                )),
            }),
            ..CommonResponse::default()
        }),
    }))
}

/// Go on with the response's headers, mutated.
pub fn response_headers(header_mutation: HeaderMutation) -> ProcessingResponse {
    reply(processing_response::Response::ResponseHeaders(
        HeadersResponse {
            response: Some(CommonResponse {
                header_mutation: Some(header_mutation),
                ..CommonResponse::default()
            }),
        },
    ))
}

/// Go on with the request: `body` replaces the buffered body, `headers` are set on the upstream
/// request, and the route is matched again on them (so `x-selected-model` can pick the cluster).
pub fn request_body(body: Vec<u8>, header_mutation: HeaderMutation) -> ProcessingResponse {
    reply(processing_response::Response::RequestBody(BodyResponse {
        response: Some(CommonResponse {
            header_mutation: Some(header_mutation),
            body_mutation: Some(BodyMutation {
                mutation: Some(body_mutation::Mutation::Body(body)),
            }),
            clear_route_cache: true,
            ..CommonResponse::default()
        }),
    }))
}

/// A chunk of the answer's body (`response_body_mode: STREAMED`) replaced by `body`.
pub fn response_body_replaced(body: Vec<u8>) -> ProcessingResponse {
    reply(processing_response::Response::ResponseBody(BodyResponse {
        response: Some(CommonResponse {
            body_mutation: Some(BodyMutation {
                mutation: Some(body_mutation::Mutation::Body(body)),
            }),
            ..CommonResponse::default()
        }),
    }))
}

/// Go on unchanged, answering a message of the phase `phase` names.
pub fn unchanged(phase: Phase) -> ProcessingResponse {
    let headers = || HeadersResponse {
        response: Some(CommonResponse::default()),
    };
    let body = || BodyResponse {
        response: Some(CommonResponse::default()),
    };
    reply(match phase {
        Phase::RequestHeaders => processing_response::Response::RequestHeaders(headers()),
        Phase::RequestBody => processing_response::Response::RequestBody(body()),
        Phase::ResponseHeaders => processing_response::Response::ResponseHeaders(headers()),
        Phase::ResponseBody => processing_response::Response::ResponseBody(body()),
        Phase::RequestTrailers => {
            processing_response::Response::RequestTrailers(Default::default())
        }
        Phase::ResponseTrailers => {
            processing_response::Response::ResponseTrailers(Default::default())
        }
    })
}

/// The phases of an exchange, as Envoy's messages name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    RequestHeaders,
    RequestBody,
    RequestTrailers,
    ResponseHeaders,
    ResponseBody,
    ResponseTrailers,
}

/// The `details` of the router's own answers: Envoy's response code details for them, which a
/// gateway's `local_reply_config` tells apart from Envoy's own errors.
pub const ROUTER_ANSWER_DETAILS: &str = "src_router_answer";

/// The router's own answer (an error, a refusal, a cache hit) as Envoy's local reply: the same
/// status, headers and body the HTTP proxy would answer.
pub async fn immediate(answer: Response<ProxyBody>) -> ProcessingResponse {
    let (parts, body) = answer.into_parts();
    // The router's own answers are whole in memory: collecting cannot wait or fail, and an
    // empty body stands in should it ever.
    let body = body
        .collect()
        .await
        .map(|c| c.to_bytes().to_vec())
        .unwrap_or_default();
    reply(processing_response::Response::ImmediateResponse(
        ImmediateResponse {
            status: Some(HttpStatus {
                code: i32::from(parts.status.as_u16()),
            }),
            headers: Some(mutation(&parts.headers, Vec::new())),
            body,
            details: ROUTER_ANSWER_DETAILS.to_owned(),
            ..ImmediateResponse::default()
        },
    ))
}

fn reply(response: processing_response::Response) -> ProcessingResponse {
    ProcessingResponse {
        response: Some(response),
        ..ProcessingResponse::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(key: &str, value: &str, raw: bool) -> EnvoyHeader {
        EnvoyHeader {
            key: key.into(),
            value: if raw { String::new() } else { value.into() },
            raw_value: if raw {
                value.as_bytes().to_vec()
            } else {
                Vec::new()
            },
        }
    }

    #[test]
    fn raw_and_plain_values_read_alike_and_pseudo_headers_apart() {
        let envoy = EnvoyHeaders {
            headers: vec![
                header(":method", "POST", true),
                header(":path", "/v1/chat/completions?x=1", true),
                header("x-tenant", "acme", true),
                header("x-plain", "old-style", false),
                header(":authority", "gw", true),
            ],
        };
        let read = read_headers(Some(&envoy));
        assert_eq!(read.method, "POST");
        assert_eq!(read.path, "/v1/chat/completions");
        assert_eq!(read.status, None);
        assert_eq!(
            read.map.get("x-tenant").map(|v| v.as_bytes()),
            Some(&b"acme"[..])
        );
        assert_eq!(
            read.map.get("x-plain").map(|v| v.as_bytes()),
            Some(&b"old-style"[..])
        );
        assert_eq!(read.map.len(), 2);
        let status = read_headers(Some(&EnvoyHeaders {
            headers: vec![header(":status", "503", true)],
        }));
        assert_eq!(status.status, Some(503));
    }

    #[test]
    fn mutations_overwrite_with_raw_values() {
        let mut set = HeaderMap::new();
        set.insert("x-selected-model", HeaderValue::from_static("org/m"));
        let m = mutation(&set, vec!["x-sr-route".into()]);
        assert_eq!(m.remove_headers, ["x-sr-route"]);
        let option = &m.set_headers[0];
        assert_eq!(
            option.append_action,
            HeaderAppendAction::OverwriteIfExistsOrAdd as i32
        );
        let header = option
            .header
            .as_ref()
            .map(|h| (h.key.as_str(), h.raw_value.as_slice()));
        assert_eq!(header, Some(("x-selected-model", &b"org/m"[..])));
    }

    #[tokio::test]
    async fn an_answer_becomes_the_same_local_reply() {
        let answer = crate::openai::ApiError::bad_request("bad").into_response();
        let reply = immediate(answer).await;
        let Some(processing_response::Response::ImmediateResponse(local)) = reply.response else {
            panic!("not an immediate response: {reply:?}");
        };
        assert_eq!(local.status.map(|s| s.code), Some(400));
        let body: serde_json::Value = serde_json::from_slice(&local.body).unwrap_or_default();
        assert_eq!(body["error"]["message"], "bad");
        let content_type = local
            .headers
            .iter()
            .flat_map(|h| &h.set_headers)
            .filter_map(|o| o.header.as_ref())
            .find(|h| h.key == "content-type")
            .map(|h| h.raw_value.clone());
        assert_eq!(content_type.as_deref(), Some(&b"application/json"[..]));
    }
}
