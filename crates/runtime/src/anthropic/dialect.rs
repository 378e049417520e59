//! What one candidate's backend is sent, by the API the client spoke and the one the backend
//! speaks (`api = openai|anthropic`): the request as it came, a Messages request translated to
//! chat completions, or nothing (a chat or Responses request has no translation to Messages,
//! so such a candidate is skipped like one whose context is too small).

use hyper::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION};
use src_dsl::ast::BackendApi;

use crate::anthropic::wire::{API_KEY_HEADER, BETA_HEADER, DEFAULT_VERSION, VERSION_HEADER};
use crate::backends::Endpoint;
use crate::openai::Api;

/// How a request reaches one backend: the failover machine's
/// [`Reach`](src_compiler::failover::Reach), which also decides
/// which candidates a request may be sent to at all.
pub use src_compiler::failover::Reach as Dialect;

/// How a request in `api` reaches a backend speaking `backend`.
pub fn of(api: Api, backend: BackendApi) -> Dialect {
    Dialect::of(api.wire(), backend)
}

/// The path after the backend's `/v1` for a request in `api` reached as `dialect`.
pub fn suffix(dialect: Dialect, api: Api) -> &'static str {
    match dialect {
        Dialect::ChatForMessages => Api::Chat.suffix(),
        Dialect::Native | Dialect::Unspoken => api.suffix(),
    }
}

/// Sets what the dialect needs on a candidate's headers, after the router's own: an Anthropic
/// backend gets its key as `x-api-key` and an `anthropic-version` (the client's, else
/// [`DEFAULT_VERSION`]); a translated request loses the Anthropic headers, and the client's
/// `x-api-key` travels as a bearer token when neither the backend nor the client set one.
pub fn set_headers(headers: &mut HeaderMap, dialect: Dialect, endpoint: &Endpoint) {
    match dialect {
        Dialect::Native if endpoint.api == BackendApi::Anthropic => {
            set_probe_headers(headers, endpoint);
        }
        Dialect::ChatForMessages => {
            headers.remove(VERSION_HEADER);
            headers.remove(BETA_HEADER);
            let key = headers.remove(API_KEY_HEADER);
            if !headers.contains_key(AUTHORIZATION) {
                let bearer = key
                    .and_then(|k| k.to_str().ok().map(|k| format!("Bearer {}", k.trim())))
                    .and_then(|v| HeaderValue::from_str(&v).ok());
                if let Some(mut bearer) = bearer {
                    bearer.set_sensitive(true);
                    headers.insert(AUTHORIZATION, bearer);
                }
            }
        }
        Dialect::Native | Dialect::Unspoken => {}
    }
}

/// The backend's `x-api-key`, when it is an Anthropic backend with a key (also on health
/// probes, which Anthropic's `GET /v1/models` authenticates the same way).
pub fn set_probe_headers(headers: &mut HeaderMap, endpoint: &Endpoint) {
    if let Some(key) = &endpoint.api_key {
        headers.insert(HeaderName::from_static(API_KEY_HEADER), key.clone());
        headers.remove(AUTHORIZATION);
    }
    if endpoint.api == BackendApi::Anthropic && !headers.contains_key(VERSION_HEADER) {
        headers.insert(
            HeaderName::from_static(VERSION_HEADER),
            HeaderValue::from_static(DEFAULT_VERSION),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pair_of_apis_has_its_dialect() {
        assert_eq!(of(Api::Messages, BackendApi::Anthropic), Dialect::Native);
        assert_eq!(
            of(Api::Messages, BackendApi::OpenAi),
            Dialect::ChatForMessages
        );
        assert_eq!(of(Api::Chat, BackendApi::OpenAi), Dialect::Native);
        assert_eq!(of(Api::Responses, BackendApi::Anthropic), Dialect::Unspoken);
        assert_eq!(
            suffix(Dialect::ChatForMessages, Api::Messages),
            "/chat/completions"
        );
        assert_eq!(suffix(Dialect::Native, Api::Messages), "/messages");
    }
}
