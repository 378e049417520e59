//! `private_key`: a PEM private key block (`-----BEGIN ... PRIVATE KEY-----` of any algorithm,
//! `OPENSSH`, `ENCRYPTED` and PGP's `PRIVATE KEY BLOCK` included) through its matching `END`
//! line. A block pasted without its `END` line is still a key when at least 64 base64
//! characters follow the `BEGIN` line; the span then ends with them.

use super::Family;
use std::ops::Range;

pub(super) const FAMILY: Family = Family {
    pattern: r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----",
    accept,
    prefixed: true,
};

/// The fewest base64 characters a block without its `END` line must carry.
const UNTERMINATED_MIN: usize = 64;

fn accept(text: &str, span: Range<usize>, out: &mut Vec<Range<usize>>) {
    let raw = &text[span.clone()];
    let label = &raw["-----BEGIN ".len()..raw.len() - "-----".len()];
    let end_line = format!("-----END {label}-----");
    let rest = &text[span.end..];
    let base64 = |body: &str| {
        body.bytes()
            .filter(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/'))
            .count()
    };
    if let Some(at) = rest.find(&end_line) {
        if base64(&rest[..at]) > 0 {
            out.push(span.start..span.end + at + end_line.len());
        }
        return;
    }
    // Without an `END` line: the base64 lines (and encrypted keys' headers) that follow.
    let body_len = rest
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || b"+/=:-, \t\r\n".contains(b))
        .count();
    let body = &rest[..body_len];
    if base64(body) >= UNTERMINATED_MIN {
        out.push(span.start..span.end + body.trim_end().len());
    }
}
