//! Personal data and secrets in text: the built-in recognizers behind `pii(TEXT, [types])`.
//!
//! Each entity type is one family module that owns a *candidate* pattern (a cheap regex that
//! over-matches) and a *validator* (Luhn, mod-97, issuer and country tables, std address
//! parsing, base64url + JSON...) that turns candidates into [`Found`] spans. A [`Recognizers`]
//! for a set of types is built once per `pii` atom at policy load. Its search reads the text
//! once for all the families together (the `scan` module: one reverse lazy DFA of every
//! candidate pattern finds where each family's candidates start) and then only the candidates
//! again, to find their ends and validate them; a prompt costs one automaton pass whatever the
//! types. The families whose candidates start with a literal (`api_key`, `private_key`, `jwt`)
//! stay out of that pass: the `regex` crate finds their literals faster than any automaton
//! reads the text. [`Recognizers::find_per_family`], a [`RegexSet`] prefilter followed by one
//! search per family that can match, is the reference the one-pass search is tested against,
//! and what it falls back to on a text that makes the lazy DFA give up.
//!
//! Recognizers read the raw text, so spans are byte ranges of what the client sent (redaction
//! needs them). Digit-based families allow hidden characters (zero-width space and joiners,
//! word joiner, BOM, soft hyphen) between digits, so a card number cannot be slipped past by
//! interleaving them; entity boundaries are checked on the raw text around the candidate.

/// The hidden characters a candidate may carry between its characters (zero or more): soft
/// hyphen, zero-width space/non-joiner/joiner, word joiner, BOM. A macro so patterns can
/// `concat!` it.
macro_rules! hidden {
    () => {
        r"[\x{AD}\x{200B}-\x{200D}\x{2060}\x{FEFF}]*"
    };
}

mod api_key;
mod card;
mod detected;
mod email;
mod iban;
mod ip;
mod jwt;
mod memo;
mod phone;
mod private_key;
mod scan;
mod ssn;
#[cfg(test)]
mod tests;
mod vault;

pub use detected::{Detected, Detections, DetectorTypes, Kind};
pub use vault::{Redact, Restoring, Vault};

use regex::{Regex, RegexSet};
use std::ops::Range;

/// A kind of personal data or secret the built-in recognizers find.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntityType {
    Email,
    Phone,
    CreditCard,
    Iban,
    UsSsn,
    IpAddress,
    ApiKey,
    PrivateKey,
    Jwt,
}

impl EntityType {
    /// Every type, in the documented order.
    pub const ALL: [EntityType; 9] = [
        EntityType::Email,
        EntityType::Phone,
        EntityType::CreditCard,
        EntityType::Iban,
        EntityType::UsSsn,
        EntityType::IpAddress,
        EntityType::ApiKey,
        EntityType::PrivateKey,
        EntityType::Jwt,
    ];

    /// The name a policy writes.
    pub fn name(self) -> &'static str {
        match self {
            EntityType::Email => "email",
            EntityType::Phone => "phone",
            EntityType::CreditCard => "credit_card",
            EntityType::Iban => "iban",
            EntityType::UsSsn => "us_ssn",
            EntityType::IpAddress => "ip_address",
            EntityType::ApiKey => "api_key",
            EntityType::PrivateKey => "private_key",
            EntityType::Jwt => "jwt",
        }
    }

    /// The type a policy names `name`, if any.
    pub fn from_name(name: &str) -> Option<EntityType> {
        EntityType::ALL.into_iter().find(|t| t.name() == name)
    }

    fn family(self) -> Family {
        match self {
            EntityType::Email => email::FAMILY,
            EntityType::Phone => phone::FAMILY,
            EntityType::CreditCard => card::FAMILY,
            EntityType::Iban => iban::FAMILY,
            EntityType::UsSsn => ssn::FAMILY,
            EntityType::IpAddress => ip::FAMILY,
            EntityType::ApiKey => api_key::FAMILY,
            EntityType::PrivateKey => private_key::FAMILY,
            EntityType::Jwt => jwt::FAMILY,
        }
    }
}

impl std::fmt::Display for EntityType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One entity found: where (byte offsets into the raw text) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub span: Range<usize>,
    pub kind: EntityType,
}

/// A family's candidate validator: given the text and one candidate match, push the spans
/// of the real entities in it (none, one, or several for a run holding more than one).
type Accept = fn(&str, Range<usize>, &mut Vec<Range<usize>>);

