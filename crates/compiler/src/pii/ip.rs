//! `ip_address`: an IPv4 address in dotted decimal (no leading zeros) or an IPv6 address
//! (RFC 4291 text forms, `::` and an embedded IPv4 tail included), each as the standard
//! library parses it. An IPv6 candidate needs a digit, so `be::ef` and a bare `::` are words;
//! a version string `v1.2.3.4` or `1.2.3.4.5` is not an address (see [`bounded_num`]).

use super::{bounded, bounded_num, Family};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::ops::Range;

pub(super) const FAMILY: Family = Family {
    pattern: r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}|[0-9A-Fa-f:]*:[0-9A-Fa-f]*:[0-9A-Fa-f:.]*",
    accept,
    prefixed: false,
};

fn accept(text: &str, span: Range<usize>, out: &mut Vec<Range<usize>>) {
    let raw = &text[span.clone()];
    if raw.contains(':') {
        // A sentence's full stop is not part of the address.
        let trimmed = raw.trim_end_matches('.');
        let found = span.start..span.start + trimmed.len();
        let ok = trimmed.bytes().any(|b| b.is_ascii_digit())
            && trimmed.parse::<Ipv6Addr>().is_ok()
            && bounded(text, &found, &[]);
        if ok {
            out.push(found);
        }
    } else if raw.parse::<Ipv4Addr>().is_ok() && bounded_num(text, &span) {
        out.push(span);
    }
}
