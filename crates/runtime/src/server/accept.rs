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

/// Waits until the client has sent enough for hyper to tell HTTP/1.1 from HTTP/2, within
/// `timeout`; `false` when it did not (or closed): the connection is dropped unanswered.
pub(super) async fn first_bytes(stream: &TcpStream, timeout: Duration) -> bool {
    let enough = async {
        let mut buf = [0u8; H2_PREFACE.len()];
        loop {
            let n = match stream.peek(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => n,
            };
            // Decided once the bytes stop matching the preface, or match all of it.
            if n == H2_PREFACE.len() || buf[..n] != H2_PREFACE[..n] {
                return true;
            }
            // A prefix of the preface: wait for more to arrive rather than spin on `peek`.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(timeout, enough).await.unwrap_or(false)
}
