//! The OpenAI wire format as the runtime needs it: the two proxied APIs, error bodies and the
//! usage evidence that upstream answers carry.
//!
//! Both the simulator and the routing proxy speak this format, so its details live here once:
//! the error envelope clients parse (`{"error":{"message","type","param","code"}}`), and a
//! reader that pulls `usage` out of a JSON answer or an SSE stream without touching the bytes
//! that flow to the client. Absent evidence stays `None`: an upstream that does not report cached
//! tokens has not reported zero.

mod api;
mod error;
mod usage;

pub use api::Api;
pub use error::{ApiError, ErrorBody, ErrorDetail};
pub use usage::{Usage, UsageScanner};
