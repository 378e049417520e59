//! `phone`: a telephone number that libphonenumber's metadata (the `phonenumber` crate)
//! calls valid. Written with `+` or the `00` international prefix, any country's numbering
//! plan applies (E.164); written nationally (`(212) 555-0100`, `020 7946 0958`), the North
//! American and the United Kingdom plans do, whose fixed lengths keep order numbers and dates
//! out. Between digits a candidate may hold one space, dash or dot, or a parenthesised area
//! code.
//!
//! Validating a number costs libphonenumber's parse and its number plan's patterns (about
//! 180,000 instructions for a British number), and a conversation's history comes back whole
//! with every turn, so the verdicts on written numbers are kept in a bounded memo: a number
//! seen again costs a lookup.

use super::{bounded_num, is_hidden, Family};
use phonenumber::country::Id;
use quick_cache::sync::Cache;
use std::ops::Range;
use std::sync::LazyLock;

pub(super) const FAMILY: Family = Family {
    pattern: concat!(
        r"\+?\(?[0-9](?:",
        hidden!(),
        r"(?:\) ?|[ .\-])?\(?",
        hidden!(),
        "[0-9]){6,16}"
    ),
    accept,
    prefixed: false,
};

/// The national plans a number without a country code is read in.
const NATIONAL: [Id; 2] = [Id::US, Id::GB];

fn accept(text: &str, span: Range<usize>, out: &mut Vec<Range<usize>>) {
    if !bounded_num(text, &span) || text[..span.start].ends_with('+') {
        return;
    }
    let clean: String = text[span.clone()]
        .chars()
        .filter(|&c| !is_hidden(c))
        .collect();
    if is_phone(&clean) {
        out.push(span);
    }
}

/// How many written numbers the memo holds verdicts on (a few hundred kilobytes at most).
pub(super) const MEMO_CAPACITY: usize = 4096;

/// Verdicts on written numbers that reached libphonenumber, whichever policy asked: a verdict
/// depends on the written number alone (the number plans are compiled into the crate), so one
/// memo serves every recognizer in the process, across policy reloads.
static VERDICTS: LazyLock<Cache<Box<str>, bool>> = LazyLock::new(|| Cache::new(MEMO_CAPACITY));

/// Whether a written number (no hidden characters) is a valid phone number.
pub(super) fn is_phone(written: &str) -> bool {
    is_phone_with(written, &|written, parse| {
        if let Some(verdict) = VERDICTS.get(written) {
            return verdict;
        }
        let verdict = parse();
        VERDICTS.insert(written.into(), verdict);
        verdict
    })
}

/// How many verdicts the memo holds.
#[cfg(test)]
pub(super) fn memo_len() -> usize {
    VERDICTS.len()
}

/// [`is_phone`] without the memo: every number that passes the length gates is parsed.
#[cfg(test)]
pub(super) fn is_phone_unmemoised(written: &str) -> bool {
    is_phone_with(written, &|_, parse| parse())
}

/// The verdict on `written`, where `memo(written, parse)` gives libphonenumber's (`parse()`)
/// for the numbers the cheap gates let through; the memo keys on the written number itself,
/// which decides the verdict (its digits, `+` or `00`, and its separators).
fn is_phone_with(written: &str, memo: &dyn Fn(&str, &dyn Fn() -> bool) -> bool) -> bool {
    let valid = |country: Option<Id>, s: &str| {
        phonenumber::parse(country, s).is_ok_and(|n| phonenumber::is_valid(&n))
    };
    // Lengths first: parsing is the costly step, and most numbers in text (dates, order
    // numbers, amounts) fail on length alone. E.164 allows 15 digits with the country code;
    // a national North American number has 10 (11 with the leading 1), a British one 10 or
    // 11 with its leading 0.
    let digits = super::digits(written);
    let national_length = matches!((digits.len(), digits.first()), (10, _) | (11, Some(1 | 0)));
    if written.starts_with('+') {
        (8..=15).contains(&digits.len()) && memo(written, &|| valid(None, written))
    } else if let Some(rest) = written.strip_prefix("00") {
        (10..=17).contains(&digits.len()) && memo(written, &|| valid(None, &format!("+{rest}")))
    } else if dotted_quad(written) {
        false
    } else {
        // A British number written nationally starts with its trunk 0; libphonenumber also
        // accepts it without, which would take order and part numbers for phones.
        national_length
            && memo(written, &|| {
                NATIONAL
                    .into_iter()
                    .any(|c| (c != Id::GB || digits.first() == Some(&0)) && valid(Some(c), written))
            })
    }
}

/// Four dot-separated groups of one to three digits: the shape of an IPv4 address, which no
/// national plan writes a phone number in (`555.123.4567` has three groups).
fn dotted_quad(written: &str) -> bool {
    let groups: Vec<&str> = written.split('.').collect();
    groups.len() == 4
        && groups
            .iter()
            .all(|g| (1..=3).contains(&g.len()) && g.bytes().all(|b| b.is_ascii_digit()))
}
