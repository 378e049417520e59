//! What carries an answer to the client and reports the request once it ends, shared by every
//! step and door that answers.
//!
//! - [`body`]: the response bodies the router sends ([`ProxyBody`](body::ProxyBody)), and the
//!   [`Relay`](body::Relay) that streams an upstream answer through (usage evidence, idle
//!   timeout, cache fill, cooldown verdict, a translation's [`Rewrite`](body::Rewrite));
//! - [`completion`]: the request's one log line and its metrics, written exactly once;
//! - [`counted`]: the router's own token counts, for an answer whose backend reports none;
//! - [`rewriting`]: the one shape of a body that rewrites an answer on its way (a
//!   [`Rewriter`](rewriting::Rewriter) inside [`Rewritten`](rewriting::Rewritten)), and the
//!   event framing the stream rewriters share;
//! - [`restore`]: a redacted request's values put back into its answer, streams included;
//! - [`usage_strip`]: a streamed chat answer without the usage chunk the router asked for.
//!
//! It sits below the request pipeline and the translations (the Messages door, kept
//! `/v1/responses` answers), which build their answers from these bodies, and above the cache,
//! the cooldowns, the log and the telemetry it reports to.

pub mod body;
pub mod completion;
pub mod counted;
pub mod restore;
pub mod rewriting;
pub mod usage_strip;
