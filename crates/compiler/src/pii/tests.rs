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

/// A piece of generated text: a valid entity of some type, a number or word that looks like
/// one (the candidates every family must refuse), or plain words.
fn piece() -> impl Strategy<Value = String> {
    let card = (prop::collection::vec(0u8..10, 18), 0usize..4, 0usize..3).prop_map(
        |(body, issuer, group)| {
            let (prefix, len): (&[u8], usize) = [
                (&[4][..], 16),
                (&[5, 3][..], 16),
                (&[3, 7][..], 15),
                (&[6, 0, 1, 1][..], 19),
            ][issuer];
            let digits = text_of(&with_luhn(prefix, &body, len));
            match group {
                0 => digits,
                sep => digits
                    .as_bytes()
                    .chunks(4)
                    .map(|c| std::str::from_utf8(c).unwrap())
                    .collect::<Vec<_>>()
                    .join(if sep == 1 { " " } else { "-" }),
            }
        },
    );
    let iban = ("[0-9]{18}", any::<bool>()).prop_map(|(bban, spaced)| {
        let iban = iban_of("DE", &bban);
        if spaced {
            iban.as_bytes()
                .chunks(4)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            iban
        }
    });
    let ssn = (
        0u32..1000,
        0u32..100,
        0u32..10000,
        prop::sample::select(vec!["-", " "]),
    )
        .prop_map(|(a, g, s, sep)| format!("{a:03}{sep}{g:02}{sep}{s:04}"));
    let ipv4 = prop::array::uniform4(0u16..300).prop_map(|[a, b, c, d]| format!("{a}.{b}.{c}.{d}"));
    let entities = prop_oneof![
        card,
        iban,
        ssn,
        ipv4,
        "[a-z]{1,8}(\\.[a-z]{1,5})?@[a-z]{2,8}\\.(com|org|co\\.uk)",
        "\\+1 [2-9][0-9]{2}-[2-9][0-9]{2}-[0-9]{4}",
        "\\(212\\) 555-01[0-9]{2}|\\+44 20 7946 0[0-9]{3}|020 7946 09[0-9]{2}",
        "[0-9a-f]{1,4}(:[0-9a-f]{1,4}){0,3}::[0-9a-f]{0,4}(:[0-9a-f]{1,4}){0,2}",
        "AKIA[0-9A-Z]{16}|ghp_[A-Za-z0-9]{36}|sk-(proj-)?[A-Za-z0-9]{32,40}|xoxb-[0-9]{4,12}-[a-zA-Z0-9]{6,12}",
        "AIza[0-9A-Za-z_\\-]{35}|sk_live_[0-9A-Za-z]{24,30}",
        Just("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl".to_string()),
        Just("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.".to_string()),
        Just(format!("-----BEGIN PRIVATE KEY-----\n{PEM_BODY}-----END PRIVATE KEY-----")),
        Just(format!("-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}")),
    ];
    let look_alikes = prop_oneof![
        "[0-9]{1,20}",
        "[0-9]{1,4}([-. :/][0-9]{1,4}){1,6}",
        "\\+?\\(?[0-9]{2,4}\\)? ?[0-9]{3,4}[ .\\-][0-9]{3,5}",
        "[0-9a-fA-F:]{1,14}",
        "v?[0-9]{1,3}(\\.[0-9]{1,3}){2,4}",
        "[A-Z]{2}[0-9]{2}[A-Z0-9 ]{8,32}",
        "[a-z.]{1,6}@[a-z]{1,6}",
        "(sk|ghp|xoxb|AKIA|AIza|eyJ)[_\\-]?[A-Za-z0-9_\\-]{0,40}",
        "-----BEGIN [A-Z ]{0,12}KEY-----\n?[A-Za-z0-9+/]{0,70}",
    ];
    prop_oneof![
        3 => entities,
        3 => look_alikes,
        2 => "[a-zé]{1,10}",
    ]
}

