//! A streamed chat answer without the usage chunk the client did not ask for: when a request
//! counts against token or cost budgets, the router asks the backend for usage
//! (`stream_options.include_usage`) though the client did not, reads it in the relay, and drops
//! that one extra event (`"choices": []` with a `usage`) from what the client sees.
//!
//! Whole events pass on as soon as their blank line arrives; only an event still incomplete at
//! the end of a frame is held until the next one.

use bytes::{Bytes, BytesMut};

use crate::relay::rewriting::{Events, Rewriter};

/// Takes usage-only events out of a relayed stream (a [`Rewriter`]).
#[derive(Debug, Default)]
pub struct StripUsage {
    events: Events,
}

impl StripUsage {
    pub fn new() -> StripUsage {
        StripUsage::default()
    }
}

impl Rewriter for StripUsage {
    /// The whole events the client keeps; an incomplete tail stays.
    fn feed(&mut self, data: &Bytes) -> Bytes {
        self.events.push(data);
        let mut out = BytesMut::new();
        while let Some(event) = self.events.next_event() {
            if !usage_only(&event) {
                out.extend_from_slice(&event);
            }
        }
        out.freeze()
    }

    /// An unterminated last event is passed on as it came.
    fn finish(&mut self) -> Bytes {
        self.events.rest()
    }
}

/// Whether an event is the usage chunk: its data is an object with an empty `choices` and a
/// `usage` object.
fn usage_only(event: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(event) else {
        return false;
    };
    let data: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim_start)
        .collect::<Vec<_>>()
        .join("\n");
    if !data.contains("\"usage\"") {
        return false;
    }
    match serde_json::from_str::<serde_json::Value>(&data) {
        Ok(v) => {
            v.get("choices")
                .and_then(serde_json::Value::as_array)
                .is_some_and(Vec::is_empty)
                && v.get("usage").is_some_and(serde_json::Value::is_object)
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay::body::{BoxError, ProxyBody};
    use crate::relay::rewriting::Rewritten;
    use http_body_util::BodyExt;
    use hyper::body::Frame;

    #[tokio::test]
    async fn the_usage_chunk_is_dropped_across_frame_boundaries() {
        let stream = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n\
                      data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n\
                      data: [DONE]\n\n";
        let (a, b) = stream.split_at(60);
        let frames = futures_util::stream::iter(vec![
            Ok::<_, BoxError>(Frame::data(Bytes::from(a.to_owned()))),
            Ok(Frame::data(Bytes::from(b.to_owned()))),
        ]);
        let inner = ProxyBody::Boxed(http_body_util::StreamBody::new(frames).boxed_unsync());
        let out = Rewritten::new(inner, StripUsage::new())
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&out),
            "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n"
        );
    }

    #[test]
    fn only_a_usage_only_event_is_one() {
        assert!(usage_only(
            b"data: {\"choices\":[],\"usage\":{\"total_tokens\":4}}\n\n"
        ));
        assert!(!usage_only(
            b"data: {\"choices\":[{\"delta\":{}}],\"usage\":{\"total_tokens\":4}}\n\n"
        ));
        assert!(!usage_only(b"data: [DONE]\n\n"));
    }
}
