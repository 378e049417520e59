//! The APIs the router proxies (OpenAI's two and Anthropic's Messages), and what each is called
//! on the wire and in the log.
//!
//! It lives with the wire format rather than with the request path because the response cache
//! (its scopes and its stored answers) tells the two apart too.

/// The proxied APIs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Chat,
    Responses,
    /// Anthropic's `/v1/messages` (docs/anthropic.md).
    Messages,
}

impl Api {
    /// The `endpoint` of the log line.
    pub fn endpoint(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Responses => "responses",
            Api::Messages => "messages",
        }
    }

    /// The API as the failover machine knows it.
    pub fn wire(self) -> src_compiler::failover::Wire {
        match self {
            Api::Chat => src_compiler::failover::Wire::Chat,
            Api::Responses => src_compiler::failover::Wire::Responses,
            Api::Messages => src_compiler::failover::Wire::Messages,
        }
    }

    /// The path after the backend's `/v1`.
    pub fn suffix(self) -> &'static str {
        match self {
            Api::Chat => "/chat/completions",
            Api::Responses => "/responses",
            Api::Messages => "/messages",
        }
    }
}