/// Text that glues pieces together with nothing, spaces, punctuation, hidden characters and
/// other scripts, so every entity is tried at every kind of boundary.
fn generated_text() -> impl Strategy<Value = String> {
    let glue = prop::sample::select(vec![
        " ", " ", ", ", "", "\n", ".", "-", "_", ":", "@", "+", "(", "\u{200B}", "é", "号", "«",
    ]);
    prop::collection::vec((piece(), glue), 0..24).prop_map(|pieces| {
        pieces
            .into_iter()
            .flat_map(|(p, g)| [p, g.to_string()])
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn one_pass_finds_what_the_search_per_family_finds(
        text in generated_text(),
        types in prop::sample::subsequence(EntityType::ALL.to_vec(), 1..=9),
    ) {
        let r = Recognizers::new(&types).unwrap();
        let found = r.find(&text);
        prop_assert_eq!(&found, &r.find_per_family(&text), "types {:?} in {:?}", types, text);
        prop_assert_eq!(r.any(&text), !found.is_empty());
    }
}

#[test]
fn one_pass_keeps_candidates_of_families_that_overlap() {
    // One run of digits is a phone candidate, a card candidate and holds an SSN-shaped
    // candidate; the families' candidates overlap and each must still be searched. The SSN is
    // also a phone candidate: two families whose candidates start at the same byte.
    let r = Recognizers::new(&EntityType::ALL).unwrap();
    let text = "call 4111 1111 1111 1111, 212-555-0100, 123-45-6789 from 10.0.0.1:8080";
    let kinds: Vec<(EntityType, &str)> = r
        .find(text)
        .into_iter()
        .map(|f| (f.kind, &text[f.span]))
        .collect();
    assert_eq!(
        kinds,
        [
            (EntityType::CreditCard, "4111 1111 1111 1111"),
            (EntityType::Phone, "212-555-0100"),
            (EntityType::UsSsn, "123-45-6789"),
            (EntityType::IpAddress, "10.0.0.1"),
        ]
    );
    assert_eq!(r.find(text), r.find_per_family(text));
}

#[test]
fn a_text_that_makes_the_one_pass_search_give_up_is_searched_per_family() {
    // The smallest state cache the lazy DFAs accept: text with many different candidates has
    // it cleared over and over, building a state every few bytes, and the search gives up.
    let r = (8..24)
        .find_map(|bits| Recognizers::with_cache_capacity(&EntityType::ALL, 1 << bits).ok())
        .unwrap();
    let mut text = String::new();
    for i in 0..400u64 {
        let n = i.wrapping_mul(2_654_435_761) % 1_000_000_007;
        text.push_str(&format!(
            "{n}-{i} +{n} x{n:x}:{i:x}::{n:X} sk-{n}{i}abcdefghijklmnopqrstuvwxyz0123 "
        ));
    }
    text.push_str("mail jane.doe@example.com, card 4111 1111 1111 1111, ssn 123-45-6789");
    let (scanner, _) = r.scanner.as_ref().unwrap();
    assert!(
        scanner.candidates(&text, &mut |_, _| false).is_err(),
        "the one-pass search did not give up"
    );
    let found = r.find(&text);
    assert!(found.len() >= 3, "{found:?}");
    assert_eq!(found, r.find_per_family(&text));
}

#[test]
fn phone_leaves_ip_addresses_and_part_numbers_alone() {
    use EntityType::Phone as P;
    none(P, "Allow 242.55.139.14 in the firewall.");
    none(P, "服务器地址：249.72.57.100");
    none(P, "Part no. 123-45-67890 in the catalogue.");
    none(P, "Invoice INV-1983-509379 is due.");
    // Written nationally, British numbers keep their trunk 0 and North American ones their
    // dots in three groups.
    assert_eq!(find(P, "ring 020 7946 0958 today"), ["020 7946 0958"]);
    assert_eq!(find(P, "or 212.555.0100."), ["212.555.0100"]);
    assert_eq!(find(P, "+44.20.7946.0958"), ["+44.20.7946.0958"]);
}

#[test]
fn an_entity_inside_a_longer_one_of_another_type_is_part_of_it() {
    let all = Recognizers::new(&EntityType::ALL).unwrap();
    let text = "pay to iban PL30 1998 5167 8185 5623 8478 1622, thanks";
    let found: Vec<(EntityType, &str)> = all
        .find(text)
        .into_iter()
        .map(|f| (f.kind, &text[f.span]))
        .collect();
    assert_eq!(
        found,
        [(EntityType::Iban, "PL30 1998 5167 8185 5623 8478 1622")]
    );
    // Alone, the card recognizer still sees the card-shaped run: it cannot know the IBAN.
    assert_eq!(find(EntityType::CreditCard, text), ["5167 8185 5623 8478"]);
    assert_eq!(all.find_per_family(text), all.find(text));
}

#[test]
fn an_apostrophe_is_part_of_a_name_not_of_a_quote() {
    use EntityType::Email as E;
    assert_eq!(
        find(E, "\"O'Brien@example.ie\" is on the list."),
        ["O'Brien@example.ie"]
    );
    assert_eq!(find(E, "say 'bob@example.org' twice"), ["bob@example.org"]);
    none(E, "a lone '@example.org");
}

#[test]
fn a_hyphenated_phrase_after_sk_is_not_a_key_even_with_a_digit() {
    use EntityType::ApiKey as K;
    none(
        K,
        "We use an sk-learn-pipeline-for-text-classification-tasks-v2 model.",
    );
    assert_eq!(
        find(K, "key sk-proj-Ab3dEf6hIj9k-Lm2nOp5qRs8tUv1wXy4zAb7cDe end"),
        ["sk-proj-Ab3dEf6hIj9k-Lm2nOp5qRs8tUv1wXy4zAb7cDe"]
    );
}

/// Written numbers of every shape the phone recognizer validates: valid and invalid, each
/// way of writing them (`+`, `00`, nationally), so the memo holds verdicts of both kinds.
const WRITTEN_NUMBERS: [&str; 12] = [
    "+44 20 7946 0958",
    "+44 20 7946 095",
    "0044 20 7946 0958",
    "0044 10 7946 0958",
    "020 7946 0958",
    "20 7946 0958",
    "(212) 555-0100",
    "(012) 555-0100",
    "+1 212-555-0100",
    "+1 000-000-0000",
    "+49 30 901820",
    "212.555.0100",
];

#[test]
fn a_remembered_verdict_is_the_verdict_libphonenumber_gives() {
    for _round in 0..3 {
        for written in WRITTEN_NUMBERS {
            assert_eq!(
                super::phone::is_phone(written),
                super::phone::is_phone_unmemoised(written),
                "{written}"
            );
        }
    }
    let valid: Vec<&str> = WRITTEN_NUMBERS
        .into_iter()
        .filter(|w| super::phone::is_phone(w))
        .collect();
    assert_eq!(
        valid,
        [
            "+44 20 7946 0958",
            "0044 20 7946 0958",
            "020 7946 0958",
            // Without the trunk 0 it is no British number but a North American one (Maine).
            "20 7946 0958",
            "(212) 555-0100",
            "+1 212-555-0100",
            "+49 30 901820",
            "212.555.0100"
        ]
    );
}

#[test]
fn the_memo_of_verdicts_stays_bounded() {
    // More distinct valid London numbers than the memo holds: it keeps at most its capacity,
    // and the numbers it dropped are validated again with the same verdict.
    let numbers: Vec<String> = (0..super::phone::MEMO_CAPACITY + 256)
        .map(|i| format!("+44 20 7946 {i:04}"))
        .collect();
    for n in &numbers {
        assert!(super::phone::is_phone(n), "{n}");
    }
    assert!(super::phone::memo_len() <= super::phone::MEMO_CAPACITY);
    for n in numbers.iter().take(16) {
        assert!(super::phone::is_phone(n), "{n}");
    }
}
