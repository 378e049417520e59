//! The `words` count of ASCII text, by the UAX #29 word-boundary rules written out for the ASCII
//! classes, so that the common case skips the general segmenter (several times the cost of a
//! phrase scan on a long prompt, and `bm25` counts words on every call).
//!
//! In ASCII the rules that can join two characters are few: letters and digits join each other
//! (WB5, WB8–WB10), `_` joins letters, digits and itself (WB13a/b), `:` joins two letters
//! (MidLetter, WB6/7), `.` and `'` join two letters or two digits (MidNumLet and Single_Quote,
//! WB6/7, WB11/12), and `,` and `;` join two digits (MidNum, WB11/12). Every other boundary
//! breaks, and only segments with a letter or digit are words. A property test holds this to
//! the `unicode-segmentation` crate.

#[derive(Debug, Clone, Copy, PartialEq)]
enum Class {
    Letter,
    Digit,
    Underscore,
    /// `:`
    MidLetter,
    /// `.` and `'`
    MidNumLet,
    /// `,` and `;`
    MidNum,
    Other,
}

fn class(b: u8) -> Class {
    match b {
        b'a'..=b'z' | b'A'..=b'Z' => Class::Letter,
        b'0'..=b'9' => Class::Digit,
        b'_' => Class::Underscore,
        b':' => Class::MidLetter,
        b'.' | b'\'' => Class::MidNumLet,
        b',' | b';' => Class::MidNum,
        _ => Class::Other,
    }
}

/// The number of UAX #29 words of ASCII `text` (segments holding a letter or a digit).
pub(super) fn count(text: &[u8]) -> usize {
    use Class::*;
    let at = |i: usize| text.get(i).copied().map_or(Other, class);
    let mut words = 0usize;
    let mut has_alnum = false;
    for i in 0..text.len() {
        let y = at(i);
        let joined = i > 0 && {
            let x = at(i - 1);
            match (x, y) {
                (Letter | Digit, Letter | Digit) => true,
                (Letter | Digit | Underscore, Underscore) => true,
                (Underscore, Letter | Digit) => true,
                (Letter, MidLetter | MidNumLet) => at(i + 1) == Letter,
                (MidLetter | MidNumLet, Letter) => i >= 2 && at(i - 2) == Letter,
                (Digit, MidNum | MidNumLet) => at(i + 1) == Digit,
                (MidNum | MidNumLet, Digit) => i >= 2 && at(i - 2) == Digit,
                _ => false,
            }
        };
        if !joined {
            words += usize::from(has_alnum);
            has_alnum = false;
        }
        has_alnum |= matches!(y, Letter | Digit);
    }
    words + usize::from(has_alnum)
}
