//! One shape for every body that rewrites or reads a relayed answer on its way to the client:
//! the usage chunk taken out of a stream, a backend's echoed key taken out of its error, a chat
//! stream translated into Messages, redacted values put back into an answer, a `/v1/responses`
//! answer kept once it has ended.
//!
//! A [`Rewriter`] says only what it makes of each piece of the answer ([`Rewriter::feed`]), what
//! it still held when the answer ended ([`Rewriter::finish`]), and what work the client waits on
//! before a piece goes ([`Rewriter::wait`]: a kept answer's store write holds its last piece);
//! [`Rewritten`] owns the polling: empty output is not sent as a frame, what is held goes out
//! before trailers, and an error ends the body. [`Events`] cuts a byte stream into whole
//! server-sent events for the rewriters that read events rather than bytes.
//!
//! The relay's whole-answer [`Rewrite`](crate::relay::body::Rewrite) is no rewriter: it runs
//! inside the relay on the answer the relay keeps for its usage, so the usage and counts it reads
//! are in the request's log line, and the Messages door can still answer with another status
//! when the answer is no chat completion.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use hyper::body::{Body, Frame, SizeHint};

use crate::hooks::BoxFuture;
use crate::relay::body::{BoxError, ProxyBody};

/// What a rewriting body does to the answer it relays.
pub trait Rewriter: Send + Unpin + 'static {
    /// The bytes the client gets for the answer's next piece `data`; empty while it holds it.
    fn feed(&mut self, data: &Bytes) -> Bytes;

    /// What it still holds once the answer has ended (or its trailers arrived).
    fn finish(&mut self) -> Bytes;

    /// Work to be done before the client gets what the last piece became; asked after each
    /// piece and once the answer has ended (`ended`: nothing more will come). A body whose last
    /// piece went out may be dropped without another poll, so work the client must not outrun
    /// holds that piece.
    fn wait(&mut self, _ended: bool) -> Option<BoxFuture<'static, ()>> {
        None
    }

    /// Whether every piece goes out as it came: the answer keeps its length.
    fn passes_through(&self) -> bool {
        false
    }

    /// Whether it may still give output or work once the inner answer has ended: until it says
    /// not, the body reports its end only once polled to it.
    fn holds(&self) -> bool {
        true
    }
}

/// A relayed body rewritten by `R`.
pub struct Rewritten<R> {
    inner: ProxyBody,
    rewriter: R,
    /// Trailers that arrive after data still held: they go once it has.
    trailers: Option<Frame<Bytes>>,
    /// The rewriter's work in flight, and the frame that waits on it.
    waiting: Option<(BoxFuture<'static, ()>, Option<Frame<Bytes>>)>,
    /// `finish` has run: nothing more is read from `inner`.
    finished: bool,
    done: bool,
}

impl<R: Rewriter> Rewritten<R> {
    pub fn new(inner: ProxyBody, rewriter: R) -> Rewritten<R> {
        Rewritten {
            inner,
            rewriter,
            trailers: None,
            waiting: None,
            finished: false,
            done: false,
        }
    }

    /// The rewritten body as a [`ProxyBody`].
    pub fn boxed(inner: ProxyBody, rewriter: R) -> ProxyBody {
        ProxyBody::Boxed(http_body_util::BodyExt::boxed_unsync(Rewritten::new(
            inner, rewriter,
        )))
    }

    /// Runs `finish` once; its output, if any.
    fn finish(&mut self) -> Option<Frame<Bytes>> {
        if self.finished {
            return None;
        }
        self.finished = true;
        let tail = self.rewriter.finish();
        (!tail.is_empty()).then(|| Frame::data(tail))
    }

    /// `out` if it may go now; else it waits on the rewriter's work.
    fn settle(&mut self, ended: bool, out: Option<Frame<Bytes>>) -> Option<Frame<Bytes>> {
        match self.rewriter.wait(ended) {
            Some(work) => {
                self.waiting = Some((work, out));
                None
            }
            None => out,
        }
    }
}

impl<R: Rewriter> Body for Rewritten<R> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        // Every field is `Unpin`: the body is moved freely.
        let this = self.get_mut();
        loop {
            if let Some((work, held)) = &mut this.waiting {
                if work.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                let held = held.take();
                this.waiting = None;
                if let Some(frame) = held {
                    return Poll::Ready(Some(Ok(frame)));
                }
            }
            if this.done {
                return Poll::Ready(None);
            }
            if this.finished {
                this.done = this.trailers.is_none();
                return Poll::Ready(this.trailers.take().map(Ok));
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    let tail = this.finish();
                    if let Some(tail) = this.settle(true, tail) {
                        return Poll::Ready(Some(Ok(tail)));
                    }
                }
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        let out = this.rewriter.feed(&data);
                        let out = (!out.is_empty()).then(|| Frame::data(out));
                        let ended = this.inner.is_end_stream();
                        if let Some(out) = this.settle(ended, out) {
                            return Poll::Ready(Some(Ok(out)));
                        }
                    }
                    Err(trailers) => {
                        // The data held goes first; the trailers wait their turn.
                        this.trailers = Some(trailers);
                        let tail = this.finish();
                        if let Some(tail) = this.settle(true, tail) {
                            return Poll::Ready(Some(Ok(tail)));
                        }
                    }
                },
                Poll::Ready(Some(Err(err))) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(err)));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
            || (self.waiting.is_none()
                && self.trailers.is_none()
                && !self.rewriter.holds()
                && self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        if self.rewriter.passes_through() {
            self.inner.size_hint()
        } else {
            // A rewrite changes the length.
            SizeHint::default()
        }
    }
}

