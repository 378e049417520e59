//! The first step of a proxied request: its body, read within a limit, and the facts a policy
//! reads from it (the compiler's [`RequestView`]), or the client error that says why not.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Body;
use hyper::header::{HeaderMap, CONTENT_LENGTH};
use serde_json::Value;
use src_compiler::request::{RequestError, RequestView};

use crate::cache::Directive;
use crate::headers;
use crate::openai::{Api, ApiError};
use crate::otel::{name, RequestTrace};

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

/// [`read_body`] within a time bound too: `(bytes, time)`. A client that has not sent the whole
/// body in time (a slow-loris upload) gets 408 and its connection back.
pub async fn read_body_within<B>(
    body: B,
    headers: &HeaderMap,
    (limit, timeout): (usize, Duration),
) -> Result<Bytes, ApiError>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match tokio::time::timeout(timeout, read_body(body, headers, limit)).await {
        Ok(read) => read,
        Err(_) => Err(ApiError::request_timeout(timeout)),
    }
}

/// The body parsed as JSON and the request's facts as `api` defines them, in the trace's parse
/// phase.
pub fn parse(
    api: Api,
    bytes: &[u8],
    headers: &HeaderMap,
    trace: &RequestTrace,
) -> Result<(Value, RequestView), ApiError> {
    let mut phase = trace.phase(name::PARSE);
    let parsed = parse_view(api, bytes, headers);
    if let Err(error) = &parsed {
        phase.fail(|| error.body.error.message.clone());
    }
    phase.end();
    parsed
}

fn parse_view(
    api: Api,
    bytes: &[u8],
    headers: &HeaderMap,
) -> Result<(Value, RequestView), ApiError> {
    let parsed: Value = serde_json::from_slice(bytes).map_err(ApiError::invalid_json)?;
    let header_pairs = header_pairs(headers);
    // Refused whether or not the policy caches: a typo must not pass unnoticed until it does.
    Directive::read(header_pairs.iter().map(|(n, v)| (n.as_str(), v.as_str())))
        .map_err(|e| ApiError::bad_request(e.to_string()).with_param(headers::SR_CACHE))?;
    let view = match api {
        Api::Chat => RequestView::from_chat(&parsed, &header_pairs),
        Api::Responses => RequestView::from_responses(&parsed, &header_pairs),
        Api::Messages => RequestView::from_messages(&parsed, &header_pairs),
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

#[cfg(test)]
mod tests {
    use http_body_util::Full;
    use hyper::header::HeaderValue;
    use serde_json::json;

    use super::*;

    fn declared(length: usize) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
        headers
    }

    #[tokio::test]
    async fn a_body_within_its_limit_is_read_whole() {
        let body = Full::new(Bytes::from_static(b"{\"a\":1}"));
        let read = read_body(body, &HeaderMap::new(), 7).await;
        assert_eq!(read, Ok(Bytes::from_static(b"{\"a\":1}")));
    }

    #[tokio::test]
    async fn a_body_over_its_limit_is_a_413_declared_or_not() {
        let body = || Full::new(Bytes::from_static(b"0123456789"));
        let undeclared = read_body(body(), &HeaderMap::new(), 4).await;
        assert_eq!(undeclared.map_err(|e| e.status.as_u16()), Err(413));
        let declared = read_body(body(), &declared(10), 4).await;
        assert_eq!(declared.map_err(|e| e.status.as_u16()), Err(413));
    }

    #[test]
    fn a_body_that_is_not_json_is_a_400() {
        let error = parse(
            Api::Chat,
            b"{nope",
            &HeaderMap::new(),
            &RequestTrace::untraced(None),
        )
        .err();
        assert_eq!(error.map(|e| e.status.as_u16()), Some(400));
    }

    #[test]
    fn each_api_reads_its_own_shape() {
        let chat = json!({"model": "auto", "messages": [{"role": "user", "content": "hi"}]});
        let parsed = parse(
            Api::Chat,
            chat.to_string().as_bytes(),
            &HeaderMap::new(),
            &RequestTrace::untraced(None),
        );
        let (value, view) = parsed.expect("a chat request parses");
        assert_eq!(value, chat);
        assert_eq!(view.model.as_deref(), Some("auto"));
        assert_eq!(view.prompt, "hi");

        let responses = json!({"model": "auto", "input": "hello"});
        let parsed = parse(
            Api::Responses,
            responses.to_string().as_bytes(),
            &HeaderMap::new(),
            &RequestTrace::untraced(None),
        );
        let (_, view) = parsed.expect("a responses request parses");
        assert_eq!(view.prompt, "hello");
    }

    #[test]
    fn a_malformed_request_names_the_field() {
        let body = json!({"model": "auto", "messages": "not a list"});
        let error = parse(
            Api::Chat,
            body.to_string().as_bytes(),
            &HeaderMap::new(),
            &RequestTrace::untraced(None),
        )
        .err();
        let error = error.expect("messages must be a list");
        assert_eq!(error.status.as_u16(), 400);
        assert!(error.body.error.param.is_some(), "{error:?}");
    }

    #[test]
    fn headers_are_read_as_name_value_pairs() {
        let mut headers = HeaderMap::new();
        headers.insert("x-tenant", HeaderValue::from_static("acme"));
        assert_eq!(header_pairs(&headers), [("x-tenant".into(), "acme".into())]);
    }
}
