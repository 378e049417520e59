//! `iban`: an International Bank Account Number: a country code, two check digits and the
//! country's fixed number of letters and digits (upper case, optionally in groups of four
//! separated by spaces), whose ISO 7064 mod-97 remainder is 1.

use super::{after, bounded_num, is_hidden, Family};
use std::ops::Range;

pub(super) const FAMILY: Family = Family {
    pattern: concat!(
        "[A-Z]{2}[0-9]{2}(?:",
        hidden!(),
        " ?",
        hidden!(),
        "[A-Z0-9]){11,30}"
    ),
    accept,
    prefixed: false,
};

fn accept(text: &str, span: Range<usize>, out: &mut Vec<Range<usize>>) {
    let raw = &text[span.clone()];
    let Some(len) = length(&raw[..2]) else {
        return;
    };
    // The first `len` characters, with where the last one ends: a run can go on into the
    // next word of a sentence (`... 3000 BIC ...`) once the number is complete.
    let mut chars = Vec::with_capacity(len);
    let mut end = span.start;
    for (i, c) in raw.char_indices() {
        if chars.len() == len {
            break;
        }
        if c.is_ascii_alphanumeric() {
            chars.push(c as u8);
            end = span.start + i + 1;
        } else if c != ' ' && !is_hidden(c) {
            return;
        }
    }
    let found = span.start..end;
    let next_alnum = after(text, end).is_some_and(|c| c.is_ascii_alphanumeric());
    if chars.len() == len && !next_alnum && bounded_num(text, &found) && mod97(&chars) {
        out.push(found);
    }
}

/// ISO 7064 mod 97-10 over the rearranged number: remainder 1.
pub(super) fn mod97(iban: &[u8]) -> bool {
    let (head, tail) = iban.split_at(4);
    let mut r: u32 = 0;
    for &b in tail.iter().chain(head) {
        r = match b {
            b'0'..=b'9' => (r * 10 + u32::from(b - b'0')) % 97,
            b'A'..=b'Z' => (r * 100 + u32::from(b - b'A') + 10) % 97,
            _ => return false,
        };
    }
    r == 1
}

/// The IBAN length of a country (the SWIFT IBAN registry).
pub(super) fn length(country: &str) -> Option<usize> {
    LENGTHS.iter().find(|(c, _)| *c == country).map(|&(_, n)| n)
}

const LENGTHS: &[(&str, usize)] = &[
    ("AD", 24),
    ("AE", 23),
    ("AL", 28),
    ("AT", 20),
    ("AZ", 28),
    ("BA", 20),
    ("BE", 16),
    ("BG", 22),
    ("BH", 22),
    ("BR", 29),
    ("BY", 28),
    ("CH", 21),
    ("CR", 22),
    ("CY", 28),
    ("CZ", 24),
    ("DE", 22),
    ("DK", 18),
    ("DO", 28),
    ("EE", 20),
    ("EG", 29),
    ("ES", 24),
    ("FI", 18),
    ("FO", 18),
    ("FR", 27),
    ("GB", 22),
    ("GE", 22),
    ("GI", 23),
    ("GL", 18),
    ("GR", 27),
    ("GT", 28),
    ("HR", 21),
    ("HU", 28),
    ("IE", 22),
    ("IL", 23),
    ("IQ", 23),
    ("IS", 26),
    ("IT", 27),
    ("JO", 30),
    ("KW", 30),
    ("KZ", 20),
    ("LB", 28),
    ("LC", 32),
    ("LI", 21),
    ("LT", 20),
    ("LU", 20),
    ("LV", 21),
    ("LY", 25),
    ("MC", 27),
    ("MD", 24),
    ("ME", 22),
    ("MK", 19),
    ("MR", 27),
    ("MT", 31),
    ("MU", 30),
    ("NL", 18),
    ("NO", 15),
    ("PK", 24),
    ("PL", 28),
    ("PS", 29),
    ("PT", 25),
    ("QA", 29),
    ("RO", 24),
    ("RS", 22),
    ("SA", 24),
    ("SC", 31),
    ("SE", 24),
    ("SI", 19),
    ("SK", 24),
    ("SM", 27),
    ("ST", 25),
    ("SV", 28),
    ("TL", 23),
    ("TN", 24),
    ("TR", 26),
    ("UA", 29),
    ("VA", 22),
    ("VG", 24),
    ("XK", 20),
];
