//! Any UTF-8 text as a `.sr` file: parse, check and format never panic, diagnostics point into
//! the text, and formatting is idempotent and keeps the tree (the property lives with the
//! workspace's proptest tests, which run it on every `cargo test`).
#![no_main]

#[path = "../../crates/compiler/tests/fuzz_support/policy.rs"]
mod policy;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // `src` reads policies as UTF-8 and refuses other bytes before parsing.
    if let Ok(text) = std::str::from_utf8(data) {
        if let Err(problem) = policy::check_text(text) {
            panic!("{problem}");
        }
    }
});
