//! A response body wrapper that lets the proxy read usage evidence while forwarding untouched.
//!
//! Frames pass through as the same `Bytes` (no copy, no re-chunking, no delay); each data frame is
//! also shown to a [`UsageScanner`] that the [`UsageProbe`] reads once the stream is done.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

use super::{Usage, UsageScanner};

/// Wraps a streaming body; see the module comment.
#[derive(Debug)]
pub struct UsageTap<B> {
    inner: B,
    scanner: Arc<Mutex<UsageScanner>>,
    finished: bool,
}

/// The reading side of a [`UsageTap`], kept by whoever reports on the request.
#[derive(Debug, Clone)]
pub struct UsageProbe {
    scanner: Arc<Mutex<UsageScanner>>,
}

impl<B> UsageTap<B> {
    pub fn new(inner: B) -> (UsageTap<B>, UsageProbe) {
        let scanner = Arc::new(Mutex::new(UsageScanner::new()));
        let probe = UsageProbe {
            scanner: Arc::clone(&scanner),
        };
        let tap = UsageTap {
            inner,
            scanner,
            finished: false,
        };
        (tap, probe)
    }

    fn finish(&mut self) {
        if !std::mem::replace(&mut self.finished, true) {
            lock(&self.scanner).finish();
        }
    }
}

impl UsageProbe {
    /// The usage seen so far (the final one once the body has ended).
    pub fn usage(&self) -> Option<Usage> {
        lock(&self.scanner).usage()
    }

    /// Whether `data: [DONE]` went through.
    pub fn saw_done(&self) -> bool {
        lock(&self.scanner).saw_done()
    }

    /// Events whose data was neither JSON nor `[DONE]`.
    pub fn malformed_events(&self) -> u64 {
        lock(&self.scanner).malformed_events()
    }
}

// A panic while holding the lock cannot leave the scanner worse than a lost chunk; keep going.
fn lock(scanner: &Mutex<UsageScanner>) -> std::sync::MutexGuard<'_, UsageScanner> {
    scanner.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<B> Body for UsageTap<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    lock(&this.scanner).feed(data);
                }
            }
            Poll::Ready(None) => this.finish(),
            Poll::Ready(Some(Err(_))) | Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::channel::Channel;
    use http_body_util::BodyExt;
    use std::convert::Infallible;

    #[tokio::test]
    async fn frames_pass_through_unchanged_and_usage_is_read() -> Result<(), Infallible> {
        let pieces = [
            "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\nda",
            "ta: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":1,",
            "\"total_tokens\":5}}\n\ndata: [DONE]\n\n",
        ];
        let (mut tx, body) = Channel::<Bytes, Infallible>::new(pieces.len());
        for piece in pieces {
            assert!(tx
                .try_send(Frame::data(Bytes::from_static(piece.as_bytes())))
                .is_ok());
        }
        drop(tx);
        let (mut tap, probe) = UsageTap::new(body);
        let mut seen = Vec::new();
        while let Some(frame) = tap.frame().await {
            if let Ok(data) = frame?.into_data() {
                seen.push(data);
            }
        }
        let expected: Vec<Bytes> = pieces
            .iter()
            .map(|p| Bytes::from_static(p.as_bytes()))
            .collect();
        assert_eq!(seen, expected);
        assert_eq!(probe.usage().and_then(|u| u.prompt_tokens), Some(4));
        assert_eq!(probe.usage().and_then(|u| u.cached_tokens), None);
        assert!(probe.saw_done());
        Ok(())
    }
}
