//! A recording upstream: an HTTP backend on `127.0.0.1:0` that keeps every request the router
//! sent it (path, headers, JSON body) and answers each with what its script says. [`canned`]
//! answers every API the router speaks (chat completions, Responses, Anthropic's Messages, the
//! `GET /models` readiness probe) with a small valid answer, or with an error of a given
//! status in that API's shape; tests that need more pass their own function.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::TestResult;

/// What the upstream saw of one request.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The order of arrival among every request of every upstream of this process, so that a
    /// test can tell which of several backends was tried first.
    pub seq: u64,
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    /// The body as JSON (`null` when it was empty or not JSON).
    pub body: Value,
    /// The body as sent.
    pub bytes: Bytes,
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    /// Headers the answer carries besides `content-type`.
    pub headers: Vec<(&'static str, &'static str)>,
}

impl Reply {
    /// A `200` JSON answer.
    pub fn json(body: &Value) -> Reply {
        Reply {
            status: 200,
            content_type: "application/json",
            body: body.to_string(),
            headers: Vec::new(),
        }
    }

    /// The answer with a header `name: value` too.
    pub fn with_header(mut self, name: &'static str, value: &'static str) -> Reply {
        self.headers.push((name, value));
        self
    }

    /// An answer of `status` with an empty body.
    pub fn empty(status: u16) -> Reply {
        Reply {
            status,
            content_type: "application/octet-stream",
            body: String::new(),
            headers: Vec::new(),
        }
    }

    /// A `200` event stream of `text`.
    pub fn stream(text: impl Into<String>) -> Reply {
        Reply {
            status: 200,
            content_type: "text/event-stream",
            body: text.into(),
            headers: Vec::new(),
        }
    }
}

type Script = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// Counts requests across upstreams ([`Seen::seq`]).
static ARRIVALS: AtomicU64 = AtomicU64::new(0);

/// A running recording upstream; it stops when dropped.
pub struct Upstream {
    /// Its base URL, up to `/v1`.
    pub url: String,
    /// `http://127.0.0.1:PORT`, without a path.
    pub origin: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Upstream {
    /// Starts an upstream answering each request with `script`.
    pub async fn start(
        script: impl Fn(&Seen) -> Reply + Send + Sync + 'static,
    ) -> TestResult<Upstream> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let origin = format!("http://127.0.0.1:{}", listener.local_addr()?.port());
        let url = format!("{origin}/v1");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let script: Script = Arc::new(script);
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let log = Arc::clone(&log);
                let script = Arc::clone(&script);
                tokio::spawn(async move {
                    let service =
                        service_fn(move |r| answer(r, Arc::clone(&log), Arc::clone(&script)));
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        Ok(Upstream {
            url,
            origin,
            seen,
            task,
        })
    }

    /// An upstream answering every API with [`canned`] answers of `status`, signed `name`.
    pub async fn canned(name: &str, status: u16) -> TestResult<Upstream> {
        let name = name.to_owned();
        Upstream::start(move |seen| canned(&name, status, seen)).await
    }

    /// Every request seen, oldest first.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Forgets the requests seen so far.
    pub fn clear(&self) {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// The requests seen on `path` (e.g. `/v1/messages`), oldest first.
    pub fn requests(&self, path: &str) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.path == path).collect()
    }

    /// The `POST`s seen, oldest first (readiness probes are `GET`s).
    pub fn posts(&self) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.method == "POST")
            .collect()
    }
}

async fn answer(
    request: Request<Incoming>,
    seen: Arc<Mutex<Vec<Seen>>>,
    script: Script,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let method = request.method().as_str().to_owned();
    let path = request.uri().path().to_owned();
    let headers = request.headers().clone();
    let bytes = request
        .into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let request = Seen {
        seq: ARRIVALS.fetch_add(1, Ordering::SeqCst),
        method,
        path,
        headers,
        body,
        bytes,
    };
    let reply = script(&request);
    seen.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(request);
    let mut response = Response::new(Full::new(Bytes::from(reply.body)));
    *response.status_mut() = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(reply.content_type));
    for (name, value) in reply.headers {
        headers.append(name, HeaderValue::from_static(value));
    }
    Ok(response)
}

/// A small valid answer to `seen` in the API of its path, whose text is `answer from {name}`;
/// with a `status` of 400 or more, that API's error envelope instead. `GET`s (the readiness
/// probe) get an empty model list.
pub fn canned(name: &str, status: u16, seen: &Seen) -> Reply {
    let model = seen.body["model"].clone();
    let text = format!("answer from {name}");
    let path = seen.path.as_str();
    if seen.method == "GET" {
        return Reply::json(&json!({"object": "list", "data": []}));
    }
    if status >= 400 {
        let message = format!("{name} failed on purpose");
        let body = if path.ends_with("/messages") {
            json!({"type": "error", "error": {"type": "api_error", "message": message}})
        } else {
            json!({"error": {"message": message, "type": "server_error", "code": null}})
        };
        return Reply {
            status,
            ..Reply::json(&body)
        };
    }
    let body = if path.ends_with("/messages") {
        json!({
            "id": "msg_upstream", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 5, "output_tokens": 3}
        })
    } else if path.ends_with("/responses") {
        json!({
            "id": "resp_upstream", "object": "response", "created_at": 1, "status": "completed",
            "model": model,
            "output": [{"type": "message", "id": "msg_upstream", "status": "completed",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}],
            "usage": {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}
        })
    } else {
        json!({
            "id": "chatcmpl-upstream", "object": "chat.completion", "created": 1, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
        })
    };
    Reply {
        status,
        ..Reply::json(&body)
    }
}