/// What a family module provides.
#[derive(Clone, Copy)]
pub(crate) struct Family {
    /// The candidate regex: it may over-match, never under-match.
    pattern: &'static str,
    accept: Accept,
    /// Whether every candidate starts with one of a few literals (`AKIA`, `-----BEGIN `,
    /// `eyJ`): the `regex` crate then finds candidates by looking for those literals alone,
    /// which costs less than a pass of the one-pass automaton, so the family is searched
    /// alone.
    prefixed: bool,
}

/// Why the recognizers of a set of types cannot be built (a built-in pattern that does not
/// compile, which the unit tests rule out).
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Regex(#[from] regex::Error),
    /// Boxed: the lazy DFA's build error is large, and this one travels in every policy
    /// compile's `Result`.
    #[error(transparent)]
    Scanner(#[from] Box<scan::BuildError>),
}

/// The most bytes of lazy DFA states the one-pass search keeps per searching thread, in each
/// of its two automata: the `regex` crate's default.
const CACHE_CAPACITY: usize = 2 * (1 << 20);

/// `found` ordered by start, without an entity that lies wholly inside a longer one of another
/// type: the card or phone digits inside an IBAN are part of the IBAN, not a second value.
fn inner_dropped(mut found: Vec<Found>) -> Vec<Found> {
    found.sort_by_key(|f| (f.span.start, std::cmp::Reverse(f.span.end), f.kind));
    let mut kept: Vec<Found> = Vec::with_capacity(found.len());
    for f in found {
        // Sorted by start, then longest first: an enclosing entity comes before what it holds.
        let inside = kept.iter().rev().any(|k| {
            k.kind != f.kind
                && k.span.start <= f.span.start
                && f.span.end <= k.span.end
                && k.span.len() > f.span.len()
        });
        if !inside {
            kept.push(f);
        }
    }
    kept.sort_by_key(|f| (f.span.start, f.span.end, f.kind));
    kept
}

/// The recognizers of a set of entity types, built once per set.
#[derive(Debug, Clone)]
pub struct Recognizers {
    types: Vec<EntityType>,
    /// The one-pass search of the families that are not prefixed, if any, with their indices.
    scanner: Option<(scan::Scanner, Vec<usize>)>,
    /// The indices of the prefixed families, each searched alone.
    prefixed: Vec<usize>,
    prefilter: RegexSet,
    candidates: Vec<Regex>,
    accepts: Vec<Accept>,
}

impl Recognizers {
    /// The recognizers of `types` (duplicates are ignored). Fails only if a built-in pattern
    /// does not compile, which the unit tests rule out.
    pub fn new(types: &[EntityType]) -> Result<Recognizers, BuildError> {
        Recognizers::with_cache_capacity(types, CACHE_CAPACITY)
    }

    fn with_cache_capacity(
        types: &[EntityType],
        cache_capacity: usize,
    ) -> Result<Recognizers, BuildError> {
        let mut types = types.to_vec();
        types.sort();
        types.dedup();
        let families: Vec<Family> = types.iter().map(|t| t.family()).collect();
        let patterns: Vec<&str> = families.iter().map(|f| f.pattern).collect();
        let (prefixed, scanned): (Vec<usize>, Vec<usize>) =
            (0..families.len()).partition(|&i| families[i].prefixed);
        let scanner = if scanned.is_empty() {
            None
        } else {
            let patterns: Vec<&str> = scanned.iter().map(|&i| patterns[i]).collect();
            let scanner = scan::Scanner::new(&patterns, cache_capacity)?;
            Some((scanner, scanned))
        };
        let prefilter = RegexSet::new(&patterns)?;
        let candidates = families
            .iter()
            .map(|f| Regex::new(f.pattern))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Recognizers {
            types,
            scanner,
            prefixed,
            prefilter,
            candidates,
            accepts: families.iter().map(|f| f.accept).collect(),
        })
    }

    /// The types these recognizers find.
    pub fn types(&self) -> &[EntityType] {
        &self.types
    }

    /// Every entity of the set in `text`, ordered by start.
    pub fn find(&self, text: &str) -> Vec<Found> {
        let mut found = Vec::new();
        self.scan(text, &mut |kind, span| {
            found.push(Found { span, kind });
            false
        });
        inner_dropped(found)
    }

    /// What [`Recognizers::find`] finds, searched family by family: the prefilter says which
    /// families have a candidate anywhere, then each of those reads the text again. The
    /// reference the one-pass search must agree with.
    pub fn find_per_family(&self, text: &str) -> Vec<Found> {
        let mut found = Vec::new();
        self.scan_per_family(text, &mut |kind, span| {
            found.push(Found { span, kind });
            false
        });
        inner_dropped(found)
    }

    /// Whether `text` holds any entity of the set; validates candidates only up to the first
    /// entity.
    pub fn any(&self, text: &str) -> bool {
        let mut any = false;
        self.scan(text, &mut |_, _| {
            any = true;
            true
        });
        any
    }

    /// Calls `sink` with each entity found until it returns `true`: the one-pass search and
    /// the prefixed families alone, or every family alone where the one-pass search gives up.
    fn scan(&self, text: &str, sink: &mut dyn FnMut(EntityType, Range<usize>) -> bool) {
        if text.is_empty() {
            return;
        }
        let mut spans = Vec::new();
        let mut stop = false;
        if let Some((scanner, families)) = &self.scanner {
            let searched = scanner.candidates(text, &mut |j, candidate| {
                let i = families[j];
                spans.clear();
                (self.accepts[i])(text, candidate, &mut spans);
                stop = spans.drain(..).any(|span| sink(self.types[i], span));
                stop
            });
            if searched.is_err() {
                return self.scan_per_family(text, sink);
            }
        }
        if stop {
            return;
        }
        for &i in &self.prefixed {
            for m in self.candidates[i].find_iter(text) {
                spans.clear();
                (self.accepts[i])(text, m.range(), &mut spans);
                if spans.drain(..).any(|span| sink(self.types[i], span)) {
                    return;
                }
            }
        }
    }

    /// [`Recognizers::scan`] family by family.
    fn scan_per_family(&self, text: &str, sink: &mut dyn FnMut(EntityType, Range<usize>) -> bool) {
        if text.is_empty() {
            return;
        }
        let mut spans = Vec::new();
        for i in self.prefilter.matches(text).iter() {
            for m in self.candidates[i].find_iter(text) {
                spans.clear();
                (self.accepts[i])(text, m.range(), &mut spans);
                for span in spans.drain(..) {
                    if sink(self.types[i], span) {
                        return;
                    }
                }
            }
        }
    }
}

