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

    /// Reads one chunk of the answer; `Some` is what the client is sent instead of it (`None`
    /// when that is the chunk itself, which then need not travel back to the gateway).
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
        replaced.filter(|kept| kept.as_ref() != bytes)
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use src_compiler::hir::BudgetUnit;

    use super::*;
    use crate::budget::{BudgetLayer, BudgetStore, Counter, MemoryBudgets};

    fn counter() -> Counter {
        Counter {
            budget: "spend".into(),
            per: "t/tenant".into(),
            window_ms: 3_600_000,
        }
    }

    /// A charge of a `tokens` budget in `store`, with an estimate of 5.
    fn charge(store: &Arc<dyn BudgetStore>) -> Charge {
        let layer = BudgetLayer::default();
        let mut charge = Charge::of(&layer, store, &[(counter(), BudgetUnit::Tokens)])
            .expect("a tokens budget is charged");
        charge.estimate = 5;
        charge
    }

    /// What the store holds once the spawned charge has landed (or 0 after a while).
    async fn charged(store: &Arc<dyn BudgetStore>, layer_now: u64) -> f64 {
        for _ in 0..200 {
            let used = store.used(&counter(), layer_now).await.unwrap_or(0.0);
            if used > 0.0 {
                return used;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        0.0
    }

    fn now() -> u64 {
        BudgetLayer::default().now_ms()
    }

    #[tokio::test]
    async fn a_usage_chunk_split_across_chunks_is_taken_out_and_charged() {
        let store: Arc<dyn BudgetStore> = Arc::new(MemoryBudgets::default());
        let mut metered = Metered::new(charge(&store), true, true);
        let first =
            b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"choices\":[],\"us";
        let kept = metered.chunk(first, false);
        assert_eq!(
            kept.as_deref(),
            Some(&b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"[..]),
            "the incomplete event is held"
        );
        let last = b"age\":{\"prompt_tokens\":40,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n";
        let kept = metered.chunk(last, true);
        assert_eq!(kept.as_deref(), Some(&b"data: [DONE]\n\n"[..]));
        assert_eq!(charged(&store, now()).await, 42.0);
    }

    #[tokio::test]
    async fn an_answer_without_usage_or_unseen_is_charged_the_estimate() {
        let store: Arc<dyn BudgetStore> = Arc::new(MemoryBudgets::default());
        let mut metered = Metered::new(charge(&store), true, false);
        assert_eq!(
            metered.chunk(b"data: {\"choices\":[]}\n\ndata: [DONE]\n\n", true),
            None
        );
        assert_eq!(charged(&store, now()).await, 5.0);

        let store: Arc<dyn BudgetStore> = Arc::new(MemoryBudgets::default());
        drop(Metered::new(charge(&store), false, false));
        assert_eq!(charged(&store, now()).await, 5.0);
    }
}
