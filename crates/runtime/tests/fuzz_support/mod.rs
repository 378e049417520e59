//! The properties the runtime's readers of untrusted bytes must have, shared by the proptest
//! tests (`fuzz_readers.rs`, on every `cargo test`) and the coverage-guided fuzz targets
//! (`fuzz/fuzz_targets/{request,sse}.rs`), so both search for the same failures.
//!
//! - [`check_intake`]: any bytes as a chat, responses or Messages body are a request or a 4xx
//!   answer, and the server's reading agrees with the compiler's (a Messages body's chat form
//!   too, made from the borrowed tree the server reads it into), and a Responses body's raw
//!   top level ([`check_turn`]: `store`, `previous_response_id`, the input items and the
//!   expanded body spliced from them) agrees with the same body read into a `Value`;
//! - [`check_stream`]: any bytes as an upstream event stream, cut into any pieces, give the
//!   same usage, `[DONE]` and event counts as the same bytes in one piece, the same Messages
//!   events when translated (each a named event with JSON data), and the cache's assembler of
//!   streamed answers reads them without panicking;
//! - [`check_extproc`]: any bytes as an Envoy `ext_proc` message are refused by the protobuf
//!   decoder or decoded into a message whose headers the processor reads as Envoy sent them.

use hyper::header::HeaderMap;
use serde_json::{json, Value};
use src_compiler::request::RequestView;
use src_runtime::anthropic::stream::StreamTranslator;
use src_runtime::anthropic::to_chat::ChatForm;
use src_runtime::cache::assemble::chat_completion;
use src_runtime::openai::{Api, UsageScanner};
use src_runtime::pipeline::intake;
use src_runtime::responses_state::turn::TurnBody;

/// Checks [`intake::parse`] on `bytes` for every API, and [`check_turn`].
pub fn check_intake(bytes: &[u8]) -> Result<(), String> {
    let headers = HeaderMap::new();
    let value = serde_json::from_slice::<serde_json::Value>(bytes).ok();
    check_turn(bytes, value.as_ref())?;
    for api in [Api::Chat, Api::Responses, Api::Messages] {
        let direct = value.as_ref().map(|v| match api {
            Api::Chat => RequestView::from_chat(v, &[]),
            Api::Responses => RequestView::from_responses(v, &[]),
            Api::Messages => RequestView::from_messages(v, &[]),
        });
        let trace = src_runtime::otel::RequestTrace::untraced(None);
        let body = bytes::Bytes::copy_from_slice(bytes);
        let chat_form = match api {
            Api::Messages => intake::ChatFormNow::Yes,
            Api::Chat | Api::Responses => intake::ChatFormNow::No,
        };
        match (
            intake::parse(api, &body, &headers, &trace, chat_form),
            direct,
        ) {
            (Ok((parsed, view)), Some(Ok(direct))) => {
                // The chat form is looked at before the tree: asked first, it would be made
                // from the `Value` rather than compared with it.
                let form = (api == Api::Messages).then(|| parsed.chat_form().clone());
                let direct_form = match (api, value.as_ref()) {
                    (Api::Messages, Some(value)) => Some(ChatForm::new(value)),
                    _ => None,
                };
                if form != direct_form {
                    return Err(format!("{api:?}: the server translates another request"));
                }
                if Some(parsed.tree()) != value.as_ref() || view != direct {
                    return Err(format!("{api:?}: the server reads another request"));
                }
            }
            (Err(e), direct @ (None | Some(Err(_)))) => {
                if !e.status.is_client_error() {
                    return Err(format!("{api:?}: refused with {}", e.status));
                }
                // The refusal is the `Value` reader's, whichever tree the intake read.
                let expected = match (direct, serde_json::from_slice::<serde_json::Value>(bytes)) {
                    (Some(Err(err)), _) => err.to_string(),
                    (_, Err(err)) => {
                        src_runtime::openai::ApiError::invalid_json(err)
                            .body
                            .error
                            .message
                    }
                    (_, Ok(_)) => String::new(),
                };
                if e.body.error.message != expected {
                    return Err(format!(
                        "{api:?}: refused with {:?}, the compiler with {expected:?}",
                        e.body.error.message
                    ));
                }
            }
            (parsed, direct) => {
                return Err(format!(
                    "{api:?}: the server says {:?}, the compiler {direct:?}",
                    parsed.map(|(_, view)| view.prompt)
                ))
            }
        }
    }
    Ok(())
}

