//! Each recognizer on valid, invalid and hard-negative text, at boundaries and with Unicode
//! around it; property tests that generated valid entities are found and corrupted ones are
//! not.

use super::{card, iban, EntityType, Found, Recognizers};
use proptest::prelude::*;

fn find(kind: EntityType, text: &str) -> Vec<&str> {
    let r = Recognizers::new(&[kind]).unwrap();
    r.find(text).into_iter().map(|f| &text[f.span]).collect()
}

fn none(kind: EntityType, text: &str) {
    assert_eq!(find(kind, text), Vec::<&str>::new(), "{kind} in {text:?}");
}

#[test]
fn every_type_builds_and_names_round_trip() {
    Recognizers::new(&EntityType::ALL).unwrap();
    for t in EntityType::ALL {
        assert_eq!(EntityType::from_name(t.name()), Some(t));
    }
    assert_eq!(EntityType::from_name("ssn"), None);
}

#[test]
fn email() {
    use EntityType::Email as E;
    assert_eq!(
        find(E, "write to jane.doe+x@mail.example.co.uk."),
        ["jane.doe+x@mail.example.co.uk"]
    );
    assert_eq!(
        find(E, "«bob@example.org» ou ✉ ana_m@exemplo.com.br"),
        ["bob@example.org", "ana_m@exemplo.com.br"]
    );
    none(E, "user@localhost");
    none(E, "a..b@example.com");
    none(E, ".a@example.com");
    none(E, "a@-example.com");
    none(E, "@handle and foo@bar");
    none(E, "café@example.com");
    none(E, "pip install pkg==1.2@3.4");
}

#[test]
fn phone() {
    use EntityType::Phone as P;
    assert_eq!(find(P, "call +1 212-555-0100 today"), ["+1 212-555-0100"]);
    assert_eq!(
        find(P, "UK office: +44 20 7946 0958."),
        ["+44 20 7946 0958"]
    );
    assert_eq!(find(P, "Berlin: +49 30 901820"), ["+49 30 901820"]);
    assert_eq!(
        find(P, "ring (212) 555-0100 or 0044 20 7946 0958"),
        ["(212) 555-0100", "0044 20 7946 0958"]
    );
    assert_eq!(find(P, "téléphone : 020 7946 0958 !"), ["020 7946 0958"]);
    assert_eq!(
        find(P, "号码+1\u{200B}212\u{200B}555\u{200B}0100。"),
        ["+1\u{200B}212\u{200B}555\u{200B}0100"]
    );
    none(P, "order 12345678 shipped");
    none(P, "released 2024-01-15, build 1.2.3.4567");
    none(P, "+1 000-000-0000");
    none(P, "ISBN 978-3-16-148410-0");
}

#[test]
fn credit_card() {
    use EntityType::CreditCard as C;
    assert_eq!(
        find(C, "card 4111 1111 1111 1111 exp 0128"),
        ["4111 1111 1111 1111"]
    );
    assert_eq!(find(C, "5500-0000-0000-0004"), ["5500-0000-0000-0004"]);
    assert_eq!(find(C, "amex:378282246310005."), ["378282246310005"]);
    assert_eq!(
        find(C, "카드 4111111111111111 입니다"),
        ["4111111111111111"]
    );
    assert_eq!(
        find(C, "4111\u{200B}1111\u{200D}1111\u{FEFF}1111"),
        ["4111\u{200B}1111\u{200D}1111\u{FEFF}1111"]
    );
    // Sixteen digits failing Luhn, an unknown issuer, too long, glued to letters or digits.
    none(C, "order 4111 1111 1111 1112");
    none(C, "tracking 9111111111111111");
    none(C, "41111111111111111111");
    none(C, "id4111111111111111");
    none(C, "4111111111111111x");
    none(C, "v4111111111111111.1");
}

#[test]
fn iban() {
    use EntityType::Iban as I;
    assert_eq!(
        find(I, "IBAN: DE89 3704 0044 0532 0130 00 BIC COBADEFFXXX"),
        ["DE89 3704 0044 0532 0130 00"]
    );
    assert_eq!(
        find(I, "GB82WEST12345698765432, merci"),
        ["GB82WEST12345698765432"]
    );
    assert_eq!(
        find(I, "→FR1420041010050500013M02606←"),
        ["FR1420041010050500013M02606"]
    );
    none(I, "DE89 3704 0044 0532 0130 01");
    none(I, "XX89370400440532013000");
    none(I, "DE8937040044053201300");
    none(I, "ADE89370400440532013000");
}

