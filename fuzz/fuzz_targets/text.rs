//! Any UTF-8 text through folding and phrase matching: never a panic, folding idempotent, a
//! phrase from the text's own words found in it (the property lives with the workspace's
//! proptest tests, which run it on every `cargo test`).
#![no_main]

#[path = "../../crates/compiler/tests/fuzz_support/text.rs"]
mod text;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(input) = std::str::from_utf8(data) {
        if let Err(problem) = text::check_text(input) {
            panic!("{problem}");
        }
    }
});
