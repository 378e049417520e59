//! A streamed chat answer without the usage chunk the client did not ask for: when a request
//! counts against token or cost budgets, the router asks the backend for usage
//! (`stream_options.include_usage`) though the client did not, reads it in the relay, and drops
//! that one extra event (`"choices": []` with a `usage`) from what the client sees.
//!
//! Whole events pass on as soon as their blank line arrives; only an event still incomplete at
//! the end of a frame is held until the next one.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use hyper::body::{Body, Frame};

use crate::relay::body::{BoxError, ProxyBody};

/// The relayed body with usage-only events removed.
pub struct StripUsage {
    inner: ProxyBody,
    /// Bytes of an event not yet ended by its blank line.
    pending: BytesMut,
}

impl StripUsage {
    pub fn new(inner: ProxyBody) -> StripUsage {
        StripUsage {
            inner,
            pending: BytesMut::new(),
        }
    }

    /// The whole events of `pending` that the client keeps; an incomplete tail stays.
    fn drain(&mut self) -> Bytes {
        let mut out = BytesMut::new();
        while let Some(end) = event_end(&self.pending) {
            let event = self.pending.split_to(end);
            if !usage_only(&event) {
                out.extend_from_slice(&event);
            }
        }
        out.freeze()
    }
}

/// Where the first event of `buf` ends (after its blank line), if it has ended.
fn event_end(buf: &[u8]) -> Option<usize> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
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

impl Body for StripUsage {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        this.pending.extend_from_slice(&data);
                        let kept = this.drain();
                        if !kept.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(kept))));
                        }
                    }
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => {
                    // An unterminated last event is passed on as it came.
                    if this.pending.is_empty() {
                        return Poll::Ready(None);
                    }
                    let rest = this.pending.split().freeze();
                    return Poll::Ready(Some(Ok(Frame::data(rest))));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

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
        let out = StripUsage::new(inner)
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
