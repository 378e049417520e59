//! The OpenAI error envelope and the status-specific builders every server here answers with.
//!
//! Clients (the official SDKs, LiteLLM, gateways) recognise failures by this exact shape, so no
//! handler writes an error body by hand.

use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde::{Deserialize, Serialize};

use crate::headers::APPLICATION_JSON;

/// The JSON body of an OpenAI error answer: `{"error": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// The inside of [`ErrorBody`]; `type` is a Rust keyword, hence `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub message: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub param: Option<String>,
    #[serde(default)]
    pub code: Option<String>,
}

impl ErrorBody {
    /// Reads an error body an upstream sent; `None` when the bytes are not this shape.
    pub fn parse(bytes: &[u8]) -> Option<ErrorBody> {
        serde_json::from_slice(bytes).ok()
    }
}

/// An error answer: the HTTP status together with the body that goes with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} {}", .status.as_u16(), .body.error.message)]
pub struct ApiError {
    pub status: StatusCode,
    pub body: ErrorBody,
}

const INVALID_REQUEST: &str = "invalid_request_error";
const SERVER_ERROR: &str = "server_error";

impl ApiError {
    pub fn new(
        status: StatusCode,
        kind: &str,
        code: Option<&str>,
        message: impl Into<String>,
    ) -> ApiError {
        ApiError {
            status,
            body: ErrorBody {
                error: ErrorDetail {
                    message: message.into(),
                    kind: kind.to_owned(),
                    param: None,
                    code: code.map(str::to_owned),
                },
            },
        }
    }

    /// Names the request field the error is about, as OpenAI's `param` does.
    pub fn with_param(mut self, param: impl Into<String>) -> ApiError {
        self.body.error.param = Some(param.into());
        self
    }

    /// 400: the request is malformed or names something invalid.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, INVALID_REQUEST, None, message)
    }

    /// 400: the body is not JSON at all.
    pub fn invalid_json(detail: impl std::fmt::Display) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            Some("invalid_json"),
            format!("the request body is not valid JSON: {detail}"),
        )
    }

    /// 404: the requested model is not served here.
    pub fn model_not_found(model: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            INVALID_REQUEST,
            Some("model_not_found"),
            format!("the model `{model}` does not exist"),
        )
        .with_param("model")
    }

    /// 404: no endpoint at this path.
    pub fn not_found(path: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            INVALID_REQUEST,
            Some("not_found"),
            format!("no endpoint at `{path}`"),
        )
    }

    /// 401: the admin listener wants its bearer token.
    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            INVALID_REQUEST,
            Some("invalid_api_key"),
            message,
        )
    }

    /// 405: the path exists but not for this method.
    pub fn method_not_allowed(method: &str, path: &str) -> ApiError {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            INVALID_REQUEST,
            Some("method_not_allowed"),
            format!("method `{method}` is not allowed on `{path}`"),
        )
    }

    /// 408: the body did not arrive within the read timeout.
    pub fn request_timeout(timeout: std::time::Duration) -> ApiError {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            INVALID_REQUEST,
            Some("request_timeout"),
            format!(
                "the request body did not arrive within {} ms",
                timeout.as_millis()
            ),
        )
    }

    /// 413: the body exceeds the configured limit.
    pub fn payload_too_large(limit_bytes: usize) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            INVALID_REQUEST,
            Some("payload_too_large"),
            format!("the request body exceeds the limit of {limit_bytes} bytes"),
        )
    }

    /// 500: the server itself failed.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            SERVER_ERROR,
            Some("internal_error"),
            message,
        )
    }

    /// 502: the upstream answered with something that is not a usable answer.
    pub fn bad_gateway(message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::BAD_GATEWAY,
            SERVER_ERROR,
            Some("bad_gateway"),
            message,
        )
    }

    /// 503: no capacity, or a fail-closed dependency is down.
    pub fn service_unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            SERVER_ERROR,
            Some("service_unavailable"),
            message,
        )
    }

    /// 504: the upstream did not answer in time.
    pub fn gateway_timeout(message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            SERVER_ERROR,
            Some("timeout"),
            message,
        )
    }

    /// The serialised body; serialising these plain strings cannot fail, but an empty object
    /// keeps this total rather than panicking if it ever did.
    pub fn to_bytes(&self) -> Bytes {
        serde_json::to_vec(&self.body)
            .map(Bytes::from)
            .unwrap_or_else(|_| Bytes::from_static(b"{}"))
    }

    /// The full HTTP answer, for any body type that can be built from bytes (`Full<Bytes>`).
    pub fn into_response<B: From<Bytes>>(self) -> Response<B> {
        let mut response = Response::new(B::from(self.to_bytes()));
        *response.status_mut() = self.status;
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(APPLICATION_JSON));
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full};

    #[test]
    fn builders_carry_their_status_and_round_trip() {
        let cases = [
            (ApiError::bad_request("x"), 400),
            (ApiError::model_not_found("m"), 404),
            (ApiError::not_found("/p"), 404),
            (ApiError::method_not_allowed("GET", "/p"), 405),
            (
                ApiError::request_timeout(std::time::Duration::from_secs(1)),
                408,
            ),
            (ApiError::payload_too_large(10), 413),
            (ApiError::internal("x"), 500),
            (ApiError::bad_gateway("x"), 502),
            (ApiError::service_unavailable("x"), 503),
            (ApiError::gateway_timeout("x"), 504),
        ];
        for (error, status) in cases {
            assert_eq!(error.status.as_u16(), status);
            let parsed = ErrorBody::parse(&error.to_bytes());
            assert_eq!(parsed.as_ref(), Some(&error.body));
        }
    }

    #[test]
    fn wire_shape_matches_openai() -> Result<(), serde_json::Error> {
        let error = ApiError::model_not_found("Qwen/Qwen3-8B");
        let value: serde_json::Value = serde_json::from_slice(&error.to_bytes())?;
        assert_eq!(value["error"]["type"], "invalid_request_error");
        assert_eq!(value["error"]["code"], "model_not_found");
        assert_eq!(value["error"]["param"], "model");
        assert_eq!(
            value["error"]["message"],
            "the model `Qwen/Qwen3-8B` does not exist"
        );
        Ok(())
    }

    #[tokio::test]
    async fn response_has_status_type_and_body() -> Result<(), Box<dyn std::error::Error>> {
        let response: Response<Full<Bytes>> = ApiError::gateway_timeout("slow").into_response();
        assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(response.headers()[CONTENT_TYPE], APPLICATION_JSON);
        let body = response.into_body().collect().await?.to_bytes();
        let parsed = ErrorBody::parse(&body).ok_or("not an error body")?;
        assert_eq!(parsed.error.message, "slow");
        assert_eq!(parsed.error.kind, "server_error");
        Ok(())
    }
}
