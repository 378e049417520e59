//! The API listener's surface beyond the proxied doors, as OpenAI's and Anthropic's clients see
//! it: the model list and each of its models by id (`GET /v1/models/{id}`, which
//! `client.models.retrieve(..)` asks for), and the endpoints of those APIs the router does not
//! serve, each refused in its own API's error shape with a 404 that says so rather than as an
//! unknown path (docs/operations.md, "Endpoints").

use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Response, StatusCode};

use crate::anthropic::wire;
use crate::headers::APPLICATION_JSON;
use crate::openai::ApiError;
use crate::policy_store::Snapshot;
use crate::relay::body::ProxyBody;

/// Where one model of the list is asked for by id.
pub const MODEL_PREFIX: &str = "/v1/models/";

/// The `GET /v1/models` answer of a snapshot (prepared at load).
pub fn models_answer(snapshot: &Snapshot) -> Bytes {
    snapshot.models_list.clone()
}

/// The `GET /v1/models/{id}` answer: the list's entry of `id` (a router name, a model, an alias
/// or a served id), percent-decoded first, as a served id such as `Qwen/Qwen3-8B` arrives
/// `Qwen%2FQwen3-8B`; 404 `model_not_found` for any other id.
pub fn model_answer(snapshot: &Snapshot, raw_id: &str) -> Result<Bytes, ApiError> {
    let id = percent_encoding::percent_decode_str(raw_id).decode_utf8_lossy();
    snapshot
        .model_entries
        .get(id.as_ref())
        .cloned()
        .ok_or_else(|| ApiError::model_not_found(&id))
}

/// Whose API an endpoint is, and so the shape of its error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    OpenAi,
    Anthropic,
}

/// The endpoints of OpenAI's and Anthropic's APIs the router does not serve: a path, or a path
/// and everything under it, with what the API is called.
const ABSENT: [(&str, Shape, &str); 19] = [
    ("/v1/completions", Shape::OpenAi, "legacy completions"),
    ("/v1/embeddings", Shape::OpenAi, "embeddings"),
    ("/v1/moderations", Shape::OpenAi, "moderations"),
    ("/v1/images", Shape::OpenAi, "images"),
    ("/v1/audio", Shape::OpenAi, "audio"),
    ("/v1/files", Shape::OpenAi, "files"),
    ("/v1/uploads", Shape::OpenAi, "uploads"),
    ("/v1/batches", Shape::OpenAi, "batch"),
    ("/v1/fine_tuning", Shape::OpenAi, "fine-tuning"),
    ("/v1/assistants", Shape::OpenAi, "assistants"),
    ("/v1/threads", Shape::OpenAi, "threads"),
    ("/v1/vector_stores", Shape::OpenAi, "vector stores"),
    ("/v1/conversations", Shape::OpenAi, "conversations"),
    ("/v1/realtime", Shape::OpenAi, "realtime"),
    ("/v1/evals", Shape::OpenAi, "evals"),
    (
        "/v1/chat/completions",
        Shape::OpenAi,
        "stored chat completions",
    ),
    (
        "/v1/messages/count_tokens",
        Shape::Anthropic,
        "token counting",
    ),
    ("/v1/messages/batches", Shape::Anthropic, "message batches"),
    ("/v1/complete", Shape::Anthropic, "legacy text completions"),
];

/// The refusal of an endpoint of OpenAI's or Anthropic's API that the router does not serve;
/// `None` for any other path. `/v1/chat/completions` itself is a door: only what is under it
/// (stored completions) is absent.
pub fn absent(method: &Method, path: &str) -> Option<Response<ProxyBody>> {
    let (_, shape, what) = ABSENT.iter().find(|(prefix, _, _)| {
        let under = path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'));
        under || (path == *prefix && *prefix != "/v1/chat/completions")
    })?;
    let owner = match shape {
        Shape::OpenAi => "OpenAI",
        Shape::Anthropic => "Anthropic",
    };
    let message = format!(
        "`{method} {path}` is {owner}'s {what} API, which this router does not serve: it routes \
         chat completions (`/v1/chat/completions`), Responses (`/v1/responses`) and Messages \
         (`/v1/messages`)"
    );
    let status = StatusCode::NOT_FOUND;
    Some(match shape {
        Shape::OpenAi => ApiError::new(
            status,
            "invalid_request_error",
            Some("unsupported_endpoint"),
            message,
        )
        .into_response(),
        Shape::Anthropic => {
            let mut response = Response::new(ProxyBody::from(wire::error_body(status, &message)));
            *response.status_mut() = status;
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(APPLICATION_JSON));
            response
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_of(path: &str) -> Option<u16> {
        absent(&Method::POST, path).map(|r| r.status().as_u16())
    }

    #[test]
    fn absent_endpoints_are_known_by_path_and_doors_are_not() {
        assert_eq!(status_of("/v1/embeddings"), Some(404));
        assert_eq!(status_of("/v1/files/file-1/content"), Some(404));
        assert_eq!(status_of("/v1/chat/completions/chatcmpl-1"), Some(404));
        assert_eq!(status_of("/v1/messages/count_tokens"), Some(404));
        for served in [
            "/v1/chat/completions",
            "/v1/messages",
            "/v1/embeddingsx",
            "/v2/x",
        ] {
            assert_eq!(status_of(served), None, "{served}");
        }
    }
}
