//! The first step of a proxied request: its body, read within a limit, and the facts a policy
//! reads from it (the compiler's [`RequestView`]), or the client error that says why not.
//!
//! Every body (chat, Responses, Messages) is read into the compiler's borrowed tree ([`Borrowed`]: its strings
//! point into the body) rather than a `serde_json::Value`, which allocates every key and string;
//! the [`JsonBody`] builds the `Value` only when a step reads one (a route's plugins, the cache,
//! `--record`), which a plain routed request never does. A Messages body that may go to an
//! OpenAI backend is given its chat form from the same borrowed tree, so translating it needs
//! no `Value` either.

use std::sync::OnceLock;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Body;
use hyper::header::{HeaderMap, CONTENT_LENGTH};
use serde_json::Value;
use src_compiler::request::{Borrowed, RequestError, RequestView};

use crate::anthropic::to_chat::{ChatForm, Untranslatable};
use crate::cache::Directive;
use crate::headers;
use crate::openai::{Api, ApiError};
use crate::otel::{name, RequestTrace};

/// What of a refused body is still read, and for how long, before its connection may close.
const DISCARD_BYTES: usize = 32 << 20;
const DISCARD_TIME: Duration = Duration::from_secs(5);

/// Reads the whole body, refusing with 413 as soon as it is known to exceed `limit` (from
/// `content-length`, or while reading a body of unknown length): nothing beyond the limit is
/// buffered. What the client still sends of a refused body is read and dropped in the background
/// (`discard_rest`), so that it reads the 413 rather than a reset connection.
async fn read_body<B>(body: B, headers: &HeaderMap, limit: usize) -> Result<Bytes, ApiError>
where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut body = Box::pin(body);
    if declared.is_some_and(|n| n > limit as u64) {
        discard_rest(body);
        return Err(ApiError::payload_too_large(limit));
    }
    // A small body usually arrives in one frame: that frame is the body, kept without a copy.
    // Only a second frame starts a buffer.
    let mut first: Option<Bytes> = None;
    let mut read = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|err| {
            let err = err.into();
            ApiError::bad_request(format!(
                "cannot read the request body: {}",
                crate::upstream::error_chain(err.as_ref())
            ))
        })?;
        if let Ok(mut data) = frame.into_data() {
            let held = first.as_ref().map_or(0, Bytes::len) + read.len();
            if held + data.remaining() > limit {
                discard_rest(body);
                return Err(ApiError::payload_too_large(limit));
            }
            if held == 0 && first.is_none() {
                first = Some(data.copy_to_bytes(data.remaining()));
                continue;
            }
            if let Some(first) = first.take() {
                read.reserve(
                    declared
                        .map_or(0, |n| n as usize)
                        .max(first.len() + data.remaining()),
                );
                read.extend_from_slice(&first);
            }
            while data.has_remaining() {
                let chunk = data.chunk();
                read.extend_from_slice(chunk);
                let n = chunk.len();
                data.advance(n);
            }
        }
    }
    Ok(match first {
        Some(first) => first,
        None => read.freeze(),
    })
}

