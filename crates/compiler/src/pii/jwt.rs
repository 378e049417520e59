//! `jwt`: a JSON Web Token in compact form, three base64url parts joined by dots, whose header
//! decodes to a JSON object with an `alg` string and whose payload decodes to JSON. The
//! signature may be empty (`alg: none`).

use super::{bounded, Family};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use std::ops::Range;

pub(super) const FAMILY: Family = Family {
    pattern: r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{2,}\.[A-Za-z0-9_\-]*",
    accept,
    prefixed: true,
};

fn accept(text: &str, span: Range<usize>, out: &mut Vec<Range<usize>>) {
    let mut parts = text[span.clone()].split('.');
    let (Some(header), Some(payload)) = (parts.next(), parts.next()) else {
        return;
    };
    let json = |part: &str| {
        URL_SAFE_NO_PAD
            .decode(part)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
    };
    let alg = json(header).is_some_and(|h| h.get("alg").is_some_and(|a| a.is_string()));
    if alg && json(payload).is_some() && bounded(text, &span, &['_', '-']) {
        out.push(span);
    }
}
