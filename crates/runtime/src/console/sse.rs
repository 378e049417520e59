//! `GET /v1/console/live`: the live stream as server-sent events, one `data:` line per request
//! (the lines waiting when the stream's task wakes are written together).
//!
//! A task copies the broadcast into the response body; when the page goes away the body is
//! dropped, the task's next send fails, and its watcher (and so the feed's count) goes with it.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::Response;
use tokio::sync::{broadcast, mpsc};

use crate::relay::body::{BoxError, ProxyBody};
use crate::watch::live::LiveFeed;

/// A comment sent this often keeps proxies and the page's reader from timing the stream out.
const HEARTBEAT: Duration = Duration::from_secs(15);

/// Bytes of events one write carries at most when lines wait.
const BATCH_BYTES: usize = 64 * 1024;

/// Appends one `data:` event.
fn event(chunk: &mut Vec<u8>, line: &[u8]) {
    chunk.extend_from_slice(b"data: ");
    chunk.extend_from_slice(line);
    chunk.extend_from_slice(b"\n\n");
}

/// The response that streams `feed` from now on.
pub fn stream(feed: &LiveFeed) -> Response<ProxyBody> {
    let mut watcher = feed.subscribe();
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        if tx.send(Bytes::from_static(b": live\n\n")).await.is_err() {
            return;
        }
        let mut beat = tokio::time::interval(HEARTBEAT);
        beat.tick().await;
        loop {
            let chunk = tokio::select! {
                next = watcher.lines.recv() => match next {
                    Ok(line) => {
                        let mut chunk = Vec::with_capacity(line.len() + 8);
                        event(&mut chunk, &line);
                        // Lines that arrived meanwhile go in the same write: under load one
                        // wake-up and one write carry many requests.
                        while chunk.len() < BATCH_BYTES {
                            match watcher.lines.try_recv() {
                                Ok(line) => event(&mut chunk, &line),
                                Err(broadcast::error::TryRecvError::Lagged(skipped)) => chunk
                                    .extend_from_slice(
                                        format!("event: lagged\ndata: {skipped}\n\n").as_bytes(),
                                    ),
                                Err(_) => break,
                            }
                        }
                        Bytes::from(chunk)
                    }
                    Err(broadcast::error::RecvError::Lagged(skipped)) => {
                        Bytes::from(format!("event: lagged\ndata: {skipped}\n\n"))
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                _ = beat.tick() => Bytes::from_static(b": beat\n\n"),
                () = tx.closed() => break,
            };
            if tx.send(chunk).await.is_err() {
                break;
            }
        }
    });
    let body = EventBody { rx }.boxed_unsync();
    let mut response = Response::new(ProxyBody::Boxed(body));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

struct EventBody {
    rx: mpsc::Receiver<Bytes>,
}

impl Body for EventBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.get_mut()
            .rx
            .poll_recv(cx)
            .map(|chunk| chunk.map(|c| Ok(Frame::data(c))))
    }
}
