//! Fuzzing text folding: any text, and text built from the characters that folding rewrites
//! (hidden characters, compatibility forms, accents, look-alikes), keeps the properties of
//! `fuzz_support/text.rs`. Inputs: the coverage-guided target's kept corpus (`fuzz/corpus/text/`)
//! and generated text. `PROPTEST_CASES` raises the case count for a long search.

mod fuzz_support;

use fuzz_support::corpus;
use fuzz_support::text::check_text;
use proptest::prelude::*;

const PIECES: &[&str] = &[
    "ignore",
    "Previous",
    " ",
    "\u{a0}",
    "\t",
    "\u{0}",
    "\u{200b}",
    "\u{200d}",
    "\u{ad}",
    "\u{2060}",
    "\u{feff}",
    "\u{202e}",
    "\u{fe0f}",
    "\u{301}",
    "\u{308}",
    "é",
    "ß",
    "İ",
    "ı",
    "ς",
    "Σ",
    "о",
    "О",
    "а",
    "ν",
    "ｉｇｎｏｒｅ",
    "𝐢𝐠𝐧",
    "ﬁ",
    "㎏",
    "字",
    "한",
    "कि",
    "ไ",
    "🔥",
];

#[test]
fn the_kept_corpus_holds() {
    for (path, bytes) in corpus::files(&corpus::root().join("fuzz/corpus/text"), None) {
        if let Ok(text) = std::str::from_utf8(&bytes) {
            if let Err(problem) = check_text(text) {
                panic!("{}: {problem}", path.display());
            }
        }
    }
}

proptest! {
    #[test]
    fn any_text(text in any::<String>()) {
        check_text(&text).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn text_made_of_what_folding_rewrites(pieces in prop::collection::vec(prop::sample::select(PIECES), 0..24)) {
        check_text(&pieces.concat()).map_err(TestCaseError::fail)?;
    }
}