/// Reads and drops the rest of a refused body, up to [`DISCARD_BYTES`] and [`DISCARD_TIME`].
/// Closing a socket that still holds unread bytes resets the connection, and a client still
/// sending would see that reset instead of the answer; nginx lingers the same way.
fn discard_rest<B>(mut body: std::pin::Pin<Box<B>>)
where
    B: Body + Send + 'static,
    B::Data: Send,
{
    tokio::spawn(async move {
        let drain = async {
            let mut seen = 0usize;
            while let Some(Ok(frame)) = body.frame().await {
                seen += frame.data_ref().map_or(0, Buf::remaining);
                if seen > DISCARD_BYTES {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(DISCARD_TIME, drain).await;
    });
}

/// Reads the whole body within its size and time bounds, `(bytes, time)`: the only way a door
/// reads one, so none can forget the time bound. Over the size it is a 413 as soon as that is
/// known; a client that has not sent the whole body in time (a slow-loris upload) gets 408 and its connection back.
pub async fn read_body_within<B>(
    body: B,
    headers: &HeaderMap,
    (limit, timeout): (usize, Duration),
) -> Result<Bytes, ApiError>
where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match tokio::time::timeout(timeout, read_body(body, headers, limit)).await {
        Ok(read) => read,
        Err(_) => Err(ApiError::request_timeout(timeout)),
    }
}

/// A request body known to be JSON: its bytes, and its `Value` tree, parsed on the first
/// [`JsonBody::tree`] (once, whichever step asks first).
#[derive(Debug)]
pub struct JsonBody {
    bytes: Bytes,
    tree: OnceLock<Value>,
    /// A Messages body's chat completions form, made on the first [`JsonBody::chat_form`] or by
    /// the intake from its borrowed tree.
    chat_form: OnceLock<Result<ChatForm, Untranslatable>>,
}

impl JsonBody {
    /// A body the intake has read as JSON already.
    fn read(
        bytes: &Bytes,
        tree: Option<Value>,
        chat_form: Option<Result<ChatForm, Untranslatable>>,
    ) -> JsonBody {
        JsonBody {
            bytes: bytes.clone(),
            tree: tree.map_or_else(OnceLock::new, OnceLock::from),
            chat_form: chat_form.map_or_else(OnceLock::new, OnceLock::from),
        }
    }

    /// A body the router serialised itself.
    pub fn written(bytes: Vec<u8>) -> JsonBody {
        JsonBody {
            bytes: Bytes::from(bytes),
            tree: OnceLock::new(),
            chat_form: OnceLock::new(),
        }
    }

    /// A body made of `value` (tests, bodies the router writes itself).
    pub fn from_value(value: Value) -> JsonBody {
        let bytes = Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
        JsonBody {
            bytes,
            tree: OnceLock::from(value),
            chat_form: OnceLock::new(),
        }
    }

    /// The body as a `serde_json::Value`.
    pub fn tree(&self) -> &Value {
        // The bytes were read as JSON before this body was made, so they parse again.
        self.tree
            .get_or_init(|| serde_json::from_slice(&self.bytes).unwrap_or_default())
    }

    /// The body, a Messages request, as a chat completions request for an OpenAI backend (or
    /// why it has no such form).
    pub fn chat_form(&self) -> &Result<ChatForm, Untranslatable> {
        self.chat_form.get_or_init(|| ChatForm::new(self.tree()))
    }

    /// The body as the client sent it.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }
}

/// Whether a Messages body's chat form is made as its facts are read: when the policy has an
/// OpenAI backend a Messages request may be translated for, the form is made from the borrowed
/// tree the facts come from (a request that then goes to an Anthropic backend has made it for
/// nothing, which costs less than a `Value` the translation would read otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatFormNow {
    Yes,
    No,
}

/// The body parsed as JSON and the request's facts as `api` defines them, in the trace's parse
/// phase.
pub fn parse(
    api: Api,
    bytes: &Bytes,
    headers: &HeaderMap,
    trace: &RequestTrace,
    chat_form: ChatFormNow,
) -> Result<(JsonBody, RequestView), ApiError> {
    let mut phase = trace.phase(name::PARSE);
    let parsed = parse_view(api, bytes, headers, chat_form);
    if let Err(error) = &parsed {
        phase.fail(|| error.body.error.message.clone());
    }
    phase.end();
    parsed
}

fn parse_view(
    api: Api,
    bytes: &Bytes,
    headers: &HeaderMap,
    chat_form: ChatFormNow,
) -> Result<(JsonBody, RequestView), ApiError> {
    // A body the borrowed tree cannot read is read into a `Value`, whose refusal is the one the
    // client gets (the borrowed tree refuses exactly what it refuses).
    let borrowed = Borrowed::parse(bytes).map(Read::Borrowed);
    let read = match borrowed {
        Some(read) => read,
        None => Read::Tree(serde_json::from_slice(bytes).map_err(ApiError::invalid_json)?),
    };
    let header_pairs = header_pairs(headers);
    // Refused whether or not the policy caches: a typo must not pass unnoticed until it does.
    Directive::read(header_pairs.iter().map(|(n, v)| (n.as_str(), v.as_str())))
        .map_err(|e| ApiError::bad_request(e.to_string()).with_param(headers::SR_CACHE))?;
    let view = match (&read, api) {
        (Read::Borrowed(body), Api::Chat) => RequestView::from_chat(body, header_pairs),
        (Read::Borrowed(body), Api::Responses) => RequestView::from_responses(body, header_pairs),
        (Read::Borrowed(body), Api::Messages) => RequestView::from_messages(body, header_pairs),
        (Read::Tree(tree), Api::Chat) => RequestView::from_chat(tree, header_pairs),
        (Read::Tree(tree), Api::Responses) => RequestView::from_responses(tree, header_pairs),
        (Read::Tree(tree), Api::Messages) => RequestView::from_messages(tree, header_pairs),
    };
    let view = view.map_err(|err| request_error(&err))?;
    let (tree, chat_form) = match read {
        Read::Borrowed(body) => {
            let form = (api == Api::Messages && chat_form == ChatFormNow::Yes)
                .then(|| ChatForm::new(&body));
            (None, form)
        }
        Read::Tree(tree) => (Some(tree), None),
    };
    Ok((JsonBody::read(bytes, tree, chat_form), view))
}

/// A body as the intake read it.
enum Read<'a> {
    Borrowed(Borrowed<'a>),
    Tree(Value),
}

/// Header names and values as the compiler's request facts read them (values lossily decoded).
pub fn header_pairs(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect()
}

fn request_error(err: &RequestError) -> ApiError {
    let error = ApiError::bad_request(err.to_string());
    match err.path() {
        Some(path) => error.with_param(path),
        None => error,
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::Full;
    use hyper::header::HeaderValue;
    use serde_json::json;

    use super::*;

    fn declared(length: usize) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
        headers
    }

    #[tokio::test]
    async fn a_body_within_its_limit_is_read_whole() {
        let body = Full::new(Bytes::from_static(b"{\"a\":1}"));
        let read = read_body(body, &HeaderMap::new(), 7).await;
        assert_eq!(read, Ok(Bytes::from_static(b"{\"a\":1}")));
    }

    #[tokio::test]
    async fn a_body_over_its_limit_is_a_413_declared_or_not() {
        let body = || Full::new(Bytes::from_static(b"0123456789"));
        let undeclared = read_body(body(), &HeaderMap::new(), 4).await;
        assert_eq!(undeclared.map_err(|e| e.status.as_u16()), Err(413));
        let declared = read_body(body(), &declared(10), 4).await;
        assert_eq!(declared.map_err(|e| e.status.as_u16()), Err(413));
    }

    /// A body whose frames come from `rx`, as a client sends them.
    fn streamed(
        rx: tokio::sync::mpsc::Receiver<Bytes>,
    ) -> impl Body<Data = Bytes, Error = std::convert::Infallible> + Send + 'static {
        let frames = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv()
                .await
                .map(|b| (Ok(hyper::body::Frame::data(b)), rx))
        });
        http_body_util::StreamBody::new(frames)
    }

    #[tokio::test]
    async fn a_body_in_several_frames_is_read_whole_in_order() {
        for frames in [
            vec!["{\"a\":", "1", "}"],
            vec!["", "{\"a\":1}"],
            vec!["{\"a\":1}", ""],
        ] {
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            for frame in &frames {
                tx.send(Bytes::from_static(frame.as_bytes())).await.unwrap();
            }
            drop(tx);
            let read = read_body(streamed(rx), &HeaderMap::new(), 7).await;
            assert_eq!(read, Ok(Bytes::from_static(b"{\"a\":1}")), "{frames:?}");
        }
        // The limit counts every frame, the first one held without a copy included.
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        for frame in ["0123", "4567"] {
            tx.send(Bytes::from_static(frame.as_bytes())).await.unwrap();
        }
        drop(tx);
        let over = read_body(streamed(rx), &HeaderMap::new(), 7).await;
        assert_eq!(over.map_err(|e| e.status.as_u16()), Err(413));
    }

    #[tokio::test]
    async fn what_is_still_sent_of_a_refused_body_is_read() {
        for headers in [declared(1 << 20), HeaderMap::new()] {
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            tx.send(Bytes::from_static(b"0123456789")).await.unwrap();
            let refused = read_body(streamed(rx), &headers, 4).await;
            assert_eq!(refused.map_err(|e| e.status.as_u16()), Err(413));
            // The client goes on sending; with room for one frame, each send waits until the
            // one before was read.
            for _ in 0..64 {
                let sent = tokio::time::timeout(
                    Duration::from_secs(5),
                    tx.send(Bytes::from_static(b"more")),
                )
                .await;
                assert!(
                    matches!(sent, Ok(Ok(()))),
                    "the rest of the body is not being read"
                );
            }
        }
    }

    #[test]
    fn a_body_that_is_not_json_is_a_400() {
        let error = parse(
            Api::Chat,
            &Bytes::from_static(b"{nope"),
            &HeaderMap::new(),
            &RequestTrace::untraced(None),
            ChatFormNow::No,
        )
        .err();
        assert_eq!(error.map(|e| e.status.as_u16()), Some(400));
    }

    #[test]
    fn each_api_reads_its_own_shape() {
        let chat = json!({"model": "auto", "messages": [{"role": "user", "content": "hi"}]});
        let parsed = parse(
            Api::Chat,
            &Bytes::from(chat.to_string()),
            &HeaderMap::new(),
            &RequestTrace::untraced(None),
            ChatFormNow::No,
        );
        let (value, view) = parsed.expect("a chat request parses");
        assert_eq!(value.tree(), &chat);
        assert_eq!(view.model.as_deref(), Some("auto"));
        assert_eq!(view.prompt, "hi");

        let responses = json!({"model": "auto", "input": "hello"});
        let parsed = parse(
            Api::Responses,
            &Bytes::from(responses.to_string()),
            &HeaderMap::new(),
            &RequestTrace::untraced(None),
            ChatFormNow::No,
        );
        let (_, view) = parsed.expect("a responses request parses");
        assert_eq!(view.prompt, "hello");
    }

    #[test]
    fn a_messages_body_is_given_its_chat_form_when_asked() {
        let messages = json!({"model": "auto", "max_tokens": 8, "system": "be brief",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi \"you\""}]}]});
        let bytes = Bytes::from(messages.to_string());
        let expected = ChatForm::new(&messages);
        assert!(expected.is_ok(), "{expected:?}");
        for now in [ChatFormNow::Yes, ChatFormNow::No] {
            let parsed = parse(
                Api::Messages,
                &bytes,
                &HeaderMap::new(),
                &RequestTrace::untraced(None),
                now,
            );
            let (body, view) = parsed.expect("a Messages request parses");
            assert_eq!(view.prompt, "hi \"you\"");
            assert_eq!(view.system, "be brief");
            // Made now from the borrowed tree, or later from the `Value`: the same form.
            assert_eq!(body.chat_form.get().is_some(), now == ChatFormNow::Yes);
            assert_eq!(body.chat_form(), &expected);
            assert_eq!(body.tree.get().is_some(), now == ChatFormNow::No);
        }
    }

    #[test]
    fn a_malformed_request_names_the_field() {
        let body = json!({"model": "auto", "messages": "not a list"});
        let error = parse(
            Api::Chat,
            &Bytes::from(body.to_string()),
            &HeaderMap::new(),
            &RequestTrace::untraced(None),
            ChatFormNow::No,
        )
        .err();
        let error = error.expect("messages must be a list");
        assert_eq!(error.status.as_u16(), 400);
        assert!(error.body.error.param.is_some(), "{error:?}");
    }

    #[test]
    fn headers_are_read_as_name_value_pairs() {
        let mut headers = HeaderMap::new();
        headers.insert("x-tenant", HeaderValue::from_static("acme"));
        assert_eq!(header_pairs(&headers), [("x-tenant".into(), "acme".into())]);
    }
}
