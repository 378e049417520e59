//! `api_key`: credentials whose issuers give them a recognisable shape: AWS access key ids
//! (`AKIA`/`ASIA` + 16), GitHub tokens (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_` + 36, and
//! fine-grained `github_pat_` + 22 + `_` + 59), OpenAI keys (`sk-`, `sk-proj-`,
//! `sk-svcacct-`, `sk-admin-` + 32 or more), Slack tokens (`xoxb-`, `xoxp-`, `xoxa-`,
//! `xoxo-`, `xoxr-`, `xoxs-`), Google API keys (`AIza` + 35) and Stripe live secret and
//! restricted keys (`sk_live_`, `rk_live_` + 24 or more). The random part must hold both a
//! letter and a digit, and an OpenAI key's a stretch of 16 or more between hyphens, so `sk-`
//! before a long hyphenated phrase (`sk-learn-pipeline-…-v2`) is not a key.

use super::{bounded, Family};
use std::ops::Range;

pub(super) const FAMILY: Family = Family {
    pattern: concat!(
        r"(?:AKIA|ASIA)[0-9A-Z]{16}",
        r"|gh[pousr]_[A-Za-z0-9]{36}",
        r"|github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}",
        r"|sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{32,}",
        r"|xox[abposr]-[0-9A-Za-z\-]{10,}",
        r"|AIza[0-9A-Za-z_\-]{35}",
        r"|[sr]k_live_[0-9A-Za-z]{24,}",
    ),
    accept,
    prefixed: true,
};

fn accept(text: &str, span: Range<usize>, out: &mut Vec<Range<usize>>) {
    let raw = &text[span.clone()];
    let secret = raw.split_once(['_', '-']).map_or(raw, |(_, rest)| rest);
    let random = if raw.starts_with("sk-") {
        // OpenAI's random part is base64url, where a hyphen is one character in 64: a key
        // has a long stretch between hyphens, a hyphenated phrase (`sk-learn-…-v2`) has words.
        secret
            .split('-')
            .any(|run| run.len() >= 16 && letters_and_digits(run))
    } else {
        letters_and_digits(secret)
    };
    if random && bounded(text, &span, &['_', '-']) {
        out.push(span);
    }
}

fn letters_and_digits(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit()) && s.bytes().any(|b| b.is_ascii_alphabetic())
}