#[test]
fn us_ssn() {
    use EntityType::UsSsn as S;
    assert_eq!(find(S, "SSN 123-45-6789."), ["123-45-6789"]);
    assert_eq!(find(S, "n° 234 56 7890 ici"), ["234 56 7890"]);
    none(S, "000-12-3456 666-12-3456 900-12-3456");
    none(S, "123-00-4567 123-45-0000");
    none(S, "123-45 6789");
    none(S, "123456789");
    none(S, "1123-45-6789 123-45-67890 123-45-6789-1");
}

#[test]
fn ip_address() {
    use EntityType::IpAddress as A;
    assert_eq!(
        find(A, "from 192.168.0.1, then 2001:db8::8a2e:370:7334."),
        ["192.168.0.1", "2001:db8::8a2e:370:7334"]
    );
    assert_eq!(
        find(A, "loopback ::1 and ::ffff:192.0.2.1"),
        ["::1", "::ffff:192.0.2.1"]
    );
    assert_eq!(find(A, "адрес 10.0.0.7/8"), ["10.0.0.7"]);
    none(A, "version 1.2.3.4.5 and v1.2.3.4");
    none(A, "256.1.1.1 and 01.2.3.4");
    none(A, "meet at 12:30:45, std::io::Error, be::ef, ::");
}

