//! The Anthropic Messages wire format as the router needs it: header names, the error envelope
//! clients recognise (`{"type":"error","error":{"type","message"}}`), stop reasons and usage
//! in Anthropic's names.
//!
//! The router's own errors are built as OpenAI errors everywhere ([`crate::openai::ApiError`]);
//! on `/v1/messages` they are rewritten into this envelope with the same HTTP status, the
//! error type chosen by status as Anthropic's API chooses it.

use bytes::Bytes;
use hyper::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::openai::{ErrorBody, Usage};
use crate::relay::counted::Counted;

/// The API version header every Messages request carries.
pub const VERSION_HEADER: &str = "anthropic-version";
/// Sent to an Anthropic backend when the client sent no version of its own.
pub const DEFAULT_VERSION: &str = "2023-06-01";
/// Where Anthropic's clients and backends carry the API key.
pub const API_KEY_HEADER: &str = "x-api-key";
/// Beta features asked for by name; meaningless to an OpenAI backend.
pub const BETA_HEADER: &str = "anthropic-beta";

/// The error `type` Anthropic answers with for an HTTP status.
pub fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        504 => "timeout_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

/// An error body in Anthropic's shape.
pub fn error_body(status: StatusCode, message: &str) -> Bytes {
    let body = json!({
        "type": "error",
        "error": {"type": error_type(status), "message": message},
    });
    Bytes::from(body.to_string())
}

/// An OpenAI-shaped error body (the router's own, or an OpenAI backend's) rewritten into
/// Anthropic's; a body that is no OpenAI error keeps its text as the message.
pub fn error_from_openai(status: StatusCode, body: &[u8]) -> Bytes {
    let message = match ErrorBody::parse(body) {
        Some(error) => error.error.message,
        None if body.is_empty() => format!("the backend answered {}", status.as_u16()),
        None => String::from_utf8_lossy(body).into_owned(),
    };
    error_body(status, &message)
}

/// A chat `finish_reason` in Messages' `stop_reason` terms.
pub fn stop_reason(finish_reason: &str) -> &'static str {
    match finish_reason {
        "length" => "max_tokens",
        "tool_calls" | "function_call" => "tool_use",
        "content_filter" => "refusal",
        _ => "end_turn",
    }
}

/// A chat `usage` object in Messages' terms: `input_tokens`, `output_tokens` and, only when
/// the backend reported cached prompt tokens, `cache_read_input_tokens`. An input or output
/// count the backend left out (or a `usage` it never sent) is the router's own.
pub fn usage(chat: Option<&Value>, counted: &Counted) -> Map<String, Value> {
    let mut out = Map::new();
    let chat = chat.unwrap_or(&Value::Null);
    let count = |key: &str| chat.get(key).and_then(Value::as_u64);
    if let Some(n) = count("prompt_tokens") {
        out.insert("input_tokens".into(), n.into());
    }
    if let Some(n) = count("completion_tokens") {
        out.insert("output_tokens".into(), n.into());
    }
    if let Some(n) = chat
        .get("prompt_tokens_details")
        .and_then(|d| d.get("cached_tokens"))
        .and_then(Value::as_u64)
    {
        out.insert("cache_read_input_tokens".into(), n.into());
    }
    out.entry("input_tokens")
        .or_insert_with(|| counted.input_tokens().into());
    out.entry("output_tokens")
        .or_insert_with(|| counted.output_tokens().into());
    out
}

/// A chat answer's `usage`, as far as Messages reports it.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct ChatUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    total_tokens: Option<u64>,
    prompt_tokens_details: Option<CachedTokens>,
}

impl From<ChatUsage> for Usage {
    /// What the relay reads from a chat answer's `usage`.
    fn from(chat: ChatUsage) -> Usage {
        Usage {
            prompt_tokens: chat.prompt_tokens,
            completion_tokens: chat.completion_tokens,
            total_tokens: chat.total_tokens,
            cached_tokens: chat.prompt_tokens_details.and_then(|d| d.cached_tokens),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
struct CachedTokens {
    cached_tokens: Option<u64>,
}

/// [`usage`]'s counts, typed: what a whole Messages answer reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MessagesUsage {
    #[serde(skip_serializing_if = "Option::is_none")]
    input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_read_input_tokens: Option<u64>,
}

impl MessagesUsage {
    /// Appends the usage object as JSON: the same bytes as serialising it, written without a
    /// serializer because a whole answer is written by hand around it.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let counts = [
            ("input_tokens", self.input_tokens),
            ("output_tokens", self.output_tokens),
            ("cache_read_input_tokens", self.cache_read_input_tokens),
        ];
        out.push(b'{');
        let mut first = true;
        for (name, count) in counts {
            let Some(count) = count else { continue };
            if !first {
                out.push(b',');
            }
            first = false;
            out.push(b'"');
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":");
            out.extend_from_slice(itoa::Buffer::new().format(count).as_bytes());
        }
        out.push(b'}');
    }
}

