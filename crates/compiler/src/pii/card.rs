//! `credit_card`: 13 to 19 digits, optionally grouped by spaces or dashes, that pass the Luhn
//! check and start with a card issuer's prefix at a length that issuer uses. Sixteen digits that
//! fail Luhn are an order number, not a card.

use super::{bounded_num, is_hidden, Family};
use std::ops::Range;

pub(super) const FAMILY: Family = Family {
    pattern: concat!("[0-9](?:", hidden!(), "[ -]?", hidden!(), "[0-9]){12,}"),
    accept,
    prefixed: false,
};

/// A run of digit groups: the whole run if it is a card, else the first windows of whole
/// groups that are (`card 4111 1111 1111 1111 exp 0128` keeps the card and drops the date).
fn accept(text: &str, span: Range<usize>, out: &mut Vec<Range<usize>>) {
    let groups = groups(text, span.clone());
    let all: Vec<u8> = groups.iter().flat_map(|g| g.1.iter().copied()).collect();
    if is_card(&all) {
        if bounded_num(text, &span) {
            out.push(span);
        }
        return;
    }
    let mut i = 0;
    while i < groups.len() {
        let mut digits = Vec::new();
        let mut hit = None;
        for (j, g) in groups.iter().enumerate().skip(i) {
            digits.extend_from_slice(&g.1);
            if digits.len() > 19 {
                break;
            }
            let window = groups[i].0.start..g.0.end;
            if is_card(&digits) && bounded_num(text, &window) {
                hit = Some((j, window));
            }
        }
        match hit {
            Some((j, window)) => {
                out.push(window);
                i = j + 1;
            }
            None => i += 1,
        }
    }
}

/// The digit groups of a candidate (split at spaces and dashes; hidden characters skipped),
/// each with its byte range in the text.
fn groups(text: &str, span: Range<usize>) -> Vec<(Range<usize>, Vec<u8>)> {
    let mut groups: Vec<(Range<usize>, Vec<u8>)> = Vec::new();
    let mut open = false;
    for (i, c) in text[span.clone()].char_indices() {
        let at = span.start + i;
        if let Some(d) = c.to_digit(10) {
            match groups.last_mut() {
                Some(g) if open => {
                    g.0.end = at + 1;
                    g.1.push(d as u8);
                }
                _ => groups.push((at..at + 1, vec![d as u8])),
            }
            open = true;
        } else if !is_hidden(c) {
            open = false;
        }
    }
    groups
}

/// Luhn and an issuer's prefix and length.
pub(super) fn is_card(d: &[u8]) -> bool {
    (13..=19).contains(&d.len()) && luhn(d) && issuer(d).is_some()
}

/// The Luhn (mod 10) check.
pub(super) fn luhn(d: &[u8]) -> bool {
    let sum: u32 = d
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &x)| {
            let x = u32::from(x);
            if i % 2 == 1 {
                let y = x * 2;
                if y > 9 {
                    y - 9
                } else {
                    y
                }
            } else {
                x
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// The issuer whose prefix and length `d` has, if any.
pub(super) fn issuer(d: &[u8]) -> Option<&'static str> {
    let n = d.len();
    let prefix = |k: usize| d[..k].iter().fold(0u32, |a, &x| a * 10 + u32::from(x));
    let (p2, p3, p4) = (prefix(2), prefix(3), prefix(4));
    let within = |lo: usize, hi: usize| (lo..=hi).contains(&n);
    if d[0] == 4 && matches!(n, 13 | 16 | 19) {
        Some("visa")
    } else if ((51..=55).contains(&p2) || (2221..=2720).contains(&p4)) && n == 16 {
        Some("mastercard")
    } else if matches!(p2, 34 | 37) && n == 15 {
        Some("amex")
    } else if (p4 == 6011 || (644..=649).contains(&p3) || p2 == 65) && within(16, 19) {
        Some("discover")
    } else if ((300..=305).contains(&p3) || matches!(p2, 36 | 38 | 39)) && within(14, 19) {
        Some("diners")
    } else if (3528..=3589).contains(&p4) && within(16, 19) {
        Some("jcb")
    } else if p2 == 62 && within(16, 19) {
        Some("unionpay")
    } else if (2200..=2204).contains(&p4) && within(16, 19) {
        Some("mir")
    } else if matches!(p2, 50 | 56..=58 | 63 | 67) && within(13, 19) {
        Some("maestro")
    } else {
        None
    }
}
