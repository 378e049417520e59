//! The front doors of `src serve`, driven alike: the proxy's `POST /v1/chat/completions`,
//! `POST /v1/responses` and `POST /v1/messages`, and the Envoy external processor on the chat
//! and Responses paths. One chat-shaped request is translated into each door's API
//! ([`Door::body`]); what came back is read into one [`Outcome`] (status, the router's headers,
//! the error type in the door's own error shape, and for the processor the body it would send
//! upstream), so a test can ask every door the same question and compare.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use hyper::Method;
use serde_json::{json, Map, Value};
use src_compiler::request::{RequestError, RequestView};

use crate::extproc::{chunk, headers, post, response_headers, Reply, Stream};
use crate::{Router, TestResult};

/// One way into the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    Chat,
    Responses,
    Messages,
    ExtprocChat,
    ExtprocResponses,
}

/// The API a door's request is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Chat,
    Responses,
    Messages,
}

impl Door {
    pub const ALL: [Door; 5] = [
        Door::Chat,
        Door::Responses,
        Door::Messages,
        Door::ExtprocChat,
        Door::ExtprocResponses,
    ];

    /// Its name in test names and case files.
    pub fn name(self) -> &'static str {
        match self {
            Door::Chat => "chat",
            Door::Responses => "responses",
            Door::Messages => "messages",
            Door::ExtprocChat => "extproc-chat",
            Door::ExtprocResponses => "extproc-responses",
        }
    }

    pub fn by_name(name: &str) -> Option<Door> {
        Door::ALL.into_iter().find(|d| d.name() == name)
    }

    pub fn shape(self) -> Shape {
        match self {
            Door::Chat | Door::ExtprocChat => Shape::Chat,
            Door::Responses | Door::ExtprocResponses => Shape::Responses,
            Door::Messages => Shape::Messages,
        }
    }

    pub fn is_extproc(self) -> bool {
        matches!(self, Door::ExtprocChat | Door::ExtprocResponses)
    }

    /// The HTTP path the request is sent on.
    pub fn path(self) -> &'static str {
        match self.shape() {
            Shape::Chat => "/v1/chat/completions",
            Shape::Responses => "/v1/responses",
            Shape::Messages => "/v1/messages",
        }
    }

    /// The API as the compiler's failover machine (and so `src explain`) knows it.
    pub fn wire(self) -> src_compiler::failover::Wire {
        match self.shape() {
            Shape::Chat => src_compiler::failover::Wire::Chat,
            Shape::Responses => src_compiler::failover::Wire::Responses,
            Shape::Messages => src_compiler::failover::Wire::Messages,
        }
    }

    /// Whether a backend speaking Anthropic's API (`api = anthropic`) can answer this door: only
    /// a Messages request reaches one.
    pub fn reaches_anthropic(self) -> bool {
        self.shape() == Shape::Messages
    }

    /// `chat`, a chat completion request, written in this door's API: Responses gets the
    /// messages as `input` items, Messages gets the system messages as `system` and a
    /// `max_tokens`. Other fields are kept.
    pub fn body(self, chat: &Value) -> Value {
        let mut out: Map<String, Value> = chat.as_object().cloned().unwrap_or_default();
        let messages = out.remove("messages").unwrap_or_else(|| json!([]));
        let messages = messages.as_array().cloned().unwrap_or_default();
        match self.shape() {
            Shape::Chat => {
                out.insert("messages".into(), Value::Array(messages));
            }
            Shape::Responses => {
                out.insert("input".into(), Value::Array(messages));
            }
            Shape::Messages => {
                let (system, rest): (Vec<Value>, Vec<Value>) =
                    messages.into_iter().partition(|m| m["role"] == "system");
                let system: Vec<&str> = system
                    .iter()
                    .filter_map(|m| m["content"].as_str())
                    .collect();
                if !system.is_empty() {
                    out.insert("system".into(), json!(system.join("\n")));
                }
                out.insert("messages".into(), Value::Array(rest));
                out.entry("max_tokens").or_insert(json!(64));
            }
        }
        Value::Object(out)
    }

    /// The request the compiler reads from `body` in this door's API (what `src explain`
    /// decides on).
    pub fn view(
        self,
        body: &Value,
        headers: &[(String, String)],
    ) -> Result<RequestView, RequestError> {
        match self.shape() {
            Shape::Chat => RequestView::from_chat(body, headers),
            Shape::Responses => RequestView::from_responses(body, headers),
            Shape::Messages => RequestView::from_messages(body, headers),
        }
    }

    /// Sends `body` (bytes as given) with `extra` headers through this door of `router`.
    pub async fn send(
        self,
        router: &Router,
        body: &[u8],
        extra: &[(String, String)],
    ) -> TestResult<Outcome> {
        if self.is_extproc() {
            let addr = router
                .server
                .extproc_addr
                .ok_or("the server has no external processor")?;
            return self.through_extproc(addr, body, extra).await;
        }
        let pairs: Vec<(&str, &str)> = extra
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let answer = router
            .client
            .send(
                Method::POST,
                &router.url(self.path()),
                body.to_vec(),
                &pairs,
            )
            .await?;
        let json: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        let headers = answer
            .headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        Ok(Outcome {
            status: answer.status,
            error: self.error_type(&json),
            headers,
            body: json,
            upstream: None,
        })
    }

    /// The error type of `body` in this door's error shape (OpenAI's `error.type`, or
    /// Anthropic's `{"type": "error", "error": {"type"}}`); `None` when it is not an error.
    pub fn error_type(self, body: &Value) -> Option<String> {
        let kind = match self.shape() {
            Shape::Messages if body["type"] == "error" => &body["error"]["type"],
            Shape::Messages => return None,
            Shape::Chat | Shape::Responses => &body["error"]["type"],
        };
        kind.as_str().map(str::to_owned)
    }

    /// One ext_proc stream as Envoy opens it (buffered body): request headers, the body, and,
    /// when the request goes upstream, the `200` response headers of the backend.
    async fn through_extproc(
        self,
        addr: SocketAddr,
        body: &[u8],
        extra: &[(String, String)],
    ) -> TestResult<Outcome> {
        let mut stream = Stream::open(addr).await?;
        let mut asked = post(self.path());
        asked.extend(extra.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let first = stream.ask(headers(&asked, false)).await?;
        if let Ok(local) = first.immediate() {
            return Ok(immediate(self, local));
        }
        let sent = stream.ask(chunk(body, true)).await?;
        if let Ok(local) = sent.immediate() {
            return Ok(immediate(self, local));
        }
        let upstream_headers = sent.set_headers()?.into_iter().collect();
        let upstream_body = sent.body().ok();
        let answered: Reply = stream.ask(response_headers("200")).await?;
        Ok(Outcome {
            status: 200,
            headers: answered.set_headers()?.into_iter().collect(),
            error: None,
            body: Value::Null,
            upstream: Some((upstream_headers, upstream_body.unwrap_or(Value::Null))),
        })
    }
}

fn immediate(
    door: Door,
    local: &envoy_types::pb::envoy::service::ext_proc::v3::ImmediateResponse,
) -> Outcome {
    let body: Value = serde_json::from_slice(&local.body).unwrap_or(Value::Null);
    Outcome {
        status: local
            .status
            .as_ref()
            .and_then(|s| u16::try_from(s.code).ok())
            .unwrap_or(0),
        headers: crate::extproc::set(local.headers.as_ref())
            .into_iter()
            .collect(),
        error: door.error_type(&body),
        body,
        upstream: None,
    }
}

/// What one door answered.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub status: u16,
    /// The answer's headers (for the processor: those it set on the response, or on its
    /// immediate response).
    pub headers: BTreeMap<String, String>,
    /// The error type, read in the door's own error shape.
    pub error: Option<String>,
    /// The answer's JSON body (`null` when none or not JSON).
    pub body: Value,
    /// For the processor: the headers it set on the request and the rewritten body, as Envoy
    /// would send them upstream (the proxy's are read from the upstream itself).
    pub upstream: Option<(BTreeMap<String, String>, Value)>,
}

impl Outcome {
    /// A header the router set, `-` (its "none") read as absent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(String::as_str)
            .filter(|v| *v != "-")
    }
}
