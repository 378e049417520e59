//! Any bytes as one Envoy `ext_proc` message (what tonic hands the processor for a gRPC frame):
//! refused by the protobuf decoder, or decoded into a message whose headers the processor reads
//! as Envoy sent them (the property lives with the workspace's proptest tests).
#![no_main]

#[path = "../../crates/runtime/tests/fuzz_support/mod.rs"]
mod runtime;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(problem) = runtime::check_extproc(data) {
        panic!("{problem}");
    }
});
