//! The pooled HTTP clients the router forwards with, and how their failures are classified.
//!
//! One client per scheme for the whole process keeps connections to each backend alive between
//! requests (a new TCP connection per request would cost more than the routing itself). Plain
//! `http` backends get HTTP/1.1 over TCP; `https` backends get TLS (rustls, see [`crate::tls`])
//! with HTTP/2 when the backend offers it through ALPN and HTTP/1.1 otherwise. The request's
//! scheme picks the client, so the plain path carries nothing of TLS. Failures are sorted into
//! the kinds the fallback rules distinguish: the backend could not be reached (a failed TLS
//! handshake included), it did not answer in time, or the exchange broke.
//!
//! The API's connections are served by single-threaded shards (`server::shards`). Each shard
//! thread gets its own pair of clients (`crate::shard`), so a request, its pooled backend
//! connection and that connection's task all stay on one thread: handing a request to a
//! connection task owned by another thread costs a cross-thread wake-up each way. The plain
//! client is this crate's own small pool over hyper's HTTP/1.1 connections (`plain.rs`): the
//! general client spawns a task per request to learn when its connection is free again, which
//! the plain path, the one most fleets use inside a cluster, does not need.

mod plain;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::http::uri::Scheme;
use hyper::{Request, Response, Uri};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

/// Idle keep-alive connections are closed after this long (backends usually allow longer).
const POOL_IDLE: Duration = Duration::from_secs(60);
/// Idle connections kept per backend.
const POOL_MAX_IDLE_PER_HOST: usize = 256;

/// Why a request to a backend produced no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    #[error("cannot connect to `{url}`: {detail}")]
    Connect { url: String, detail: String },
    #[error("`{url}` did not answer within {}", crate::upstream::human_duration(*timeout))]
    Timeout { url: String, timeout: Duration },
    #[error("request to `{url}` failed: {detail}")]
    Exchange { url: String, detail: String },
}

impl UpstreamError {
    /// The fallback metric's `reason` label.
    pub fn reason(&self) -> &'static str {
        match self {
            UpstreamError::Connect { .. } => "connect",
            UpstreamError::Timeout { .. } => "timeout",
            UpstreamError::Exchange { .. } => "exchange",
        }
    }
}

pub(crate) fn human_duration(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{} ms", d.as_millis())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// The pooled clients: for each thread kind (off the shards, and each shard), one client for
/// `http` backends and one for `https` backends.
#[derive(Clone)]
pub struct Upstream {
    sets: Arc<[Clients]>,
}

/// One thread's clients: their pools and the tasks of their connections live on that thread.
#[derive(Clone)]
struct Clients {
    plain: Arc<plain::PlainPool>,
    tls: Client<Bounded<HttpsConnector<HttpConnector>>, Full<Bytes>>,
}

impl Upstream {
    /// Clients that open connections within `connect_timeout` (TCP, and for `https` the TLS
    /// handshake too) and check backends' TLS certificates with `tls` (its ALPN protocols are
    /// set here); one set for threads off the shards and one for each of `shards`.
    pub fn new(connect_timeout: Duration, tls: rustls::ClientConfig, shards: usize) -> Upstream {
        let sets = (0..=shards)
            .map(|_| Clients::new(connect_timeout, tls.clone()))
            .collect();
        Upstream { sets }
    }

    /// The calling thread's clients.
    fn clients(&self) -> &Clients {
        // A thread of another server (tests run several) may be on a higher shard slot.
        &self.sets[crate::shard::slot() % self.sets.len()]
    }
    /// Sends `request` and waits at most `timeout` for the response head. Dropping the returned
    /// response (or its body) before the end closes the connection, which is how a client that
    /// goes away cancels the backend's work.
    pub async fn send(
        &self,
        request: Request<Full<Bytes>>,
        timeout: Duration,
    ) -> Result<Response<Incoming>, UpstreamError> {
        // Kept for the error only; the URL text is made when one happens.
        let uri = request.uri().clone();
        let clients = self.clients();
        if uri.scheme() != Some(&Scheme::HTTPS) {
            return match tokio::time::timeout(timeout, clients.plain.send(request)).await {
                Ok(Ok(response)) => Ok(response),
                Err(_) => Err(UpstreamError::Timeout {
                    url: uri.to_string(),
                    timeout,
                }),
                Ok(Err(plain::PlainError::Connect(detail))) => Err(UpstreamError::Connect {
                    url: uri.to_string(),
                    detail,
                }),
                Ok(Err(plain::PlainError::Exchange(detail))) => Err(UpstreamError::Exchange {
                    url: uri.to_string(),
                    detail,
                }),
            };
        }
        let answer = clients.tls.request(request);
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(response)) => Ok(response),
            Err(_) => Err(UpstreamError::Timeout {
                url: uri.to_string(),
                timeout,
            }),
            Ok(Err(err)) if err.is_connect() => Err(UpstreamError::Connect {
                url: uri.to_string(),
                detail: error_chain(&err),
            }),
            Ok(Err(err)) => Err(UpstreamError::Exchange {
                url: uri.to_string(),
                detail: error_chain(&err),
            }),
        }
    }
}

