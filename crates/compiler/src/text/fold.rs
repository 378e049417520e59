//! Folding: the one form in which phrase lists and request texts are compared, and the
//! character classes that phrase matching and word counting rely on.
//!
//! Matching runs on folded text only (phrases are folded once, at policy load; the request text
//! once per call), so the length changes of normalisation never need an offset map. A fold is
//! built to leave an attacker nothing between a phrase guard and the words it guards:
//!
//! 1. compatibility normalisation (NFKC): fullwidth `ｉｇｎｏｒｅ`, mathematical `𝐢𝐠𝐧𝐨𝐫𝐞`,
//!    ligatures and no-break spaces become the plain letters and spaces they stand for;
//! 2. hidden characters removed: Unicode's default-ignorable code points (zero-width space and
//!    joiners, word joiner, soft hyphen, byte-order mark, bidirectional controls, variation
//!    selectors) and control characters other than whitespace (NUL among them);
//! 3. caseless: Unicode lowercasing plus the full-folding cases that plain lowercasing leaves
//!    apart (`ß`/`ẞ` → `ss`, final `ς` → `σ`, long `ſ` → `s`, micro `µ` → `μ`, `İ` → `i`);
//! 4. accents off Latin letters: letters are decomposed and a combining mark that follows an
//!    ASCII letter is dropped (`ígnore` is `ignore`); marks on other scripts' letters, which
//!    carry vowels in Devanagari or Thai, stay;
//! 5. look-alikes read as the ASCII they imitate: a letter that Unicode's confusables table
//!    (UTS #39) lists as a look-alike of ASCII, such as Cyrillic `о` or Greek `ο` for `o`, is
//!    read as that ASCII ([`super::confusables`]). Case folds first, as UTS #39 asks for caseless
//!    matching, so an upper-case letter is read by its lower-case form's look-alike.
//!
//! ASCII text needs none of 1, 4 and 5: it costs one vectorised pass and is borrowed unchanged
//! when it has no upper-case letter and no control character. Other text is borrowed when no
//! character of it changes; otherwise it is rebuilt in one pass. The script tables are
//! hand-written ranges because the standard library exposes neither the `Script` property nor
//! general categories, and only a yes/no answer per character is needed.

use super::confusables::lookalike;
use std::borrow::Cow;
use unicode_normalization::char::{decompose_canonical, decompose_compatible, is_combining_mark};
use unicode_normalization::{IsNormalized, UnicodeNormalization};

/// Folds `text` for matching (the steps above). Dotless `ı` is read as `i` (a look-alike);
/// telling Turkish `I` apart would need the text's language, which a phrase list does not carry.
///
/// Borrows when nothing changes, which is the common case for prompts already in lowercase.
pub fn fold(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        // A fold rather than `any`, so the check has no exit per byte and runs vectorised.
        let (upper, hidden) = text.bytes().fold((false, false), |(upper, hidden), b| {
            (upper | b.is_ascii_uppercase(), hidden | is_hidden_ascii(b))
        });
        if hidden {
            return Cow::Owned(
                text.bytes()
                    .filter(|&b| !is_hidden_ascii(b))
                    .map(|b| char::from(b.to_ascii_lowercase()))
                    .collect(),
            );
        }
        if upper {
            return Cow::Owned(text.to_ascii_lowercase());
        }
        return Cow::Borrowed(text);
    }
    if text.chars().all(is_inert) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    let mut push = |c: char| {
        if c.is_ascii() {
            if !is_hidden_ascii(c as u8) {
                out.push(c.to_ascii_lowercase());
            }
        } else if !is_hidden(c) {
            fold_case(c, |lower| push_letters(lower, &mut out));
        }
    };
    // Most text is already in NFKC (the quick check answers from a table, no buffering), and
    // then normalising would change nothing but the speed.
    let hidden = text.chars().any(is_hidden);
    if !hidden && unicode_normalization::is_nfkc_quick(text.chars()) == IsNormalized::Yes {
        text.chars().for_each(&mut push);
    } else {
        // Hidden characters go before normalising too, so that one between a letter and its
        // accent cannot keep the two from composing.
        text.chars()
            .filter(|&c| !is_hidden(c))
            .nfkc()
            .for_each(&mut push);
    }
    Cow::Owned(out)
}

/// The text as regexes read it: steps 1 and 2 of a fold (NFKC, hidden characters removed), case
/// and letters as written, since a regex states its own case rules and character classes.
/// Borrowed when that changes nothing.
pub fn unhide(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        if !has_hidden_ascii(text) {
            return Cow::Borrowed(text);
        }
        return Cow::Owned(text.chars().filter(|&c| !is_hidden(c)).collect());
    }
    let normal = unicode_normalization::is_nfkc_quick(text.chars()) == IsNormalized::Yes;
    if normal && !text.chars().any(is_hidden) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .filter(|&c| !is_hidden(c))
            .nfkc()
            .filter(|&c| !is_hidden(c))
            .collect(),
    )
}

/// Whether an ASCII text holds a byte that [`fold`] removes, so that a matcher which ignores
/// ASCII case by itself can still search an ASCII text as it is when this is false.
pub fn has_hidden_ascii(text: &str) -> bool {
    text.bytes()
        .fold(false, |hidden, b| hidden | is_hidden_ascii(b))
}

/// An ASCII control character other than whitespace (tab, line feed, vertical tab, form
/// feed, carriage return): NUL, escape, delete and the like.
fn is_hidden_ascii(b: u8) -> bool {
    (b < 0x20 && !(0x09..=0x0D).contains(&b)) || b == 0x7F
}

