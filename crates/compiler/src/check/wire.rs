//! What the server sends over the network, written in the policy: backend URLs (E047), served
//! ids (E048) and route headers (E049); Redis stores are `stores`'.
//!
//! `src serve` runs this same checker, then puts these values on the wire as they are, so each
//! is parsed here, once, into the form the runtime uses (an `http` header value) and with the
//! very parsers the runtime's HTTP stack uses; a policy that checks
//! is never refused at load, or failed on every request, for one of them.

use super::Checker;
use crate::hir::{HeaderName, HeaderValue};
use http::uri::Uri;
use src_dsl::ast::{self, HeaderSet, Ident};
use src_dsl::{codes, Diagnostic, Spanned};

impl Checker<'_> {
    /// E047 unless a backend that is not simulated has an absolute `http` or `https` URL (the
    /// forwarder appends `/chat/completions` to it, trailing `/`s dropped).
    pub(super) fn check_backend_url(&mut self, backend: &ast::Backend) {
        if backend.simulated.as_ref().is_some_and(|s| s.value) {
            return;
        }
        let Some(url) = &backend.url else { return };
        let why = match url.value.trim_end_matches('/').parse::<Uri>() {
            Err(e) => format!("it does not parse ({e})"),
            Ok(uri) => match (uri.scheme_str(), uri.authority()) {
                (Some("http" | "https"), Some(a)) if !a.host().is_empty() => return,
                (Some("http" | "https"), _) => "it names no host".to_string(),
                (Some(other), _) => format!("its scheme is `{other}`"),
                (None, _) => "it has no scheme".to_string(),
            },
        };
        self.report(
            Diagnostic::error(
                codes::INVALID_BACKEND_URL,
                format!(
                    "url of backend `{}` is not an absolute http or https URL: {why}",
                    backend.name.name
                ),
                url.span,
            )
            .with_label_message("not an http or https URL")
            .with_help("write the URL up to the API version, e.g. `http://127.0.0.1:8000/v1`; or declare `simulated = true`"),
        );
    }

    /// A model's `serves` as the `x-selected-model` header value; E048 when it is empty or
    /// cannot be one.
    pub(super) fn served_header(
        &mut self,
        model: &Ident,
        serves: &Spanned<String>,
    ) -> Option<HeaderValue> {
        let (message, label) = if serves.value.is_empty() {
            (
                format!("model `{}` serves an empty id", model.name),
                "an empty id",
            )
        } else {
            match HeaderValue::from_str(&serves.value) {
                Ok(value) => return Some(value),
                Err(_) => (
                    format!(
                        "model `{}` serves {:?}, which cannot be sent in the `x-selected-model` header",
                        model.name, serves.value
                    ),
                    "control characters",
                ),
            }
        };
        self.report(
            Diagnostic::error(codes::INVALID_SERVED_ID, message, serves.span)
                .with_label_message(label)
                .with_help("write the id the backend serves the model under, as its `/v1/models` lists it (e.g. `Qwen/Qwen3-8B`)"),
        );
        None
    }

    /// A route's `headers { }` as HTTP header fields; E049 for each name or value that cannot be
    /// one, and `None` when any cannot.
    pub(super) fn header_fields(
        &mut self,
        route: &Ident,
        headers: &[HeaderSet],
    ) -> Option<Vec<(HeaderName, HeaderValue)>> {
        let mut fields = Some(Vec::with_capacity(headers.len()));
        for h in headers {
            let name = HeaderName::from_bytes(h.name.value.as_bytes()).ok();
            if name.is_none() {
                self.report(
                    Diagnostic::error(
                        codes::INVALID_HEADER,
                        format!(
                            "route `{}` sets the header {:?}, which is not an HTTP header name",
                            route.name, h.name.value
                        ),
                        h.name.span,
                    )
                    .with_label_message("not a header name")
                    .with_help("a header name is letters, digits and `-`, with no spaces or `:`, e.g. `x-team`"),
                );
            }
            if let Some(why) = name.as_ref().and_then(reserved_header) {
                self.report(
                    Diagnostic::error(
                        codes::INVALID_HEADER,
                        format!(
                            "route `{}` sets the header `{}`, which {why}",
                            route.name, h.name.value
                        ),
                        h.name.span,
                    )
                    .with_label_message("the router owns this header")
                    .with_help(
                        "name a header of your own, e.g. `x-team`; the router sets this one itself",
                    ),
                );
            }
            let value = HeaderValue::from_str(&h.value.value).ok();
            if value.is_none() {
                self.report(
                    Diagnostic::error(
                        codes::INVALID_HEADER,
                        format!(
                            "route `{}` sets header `{}` to {:?}, which cannot be sent in HTTP",
                            route.name, h.name.value, h.value.value
                        ),
                        h.value.span,
                    )
                    .with_label_message("control characters")
                    .with_help("a header value is one line of text: remove the control characters (`\\n`, `\\r`, ...)"),
                );
            }
            match (name, value, fields.as_mut()) {
                (Some(n), Some(v), Some(f)) => f.push((n, v)),
                _ => fields = None,
            }
        }
        fields
    }
}

/// Why a route may not set `name`: it frames the request or its connection, or the router sets
/// it to tell the backend and the gateway what was decided (a route's value would win over the
/// router's and misreport the decision).
fn reserved_header(name: &HeaderName) -> Option<&'static str> {
    const FRAMING: [&str; 11] = [
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "te",
        "trailer",
        "upgrade",
        "expect",
    ];
    const DECISION: [&str; 6] = [
        "content-type",
        "x-request-id",
        "traceparent",
        "x-selected-model",
        "x-gateway-model-name",
        "x-dynamo-session-id",
    ];
    let name = name.as_str();
    if FRAMING.contains(&name) {
        Some("frames the request or its connection")
    } else if DECISION.contains(&name) || name.starts_with("x-sr-") {
        Some("the router sets to report its decision")
    } else {
        None
    }
}