impl MessagesUsage {
    /// A chat answer's usage in Messages' terms, the input and output counts it lacks counted
    /// by the router: Messages always reports both.
    pub fn counted(chat: Option<ChatUsage>, counted: &Counted) -> MessagesUsage {
        let mut usage = chat.map(MessagesUsage::from).unwrap_or_default();
        usage.input_tokens = usage.input_tokens.or(Some(counted.input_tokens()));
        usage.output_tokens = usage
            .output_tokens
            .or_else(|| Some(counted.output_tokens()));
        usage
    }
}

impl From<ChatUsage> for MessagesUsage {
    fn from(chat: ChatUsage) -> MessagesUsage {
        MessagesUsage {
            input_tokens: chat.prompt_tokens,
            output_tokens: chat.completion_tokens,
            cache_read_input_tokens: chat.prompt_tokens_details.and_then(|d| d.cached_tokens),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_take_their_type_from_the_status() {
        let cases = [
            (400, "invalid_request_error"),
            (422, "invalid_request_error"),
            (403, "permission_error"),
            (404, "not_found_error"),
            (500, "api_error"),
            (502, "api_error"),
            (503, "overloaded_error"),
        ];
        for (status, kind) in cases {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            let body: Value = serde_json::from_slice(&error_body(status, "m")).unwrap_or_default();
            assert_eq!(body["type"], "error");
            assert_eq!(body["error"]["type"], kind, "{status}");
            assert_eq!(body["error"]["message"], "m");
        }
    }

    #[test]
    fn an_openai_error_keeps_its_message() {
        let openai = br#"{"error":{"message":"the model `x` does not exist","type":"invalid_request_error","param":"model","code":"model_not_found"}}"#;
        let body: Value = serde_json::from_slice(&error_from_openai(StatusCode::NOT_FOUND, openai))
            .unwrap_or_default();
        assert_eq!(body["error"]["type"], "not_found_error");
        assert_eq!(body["error"]["message"], "the model `x` does not exist");
        let plain: Value = serde_json::from_slice(&error_from_openai(
            StatusCode::BAD_GATEWAY,
            b"upstream died",
        ))
        .unwrap_or_default();
        assert_eq!(plain["error"]["message"], "upstream died");
    }

    #[test]
    fn usage_maps_cached_tokens_and_counts_what_the_backend_left_out() {
        let counted = Counted::of_request("four");
        let full = json!({"prompt_tokens": 40, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 32}});
        assert_eq!(
            Value::Object(usage(Some(&full), &counted)),
            json!({"input_tokens": 40, "output_tokens": 7, "cache_read_input_tokens": 32})
        );
        let plain = json!({"prompt_tokens": 3, "completion_tokens": 1});
        assert_eq!(
            Value::Object(usage(Some(&plain), &counted)),
            json!({"input_tokens": 3, "output_tokens": 1})
        );
        counted.add_output(5);
        assert_eq!(
            Value::Object(usage(None, &counted)),
            json!({"input_tokens": 1, "output_tokens": 2})
        );
    }

    #[test]
    fn usage_is_written_as_serde_writes_it() {
        let counts = [None, Some(0), Some(31), Some(u64::MAX)];
        for input_tokens in counts {
            for output_tokens in counts {
                for cache_read_input_tokens in counts {
                    let usage = MessagesUsage {
                        input_tokens,
                        output_tokens,
                        cache_read_input_tokens,
                    };
                    let mut written = Vec::new();
                    usage.write_json(&mut written);
                    assert_eq!(serde_json::to_vec(&usage).ok(), Some(written), "{usage:?}");
                }
            }
        }
    }

    #[test]
    fn finish_reasons_become_stop_reasons() {
        assert_eq!(stop_reason("stop"), "end_turn");
        assert_eq!(stop_reason("length"), "max_tokens");
        assert_eq!(stop_reason("tool_calls"), "tool_use");
        assert_eq!(stop_reason("content_filter"), "refusal");
    }
}
