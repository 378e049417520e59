//! `email`: an address `local@domain.tld` (ASCII), the local part without leading, trailing
//! or doubled dots (an apostrophe inside it, as in `o'brien@`, is part of it), each domain
//! label without a leading or trailing hyphen, within RFC 5321's lengths (local 64, label 63,
//! whole 254).

use super::{bounded, Family};
use std::ops::Range;

pub(super) const FAMILY: Family = Family {
    pattern: r"[A-Za-z0-9._%+'\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}",
    accept,
    prefixed: false,
};

fn accept(text: &str, span: Range<usize>, out: &mut Vec<Range<usize>>) {
    // An apostrophe belongs to a name (`o'brien@…`), never to the quote around an address.
    let quotes = text[span.clone()].len() - text[span.clone()].trim_start_matches('\'').len();
    let span = span.start + quotes..span.end;
    let raw = &text[span.clone()];
    let Some((local, domain)) = raw.split_once('@') else {
        return;
    };
    let local_ok = !local.is_empty()
        && local.len() <= 64
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..");
    let domain_ok = domain
        .split('.')
        .all(|l| !l.is_empty() && l.len() <= 63 && !l.starts_with('-') && !l.ends_with('-'));
    if local_ok && domain_ok && raw.len() <= 254 && bounded(text, &span, &['@']) {
        out.push(span);
    }
}
