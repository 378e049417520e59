//! The first step of a proxied request: its body, read within a limit, and the facts a policy
//! reads from it (the compiler's [`RequestView`]), or the client error that says why not.

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Body;
use hyper::header::{HeaderMap, CONTENT_LENGTH};
use serde_json::Value;
use src_compiler::request::{RequestError, RequestView};

use crate::openai::{Api, ApiError};

/// Reads the whole body, refusing with 413 as soon as it is known to exceed `limit` (from
/// `content-length`, or while reading a body of unknown length): nothing beyond the limit is
/// buffered.
pub async fn read_body<B>(body: B, headers: &HeaderMap, limit: usize) -> Result<Bytes, ApiError>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::payload_too_large(limit));
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(err) if err.is::<http_body_util::LengthLimitError>() => {
            Err(ApiError::payload_too_large(limit))
        }
        Err(err) => Err(ApiError::bad_request(format!(
            "cannot read the request body: {}",
            crate::upstream::error_chain(err.as_ref())
        ))),
    }
}

/// The body parsed as JSON and the request's facts as `api` defines them.
pub fn parse(
    api: Api,
    bytes: &[u8],
    headers: &HeaderMap,
) -> Result<(Value, RequestView), ApiError> {
    let parsed: Value = serde_json::from_slice(bytes).map_err(ApiError::invalid_json)?;
    let header_pairs = header_pairs(headers);
    let view = match api {
        Api::Chat => RequestView::from_chat(&parsed, &header_pairs),
        Api::Responses => RequestView::from_responses(&parsed, &header_pairs),
    };
    let view = view.map_err(|err| request_error(&err))?;
    Ok((parsed, view))
}

/// Header names and values as the compiler's request facts read them (values lossily decoded).
pub fn header_pairs(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect()
}

fn request_error(err: &RequestError) -> ApiError {
    let error = ApiError::bad_request(err.to_string());
    match err.path() {
        Some(path) => error.with_param(path),
        None => error,
    }
}
