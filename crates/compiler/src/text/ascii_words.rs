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

#[derive(Debug, Clone, Copy, PartialEq)]
enum Join {
    Yes,
    No,
    /// Decided by the byte before or after the pair.
    Context,
}

const CLASS_COUNT: usize = 7;

/// Whether two adjacent classes join, by the rules above; the pairs around a mid character
/// need a third byte.
const JOINS: [[Join; CLASS_COUNT]; CLASS_COUNT] = {
    use Class::*;
    let all = [
        Letter, Digit, Underscore, MidLetter, MidNumLet, MidNum, Other,
    ];
    let mut table = [[Join::No; CLASS_COUNT]; CLASS_COUNT];
    let mut x = 0;
    while x < CLASS_COUNT {
        let mut y = 0;
        while y < CLASS_COUNT {
            table[all[x] as usize][all[y] as usize] = match (all[x], all[y]) {
                (Letter | Digit, Letter | Digit)
                | (Letter | Digit | Underscore, Underscore)
                | (Underscore, Letter | Digit) => Join::Yes,
                (Letter, MidLetter | MidNumLet)
                | (MidLetter | MidNumLet, Letter)
                | (Digit, MidNum | MidNumLet)
                | (MidNum | MidNumLet, Digit) => Join::Context,
                _ => Join::No,
            };
            y += 1;
        }
        x += 1;
    }
    table
};

/// The class of every byte, so the scan reads a table instead of matching ranges.
const CLASSES: [Class; 256] = {
    let mut table = [Class::Other; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = match b as u8 {
            b'a'..=b'z' | b'A'..=b'Z' => Class::Letter,
            b'0'..=b'9' => Class::Digit,
            b'_' => Class::Underscore,
            b':' => Class::MidLetter,
            b'.' | b'\'' => Class::MidNumLet,
            b',' | b';' => Class::MidNum,
            _ => Class::Other,
        };
        b += 1;
    }
    table
};

/// The number of UAX #29 words of ASCII `text` (segments holding a letter or a digit).
pub(super) fn count(text: &[u8]) -> usize {
    use Class::*;
    let at = |i: usize| text.get(i).map_or(Other, |&b| CLASSES[usize::from(b)]);
    let mut words = 0usize;
    let mut has_alnum = false;
    // The classes of the two bytes before the current one.
    let (mut before, mut previous) = (Other, Other);
    for (i, &b) in text.iter().enumerate() {
        let y = CLASSES[usize::from(b)];
        let joined = match JOINS[previous as usize][y as usize] {
            Join::Yes => true,
            Join::No => false,
            Join::Context => match (previous, y) {
                (Letter, MidLetter | MidNumLet) => at(i + 1) == Letter,
                (MidLetter | MidNumLet, Letter) => before == Letter,
                (Digit, MidNum | MidNumLet) => at(i + 1) == Digit,
                (MidNum | MidNumLet, Digit) => before == Digit,
                _ => false,
            },
        };
        // Without a branch on the common pairs: a break closes the segment before `y`.
        words += usize::from(!joined & has_alnum);
        has_alnum = (has_alnum & joined) | matches!(y, Letter | Digit);
        (before, previous) = (previous, y);
    }
    words + usize::from(has_alnum)
}
