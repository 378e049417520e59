//! Envoy's own error answers in the router's JSON error shape (`{"error": {"message", "type",
//! "code"}}`, `application/json`), so a client reads the same kind of body whoever failed.
//! Envoy's bodies are plain text, or empty when the external processor failed.
//!
//! The router's own answers are local replies too (an `immediate_response`, with the details
//! `src_router_answer`): they are left as they are, JSON already, whatever their status.

use serde_json::{json, Value};
use src_runtime::extproc::wire::ROUTER_ANSWER_DETAILS as ROUTER_ANSWER;
use src_runtime::headers::APPLICATION_JSON;

fn cel(expression: &str) -> Value {
    json!({"extension_filter": {
        "name": "envoy.access_loggers.extension_filters.cel",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.access_loggers.filters.cel.v3.ExpressionFilter",
            "expression": expression,
        },
    }})
}

fn error_body(message: &str, code: &str) -> Value {
    json!({
        "json_format": {"error": {"message": message, "type": "server_error", "code": code}},
        "content_type": APPLICATION_JSON,
    })
}

/// The connection manager's `local_reply_config`: the external processor failing (unreachable:
/// 503, `status_on_error`; silent past the deadline: 504) is `router_unavailable`; any other
/// 5xx of Envoy's own (a backend that cannot be reached, a stream gone silent) is
/// `gateway_error` with Envoy's text as the message.
pub fn local_reply_config() -> Value {
    json!({"mappers": [
        {
            "filter": cel("response.code_details.startsWith('ext_proc_error')"),
            "body_format_override": error_body(
                "the router did not decide this request (%RESPONSE_CODE_DETAILS%)",
                "router_unavailable",
            ),
        },
        {
            "filter": cel(&format!(
                "response.code >= 500 && response.code_details != '{ROUTER_ANSWER}'"
            )),
            "body_format_override": error_body("%LOCAL_REPLY_BODY%", "gateway_error"),
        },
    ]})
}
