//! HTTP/1.1 connections to plain `http` backends, pooled by the thread that uses them.
//!
//! Each serving shard owns one pool (see [`super::Upstream`]): a request checks out an idle
//! connection of its backend, sends on it and puts it straight back, busy, on the same thread.
//! The connection reports itself ready again once its answer has been read to the end, which
//! the next checkout sees; a connection that is still busy is skipped and, when every one is, a
//! new one is opened. Nothing is spawned per request (only one task per connection, which reads
//! and writes its socket), and no hand-off to another thread happens on the way.
//!
//! A connection is dropped when it is closed (by the backend, or because an answer's body was
//! dropped before its end, which is how a client that goes away cancels the backend's work),
//! or when it has sat idle longer than the pool's idle limit. A request that a reused
//! connection refused before writing a byte of it (the backend closed it at that moment) is
//! sent once more, on a new connection.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderValue, HOST};
use hyper::http::uri::{Authority, Uri};
use hyper::{Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use tower_service::Service;

use super::error_chain;

/// Why a plain exchange produced no answer head.
#[derive(Debug)]
pub(super) enum PlainError {
    /// No connection could be opened.
    Connect(String),
    /// The connection broke, or the backend answered something that is not HTTP.
    Exchange(String),
}

/// One connection and when it was last handed out.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    used: Instant,
}

/// The connections of one thread (or of every thread off the shards), by backend.
pub(super) struct PlainPool {
    connector: HttpConnector,
    backends: Mutex<Vec<(Authority, Vec<Conn>)>>,
    idle_limit: Duration,
    max_per_backend: usize,
}

impl PlainPool {
    pub(super) fn new(
        connector: HttpConnector,
        idle_limit: Duration,
        max_per_backend: usize,
    ) -> PlainPool {
        PlainPool {
            connector,
            backends: Mutex::new(Vec::new()),
            idle_limit,
            max_per_backend,
        }
    }

    /// Sends `request` (an absolute `http` URL) and answers its response head.
    pub(super) async fn send(
        &self,
        mut request: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, PlainError> {
        let uri = request.uri().clone();
        let Some(authority) = uri.authority().cloned() else {
            return Err(PlainError::Connect(format!("`{uri}` names no host")));
        };
        // HTTP/1.1 names the path on the request line and the host in its own header.
        *request.uri_mut() = origin_form(&uri);
        if !request.headers().contains_key(HOST) {
            if let Ok(host) = HeaderValue::from_str(&host_header(&authority)) {
                request.headers_mut().insert(HOST, host);
            }
        }
        let (mut sender, reused) = match self.checkout(&authority) {
            Some(sender) => (sender, true),
            None => (self.connect(&uri).await?, false),
        };
        let sent = sender.try_send_request(request);
        self.checkin(authority.clone(), sender);
        match sent.await {
            Ok(response) => Ok(response),
            Err(mut refused) => match refused.take_message() {
                // Nothing of it was written: the reused connection was closing.
                Some(request) if reused => {
                    let mut sender = self.connect(&uri).await?;
                    let sent = sender.send_request(request);
                    self.checkin(authority, sender);
                    sent.await
                        .map_err(|err| PlainError::Exchange(error_chain(&err)))
                }
                _ => Err(PlainError::Exchange(error_chain(&refused.into_error()))),
            },
        }
    }

    /// A ready connection to `authority`, the most recently used first; closed ones and ones
    /// idle past the limit are dropped on the way.
    fn checkout(&self, authority: &Authority) -> Option<SendRequest<Full<Bytes>>> {
        let mut backends = self.backends.lock().ok()?;
        let (_, conns) = backends.iter_mut().find(|(a, _)| a == authority)?;
        let now = Instant::now();
        let mut i = conns.len();
        while i > 0 {
            i -= 1;
            let conn = &conns[i];
            if conn.sender.is_closed() {
                conns.swap_remove(i);
            } else if conn.sender.is_ready() {
                if now.saturating_duration_since(conn.used) > self.idle_limit {
                    conns.swap_remove(i);
                } else {
                    return Some(conns.swap_remove(i).sender);
                }
            }
        }
        None
    }

    /// Puts `sender` back (busy until its answer is read); beyond the limit it is dropped, and
    /// its connection closes once that answer is done.
    fn checkin(&self, authority: Authority, sender: SendRequest<Full<Bytes>>) {
        let Ok(mut backends) = self.backends.lock() else {
            return;
        };
        let conn = Conn {
            sender,
            used: Instant::now(),
        };
        match backends.iter_mut().find(|(a, _)| *a == authority) {
            Some((_, conns)) if conns.len() < self.max_per_backend => conns.push(conn),
            Some(_) => {}
            None => backends.push((authority, vec![conn])),
        }
    }

    /// Opens a connection to the host of `uri` and starts the task that serves it.
    async fn connect(&self, uri: &Uri) -> Result<SendRequest<Full<Bytes>>, PlainError> {
        let io = self
            .connector
            .clone()
            .call(uri.clone())
            .await
            .map_err(|err| PlainError::Connect(error_chain(&err)))?;
        let (sender, connection) = http1::handshake(io)
            .await
            .map_err(|err| PlainError::Connect(error_chain(&err)))?;
        tokio::spawn(async move {
            // Ends when the backend closes the connection or the pool drops its sender; either
            // way a later checkout sees it closed.
            let _ = connection.await;
        });
        Ok(sender)
    }
}

/// `uri` with only its path and query, as an HTTP/1.1 request line names it.
fn origin_form(uri: &Uri) -> Uri {
    match uri.path_and_query() {
        Some(path) if path.as_str() != "" => Uri::from(path.clone()),
        _ => Uri::from_static("/"),
    }
}

/// The `host` header for `authority`: the port is left out when it is HTTP's default.
fn host_header(authority: &Authority) -> String {
    match authority.port_u16() {
        Some(80) => authority.host().to_owned(),
        _ => authority.as_str().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_line_carries_the_path_and_query_only() {
        let uri: Uri = "http://b.svc:8000/v1/chat/completions?x=1".parse().unwrap();
        assert_eq!(origin_form(&uri), "/v1/chat/completions?x=1");
        let bare: Uri = "http://b.svc:8000".parse().unwrap();
        assert_eq!(origin_form(&bare), "/");
    }

    #[test]
    fn the_host_header_leaves_out_the_default_port() {
        let host = |a: &str| host_header(&a.parse::<Authority>().unwrap());
        assert_eq!(host("b.svc:80"), "b.svc");
        assert_eq!(host("b.svc:8000"), "b.svc:8000");
        assert_eq!(host("b.svc"), "b.svc");
    }
}