impl Clients {
    fn new(connect_timeout: Duration, tls: rustls::ClientConfig) -> Clients {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(connect_timeout));
        connector.set_keepalive(Some(Duration::from_secs(30)));
        let plain = Arc::new(plain::PlainPool::new(
            connector.clone(),
            POOL_IDLE,
            POOL_MAX_IDLE_PER_HOST,
        ));
        // The TLS connector hands `https` URLs to the TCP connector, which must not refuse them.
        connector.enforce_http(false);
        let https = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_all_versions()
            .wrap_connector(connector);
        let tls = client_builder().build(Bounded {
            inner: https,
            timeout: connect_timeout,
        });
        Clients { plain, tls }
    }
}

fn client_builder() -> hyper_util::client::legacy::Builder {
    let mut builder = Client::builder(TokioExecutor::new());
    builder
        .pool_idle_timeout(POOL_IDLE)
        .pool_max_idle_per_host(POOL_MAX_IDLE_PER_HOST)
        .pool_timer(TokioTimer::new());
    builder
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A connection set-up that took longer than the connect timeout.
#[derive(Debug, thiserror::Error)]
#[error("no connection within {} (TCP and TLS handshake)", human_duration(*.0))]
struct ConnectTimeout(Duration);

/// A connector whose whole set-up, the TLS handshake included, is bounded by `timeout`: a
/// backend that accepts TCP but stalls the handshake is a connect failure, not a silent one.
#[derive(Clone)]
struct Bounded<C> {
    inner: C,
    timeout: Duration,
}

impl<C> tower_service::Service<Uri> for Bounded<C>
where
    C: tower_service::Service<Uri>,
    C::Response: Send + 'static,
    C::Error: Into<BoxError>,
    C::Future: Send + 'static,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<C::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let timeout = self.timeout;
        let connecting = self.inner.call(uri);
        Box::pin(async move {
            match tokio::time::timeout(timeout, connecting).await {
                Ok(connected) => connected.map_err(Into::into),
                Err(_) => Err(ConnectTimeout(timeout).into()),
            }
        })
    }
}

/// Reads a whole answer body of at most `limit` bytes within `within`, for the operator's
/// probes (catalog fetch, doctor) rather than the request path; the error names `url` and
/// says what went wrong in words.
pub async fn read_bounded(
    body: Incoming,
    limit: usize,
    within: Duration,
    url: &str,
) -> Result<bytes::Bytes, String> {
    use http_body_util::{BodyExt, Limited};
    let collected = tokio::time::timeout(within, Limited::new(body, limit).collect())
        .await
        .map_err(|_| format!("`{url}` did not finish its answer in time"))?
        .map_err(|e| {
            format!(
                "cannot read the answer of `{url}`: {}",
                error_chain(e.as_ref())
            )
        })?;
    Ok(collected.to_bytes())
}

