//! What a candidate model is sent, whichever front door sends it: the body (route plugins, the
//! served id as `model`) and the headers the router sets (request id, trace context, route
//! headers, the session identity, the served id, the backend's key).
//!
//! The HTTP proxy adds these to the client's forwarded headers and sends the request itself; the
//! Envoy external processor hands the same body and headers to the gateway as mutations. Keeping
//! one definition is what makes both front doors send a backend the same request.

use hyper::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use serde_json::Value;
use src_compiler::hir::{ModelDef, RouteDef};
use src_compiler::request::RequestView;

use crate::backends::Endpoint;
use crate::headers::{self, APPLICATION_JSON};
use crate::openai::Api;
use crate::otel::{Phase, RequestTrace};
use crate::pipeline::intake::JsonBody;
use crate::pipeline::json_edit::NotAnObject;
use crate::pipeline::rewrite::{self, Edit};
use crate::policy_store::ModelWire;

/// The parts of an upstream request that do not depend on which candidate is tried, computed
/// once per request.
pub struct Shaping<'a> {
    original: &'a [u8],
    edits: Vec<Edit>,
    router_headers: HeaderMap,
}

/// What the request carries that shaping reads.
pub struct ShapeInput<'a> {
    pub api: Api,
    /// The client's body as sent, and parsed.
    pub original: &'a [u8],
    pub parsed: &'a JsonBody,
    /// The request's trace, continued in the `traceparent` sent upstream.
    pub trace: &'a RequestTrace,
    pub request_id: &'a str,
    /// The route that decided, if one did.
    pub route: Option<&'a RouteDef>,
    /// The session identity the session layer keyed the call on.
    pub session_identity: Option<&'a str>,
    /// Ask a streamed chat answer for its usage (token and cost budgets) if the client did not.
    pub ask_usage: bool,
}

impl<'a> Shaping<'a> {
    pub fn new(input: ShapeInput<'a>) -> Shaping<'a> {
        let mut edits = match (input.api, input.route) {
            // Without plugins there is nothing to edit, and the body's tree is not built.
            (Api::Chat, Some(route)) if rewrite::has_plugins(route) => {
                rewrite::chat_plugin_edits(input.parsed.tree(), route)
            }
            _ => Vec::new(),
        };
        if input.ask_usage && input.api == Api::Chat {
            if let Some(options) = usage_asked(input.parsed.tree()) {
                edits.push(("stream_options", Some(options)));
            }
        }
        Shaping {
            original: input.original,
            edits,
            router_headers: router_headers(&input),
        }
    }

    /// Headers the router sets on every candidate's request: `x-request-id`, `traceparent`,
    /// `content-type`, the route's headers, then `x-dynamo-session-id` (so a route header cannot
    /// move a session off its worker).
    pub fn router_headers(&self) -> &HeaderMap {
        &self.router_headers
    }

    /// The body one candidate is sent: the plugin edits and its served id as `model`.
    pub fn body(&self, wire: &ModelWire) -> Result<Vec<u8>, NotAnObject> {
        rewrite::build_body(self.original, &self.edits, &wire.served_json)
    }
}

/// Whether a chat request streams without asking for usage: the `stream_options` that ask for
/// it (the client's other options kept), or `None` when nothing is to change.
pub fn usage_asked(parsed: &Value) -> Option<Vec<u8>> {
    if parsed.get("stream").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let mut options = match parsed.get("stream_options") {
        Some(Value::Object(o)) => o.clone(),
        _ => serde_json::Map::new(),
    };
    if options.get("include_usage").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    options.insert("include_usage".into(), Value::Bool(true));
    serde_json::to_vec(&Value::Object(options)).ok()
}

/// Sets what is particular to one candidate: `x-selected-model` (its served id) and the
/// backend's `authorization`; removes the client's credentials where the backend drops them.
pub fn set_model_headers(headers: &mut HeaderMap, wire: &ModelWire, endpoint: &Endpoint) {
    headers.insert(
        HeaderName::from_static(headers::SELECTED_MODEL),
        wire.served_header.clone(),
    );
    for name in dropped_credentials(endpoint) {
        headers.remove(name);
    }
    if let Some(auth) = &endpoint.authorization {
        headers.insert(AUTHORIZATION, auth.clone());
    }
}

/// The client's credential headers that must not reach `endpoint` and that nothing of the
/// router's replaces (a gateway is told to remove these).
pub fn dropped_credentials(endpoint: &Endpoint) -> Vec<&'static str> {
    if endpoint.forward_client_auth {
        return Vec::new();
    }
    headers::CLIENT_CREDENTIALS
        .into_iter()
        .filter(|name| endpoint.authorization.is_none() || *name != AUTHORIZATION.as_str())
        .collect()
}

/// Whether `model` is skipped because the request is longer than its `context`; `tokens` keeps
/// the estimate across candidates (it is computed at most once). Answers the count and the
/// context when it is skipped.
pub fn over_context(
    model: &ModelDef,
    view: &RequestView,
    tokens: &mut Option<i64>,
) -> Option<(i64, u64)> {
    let context = model.context?;
    let count = *tokens.get_or_insert_with(|| src_compiler::text::tokens_estimate(&view.history));
    (u64::try_from(count).unwrap_or(0) > context).then_some((count, context))
}

fn router_headers(input: &ShapeInput<'_>) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(6);
    if let Ok(v) = HeaderValue::from_str(input.request_id) {
        out.insert(HeaderName::from_static(headers::REQUEST_ID), v);
    }
    if let Ok(v) = HeaderValue::from_str(&input.trace.traceparent(&Phase::off())) {
        out.insert(HeaderName::from_static(headers::TRACEPARENT), v);
    }
    out.insert(CONTENT_TYPE, HeaderValue::from_static(APPLICATION_JSON));
    for (name, value) in input.route.map(|r| &r.header_fields).into_iter().flatten() {
        out.insert(name.clone(), value.clone());
    }
    if let Some(id) = input
        .session_identity
        .and_then(|id| HeaderValue::from_str(id).ok())
    {
        out.insert(HeaderName::from_static(headers::DYNAMO_SESSION_ID), id);
    }
    out
}
