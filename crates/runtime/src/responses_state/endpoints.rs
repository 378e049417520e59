//! `GET /v1/responses/{id}`, `DELETE /v1/responses/{id}` and `GET
//! /v1/responses/{id}/input_items` for the responses the router stored, in OpenAI's shapes.
//!
//! They are scoped exactly like pins: the tenant comes from the request (the session's `tenant`
//! expression, or a hash of the API key), so another tenant's id answers 404 as an unknown one
//! does, and nothing says the id exists elsewhere.

use bytes::Bytes;
use hyper::header::{HeaderMap, HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Method, Response, StatusCode};
use serde_json::{json, Value};
use src_compiler::request::RequestView;

use crate::headers::APPLICATION_JSON;
use crate::openai::ApiError;
use crate::pipeline::intake;
use crate::policy_store::Snapshot;
use crate::relay::body::ProxyBody;
use crate::responses_state::record::StoredResponse;
use crate::responses_state::{ResponseStates, Scope};

/// The path prefix these endpoints answer under.
pub const PREFIX: &str = "/v1/responses/";

/// Input items listed when the client names no `limit`, and the most it may name.
const DEFAULT_LIMIT: usize = 20;
const MAX_LIMIT: usize = 100;

/// What a request under [`PREFIX`] asks.
#[derive(Debug, PartialEq, Eq)]
enum Asked<'a> {
    Response(&'a str),
    InputItems(&'a str),
}

fn asked(path: &str) -> Option<Asked<'_>> {
    let rest = path.strip_prefix(PREFIX)?;
    match rest.split_once('/') {
        None if !rest.is_empty() => Some(Asked::Response(rest)),
        Some((id, "input_items")) if !id.is_empty() => Some(Asked::InputItems(id)),
        _ => None,
    }
}

/// Answers one request under [`PREFIX`].
pub async fn answer(
    states: &ResponseStates,
    snapshot: &Snapshot,
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Response<ProxyBody> {
    let Some(asked) = asked(path) else {
        return ApiError::not_found(path).into_response();
    };
    let allowed = match asked {
        Asked::Response(_) => "GET, DELETE",
        Asked::InputItems(_) => "GET",
    };
    let known = matches!(
        (&asked, method),
        (Asked::Response(_), &Method::GET | &Method::DELETE) | (Asked::InputItems(_), &Method::GET)
    );
    if !known {
        let mut response: Response<ProxyBody> =
            ApiError::method_not_allowed(method.as_str(), path).into_response();
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static(allowed));
        return response;
    }
    let view = RequestView::from_prompt("", None, intake::header_pairs(headers));
    if crate::session::identity::isolated(snapshot.policy(), &view) {
        // Nothing is stored for a keyless client, and it may not see what others stored.
        let (Asked::Response(id) | Asked::InputItems(id)) = asked;
        return not_found(id).into_response();
    }
    let scope = match states.scope(snapshot.policy(), &view) {
        Ok(scope) => scope,
        Err(err) => return store_failed(&err),
    };
    match (asked, method) {
        (Asked::Response(id), &Method::DELETE) => delete(states, &scope, id).await,
        (Asked::Response(id), _) => match read(states, &scope, id).await {
            Ok(stored) => json_text(Bytes::from(stored.response.get().to_owned())),
            Err(error) => error.into_response(),
        },
        (Asked::InputItems(id), _) => match read(states, &scope, id).await {
            Ok(stored) => json(&input_items(&stored, query)),
            Err(error) => error.into_response(),
        },
    }
}

async fn read(
    states: &ResponseStates,
    scope: &Scope,
    id: &str,
) -> Result<StoredResponse, ApiError> {
    match scope.store.get(&scope.tenant, id, states.now_ms()).await {
        Ok(Some(bytes)) => StoredResponse::decode(&bytes).map_err(|err| {
            tracing::warn!(%err, id, "a stored response is unreadable");
            not_found(id)
        }),
        Ok(None) => Err(not_found(id)),
        Err(err) => Err(unavailable(&err)),
    }
}

async fn delete(states: &ResponseStates, scope: &Scope, id: &str) -> Response<ProxyBody> {
    match scope.store.delete(&scope.tenant, id, states.now_ms()).await {
        Ok(true) => json(&json!({"id": id, "object": "response.deleted", "deleted": true})),
        Ok(false) => not_found(id).into_response(),
        Err(err) => store_failed(&err),
    }
}

