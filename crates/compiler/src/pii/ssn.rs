//! `us_ssn`: a US Social Security number written `AAA-GG-SSSS` or `AAA GG SSSS` (one
//! separator kind), excluding the numbers never issued: area 000, 666 or 900-999, group 00,
//! serial 0000. Nine bare digits are not read as one (too many other numbers look alike).

use super::{bounded_num, digits, Family};
use std::ops::Range;

pub(super) const FAMILY: Family = Family {
    pattern: concat!(
        "[0-9]",
        hidden!(),
        "[0-9]",
        hidden!(),
        "[0-9]",
        hidden!(),
        "[- ]",
        hidden!(),
        "[0-9]",
        hidden!(),
        "[0-9]",
        hidden!(),
        "[- ]",
        hidden!(),
        "[0-9]",
        hidden!(),
        "[0-9]",
        hidden!(),
        "[0-9]",
        hidden!(),
        "[0-9]"
    ),
    accept,
    prefixed: false,
};

fn accept(text: &str, span: Range<usize>, out: &mut Vec<Range<usize>>) {
    let raw = &text[span.clone()];
    let mut seps = raw.chars().filter(|c| matches!(c, '-' | ' '));
    if seps.next() != seps.next() || !bounded_num(text, &span) {
        return;
    }
    if valid(&digits(raw)) {
        out.push(span);
    }
}

/// Whether nine digits are an issuable SSN.
pub(super) fn valid(d: &[u8]) -> bool {
    let num = |r: Range<usize>| d[r].iter().fold(0u32, |a, &x| a * 10 + u32::from(x));
    let (area, group, serial) = (num(0..3), num(3..5), num(5..9));
    d.len() == 9 && area != 0 && area != 666 && area < 900 && group != 0 && serial != 0
}
