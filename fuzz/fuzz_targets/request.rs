//! Any bytes as a chat completions body and as a responses body: the compiler's reader and the
//! server's intake give a request (decided under the shipped example policies) or a 4xx, never
//! a panic (the properties live with the workspace's proptest tests).
#![no_main]

use std::sync::OnceLock;

#[path = "../../crates/compiler/tests/fuzz_support/request.rs"]
mod request;
#[path = "../../crates/runtime/tests/fuzz_support/mod.rs"]
mod runtime;

fn policies() -> &'static [src_compiler::CompiledPolicy] {
    static POLICIES: OnceLock<Vec<src_compiler::CompiledPolicy>> = OnceLock::new();
    POLICIES.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        [
            "examples/quickstart",
            "examples/guarded",
            "policies/production",
        ]
        .iter()
        .filter_map(|dir| request::compiled(&root.join(dir)))
        .collect()
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(problem) = request::check_body(data, policies()) {
        panic!("{problem}");
    }
    if let Err(problem) = runtime::check_intake(data) {
        panic!("{problem}");
    }
});