/// A Responses body's raw top level ([`TurnBody`]) reads what its `Value` (`value`, `None` when
/// `bytes` are no JSON) holds, serde_json's marker keys aside: the same `store` and `previous_response_id`, the same input items
/// (a string as one user message), and an expanded body that is the `Value` without
/// `previous_response_id` and with `input` the items given.
pub fn check_turn(bytes: &[u8], value: Option<&Value>) -> Result<(), String> {
    // serde_json's own marker keys make a `Value` read a map as what it stands for; the raw
    // reader reads the object as written, as the borrowed tree leaves such bodies to a `Value`.
    let marker = b"$serde_json::private::";
    if bytes.windows(marker.len()).any(|w| w == marker) {
        return Ok(());
    }
    let body = TurnBody::parse(bytes);
    let (body, object) = match (body, value.and_then(Value::as_object)) {
        (None, None) => return Ok(()),
        (Some(body), Some(object)) => (body, object),
        (body, _) => {
            return Err(format!(
                "the turn reader {} a body the Value reads as {value:?}",
                if body.is_some() { "reads" } else { "refuses" }
            ))
        }
    };
    let store = object.get("store").and_then(Value::as_bool);
    if body.store() != store {
        return Err(format!("store: {:?} against {store:?}", body.store()));
    }
    let previous = object
        .get("previous_response_id")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|id| !id.is_empty());
    if body.previous_response_id().as_deref() != previous {
        return Err(format!(
            "previous_response_id: {:?} against {previous:?}",
            body.previous_response_id()
        ));
    }
    let expected: Vec<Value> = match object.get("input") {
        Some(Value::String(text)) => vec![json!({"role": "user", "content": text})],
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    };
    let items = body.input_items();
    let read: Vec<Value> = items
        .iter()
        .map(|item| serde_json::from_str(item.get()).unwrap_or(Value::Null))
        .collect();
    if read != expected {
        return Err(format!("input items: {read:?} against {expected:?}"));
    }
    let mut expanded = object.clone();
    expanded.remove("previous_response_id");
    expanded.insert("input".into(), Value::Array(expected));
    let spliced = serde_json::from_slice::<Value>(&body.expanded(&items));
    if spliced.as_ref().ok() != Some(&Value::Object(expanded.clone())) {
        return Err(format!("expanded: {spliced:?} against {expanded:?}"));
    }
    Ok(())
}

/// What a scanner concluded about a stream.
#[derive(Debug, PartialEq, Eq)]
pub struct Reading {
    pub usage: Option<src_runtime::openai::Usage>,
    pub done: bool,
    pub events: u64,
    pub malformed: u64,
}

/// Scans `pieces` in order, then ends the stream.
pub fn scan<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> Reading {
    let mut scanner = UsageScanner::new();
    for piece in pieces {
        scanner.feed(piece);
    }
    scanner.finish();
    Reading {
        usage: scanner.usage(),
        done: scanner.saw_done(),
        events: scanner.events(),
        malformed: scanner.malformed_events(),
    }
}

/// The Messages events `pieces` of a chat stream translate to, the stream then ended.
pub fn translate<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut translator = StreamTranslator::new(Default::default());
    let mut out = Vec::new();
    for piece in pieces {
        out.extend_from_slice(&translator.feed(piece));
    }
    out.extend_from_slice(&translator.finish());
    out
}

/// Every event of a translated stream: `event: NAME`, then `data:` a JSON object whose `type`
/// is NAME.
fn well_formed_events(out: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(out).map_err(|e| format!("translated to non-UTF-8: {e}"))?;
    for event in text.split_terminator("\n\n") {
        let (name, data) = event
            .strip_prefix("event: ")
            .and_then(|e| e.split_once("\ndata: "))
            .ok_or_else(|| format!("a malformed event: {event:?}"))?;
        let data: serde_json::Value =
            serde_json::from_str(data).map_err(|e| format!("event data is not JSON: {e}"))?;
        if data["type"] != name {
            return Err(format!("event `{name}` carries {data}"));
        }
    }
    Ok(())
}

