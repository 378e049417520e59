//! How an accepted connection is served under the [`ConnectionLimits`]: hyper's builder with
//! the head timeout and head size bound, and the wait for a client's first bytes, which hyper's
//! protocol detection does without any timeout of its own.

use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpStream;

use crate::limits::ConnectionLimits;

/// What a client sends first on an HTTP/2 connection with prior knowledge.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The connection builder of both listeners (HTTP/1.1 and HTTP/2, detected per connection).
pub(super) fn builder(limits: &ConnectionLimits) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.header_buffer());
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(limits.header_buffer()).unwrap_or(u32::MAX));
    builder
}

/// What a connection's first bytes say it speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Protocol {
    Http1,
    /// HTTP/2 with prior knowledge (the preface).
    Http2,
}

/// Waits until the client has sent enough to tell HTTP/1.1 from HTTP/2, within `timeout`;
/// `None` when it did not (or closed): the connection is dropped unanswered.
pub(super) async fn first_bytes(stream: &TcpStream, timeout: Duration) -> Option<Protocol> {
    let enough = async {
        let mut buf = [0u8; H2_PREFACE.len()];
        loop {
            let n = match stream.peek(&mut buf).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => n,
            };
            // Decided once the bytes stop matching the preface, or match all of it.
            if buf[..n] != H2_PREFACE[..n] {
                return Some(Protocol::Http1);
            }
            if n == H2_PREFACE.len() {
                return Some(Protocol::Http2);
            }
            // A prefix of the preface: wait for more to arrive rather than spin on `peek`.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(timeout, enough).await.ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    /// What `first_bytes` makes of a client that sends `bytes` (and then waits, or closes).
    async fn detect(bytes: &'static [u8], close: bool) -> Option<Protocol> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(async move {
            let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            stream.write_all(bytes).await.unwrap();
            if !close {
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        });
        let (stream, _) = listener.accept().await.unwrap();
        let seen = first_bytes(&stream, Duration::from_millis(300)).await;
        client.abort();
        seen
    }

    #[tokio::test]
    async fn a_request_line_is_http1_and_the_preface_is_http2() {
        assert_eq!(
            detect(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n\r\n",
                false
            )
            .await,
            Some(Protocol::Http1)
        );
        // Shares the preface's first letter only.
        assert_eq!(
            detect(b"PUT / HTTP/1.1\r\n\r\n", false).await,
            Some(Protocol::Http1)
        );
        assert_eq!(detect(H2_PREFACE, false).await, Some(Protocol::Http2));
    }

    #[tokio::test]
    async fn a_client_that_stalls_inside_the_preface_or_closes_is_dropped() {
        assert_eq!(detect(b"PRI * HTTP", false).await, None);
        assert_eq!(detect(b"", true).await, None);
    }
}