/// OpenAI's list of a response's input items: `order` `desc` (the default) or `asc`, `limit`
/// items after the item named by `after`. Items the client sent without an `id` are given one
/// (`{response}-input-{n}`) so a page can name where the next starts.
fn input_items(stored: &StoredResponse, query: Option<&str>) -> Value {
    let param = |name: &str| {
        query?
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    };
    let limit = param("limit")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(DEFAULT_LIMIT)
        .clamp(1, MAX_LIMIT);
    let mut items: Vec<Value> = stored
        .input
        .iter()
        .enumerate()
        .map(|(n, item)| {
            // Listing is rare and reshapes each item: a tree per item is fine here.
            let mut item: Value = serde_json::from_str(item.get()).unwrap_or(Value::Null);
            if let Some(object) = item.as_object_mut() {
                if !object.get("id").is_some_and(Value::is_string) {
                    object.insert("id".into(), json!(format!("{}-input-{n}", stored.id)));
                }
                if !object.contains_key("type") {
                    object.insert("type".into(), json!("message"));
                }
                listed_content(object);
            }
            item
        })
        .collect();
    if param("order") != Some("asc") {
        items.reverse();
    }
    let start = param("after")
        .and_then(|after| items.iter().position(|i| i["id"] == after))
        .map_or(0, |i| i + 1);
    let rest = items.get(start..).unwrap_or_default();
    let page: Vec<Value> = rest.iter().take(limit).cloned().collect();
    json!({
        "object": "list",
        "first_id": page.first().map(|i| i["id"].clone()),
        "last_id": page.last().map(|i| i["id"].clone()),
        "has_more": rest.len() > page.len(),
        "data": page,
    })
}

/// A message's string `content` as the one content part OpenAI lists it as (`input_text`, or
/// `output_text` for the assistant's).
fn listed_content(item: &mut serde_json::Map<String, Value>) {
    let Some(Value::String(text)) = item.get("content") else {
        return;
    };
    let kind = match item.get("role").and_then(Value::as_str) {
        Some("assistant") => "output_text",
        _ => "input_text",
    };
    let parts = json!([{"type": kind, "text": text}]);
    item.insert("content".into(), parts);
}

fn not_found(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        None,
        format!("Response with id '{id}' not found."),
    )
}

fn unavailable(err: &crate::store::StoreError) -> ApiError {
    // An unreachable store was reported once by its link, not once a request.
    if err.is_outage() {
        tracing::debug!(%err, "the response store failed");
    } else {
        tracing::warn!(%err, "the response store failed");
    }
    ApiError::service_unavailable("the response store is unavailable")
}

fn store_failed(err: &crate::store::StoreError) -> Response<ProxyBody> {
    unavailable(err).into_response()
}

fn json(value: &Value) -> Response<ProxyBody> {
    json_text(Bytes::from(value.to_string()))
}

/// A JSON text as the answer, as it is.
fn json_text(text: Bytes) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::from(text));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(APPLICATION_JSON));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_a_response_or_its_input_items() {
        assert_eq!(
            asked("/v1/responses/resp_1"),
            Some(Asked::Response("resp_1"))
        );
        assert_eq!(
            asked("/v1/responses/resp_1/input_items"),
            Some(Asked::InputItems("resp_1"))
        );
        assert_eq!(asked("/v1/responses/"), None);
        assert_eq!(asked("/v1/responses/resp_1/cancel"), None);
        assert_eq!(asked("/v1/responses//input_items"), None);
    }

    #[test]
    fn input_items_page_newest_first_by_default() {
        let stored = StoredResponse {
            id: "resp_9".into(),
            backend: "a".into(),
            served: "m".into(),
            model: "m".into(),
            input: (0..5)
                .filter_map(|n| {
                    serde_json::value::to_raw_value(
                        &json!({"role": "user", "content": format!("m{n}")}),
                    )
                    .ok()
                })
                .collect(),
            response: serde_json::value::to_raw_value(&json!({})).expect("JSON"),
            created_ms: 0,
            conversation: None,
        };
        let page = input_items(&stored, Some("limit=2"));
        let texts = |page: &Value| -> Vec<String> {
            page["data"]
                .as_array()
                .map(|d| {
                    d.iter()
                        .map(|i| i["content"][0]["text"].as_str().unwrap_or("").to_owned())
                        .collect()
                })
                .unwrap_or_default()
        };
        assert_eq!(page["data"][0]["content"][0]["type"], "input_text");
        assert_eq!(texts(&page), ["m4", "m3"]);
        assert_eq!(page["has_more"], true);
        assert_eq!(page["data"][0]["type"], "message");
        let after = page["last_id"].as_str().unwrap_or_default().to_owned();
        let next = input_items(&stored, Some(&format!("limit=2&after={after}")));
        assert_eq!(texts(&next), ["m2", "m1"]);
        let all = input_items(&stored, Some("order=asc"));
        assert_eq!(texts(&all), ["m0", "m1", "m2", "m3", "m4"]);
        assert_eq!(all["has_more"], false);
    }
}
