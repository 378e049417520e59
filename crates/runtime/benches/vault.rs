//! What a redacted Responses chain adds to a turn that continues backend-held state: opening
//! the chain's sealed vault (AES-256-GCM, the values' JSON, the vault rebuilt) before redacting,
//! and sealing the extended vault after, against redacting the same body with a fresh vault (the
//! work every redacted request does anyway). The body is a Responses turn carrying five entities
//! (two email addresses, a phone number, an IPv4 address, an IBAN); the chain's vault holds the
//! five values of earlier turns plus these, so the turn's values are found in it.
//!
//! A second figure is what an answer on a route without `redact` adds on a policy that redacts
//! elsewhere: sealing an empty vault (a chain's first turn keeps one so a later redacting turn
//! is not refused), against the same fresh redaction.
//!
//! Each round times a batch of each variant; the ratio reported is the median of the rounds'
//! ratios, so a change in the machine's load falls on both. The store's round trips (one read,
//! one write) are not in it: they are the store's, measured with the stores.
//!
//! `cargo bench -p src-runtime --bench vault`

mod support;

use std::time::Instant;

use src_compiler::pii::{EntityType, Redact, Vault};
use src_runtime::pipeline::redact::redact_body;
use src_runtime::responses_state::VaultKey;
use support::median;

const INPUT: &str = "Write to ann.lee@example.com and cc bob@example.org, call +1 415 555 0132 \
    from 10.20.30.40, and pay GB82 WEST 1234 5698 7654 32 before Friday.";
const EARLIER: &str = "Earlier: dan@example.net, eve@example.com, +1 415 555 0199, \
    192.168.1.7, DE89 3704 0044 0532 0130 00.";
const ROUNDS: usize = 15;
const BATCH: usize = 400;

fn main() {
    let redact = Redact::new(&[
        EntityType::Email,
        EntityType::Phone,
        EntityType::IpAddress,
        EntityType::Iban,
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    let body = serde_json::json!({"model": "auto", "input": INPUT,
        "previous_response_id": "resp_up_1"})
    .to_string()
    .into_bytes();
    let earlier = serde_json::json!({"model": "auto", "input": EARLIER}).to_string();
    let key = VaultKey::generate().unwrap_or_else(|e| panic!("{e}"));
    let mut chain = Vault::new();
    redact_body(earlier.as_bytes(), &redact, &mut chain);
    redact_body(&body, &redact, &mut chain);
    let sealed = key
        .seal("tenant", "resp_up_1", &chain)
        .unwrap_or_else(|| panic!("cannot seal"));

    let fresh = || {
        let mut vault = Vault::new();
        let out = redact_body(&body, &redact, &mut vault);
        assert!(out.is_some_and(|o| !o.windows(8).any(|w| w == b"ann.lee@")));
    };
    let chained = || {
        let mut vault = key
            .open("tenant", "resp_up_1", &sealed)
            .unwrap_or_else(|| panic!("cannot open"));
        let out = redact_body(&body, &redact, &mut vault);
        assert!(out.is_some_and(|o| o.windows(9).any(|w| w == b"<EMAIL_3>")));
        assert!(key.seal("tenant", "resp_up_2", &vault).is_some());
    };
    let time = |f: &dyn Fn()| {
        let start = Instant::now();
        for _ in 0..BATCH {
            f();
        }
        start.elapsed().as_secs_f64() / BATCH as f64
    };
    let empty = || {
        assert!(key.seal("tenant", "resp_up_3", &Vault::new()).is_some());
    };
    fresh();
    chained();
    empty();
    let mut ratios = Vec::new();
    let mut empty_ratios = Vec::new();
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let base = time(&fresh);
        let with = time(&chained);
        let sealed_empty = time(&empty);
        ratios.push(with / base);
        empty_ratios.push(sealed_empty / base);
        a.push(base * 1e6);
        b.push(with * 1e6);
        c.push(sealed_empty * 1e6);
    }
    println!(
        "redact, fresh vault: {:.1} µs; open + redact + seal: {:.1} µs; ratio {:.2} (median of {ROUNDS} rounds)",
        median(a),
        median(b),
        median(ratios)
    );
    println!(
        "seal an empty vault: {:.2} µs; ratio to redact, fresh vault {:.2} (median of {ROUNDS} rounds)",
        median(c),
        median(empty_ratios)
    );
}