/// An error and its sources on one line (hyper's top-level messages alone say little).
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    fn upstream() -> Result<Upstream, crate::tls::TlsError> {
        Ok(Upstream::new(
            Duration::from_secs(2),
            crate::tls::client_config(None)?,
            0,
        ))
    }

    fn get(url: &str) -> Result<Request<Full<Bytes>>, hyper::http::Error> {
        Request::get(url).body(Full::new(Bytes::new()))
    }

    #[tokio::test]
    async fn closed_port_is_a_connect_error() -> Result<(), Box<dyn std::error::Error>> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        drop(listener);
        let upstream = upstream()?;
        let err = upstream
            .send(
                get(&format!("http://{addr}/v1/models"))?,
                Duration::from_secs(5),
            )
            .await
            .err()
            .ok_or("expected an error")?;
        assert_eq!(err.reason(), "connect", "{err}");
        Ok(())
    }

    #[tokio::test]
    async fn silent_backend_times_out() -> Result<(), Box<dyn std::error::Error>> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let hold = tokio::spawn(async move {
            // Accept and read, never answer.
            if let Ok((mut socket, _)) = listener.accept().await {
                let mut buf = [0u8; 1024];
                while let Ok(n) = socket.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                }
            }
        });
        let upstream = upstream()?;
        let err = upstream
            .send(get(&format!("http://{addr}/"))?, Duration::from_millis(100))
            .await
            .err()
            .ok_or("expected an error")?;
        assert_eq!(err.reason(), "timeout", "{err}");
        hold.abort();
        Ok(())
    }

    #[tokio::test]
    async fn connections_are_reused() -> Result<(), Box<dyn std::error::Error>> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(async move {
            let mut accepted = 0u32;
            // Serve keep-alive answers; count connections.
            while let Ok((mut socket, _)) = listener.accept().await {
                accepted += 1;
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    while let Ok(n) = socket.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-conn: {accepted}\r\n\r\nok"
                        );
                        if socket.write_all(answer.as_bytes()).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let upstream = upstream()?;
        let mut conns = Vec::new();
        for _ in 0..3 {
            let response = upstream
                .send(get(&format!("http://{addr}/"))?, Duration::from_secs(5))
                .await?;
            conns.push(response.headers()["x-conn"].to_str()?.to_owned());
            response.into_body().collect().await?;
        }
        assert_eq!(conns, ["1", "1", "1"]);
        server.abort();
        Ok(())
    }

    /// A backend on loopback that answers every request on a connection with `answer(conn)`,
    /// numbering connections from 1; `close` closes each connection after its first answer;
    /// `tail` is written this long after the answer (the rest of a body the answer announced).
    async fn backend(
        close: bool,
        answer: fn(u32) -> String,
        tail: Option<Duration>,
    ) -> Result<std::net::SocketAddr, Box<dyn std::error::Error>> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move {
            let mut accepted = 0u32;
            while let Ok((mut socket, _)) = listener.accept().await {
                accepted += 1;
                let conn = accepted;
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    while let Ok(n) = socket.read(&mut buf).await {
                        if n == 0 || socket.write_all(answer(conn).as_bytes()).await.is_err() {
                            break;
                        }
                        if let Some(after) = tail {
                            tokio::time::sleep(after).await;
                            if socket.write_all(b"ok").await.is_err() {
                                break;
                            }
                        }
                        if close {
                            break;
                        }
                    }
                });
            }
        });
        Ok(addr)
    }

    fn numbered(conn: u32) -> String {
        format!("HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-conn: {conn}\r\n\r\nok")
    }

    #[tokio::test]
    async fn a_backend_that_closes_each_connection_still_answers_every_request(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let addr = backend(true, numbered, None).await?;
        let upstream = upstream()?;
        let mut conns = Vec::new();
        for _ in 0..4 {
            let response = upstream
                .send(get(&format!("http://{addr}/"))?, Duration::from_secs(5))
                .await?;
            conns.push(response.headers()["x-conn"].to_str()?.to_owned());
            response.into_body().collect().await?;
            // Let the connection's task see the close, as time between requests would.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(conns, ["1", "2", "3", "4"]);
        Ok(())
    }

    #[tokio::test]
    async fn an_answer_dropped_before_its_end_is_not_reused(
    ) -> Result<(), Box<dyn std::error::Error>> {
        // Announces ten bytes, sends two: the answer never ends.
        fn unfinished(conn: u32) -> String {
            format!("HTTP/1.1 200 OK\r\ncontent-length: 10\r\nx-conn: {conn}\r\n\r\nok")
        }
        let addr = backend(false, unfinished, None).await?;
        let upstream = upstream()?;
        let first = upstream
            .send(get(&format!("http://{addr}/"))?, Duration::from_secs(5))
            .await?;
        assert_eq!(first.headers()["x-conn"], "1");
        drop(first);
        let second = upstream
            .send(get(&format!("http://{addr}/"))?, Duration::from_secs(5))
            .await?;
        assert_eq!(second.headers()["x-conn"], "2");
        Ok(())
    }

    #[tokio::test]
    async fn concurrent_requests_open_connections_that_are_then_reused(
    ) -> Result<(), Box<dyn std::error::Error>> {
        // Each body ends 100 ms after its head: three heads taken at once leave three
        // connections busy.
        fn late(conn: u32) -> String {
            format!("HTTP/1.1 200 OK\r\ncontent-length: 4\r\nx-conn: {conn}\r\n\r\nok")
        }
        let addr = backend(false, late, Some(Duration::from_millis(100))).await?;
        let upstream = upstream()?;
        let url = format!("http://{addr}/");
        let mut heads = Vec::new();
        for _ in 0..3 {
            heads.push(upstream.send(get(&url)?, Duration::from_secs(5)).await?);
        }
        let mut opened: Vec<String> = Vec::new();
        for response in heads {
            opened.push(response.headers()["x-conn"].to_str()?.to_owned());
            response.into_body().collect().await?;
        }
        opened.sort();
        assert_eq!(opened, ["1", "2", "3"]);
        // Read to their ends, all three are free again: no fourth connection.
        for _ in 0..6 {
            let response = upstream.send(get(&url)?, Duration::from_secs(5)).await?;
            let conn: u32 = response.headers()["x-conn"].to_str()?.parse()?;
            assert!(conn <= 3, "opened connection {conn}");
            response.into_body().collect().await?;
        }
        Ok(())
    }
}