/// `stream` cut after every `sizes[i]` bytes in turn (sizes cycle; a zero counts as one).
pub fn pieces<'a>(stream: &'a [u8], sizes: &[u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = stream;
    let mut sizes = sizes.iter().cycle();
    while !rest.is_empty() {
        let size = sizes.next().map_or(rest.len(), |s| usize::from(*s).max(1));
        let (piece, tail) = rest.split_at(size.min(rest.len()));
        out.push(piece);
        rest = tail;
    }
    out
}

/// Checks the stream readers on `stream` cut by `sizes`.
pub fn check_stream(stream: &[u8], sizes: &[u8]) -> Result<(), String> {
    let whole = scan([stream]);
    let cut = scan(pieces(stream, sizes));
    if cut != whole {
        return Err(format!("cut by {sizes:?}: {cut:?}, whole: {whole:?}"));
    }
    // Byte by byte is the hardest cut: every CR, LF and `data:` prefix is split.
    if stream.len() <= 4096 {
        let bytes = scan(stream.chunks(1));
        if bytes != whole {
            return Err(format!("byte by byte: {bytes:?}, whole: {whole:?}"));
        }
    }
    let translated = translate([stream]);
    if translate(pieces(stream, sizes)) != translated {
        return Err(format!(
            "translated cut by {sizes:?}: other events than whole"
        ));
    }
    well_formed_events(&translated)?;
    if let Some(answer) = chat_completion(stream) {
        if serde_json::from_slice::<serde_json::Value>(&answer).is_err() {
            return Err("an assembled answer that is not JSON".into());
        }
    }
    Ok(())
}

/// Checks the decoding of `bytes` as one `ProcessingRequest` (what tonic hands the processor for
/// each gRPC frame) and [`wire::read_headers`] on every header map it carries: pseudo-headers go
/// to their fields (`:path` without its query), every other entry that `http` can hold is kept
/// (a value from `raw_value`, else `value`) and no other, and a decoded message encodes back to
/// the same message.
pub fn check_extproc(bytes: &[u8]) -> Result<(), String> {
    use envoy_types::pb::envoy::service::ext_proc::v3::processing_request::Request as Message;
    use envoy_types::pb::envoy::service::ext_proc::v3::ProcessingRequest;
    use prost::Message as _;
    use src_runtime::extproc::wire;

    let Ok(message) = ProcessingRequest::decode(bytes) else {
        return Ok(());
    };
    let again = ProcessingRequest::decode(message.encode_to_vec().as_slice())
        .map_err(|e| format!("a decoded message does not decode once encoded: {e}"))?;
    if again != message {
        return Err("a decoded message encodes to another message".into());
    }
    let maps = match &message.request {
        Some(Message::RequestHeaders(h) | Message::ResponseHeaders(h)) => vec![h.headers.as_ref()],
        Some(Message::RequestTrailers(t) | Message::ResponseTrailers(t)) => {
            vec![t.trailers.as_ref()]
        }
        _ => Vec::new(),
    };
    for map in maps {
        let read = wire::read_headers(map);
        if read.path.contains('?') {
            return Err(format!("`:path` kept its query: {:?}", read.path));
        }
        let kept = map
            .into_iter()
            .flat_map(|m| &m.headers)
            .filter(|h| !h.key.starts_with(':'))
            .filter(|h| {
                let value: &[u8] = if h.raw_value.is_empty() {
                    h.value.as_bytes()
                } else {
                    &h.raw_value
                };
                hyper::header::HeaderName::from_bytes(h.key.as_bytes()).is_ok()
                    && hyper::header::HeaderValue::from_bytes(value).is_ok()
            })
            .count();
        if read.map.len() != kept {
            return Err(format!(
                "{} headers read of the {kept} `http` can hold",
                read.map.len()
            ));
        }
    }
    Ok(())
}
