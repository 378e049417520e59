//! Request identity across hops: the request id and the W3C `traceparent` the router forwards.
//!
//! Operators follow one request from the gateway through the router to the frontend and the
//! worker, so the router keeps what the client sent when it is usable (continuing the trace with a
//! span of its own) and makes fresh ids only when nothing usable arrived.

use crate::hex::lower as hex;

/// The longest client request id the router adopts; longer ones are replaced, not truncated, so a
/// log search for the client's id never half-matches.
const MAX_REQUEST_ID: usize = 128;

/// The client's request id when it is short printable ASCII, else a fresh random one.
pub fn request_id(client: Option<&str>) -> String {
    match client {
        Some(id)
            if !id.is_empty()
                && id.len() <= MAX_REQUEST_ID
                && id.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            id.to_owned()
        }
        _ => hex(&rand::random::<[u8; 16]>()),
    }
}

/// The `traceparent` to send upstream: the client's trace continued under a new span id, or a
/// new trace when the client's header is absent or invalid.
pub fn traceparent(client: Option<&str>) -> String {
    TraceContext::continue_from(client).child()
}

/// One request's W3C trace: the trace id every hop shares, the client's span (when it sent a
/// usable `traceparent`) and the flags to pass on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// 32 lowercase hex digits.
    pub trace_id: String,
    /// The client's span id (16 hex digits), when it sent one.
    pub parent_id: Option<String>,
    /// 2 hex digits (`01`: sampled).
    pub flags: String,
}

impl TraceContext {
    /// The client's trace when its `traceparent` is valid, else a new sampled trace.
    pub fn continue_from(client: Option<&str>) -> TraceContext {
        match client.and_then(parse_traceparent) {
            Some(parent) => TraceContext {
                trace_id: parent.trace_id.to_owned(),
                parent_id: Some(parent.parent_id.to_owned()),
                flags: parent.flags.to_owned(),
            },
            None => TraceContext {
                trace_id: hex(&nonzero_random::<16>()),
                parent_id: None,
                flags: "01".to_owned(),
            },
        }
    }

    /// A `traceparent` naming `span_id` (16 hex digits) as the parent in this trace.
    pub fn with_span(&self, span_id: &str) -> String {
        // Made twice a request: pushed, not `format!`ted (a third of the cost of the request's
        // ids went to the formatting machinery).
        traceparent_of(&self.trace_id, span_id, &self.flags)
    }

    /// A `traceparent` continuing this trace under a new random span id (when no span of the
    /// router's is exported, the id names the router's hop all the same).
    pub fn child(&self) -> String {
        let span = nonzero_random::<8>();
        let mut digits = [0u8; 16];
        crate::hex::lower_into(&span, &mut digits);
        // Hex digits are ASCII.
        self.with_span(std::str::from_utf8(&digits).unwrap_or_default())
    }
}

/// `00-{trace_id}-{span_id}-{flags}`.
pub fn traceparent_of(trace_id: &str, span_id: &str, flags: &str) -> String {
    let mut out = String::with_capacity(6 + trace_id.len() + span_id.len() + flags.len());
    for part in ["00-", trace_id, "-", span_id, "-", flags] {
        out.push_str(part);
    }
    out
}

/// The parts of a valid `traceparent` the router keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParent<'a> {
    pub trace_id: &'a str,
    pub parent_id: &'a str,
    pub flags: &'a str,
}

/// Parses `version-traceid-parentid-flags` as W3C Trace Context level 1 defines it: lowercase
/// hex, all-zero ids invalid, version `ff` invalid, and future versions accepted when their first
/// four fields have the version-00 shape.
pub fn parse_traceparent(value: &str) -> Option<TraceParent<'_>> {
    let value = value.trim();
    let mut parts = value.splitn(5, '-');
    let version = parts.next()?;
    let trace_id = parts.next()?;
    let parent_id = parts.next()?;
    let flags_and_rest = parts.next()?;
    let rest = parts.next();
    let flags = flags_and_rest;
    if !is_lower_hex(version, 2) || version == "ff" {
        return None;
    }
    if version == "00" && rest.is_some() {
        return None;
    }
    if !is_lower_hex(trace_id, 32) || !is_lower_hex(parent_id, 16) || !is_lower_hex(flags, 2) {
        return None;
    }
    if trace_id.bytes().all(|b| b == b'0') || parent_id.bytes().all(|b| b == b'0') {
        return None;
    }
    Some(TraceParent {
        trace_id,
        parent_id,
        flags,
    })
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// W3C ids must not be all zeros; a random draw that is gets its last bit set.
fn nonzero_random<const N: usize>() -> [u8; N] {
    let mut bytes = rand::random::<[u8; N]>();
    if bytes.iter().all(|b| *b == 0) {
        if let Some(last) = bytes.last_mut() {
            *last = 1;
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_a_usable_client_request_id() {
        assert_eq!(request_id(Some("req-42")), "req-42");
    }

    #[test]
    fn replaces_unusable_request_ids() {
        for bad in [None, Some(""), Some("has space"), Some("é")] {
            let id = request_id(bad);
            assert_eq!(id.len(), 32, "{bad:?}");
            assert!(is_lower_hex(&id, 32));
        }
        let long = "x".repeat(MAX_REQUEST_ID + 1);
        assert_ne!(request_id(Some(&long)), long);
    }

    #[test]
    fn continues_a_client_trace_with_a_new_span() -> Result<(), String> {
        let client = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let sent = traceparent(Some(client));
        let parsed = parse_traceparent(&sent).ok_or("router sent an invalid traceparent")?;
        assert_eq!(parsed.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_ne!(parsed.parent_id, "00f067aa0ba902b7");
        assert_eq!(parsed.flags, "01");
        Ok(())
    }

    #[test]
    fn starts_a_new_trace_when_the_client_sent_garbage() -> Result<(), String> {
        for bad in [
            None,
            Some("nonsense"),
            Some("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
            Some("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),
            Some("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"),
        ] {
            let sent = traceparent(bad);
            let parsed = parse_traceparent(&sent).ok_or("router sent an invalid traceparent")?;
            assert_ne!(
                parsed.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736",
                "{bad:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn one_request_keeps_one_trace_id_across_its_hops() -> Result<(), String> {
        let trace = TraceContext::continue_from(None);
        let first = trace.child();
        let second = trace.child();
        let (a, b) = (
            parse_traceparent(&first).ok_or("invalid traceparent")?,
            parse_traceparent(&second).ok_or("invalid traceparent")?,
        );
        assert_eq!(a.trace_id, trace.trace_id);
        assert_eq!(b.trace_id, trace.trace_id);
        assert_ne!(a.parent_id, b.parent_id);
        assert_eq!(trace.parent_id, None);
        let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        let continued = TraceContext::continue_from(Some(unsampled));
        assert_eq!(continued.parent_id.as_deref(), Some("00f067aa0ba902b7"));
        assert_eq!(
            continued.with_span("0123456789abcdef"),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0123456789abcdef-00"
        );
        Ok(())
    }

    #[test]
    fn accepts_future_versions_with_extra_fields() {
        let v = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more";
        assert!(parse_traceparent(v).is_some());
    }
}