/// The character just before byte `at`, if any.
pub(crate) fn before(text: &str, at: usize) -> Option<char> {
    text.get(..at).and_then(|s| s.chars().next_back())
}

/// The character at byte `at`, if any.
pub(crate) fn after(text: &str, at: usize) -> Option<char> {
    text.get(at..).and_then(|s| s.chars().next())
}

/// Whether `span` stands alone: no letter or digit that glues to it (see [`glues`]) or one of
/// `joiners` touches it on either side.
pub(crate) fn bounded(text: &str, span: &Range<usize>, joiners: &[char]) -> bool {
    let free = |c: Option<char>| c.is_none_or(|c| !glues(c) && !joiners.contains(&c));
    free(before(text, span.start)) && free(after(text, span.end))
}

/// Whether a letter or digit `c` next to an entity makes it part of a longer word. Scripts
/// written without spaces between words (Thai, Lao, Myanmar, Khmer, Han, kana; Hangul,
/// whose particles attach to numbers) put an entity right against their letters, so those do
/// not glue: U+0E00 to U+1CFF and from U+2E80 on, except fullwidth Latin letters and digits.
pub(crate) fn glues(c: char) -> bool {
    let u = u32::from(c);
    let unspaced =
        (0x0E00..0x1D00).contains(&u) || (u >= 0x2E80 && !(0xFF10..=0xFF5A).contains(&u));
    c.is_alphanumeric() && !unspaced
}

/// The ASCII digits of `s` as numbers, skipping everything else.
pub(crate) fn digits(s: &str) -> Vec<u8> {
    s.bytes()
        .filter(u8::is_ascii_digit)
        .map(|b| b - b'0')
        .collect()
}

/// Whether a number-like `span` stands alone: no letter or digit touches it, nor a `-`, `.`
/// or `,` that continues it into more digits (`1.2.3.4.5`, `123-45-6789-0`).
pub(crate) fn bounded_num(text: &str, span: &Range<usize>) -> bool {
    let joins = |c: char| matches!(c, '-' | '.' | ',');
    let start_ok = match before(text, span.start) {
        None => true,
        Some(c) if glues(c) => false,
        Some(c) if joins(c) => {
            !before(text, span.start - c.len_utf8()).is_some_and(|d| d.is_ascii_digit())
        }
        Some(_) => true,
    };
    let end_ok = match after(text, span.end) {
        None => true,
        Some(c) if glues(c) => false,
        Some(c) if joins(c) => {
            !after(text, span.end + c.len_utf8()).is_some_and(|d| d.is_ascii_digit())
        }
        Some(_) => true,
    };
    start_ok && end_ok
}

/// Whether `c` is one of the hidden characters of `hidden!()`.
pub(crate) fn is_hidden(c: char) -> bool {
    matches!(
        c,
        '\u{AD}' | '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}'
    )
}