#[test]
fn api_key() {
    use EntityType::ApiKey as K;
    let keys = [
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_1234567890abcdefghijABCDEFGHIJklmnop",
        "github_pat_11ABCDEFG0123456789abc_0123456789abcdefghijABCDEFGHIJ0123456789abcdefghijABCDEFGHI",
        "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe",
        "sk-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDeF",
        "xoxb-123456789012-abcdefABCDEF",
        "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    ];
    for k in keys {
        assert_eq!(find(K, &format!("key=«{k}» ok")), [k], "{k}");
    }
    none(K, "sk-this-is-a-very-long-hyphenated-phrase-of-words");
    none(K, "AKIAIOSFODNN7EXAMPLEX");
    none(K, "ghp_short");
    none(K, "sk_test_4eC39HqLyjWDarjtT1zdp7dc");
    none(K, "my_sk_live_4eC39HqLyjWDarjtT1zdp7dc");
}

const PEM_BODY: &str = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\nMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n";

#[test]
fn private_key() {
    use EntityType::PrivateKey as P;
    let rsa = format!("-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}-----END RSA PRIVATE KEY-----");
    assert_eq!(find(P, &format!("here: {rsa}\nthanks")), [rsa.as_str()]);
    let pkcs8 = format!("-----BEGIN PRIVATE KEY-----\n{PEM_BODY}");
    assert_eq!(
        find(P, &format!("{pkcs8}\n(truncated)")),
        [pkcs8.trim_end()]
    );
    none(
        P,
        &format!("-----BEGIN PUBLIC KEY-----\n{PEM_BODY}-----END PUBLIC KEY-----"),
    );
    none(P, "-----BEGIN PRIVATE KEY-----\nabc\n");
    none(P, "-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----");
}

#[test]
fn jwt() {
    use EntityType::Jwt as J;
    let token = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
    assert_eq!(find(J, &format!("Authorization: Bearer {token}.")), [token]);
    let none_alg = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.";
    assert_eq!(find(J, none_alg), [none_alg]);
    // A header without `alg`, and base64 that is not JSON.
    none(J, "eyJ0eXAiOiJKV1QifQ.eyJzdWIiOiJ4In0.abc");
    none(J, "eyJhbGciOiJIUzI1NiJ9.bm90IGpzb24.abc");
}

#[test]
fn all_types_at_once_are_ordered_and_typed() {
    let r = Recognizers::new(&EntityType::ALL).unwrap();
    let text = "mail a@b.io, ssn 123-45-6789, card 4111111111111111, host 10.0.0.1";
    let kinds: Vec<EntityType> = r.find(text).into_iter().map(|f: Found| f.kind).collect();
    assert_eq!(
        kinds,
        [
            EntityType::Email,
            EntityType::UsSsn,
            EntityType::CreditCard,
            EntityType::IpAddress
        ]
    );
    assert!(r.any(text));
    assert!(!r.any("nothing personal here, version 1.2.3, order 12345"));
    assert!(!Recognizers::new(&[EntityType::Jwt]).unwrap().any(text));
}

/// A card number of `len` digits with issuer prefix `prefix`, completed with a Luhn digit.
fn with_luhn(prefix: &[u8], body: &[u8], len: usize) -> Vec<u8> {
    let mut d: Vec<u8> = prefix.iter().chain(body).copied().take(len - 1).collect();
    while d.len() < len - 1 {
        d.push(0);
    }
    (0..10)
        .map(|c| {
            let mut e = d.clone();
            e.push(c);
            e
        })
        .find(|e| card::luhn(e))
        .unwrap()
}

fn text_of(d: &[u8]) -> String {
    d.iter().map(|x| char::from(b'0' + x)).collect()
}

/// An IBAN for `country` with `bban`, its check digits computed.
fn iban_of(country: &str, bban: &str) -> String {
    (0..100)
        .map(|c| format!("{country}{c:02}{bban}"))
        .find(|s| iban::mod97(s.as_bytes()))
        .unwrap()
}

proptest! {
    #[test]
    fn generated_cards_are_found(body in prop::collection::vec(0u8..10, 18), visa in any::<bool>(), group in any::<bool>(), pre in "[ a-zé,:]{0,3}", post in "[ a-zé.]{0,3}") {
        let d = if visa { with_luhn(&[4], &body, 16) } else { with_luhn(&[5, 1 + body[0] % 5], &body, 16) };
        let mut card = text_of(&d);
        if group {
            card = card.as_bytes().chunks(4).map(|c| std::str::from_utf8(c).unwrap()).collect::<Vec<_>>().join(" ");
        }
        let pre = if pre.ends_with(|c: char| c.is_alphanumeric()) { format!("{pre} ") } else { pre };
        let post = if post.starts_with(|c: char| c.is_alphanumeric()) { format!(" {post}") } else { post };
        let text = format!("{pre}{card}{post}");
        prop_assert_eq!(find(EntityType::CreditCard, &text), vec![card.as_str()]);
    }

    #[test]
    fn one_changed_digit_fails_luhn(body in prop::collection::vec(0u8..10, 18), at in 0usize..16, by in 1u8..10) {
        let mut d = with_luhn(&[4], &body, 16);
        d[at] = (d[at] + by) % 10;
        prop_assert!(!card::luhn(&d));
        prop_assert!(find(EntityType::CreditCard, &text_of(&d)).is_empty());
    }

    #[test]
    fn generated_ibans_are_found(bban in "[0-9]{18}", spaced in any::<bool>()) {
        let mut iban = iban_of("DE", &bban);
        if spaced {
            iban = iban.as_bytes().chunks(4).map(|c| std::str::from_utf8(c).unwrap()).collect::<Vec<_>>().join(" ");
        }
        let text = format!("IBAN {iban}.");
        prop_assert_eq!(find(EntityType::Iban, &text), vec![iban.as_str()]);
    }

    #[test]
    fn one_changed_iban_digit_fails_mod97(bban in "[0-9]{18}", at in 4usize..22, by in 1u8..10) {
        let mut iban = iban_of("DE", &bban).into_bytes();
        iban[at] = b'0' + (iban[at] - b'0' + by) % 10;
        prop_assert!(!iban::mod97(&iban));
        prop_assert!(find(EntityType::Iban, std::str::from_utf8(&iban).unwrap()).is_empty());
    }

    #[test]
    fn valid_ssns_are_found_and_reserved_ranges_not(area in 0u32..1000, group in 0u32..100, serial in 0u32..10000) {
        let text = format!("ssn {area:03}-{group:02}-{serial:04}.");
        let valid = area != 0 && area != 666 && area < 900 && group != 0 && serial != 0;
        prop_assert_eq!(find(EntityType::UsSsn, &text).len(), usize::from(valid));
    }

    #[test]
    fn any_text_never_panics_and_spans_are_char_boundaries(text in "\\PC{0,80}") {
        let r = Recognizers::new(&EntityType::ALL).unwrap();
        for f in r.find(&text) {
            prop_assert!(text.is_char_boundary(f.span.start) && text.is_char_boundary(f.span.end));
            prop_assert!(f.span.start < f.span.end);
        }
    }
}
