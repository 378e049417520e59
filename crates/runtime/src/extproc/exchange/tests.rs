//! The exchange driven message by message, as Envoy would, over a real snapshot and fakes.
