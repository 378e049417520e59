//! Any bytes as an upstream event stream, cut into pieces: the usage reader gives the same
//! answer however the bytes are cut, and the stream assembler never panics (the property lives
//! with the workspace's proptest tests).
//!
//! The first eight bytes of an input are the sizes of the pieces (in turn, cycling); the rest
//! is the stream.
#![no_main]

#[path = "../../crates/runtime/tests/fuzz_support/mod.rs"]
mod runtime;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let (sizes, stream) = data.split_at(data.len().min(8));
    if let Err(problem) = runtime::check_stream(stream, sizes) {
        panic!("{problem}");
    }
});
