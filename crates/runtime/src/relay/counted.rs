//! The router's own token counts for an answer whose backend reports none, where the client's
//! API promises them: a Messages answer always has integer `input_tokens` and `output_tokens`,
//! and an OpenAI-compatible backend may send no `usage` at all.
//!
//! The counts are the documented estimate policies' `tokens(..)` falls back to (⌈UTF-8 bytes / 4⌉):
//! the input is the request's `history`, counted before it is sent; the output is the text and
//! tool-call arguments of the answer, added by the translation as it writes them. The relay
//! logs the same counts the client is given, and says so (`usage_estimated`).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::openai::Usage;

/// What the router counted of one request and its answer.
#[derive(Debug, Default)]
pub struct Counted {
    input_tokens: u64,
    /// Bytes of answer text and arguments seen so far; shared between the translation that
    /// writes the answer and the relay that logs it.
    output_bytes: AtomicU64,
}

impl Counted {
    /// Counts for a request whose `history` is `history`.
    pub fn of_request(history: &str) -> Counted {
        Counted {
            input_tokens: estimate(history.len() as u64),
            output_bytes: AtomicU64::new(0),
        }
    }

    /// Notes `bytes` more of the answer's text.
    pub fn add_output(&self, bytes: usize) {
        self.output_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub fn input_tokens(&self) -> u64 {
        self.input_tokens
    }

    pub fn output_tokens(&self) -> u64 {
        estimate(self.output_bytes.load(Ordering::Relaxed))
    }

    /// `usage` with what the backend left out (`prompt_tokens`, `completion_tokens`) counted by
    /// the router; whether any count is the router's.
    pub fn fill(&self, usage: Option<Usage>) -> (Usage, bool) {
        let usage = usage.unwrap_or_default();
        let estimated = usage.prompt_tokens.is_none() || usage.completion_tokens.is_none();
        let prompt = usage.prompt_tokens.unwrap_or(self.input_tokens);
        let completion = usage
            .completion_tokens
            .unwrap_or_else(|| self.output_tokens());
        let filled = Usage {
            prompt_tokens: Some(prompt),
            completion_tokens: Some(completion),
            total_tokens: usage
                .total_tokens
                .filter(|_| !estimated)
                .or(Some(prompt.saturating_add(completion))),
            cached_tokens: usage.cached_tokens,
        };
        (filled, estimated)
    }
}

/// ⌈bytes / 4⌉, as `src_compiler::text::tokens_estimate` counts.
fn estimate(bytes: u64) -> u64 {
    bytes.div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_counts_are_the_routers_and_reported_ones_stay() {
        let counted = Counted::of_request("what is the door code?");
        counted.add_output(5);
        counted.add_output(4);
        assert_eq!(
            (counted.input_tokens(), counted.output_tokens()),
            (6, 3),
            "22 and 9 bytes"
        );
        let (none, estimated) = counted.fill(None);
        assert!(estimated);
        assert_eq!(
            (
                none.prompt_tokens,
                none.completion_tokens,
                none.total_tokens
            ),
            (Some(6), Some(3), Some(9))
        );
        let reported = Usage {
            prompt_tokens: Some(40),
            completion_tokens: Some(7),
            total_tokens: Some(47),
            cached_tokens: Some(32),
        };
        assert_eq!(counted.fill(Some(reported)), (reported, false));
        let half = Usage {
            prompt_tokens: Some(40),
            ..Usage::default()
        };
        let (filled, estimated) = counted.fill(Some(half));
        assert!(estimated);
        assert_eq!(
            (filled.prompt_tokens, filled.completion_tokens),
            (Some(40), Some(3))
        );
    }
}
