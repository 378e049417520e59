//! What an answer the gateway relays charges to its request's token and cost budgets: the
//! usage the answer reports, read from the response body when Envoy shows it to the processor
//! (`response_body_mode: STREAMED` or `BUFFERED`), else the router's estimate of the prompt,
//! charged when the exchange ends.
//!
//! The body is shown chunk by chunk and each chunk answered at once, unchanged, except that a
//! streamed chat answer whose usage the router asked for (the client did not) loses that extra
//! usage chunk ([`StripUsage`]), as it does through the proxy. Usage is found as the proxy finds
//! it: the last `usage` of a server-sent-events body ([`UsageScanner`]), or the `usage` of a
//! JSON answer, read whole up to [`MAX_JSON_BYTES`].

use bytes::Bytes;

use crate::budget::Charge;
use crate::openai::{Usage, UsageScanner};
use crate::relay::rewriting::Rewriter;
use crate::relay::usage_strip::StripUsage;

/// A JSON answer longer than this is not read for its usage (it is charged the estimate).
pub const MAX_JSON_BYTES: usize = 8 << 20;

/// An answer's body on its way through the gateway, and the charge it owes.
pub struct Metered {
    charge: Option<Charge>,
    /// The answer is an event stream (else one JSON document).
    events: bool,
    scanner: UsageScanner,
    json: Vec<u8>,
    /// A JSON answer over [`MAX_JSON_BYTES`]: not read.
    overlong: bool,
    /// The usage chunk the client did not ask for is taken out.
    strip: Option<StripUsage>,
}

impl Metered {
    /// Charges `charge` once the answer ends; `events` when the answer is an event stream,
    /// `strip` when its usage chunk was asked for by the router.
    pub fn new(charge: Charge, events: bool, strip: bool) -> Metered {
        Metered {
            charge: Some(charge),
            events,
            scanner: UsageScanner::new(),
            json: Vec::new(),
            overlong: false,
            strip: (strip && events).then(StripUsage::new),
        }
    }

    /// Reads one chunk of the answer; `Some` is what the client is sent instead of it.
    pub fn chunk(&mut self, bytes: &[u8], end_of_stream: bool) -> Option<Bytes> {
        if self.events {
            self.scanner.feed(bytes);
        } else if !self.overlong && self.json.len() + bytes.len() <= MAX_JSON_BYTES {
            self.json.extend_from_slice(bytes);
        } else {
            // Too long to read for usage: the estimate is charged.
            self.json = Vec::new();
            self.overlong = true;
        }
        let replaced = self.strip.as_mut().map(|strip| {
            let kept = strip.feed(&Bytes::copy_from_slice(bytes));
            if end_of_stream {
                let rest = strip.finish();
                [kept, rest].concat().into()
            } else {
                kept
            }
        });
        if end_of_stream {
            self.end();
        }
        replaced
    }

    /// The answer ended: its usage is charged, or the estimate when it reported none.
    pub fn end(&mut self) {
        let Some(charge) = self.charge.take() else {
            return;
        };
        let usage = if self.events {
            self.scanner.finish();
            self.scanner.usage()
        } else {
            Usage::from_body(&self.json)
        };
        let reported = usage.and_then(|u| {
            (u.prompt_tokens.is_some() || u.completion_tokens.is_some())
                .then(|| u.prompt_tokens.unwrap_or(0) + u.completion_tokens.unwrap_or(0))
        });
        let tokens = reported.unwrap_or(charge.estimate);
        charge.tokens(tokens);
    }
}

/// An answer whose end the processor did not see (Envoy showed no body, or the stream was
/// dropped) is charged the estimate.
impl Drop for Metered {
    fn drop(&mut self) {
        if let Some(charge) = self.charge.take() {
            let estimate = charge.estimate;
            charge.tokens(estimate);
        }
    }
}