/// The bytes of an event stream cut into whole events (each with its blank line); an event
/// not yet ended waits for the next piece.
#[derive(Debug, Default)]
pub struct Events {
    pending: BytesMut,
}

impl Events {
    /// Adds the stream's next piece.
    pub fn push(&mut self, data: &[u8]) {
        self.pending.extend_from_slice(data);
    }

    /// The next whole event, if one has ended.
    pub fn next_event(&mut self) -> Option<Bytes> {
        let end = event_end(&self.pending)?;
        Some(self.pending.split_to(end).freeze())
    }

    /// What is left: an event the stream never ended.
    pub fn rest(&mut self) -> Bytes {
        self.pending.split().freeze()
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

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    /// Holds everything until the end, then answers it upper-cased.
    struct Shout(Vec<u8>);

    impl Rewriter for Shout {
        fn feed(&mut self, data: &Bytes) -> Bytes {
            self.0.extend_from_slice(data);
            Bytes::new()
        }
        fn finish(&mut self) -> Bytes {
            Bytes::from(std::mem::take(&mut self.0).to_ascii_uppercase())
        }
    }

    fn frames(frames: Vec<Frame<Bytes>>) -> ProxyBody {
        let stream = futures_util::stream::iter(frames.into_iter().map(Ok::<_, BoxError>));
        ProxyBody::Boxed(http_body_util::StreamBody::new(stream).boxed_unsync())
    }

    #[tokio::test]
    async fn what_is_held_goes_before_the_trailers() -> Result<(), BoxError> {
        let mut trailers = hyper::HeaderMap::new();
        trailers.insert("x-end", hyper::header::HeaderValue::from_static("1"));
        let inner = frames(vec![
            Frame::data(Bytes::from_static(b"ab")),
            Frame::data(Bytes::from_static(b"c")),
            Frame::trailers(trailers.clone()),
        ]);
        let out = Rewritten::new(inner, Shout(Vec::new())).collect().await?;
        assert_eq!(out.trailers(), Some(&trailers));
        assert_eq!(out.to_bytes(), Bytes::from_static(b"ABC"));
        Ok(())
    }

    /// Passes the answer through; its last piece waits on `work`.
    struct Keeps {
        work: Option<tokio::sync::oneshot::Receiver<()>>,
    }

    impl Rewriter for Keeps {
        fn feed(&mut self, data: &Bytes) -> Bytes {
            data.clone()
        }
        fn finish(&mut self) -> Bytes {
            Bytes::new()
        }
        fn wait(&mut self, ended: bool) -> Option<BoxFuture<'static, ()>> {
            let work = self.work.take().filter(|_| ended)?;
            Some(Box::pin(async move {
                let _ = work.await;
            }))
        }
        fn passes_through(&self) -> bool {
            true
        }
        fn holds(&self) -> bool {
            self.work.is_some()
        }
    }

    #[tokio::test]
    async fn the_last_piece_waits_on_the_rewriter_s_work() -> Result<(), BoxError> {
        use futures_util::FutureExt;
        let (done, work) = tokio::sync::oneshot::channel();
        let inner = ProxyBody::from(Bytes::from_static(b"whole"));
        let mut body = Rewritten::new(inner, Keeps { work: Some(work) });
        assert_eq!(body.size_hint().exact(), Some(5));
        assert!(body.frame().now_or_never().is_none());
        assert!(!body.is_end_stream());
        let _ = done.send(());
        let frame = body.frame().await.ok_or("no frame")??;
        assert_eq!(frame.into_data().ok(), Some(Bytes::from_static(b"whole")));
        assert!(body.is_end_stream());
        Ok(())
    }

    #[test]
    fn events_end_at_their_blank_line_whichever_line_ending() {
        let mut events = Events::default();
        events.push(b"data: 1\n\ndata: 2\r\n\r\ndata: ");
        assert_eq!(
            events.next_event(),
            Some(Bytes::from_static(b"data: 1\n\n"))
        );
        assert_eq!(
            events.next_event(),
            Some(Bytes::from_static(b"data: 2\r\n\r\n"))
        );
        assert_eq!(events.next_event(), None);
        events.push(b"3\n\n");
        assert_eq!(
            events.next_event(),
            Some(Bytes::from_static(b"data: 3\n\n"))
        );
        assert_eq!(events.rest(), Bytes::new());
    }
}
