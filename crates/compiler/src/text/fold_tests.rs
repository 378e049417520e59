//! Folding against a plain reference, and the evasions that folding exists to defeat: a phrase
//! stays found however its text is disguised with hidden characters, compatibility forms,
//! accents, look-alike letters or case.

use super::confusables::{lookalike, TABLE};
use super::fold::{fold, is_hidden, unhide};
use super::PhraseSet;
use proptest::prelude::*;
use unicode_normalization::char::{decompose_canonical, is_combining_mark};
use unicode_normalization::UnicodeNormalization;

/// The fold written as the plain composition of its documented steps, with no shortcut.
fn reference(text: &str) -> String {
    let mut out = String::new();
    let visible: String = text.chars().filter(|&c| !is_hidden(c)).collect();
    for c in visible.nfkc().filter(|&c| !is_hidden(c)) {
        let lower: Vec<char> = match c {
            'ß' | 'ẞ' => vec!['s', 's'],
            'ς' => vec!['σ'],
            'ſ' => vec!['s'],
            'µ' => vec!['μ'],
            'İ' => vec!['i'],
            _ => c.to_lowercase().collect(),
        };
        for l in lower {
            let mut pieces = Vec::new();
            if (0xAC00..=0xD7A3).contains(&u32::from(l)) {
                pieces.push(l);
            } else {
                decompose_canonical(l, |d| pieces.push(d));
            }
            for d in pieces {
                if is_combining_mark(d) {
                    if !out
                        .chars()
                        .last()
                        .is_some_and(|p| p.is_ascii_alphanumeric())
                    {
                        out.push(d);
                    }
                } else {
                    out.push_str(lookalike(d).unwrap_or(&d.to_string()));
                }
            }
        }
    }
    out
}

/// Text from where the steps differ: ASCII and its controls, case, accents, compatibility
/// forms, hidden characters, look-alikes, Hangul, Han, Devanagari with its vowel marks.
fn text_strategy() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "a", "Q", "z", " ", "\t", "\0", "\u{7f}", "1", "é", "e\u{301}", "\u{301}", "É", "ß", "İ",
        "ı", "Σ", "ς", "ﬁ", "ｉ", "𝐢", "\u{200b}", "\u{200d}", "\u{ad}", "\u{feff}", "\u{202e}",
        "\u{fe0f}", "о", "О", "а", "ν", "한", "字", "कि", "\u{a0}", "\u{85}", "㎏",
    ]);
    prop::collection::vec(pieces, 0..20).prop_map(|v| v.concat())
}

/// A disguise for one ASCII letter of a phrase: as it is, upper case, fullwidth, with a hidden
/// character after it, accented, or a look-alike from another script.
fn disguise(c: char, how: u8) -> String {
    let lower = c.to_ascii_lowercase();
    match how % 6 {
        0 => lower.to_string(),
        1 => lower.to_ascii_uppercase().to_string(),
        2 => char::from_u32(u32::from(lower) - u32::from('a') + 0xFF41)
            .map_or(lower.to_string(), String::from),
        3 => format!("{lower}\u{200b}"),
        4 => format!("{lower}\u{301}"),
        _ => TABLE
            .iter()
            .find(|&&(from, ascii)| ascii == lower.to_string() && from.is_lowercase())
            .map_or(lower.to_string(), |&(from, _)| from.to_string()),
    }
}

#[test]
fn hidden_characters_and_controls_are_removed() {
    assert_eq!(fold("a\u{0}b\u{7f}c\u{1b}d"), "abcd");
    assert_eq!(fold("A\u{200b}B"), "ab");
    // Whitespace controls stay: phrase matching treats them as spaces.
    assert_eq!(fold("a\tb\nc"), "a\tb\nc");
    assert_eq!(unhide("ex\u{200b}fil\u{0}trate"), "exfiltrate");
    assert_eq!(unhide("ＣＡＳＥ"), "CASE");
    assert!(matches!(
        unhide("plain text"),
        std::borrow::Cow::Borrowed(_)
    ));
    assert!(matches!(unhide("ещё"), std::borrow::Cow::Borrowed(_)));
}

#[test]
fn inert_text_is_borrowed() {
    for text in ["already lower", "你好 世界", "한국어", "κ"] {
        assert!(
            matches!(fold(text), std::borrow::Cow::Borrowed(_)),
            "{text}"
        );
    }
}

proptest! {
    #[test]
    fn fold_is_its_reference(text in text_strategy()) {
        prop_assert_eq!(fold(&text).into_owned(), reference(&text));
    }

    #[test]
    fn fold_is_idempotent(text in text_strategy()) {
        let once = fold(&text).into_owned();
        prop_assert_eq!(fold(&once).into_owned(), once);
    }

    #[test]
    fn ascii_fold_is_its_reference(text in "[ -~\t\n\u{0}-\u{1f}\u{7f}]{0,30}") {
        prop_assert_eq!(fold(&text).into_owned(), reference(&text));
    }

    #[test]
    fn a_disguised_phrase_is_still_found(
        words in prop::collection::vec("[a-z]{2,8}", 1..4),
        disguises in prop::collection::vec(any::<u8>(), 32),
        prefix in text_strategy(),
    ) {
        let phrase = words.join(" ");
        let mut disguised = String::new();
        for (i, c) in phrase.chars().enumerate() {
            if c == ' ' {
                disguised.push_str(["\u{a0}", "  ", "\n", " "][i % 4]);
            } else {
                disguised.push_str(&disguise(c, disguises[i % disguises.len()]));
            }
        }
        let text = format!("{prefix} {disguised}\u{200d} tail");
        prop_assert!(PhraseSet::new(std::slice::from_ref(&phrase)).contains(&text), "{text:?}");
    }
}
