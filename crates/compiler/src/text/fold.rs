//! Case folding and the character classes that phrase matching and word counting rely on.
//!
//! Matching runs on folded text only (phrases are folded once, at policy load; the request text
//! once per call), so the length changes of Unicode lowercasing never need an offset map. The
//! script tables are hand-written ranges because the standard library exposes neither the
//! `Script` property nor general categories, and only a yes/no answer per character is needed.

use std::borrow::Cow;

/// Folds `text` for caseless comparison: Unicode lowercasing plus the full-folding cases that
/// plain lowercasing leaves apart (`ß`/`ẞ` → `ss`, final `ς` → `σ`, long `ſ` → `s`, micro
/// `µ` → `μ`) and `İ` → `i` without the combining dot that lowercasing would add, so
/// `İstanbul` matches `istanbul`. Dotless `ı` stays distinct: telling Turkish `I` apart
/// needs the text's language, which a phrase list does not carry.
///
/// Borrows when nothing changes, which is the common case for prompts already in lowercase.
pub fn fold(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        // A fold rather than `any`, so the check has no exit per byte and runs vectorised.
        if text
            .bytes()
            .fold(false, |upper, b| upper | b.is_ascii_uppercase())
        {
            return Cow::Owned(text.to_ascii_lowercase());
        }
        return Cow::Borrowed(text);
    }
    let Some(first) = text.char_indices().find(|&(_, c)| changes_when_folded(c)) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    out.push_str(&text[..first.0]);
    for c in text[first.0..].chars() {
        push_folded(c, &mut out);
    }
    Cow::Owned(out)
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

fn push_folded(c: char, out: &mut String) {
    match c {
        'ß' | 'ẞ' => out.push_str("ss"),
        'ς' => out.push('σ'),
        'ſ' => out.push('s'),
        'µ' => out.push('μ'),
        'İ' => out.push('i'),
        _ if c.is_ascii() => out.push(c.to_ascii_lowercase()),
        _ => out.extend(c.to_lowercase()),
    }
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