/// Characters [`fold`] removes: default-ignorable code points and non-whitespace controls.
pub fn is_hidden(c: char) -> bool {
    if c.is_ascii() {
        return is_hidden_ascii(c as u8);
    }
    (c.is_control() && !c.is_whitespace()) || is_default_ignorable(c)
}

/// Unicode's `Default_Ignorable_Code_Point` (DerivedCoreProperties.txt, Unicode 16): what a
/// renderer shows as nothing. Held to the `unicode-security` crate's table by a test.
fn is_default_ignorable(c: char) -> bool {
    matches!(u32::from(c),
        0x00AD | 0x034F | 0x061C | 0x115F..=0x1160 | 0x17B4..=0x17B5 | 0x180B..=0x180F
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F
        | 0xFEFF | 0xFFA0 | 0xFFF0..=0xFFF8 | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A
        | 0xE0000..=0xE0FFF)
}

/// A non-ASCII character that [`fold`] leaves as it is.
fn is_inert(c: char) -> bool {
    if c.is_ascii() {
        return !c.is_ascii_uppercase() && !is_hidden_ascii(c as u8);
    }
    if is_hangul_syllable(c) {
        return true;
    }
    let mut decomposes = false;
    decompose_compatible(c, |d| decomposes |= d != c);
    !decomposes
        && !is_hidden(c)
        && !is_combining_mark(c)
        && !changes_when_folded(c)
        && lookalike(c).is_none()
}

/// Hangul syllables are NFKC's composed form; decomposing them into jamo would only make the
/// folded text longer.
fn is_hangul_syllable(c: char) -> bool {
    matches!(u32::from(c), 0xAC00..=0xD7A3)
}

/// Steps 4 and 5 for one case-folded character: its canonical decomposition, marks after an
/// ASCII letter dropped, look-alikes replaced by their ASCII.
fn push_letters(c: char, out: &mut String) {
    if c.is_ascii() {
        out.push(c);
        return;
    }
    let mut each = |d: char| {
        if is_combining_mark(d) {
            if !out.ends_with(|last: char| last.is_ascii_alphanumeric()) {
                out.push(d);
            }
        } else if let Some(ascii) = lookalike(d) {
            out.push_str(ascii);
        } else {
            out.push(d);
        }
    };
    if is_hangul_syllable(c) {
        each(c);
    } else {
        decompose_canonical(c, each);
    }
}

/// Calls `f` with each character of `c`'s case fold (the full-folding cases of step 3).
fn fold_case(c: char, mut f: impl FnMut(char)) {
    match c {
        'ß' | 'ẞ' => {
            f('s');
            f('s');
        }
        'ς' => f('σ'),
        'ſ' => f('s'),
        'µ' => f('μ'),
        'İ' => f('i'),
        _ => c.to_lowercase().for_each(f),
    }
}

fn changes_when_folded(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_uppercase();
    }
    if matches!(c, 'ß' | 'ς' | 'ſ' | 'µ') {
        return true;
    }
    let mut lower = c.to_lowercase();
    lower.next() != Some(c) || lower.next().is_some()
}

/// Characters of scripts written without spaces between words. A phrase edge in these scripts
/// needs no word boundary (there is none to find), and such characters never form one.
pub fn is_unspaced(c: char) -> bool {
    let u = u32::from(c);
    if u < 0x0E00 {
        return false;
    }
    is_han_or_kana(c)
        || matches!(u,
            0x0E00..=0x0E7F     // Thai
            | 0x0E80..=0x0EFF   // Lao
            | 0x0F00..=0x0FFF   // Tibetan
            | 0x1000..=0x109F   // Myanmar
            | 0x1780..=0x17FF   // Khmer
            | 0x1950..=0x19DF   // Tai Le, New Tai Lue
            | 0x19E0..=0x19FF   // Khmer symbols
            | 0x1A20..=0x1AAF   // Tai Tham
            | 0x1B00..=0x1B7F   // Balinese
            | 0x3100..=0x312F   // Bopomofo
            | 0x31A0..=0x31BF   // Bopomofo extended
            | 0xA000..=0xA4CF   // Yi
            | 0xA980..=0xA9FF   // Javanese, Myanmar extended B
            | 0xAA60..=0xAADF   // Myanmar extended A, Tai Viet
        )
}

/// Han ideographs and kana: each such character counts as one word.
pub fn is_han_or_kana(c: char) -> bool {
    matches!(u32::from(c),
        0x3005..=0x3007         // 々 〆 〇
        | 0x3021..=0x3029       // Hangzhou numerals
        | 0x3031..=0x3035       // kana repeat marks
        | 0x303B..=0x303C
        | 0x3040..=0x30FF       // Hiragana, Katakana
        | 0x31F0..=0x31FF       // Katakana phonetic extensions
        | 0x3400..=0x4DBF       // CJK extension A
        | 0x4E00..=0x9FFF       // CJK unified ideographs
        | 0xF900..=0xFAFF       // CJK compatibility ideographs
        | 0xFF66..=0xFF9F       // halfwidth Katakana
        | 0x1B000..=0x1B16F     // Kana supplement and extensions
        | 0x20000..=0x323AF     // CJK extensions B to H, compatibility supplement
    )
}

/// Whether `c` continues a word of a space-separated script: letters, digits, `_` (as in
/// `snake_case`, matching UAX #29 and regex `\w`), combining marks (a decomposed `é` is still
/// inside its word) and the zero-width joiners used inside Persian and Indic words.
pub fn is_word_char(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric() || c == '_';
    }
    if is_unspaced(c) {
        return false;
    }
    c.is_alphanumeric()
        || matches!(u32::from(c),
            0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF
            | 0xFE20..=0xFE2F | 0x200C..=0x200D)
}
