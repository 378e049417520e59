//! Anthropic's Messages API (`POST /v1/messages`) as one more front door over the routing
//! pipeline (docs/anthropic.md).
//!
//! A Messages request is read into the same request view as a chat completion (the compiler's
//! `RequestView::from_messages`) and decided by the same steps. Each candidate is then reached
//! in the API its backend declares (`api = openai|anthropic`): natively, or translated to chat
//! completions and back for OpenAI-only backends (NVIDIA Dynamo, vLLM, the simulator).
//!
//! - [`wire`]: header names, the error envelope, stop reasons and usage in Anthropic's terms;
//! - [`dialect`]: which form of the request each backend gets, and its headers;
//! - [`to_chat`]: the request as chat completions;
//! - [`from_chat`] and [`stream`]: a chat answer, whole or streamed, as Messages;
//! - [`translate`]: the relayed answer rewritten on its way to the client.
//!
//! The door itself is `door::messages`, above this module.

pub mod dialect;
pub mod from_chat;
pub mod stream;
pub mod to_chat;
pub mod translate;
pub mod wire;
