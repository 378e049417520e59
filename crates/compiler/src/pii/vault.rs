//! `redact = [types]`: values swapped for typed placeholders on the way to a model, and put back
//! in its answer.
//!
//! A [`Redact`] is a route's or block's set of types with its recognizers, built once at policy
//! load. A [`Vault`] lives for one request: [`Vault::redact`] replaces every entity of the set in
//! a text by `<TYPE_N>` (`<EMAIL_1>`, `<CREDIT_CARD_2>`), the same value by the same placeholder
//! wherever it appears in the request, and remembers the pair; [`Vault::restore`] puts the values
//! back into a whole text. An answer that streams comes in pieces that may cut a placeholder
//! anywhere, so a [`Restoring`] channel holds back only a tail that can still grow into one of
//! the vault's placeholders (never more than the longest of them) and lets the rest through.
//!
//! A detector's entities are a second source of spans: the runtime runs the model and gives the
//! vault what it found ([`Vault::with_detections`]), merged with the recognizers' spans.
//!
//! A vault made [`Vault::for_tenant`] asks its redaction's memo (`memo`) what a text holds
//! before searching it, so a conversation's history resent at every turn is searched once per
//! tenant.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use super::detected::{merged, Detections, DetectorTypes, Kind};
use super::memo::{self, Memo};
use super::{BuildError, EntityType, Found, Recognizers};

/// The types a route or block redacts, with their recognizers and the memo of what they found.
#[derive(Clone)]
pub struct Redact {
    recognizers: Arc<Recognizers>,
    /// The detectors' types, found by the runtime.
    detectors: Vec<DetectorTypes>,
    memo: Arc<Memo>,
}

impl Redact {
    /// The redaction of `types` (duplicates are ignored).
    pub fn new(types: &[EntityType]) -> Result<Redact, BuildError> {
        Ok(Redact {
            recognizers: Arc::new(Recognizers::new(types)?),
            detectors: Vec::new(),
            memo: Arc::new(Memo::new()),
        })
    }

    /// This redaction with the types of `detectors` too.
    pub fn with_detectors(mut self, detectors: Vec<DetectorTypes>) -> Redact {
        self.detectors = detectors;
        self
    }

    /// The built-in types redacted, in the documented order.
    pub fn types(&self) -> &[EntityType] {
        self.recognizers.types()
    }

    /// The detectors whose types are redacted, each once.
    pub fn detectors(&self) -> &[DetectorTypes] {
        &self.detectors
    }

    /// Every type redacted as a policy names it: the built-in ones, then each detector's
    /// qualified by its name (`people.PERSON`).
    pub fn names(&self) -> Vec<String> {
        let builtin = self.types().iter().map(|t| t.name().to_owned());
        let detected = self
            .detectors
            .iter()
            .flat_map(|d| d.types.iter().map(move |t| format!("{}.{t}", d.name)));
        builtin.chain(detected).collect()
    }

    /// The entities of `text`, from the memo under `scope` (a tenant's keyed hash) when there
    /// is one.
    fn find(&self, scope: Option<u128>, text: &str) -> Arc<[Found]> {
        match scope {
            Some(scope) => self.memo.spans(scope, text, || self.recognizers.find(text)),
            None => self.recognizers.find(text).into(),
        }
    }

    /// How many texts and bytes the memo holds.
    #[cfg(test)]
    pub(super) fn memo_size(&self) -> (usize, u64) {
        self.memo.size()
    }

    #[cfg(test)]
    pub(super) fn with_memo_bytes(types: &[EntityType], bytes: u64) -> Result<Redact, BuildError> {
        Ok(Redact {
            recognizers: Arc::new(Recognizers::new(types)?),
            detectors: Vec::new(),
            memo: Arc::new(Memo::with_capacity(bytes)),
        })
    }
}

impl PartialEq for Redact {
    fn eq(&self, other: &Redact) -> bool {
        self.types() == other.types() && self.detectors == other.detectors
    }
}

impl std::fmt::Debug for Redact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Redact").field(&self.names()).finish()
    }
}

/// The values one request's texts carried and the placeholders that stand for them.
///
/// A request carries a handful of values, and a vault is made for every redacted request: up to
/// sixteen values (`SCANNED`) are found by reading the list, which costs less than hashing them;
/// past that, indexes by value and by placeholder are built and kept.
#[derive(Debug, Clone, Default)]
pub struct Vault {
    /// Each value replaced, in the order first seen.
    entries: Vec<Entry>,
    /// Per type, value → index into `entries`; empty until there are more than [`SCANNED`].
    by_value: Vec<(Kind, HashMap<Box<str>, usize>)>,
    /// Placeholder → index into `entries`; empty until there are more than [`SCANNED`].
    by_placeholder: HashMap<Box<str>, usize>,
    /// How many distinct values of each type were replaced.
    counts: Vec<(Kind, usize)>,
    /// How many spans were replaced in all (a value seen twice counts twice).
    replaced: usize,
    /// The longest placeholder, in bytes: the most a stream ever holds back.
    longest: usize,
    /// What the detectors found in the request's texts.
    detections: Option<Arc<Detections>>,
    /// The keyed hash of the tenant whose memo entries this vault reads and writes; `None`:
    /// every text is searched.
    scope: Option<u128>,
}

/// How many values a vault finds by reading its list rather than an index.
const SCANNED: usize = 16;

#[derive(Debug, Clone)]
struct Entry {
    kind: Kind,
    value: Box<str>,
    placeholder: Box<str>,
}

impl Vault {
    /// A vault that searches every text.
    pub fn new() -> Vault {
        Vault::default()
    }

    /// A vault that also replaces the entities `detections` holds for each text it redacts.
    pub fn with_detections(detections: Arc<Detections>) -> Vault {
        Vault {
            detections: Some(detections),
            ..Vault::default()
        }
    }

    /// A vault for a request of `tenant`: what a text holds is remembered in the redaction's
    /// memo under the tenant, and read from it when the tenant sends that text again. A call
    /// the policy keeps apart from every other (no credential) gets [`Vault::new`] instead.
    pub fn for_tenant(tenant: &str) -> Vault {
        Vault {
            scope: memo::keyed(tenant.as_bytes()),
            ..Vault::default()
        }
    }

    /// This vault going on with what the detectors found (`found`, a vault
    /// [`Vault::with_detections`] made for the same request).
    pub fn detect_as(&mut self, found: Vault) {
        if found.detections.is_some() {
            self.detections = found.detections;
        }
    }

    /// This vault going on from `earlier`'s values (a chain's vault, [`Vault::resume`]): each
    /// keeps the placeholder it had, and a new value gets the next number of its type.
    pub fn go_on_from(&mut self, earlier: &Vault) {
        for entry in &earlier.entries {
            self.placeholder(entry.kind.clone(), &entry.value);
        }
    }

    /// `text` with each entity of `redact`'s types replaced by its placeholder; `None` when it
    /// holds none (the text stays as it is).
    pub fn redact(&mut self, redact: &Redact, text: &str) -> Option<String> {
        let mut out = String::new();
        let mut at = 0;
        let found = self.redact_spans(redact, text, |span, placeholder| {
            if out.capacity() == 0 {
                // A placeholder may be longer than its value (`<IP_ADDRESS_1>` for `10.0.0.7`).
                out.reserve(text.len() + 16);
            }
            out.push_str(&text[at..span.start]);
            out.push_str(placeholder);
            at = span.end;
        });
        if !found {
            return None;
        }
        out.push_str(&text[at..]);
        Some(out)
    }

    /// Replaces each entity of `redact`'s types in `text` as [`Vault::redact`] does, handing
    /// `each` the entity's bytes in `text` and its placeholder, in the order of the text, instead
    /// of writing the redacted text: a caller that holds `text` in a larger buffer writes the
    /// placeholders there itself. Whether `text` held any entity.
    pub fn redact_spans(
        &mut self,
        redact: &Redact,
        text: &str,
        mut each: impl FnMut(Range<usize>, &str),
    ) -> bool {
        let found = redact.find(self.scope, text);
        if self.detections.is_none() {
            // The common case: the recognizers' spans alone, read where the memo keeps them.
            let mut at = 0;
            for f in found.iter() {
                self.replace(Kind::Pii(f.kind), f.span.clone(), text, &mut at, &mut each);
            }
            return !found.is_empty();
        }
        // An `Arc` clone: the spans are read while entries are added.
        let detections = self.detections.clone();
        let detected = detections.as_deref().map_or(&[][..], |d| d.of(text));
        if found.is_empty() && detected.is_empty() {
            return false;
        }
        let mut at = 0;
        let spans: Vec<(Kind, Range<usize>)> = if detected.is_empty() {
            found
                .iter()
                .map(|f| (Kind::Pii(f.kind), f.span.clone()))
                .collect()
        } else {
            merged(&found, detected)
        };
        for (kind, span) in spans {
            self.replace(kind, span, text, &mut at, &mut each);
        }
        true
    }

    /// Replaces the entity of `kind` at `span` of `text` unless an earlier one (ending at `at`)
    /// overlaps it: spans of two types may overlap, and the first (by start) wins.
    fn replace(
        &mut self,
        kind: Kind,
        span: Range<usize>,
        text: &str,
        at: &mut usize,
        each: &mut impl FnMut(Range<usize>, &str),
    ) {
        if span.start < *at {
            return;
        }
        let i = self.placeholder(kind, &text[span.clone()]);
        *at = span.end;
        each(span, &self.entries[i].placeholder);
        self.replaced += 1;
    }

    /// The entry of `value`, made on its first sight.
    fn placeholder(&mut self, kind: Kind, value: &str) -> usize {
        if let Some(i) = self.entry_of_value(&kind, value) {
            return i;
        }
        let n = match self.counts.iter_mut().find(|(t, _)| *t == kind) {
            Some((_, n)) => {
                *n += 1;
                *n
            }
            None => {
                if self.counts.is_empty() {
                    self.counts.reserve(4);
                }
                self.counts.push((kind.clone(), 1));
                1
            }
        };
        let placeholder = placeholder(&kind, n);
        self.longest = self.longest.max(placeholder.len());
        let i = self.entries.len();
        if self.entries.is_empty() {
            // A request carries a handful of values: room for them at once, not by doubling.
            self.entries.reserve(SCANNED / 2);
        }
        self.entries.push(Entry {
            kind,
            value: value.into(),
            placeholder,
        });
        if self.entries.len() == SCANNED + 1 {
            for j in 0..self.entries.len() {
                self.index(j);
            }
        } else if self.entries.len() > SCANNED + 1 {
            self.index(i);
        }
        i
    }

    /// Puts entry `i` in the indexes.
    fn index(&mut self, i: usize) {
        let entry = &self.entries[i];
        let by_kind = match self.by_value.iter().position(|(t, _)| *t == entry.kind) {
            Some(k) => &mut self.by_value[k].1,
            None => {
                self.by_value.push((entry.kind.clone(), HashMap::new()));
                let last = self.by_value.len() - 1;
                &mut self.by_value[last].1
            }
        };
        by_kind.insert(entry.value.clone(), i);
        self.by_placeholder.insert(entry.placeholder.clone(), i);
    }

    fn entry_of_value(&self, kind: &Kind, value: &str) -> Option<usize> {
        if self.entries.len() <= SCANNED {
            return self
                .entries
                .iter()
                .position(|e| e.kind == *kind && &*e.value == value);
        }
        let (_, by_kind) = self.by_value.iter().find(|(t, _)| t == kind)?;
        by_kind.get(value).copied()
    }

    /// The value `placeholder` stands for, if it is one of this vault's.
    fn value_of(&self, placeholder: &str) -> Option<&str> {
        let i = if self.entries.len() <= SCANNED {
            self.entries
                .iter()
                .position(|e| &*e.placeholder == placeholder)?
        } else {
            *self.by_placeholder.get(placeholder)?
        };
        Some(&self.entries[i].value)
    }

    /// A vault that starts from `values` (each type with its value, in the order
    /// [`Vault::values`] gave them): each value gets back the placeholder it had, and a new value
    /// the next number of its type. A conversation whose earlier turns a backend keeps goes on
    /// with the placeholders the backend has already read. Nothing counts as replaced yet.
    pub fn resume<'a>(values: impl IntoIterator<Item = (Kind, &'a str)>) -> Vault {
        let mut vault = Vault::new();
        for (kind, value) in values {
            vault.placeholder(kind, value);
        }
        vault
    }

    /// Each value replaced with its type, in the order first seen (what [`Vault::resume`]
    /// starts from).
    pub fn values(&self) -> impl Iterator<Item = (&Kind, &str)> {
        self.entries.iter().map(|e| (&e.kind, &*e.value))
    }

    /// Whether nothing was replaced.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The types replaced with how many distinct values of each, in the documented order.
    pub fn counts(&self) -> Vec<(Kind, usize)> {
        let mut counts = self.counts.clone();
        counts.sort();
        counts
    }

    /// How many spans were replaced in all.
    pub fn replaced(&self) -> usize {
        self.replaced
    }

    /// `text` with every placeholder of this vault replaced by its value; `escape` writes each
    /// value as it goes inside a JSON string (for text that is itself JSON, such as a tool
    /// call's arguments). `None` when there was nothing to restore.
    pub fn restore(&self, text: &str, escape: bool) -> Option<String> {
        if self.entries.is_empty() || !text.contains('<') {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        let mut changed = false;
        while let Some(open) = rest.find('<') {
            out.push_str(&rest[..open]);
            let tail = &rest[open..];
            let value = tail
                .find('>')
                .filter(|&close| close < self.longest)
                .and_then(|close| Some((close, self.value_of(&tail[..=close])?)));
            match value {
                Some((close, value)) => {
                    push_value(&mut out, value, escape);
                    rest = &tail[close + 1..];
                    changed = true;
                }
                None => {
                    out.push('<');
                    rest = &tail[1..];
                }
            }
        }
        out.push_str(rest);
        changed.then_some(out)
    }

    /// Whether `tail` (which starts with `<`) can still grow into one of the placeholders.
    fn may_grow(&self, tail: &str) -> bool {
        tail.len() < self.longest && self.entries.iter().any(|e| e.placeholder.starts_with(tail))
    }
}

/// `<TYPE_N>`: the type's name in capitals and the value's number among that type's, allocated
/// once at its exact length (a vault makes one for every value of every redacted request).
fn placeholder(kind: &Kind, n: usize) -> Box<str> {
    let name = kind.name();
    // The digits of `n`, least significant first.
    let mut digits = [0u8; 20];
    let mut len = 0;
    let mut rest = n;
    loop {
        digits[len] = b'0' + (rest % 10) as u8;
        len += 1;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let mut out = String::with_capacity(name.len() + len + 3);
    out.push('<');
    out.push_str(name);
    out.make_ascii_uppercase();
    out.push('_');
    out.extend(digits[..len].iter().rev().map(|&d| char::from(d)));
    out.push('>');
    out.into_boxed_str()
}

fn push_value(out: &mut String, value: &str, escape: bool) {
    if !escape {
        out.push_str(value);
        return;
    }
    // A JSON string's inside: its quotes taken off.
    let quoted = serde_json::Value::String(value.to_owned()).to_string();
    out.push_str(&quoted[1..quoted.len() - 1]);
}

/// One streamed text (a choice's content, a tool call's arguments, a content block's text),
/// restored piece by piece.
#[derive(Debug, Clone, Default)]
pub struct Restoring {
    held: String,
    escape: bool,
}

impl Restoring {
    /// `escape`: the text is JSON (see [`Vault::restore`]).
    pub fn new(escape: bool) -> Restoring {
        Restoring {
            held: String::new(),
            escape,
        }
    }

    /// What the client gets for the stream's next piece: restored up to any tail that may still
    /// become a placeholder, which is held for the next piece.
    pub fn push(&mut self, vault: &Vault, piece: &str) -> String {
        self.held.push_str(piece);
        let text = std::mem::take(&mut self.held);
        let keep = text
            .rfind('<')
            .filter(|&at| vault.may_grow(&text[at..]))
            .unwrap_or(text.len());
        self.held = text[keep..].to_owned();
        let ready = &text[..keep];
        vault
            .restore(ready, self.escape)
            .unwrap_or_else(|| ready.to_owned())
    }

    /// Whether a tail is held.
    pub fn holds(&self) -> bool {
        !self.held.is_empty()
    }

    /// The tail held, restored as it is (the stream ended without completing a placeholder).
    pub fn flush(&mut self, vault: &Vault) -> String {
        let held = std::mem::take(&mut self.held);
        vault.restore(&held, self.escape).unwrap_or(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redact(types: &[EntityType]) -> Redact {
        match Redact::new(types) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn the_same_value_gets_the_same_placeholder_and_comes_back() {
        let r = redact(&[EntityType::Email, EntityType::CreditCard]);
        let mut vault = Vault::new();
        let a = vault.redact(&r, "mail ann@example.com or bob@example.org");
        let b = vault.redact(&r, "card 4111 1111 1111 1111, again ann@example.com");
        assert_eq!(a.as_deref(), Some("mail <EMAIL_1> or <EMAIL_2>"));
        assert_eq!(b.as_deref(), Some("card <CREDIT_CARD_1>, again <EMAIL_1>"));
        assert_eq!(vault.redact(&r, "nothing here"), None);
        assert_eq!(
            vault.counts(),
            vec![
                (EntityType::Email.into(), 2),
                (EntityType::CreditCard.into(), 1)
            ]
        );
        assert_eq!(vault.replaced(), 4);
        assert_eq!(
            vault.restore("to <EMAIL_2> and <EMAIL_1>, <EMAIL_9> <b>", false),
            Some("to bob@example.org and ann@example.com, <EMAIL_9> <b>".to_owned())
        );
        assert_eq!(vault.restore("no placeholder <here>", false), None);
    }

    #[test]
    fn a_vault_past_its_scanned_list_finds_values_and_placeholders_by_index() {
        let r = redact(&[EntityType::Email, EntityType::IpAddress]);
        let mut vault = Vault::new();
        let values: Vec<String> = (0..3 * SCANNED)
            .map(|i| format!("u{i}@example.com"))
            .collect();
        // Each text brings a new value and one already seen, and an address of another type.
        for (i, value) in values.iter().enumerate() {
            let text = format!("{value} and {} from 10.0.0.{}", values[i / 2], i % 3);
            let redacted = vault.redact(&r, &text).unwrap_or_default();
            let expected = format!(
                "<EMAIL_{}> and <EMAIL_{}> from <IP_ADDRESS_{}>",
                i + 1,
                i / 2 + 1,
                (i % 3) + 1
            );
            assert_eq!(redacted, expected);
            assert_eq!(vault.restore(&redacted, false), Some(text));
        }
        assert_eq!(
            vault.counts(),
            vec![
                (EntityType::Email.into(), 3 * SCANNED),
                (EntityType::IpAddress.into(), 3)
            ]
        );
        assert_eq!(vault.replaced(), 3 * 3 * SCANNED);
        assert_eq!(
            vault.restore("<EMAIL_49> <EMAIL_0> <EMAIL_10>", false),
            Some("<EMAIL_49> <EMAIL_0> u9@example.com".to_owned())
        );
        let mut stream = Restoring::new(false);
        assert_eq!(stream.push(&vault, "to <EMAIL_4"), "to ");
        assert_eq!(stream.push(&vault, "8>."), "u47@example.com.");
    }

    /// A conversation's texts, one more each turn, each later one with a new value.
    const TURNS: [&str; 5] = [
        "update jane.doe@example.com, +44 20 7946 0958, 192.168.0.1, DE89 3704 0044 0532 0130 00",
        "Noted, I have updated the contact.",
        "also, the new number is +44 20 7946 0001 (not 0958), please keep it",
        "and write to bob@example.org from 10.0.0.7 — é ü \u{200B}",
        "nothing new here, order 12345678",
    ];

    fn four() -> Redact {
        redact(&[
            EntityType::Email,
            EntityType::Phone,
            EntityType::IpAddress,
            EntityType::Iban,
        ])
    }

    /// Every turn's request, redacted by `vault()`'s vaults, one per request.
    fn conversation(r: &Redact, vault: impl Fn() -> Vault) -> Vec<Vec<Option<String>>> {
        (1..=TURNS.len())
            .map(|n| {
                let mut v = vault();
                TURNS[..n].iter().map(|t| v.redact(r, t)).collect()
            })
            .collect()
    }

    #[test]
    fn a_tenant_s_texts_sent_again_are_read_from_the_memo_and_redacted_the_same() {
        let r = four();
        let searched = conversation(&r, Vault::new);
        assert_eq!(r.memo_size().0, 0, "a vault without a tenant keeps nothing");
        assert_eq!(
            searched[4][2].as_deref(),
            Some("also, the new number is <PHONE_2> (not 0958), please keep it")
        );
        let remembered = conversation(&r, || Vault::for_tenant("tenant-a"));
        assert_eq!(remembered, searched);
        // Each text was searched once and kept once, entities or not.
        assert_eq!(r.memo_size().0, TURNS.len());
        let again = conversation(&r, || Vault::for_tenant("tenant-a"));
        assert_eq!(again, searched);
        assert_eq!(r.memo_size().0, TURNS.len());
        // Another tenant's texts are its own entries, found the same.
        assert_eq!(conversation(&r, || Vault::for_tenant("tenant-b")), searched);
        assert_eq!(r.memo_size().0, 2 * TURNS.len());
    }

    #[test]
    fn each_redaction_remembers_what_its_own_types_found() {
        let email = redact(&[EntityType::Email]);
        let both = redact(&[EntityType::Email, EntityType::Phone]);
        let text = "ann@example.com or +44 20 7946 0958";
        for _ in 0..2 {
            let mut v = Vault::for_tenant("t");
            assert_eq!(
                v.redact(&email, text).as_deref(),
                Some("<EMAIL_1> or +44 20 7946 0958")
            );
            assert_eq!(
                v.redact(&both, text).as_deref(),
                Some("<EMAIL_1> or <PHONE_1>")
            );
        }
        assert_eq!((email.memo_size().0, both.memo_size().0), (1, 1));
    }

    #[test]
    fn the_memo_stays_within_its_bytes_and_evicted_texts_are_searched_again() {
        let bytes = 4096;
        let r = Redact::with_memo_bytes(&[EntityType::Email, EntityType::Phone], bytes)
            .unwrap_or_else(|e| panic!("{e}"));
        for round in 0..2 {
            for i in 0..500 {
                let text =
                    format!("write to u{i}@example.com or v{i}@example.com, call +1 415 555 0132");
                let mut remembered = Vault::for_tenant("t");
                let mut searched = Vault::new();
                assert_eq!(
                    remembered.redact(&r, &text),
                    searched.redact(&r, &text),
                    "round {round}, text {i}"
                );
                let (texts, held) = r.memo_size();
                assert!(held <= bytes, "{held} bytes held");
                assert!(
                    texts <= (bytes / memo::ENTRY_BYTES) as usize,
                    "{texts} texts"
                );
            }
        }
        assert!(r.memo_size().0 > 0);
    }

    #[test]
    fn a_resumed_vault_keeps_the_old_placeholders_and_numbers_new_values_after_them() {
        let r = redact(&[EntityType::Email, EntityType::Phone]);
        let mut first = Vault::new();
        first.redact(&r, "ann@example.com, +1 415 555 0132, bob@example.org");
        let kept: Vec<(Kind, String)> = first
            .values()
            .map(|(k, v)| (k.clone(), v.to_owned()))
            .collect();
        let mut next = Vault::resume(kept.iter().map(|(k, v)| (k.clone(), v.as_str())));
        assert_eq!(next.replaced(), 0);
        let redacted = next.redact(&r, "bob@example.org and cy@example.net, +1 415 555 0199");
        assert_eq!(
            redacted.as_deref(),
            Some("<EMAIL_2> and <EMAIL_3>, <PHONE_2>")
        );
        assert_eq!(
            next.restore("<EMAIL_1> <PHONE_1> <EMAIL_3>", false),
            Some("ann@example.com +1 415 555 0132 cy@example.net".to_owned())
        );
        // Past the scanned list, the resumed entries are indexed too.
        let many: Vec<String> = (0..2 * SCANNED)
            .map(|i| format!("u{i}@example.com"))
            .collect();
        let mut big = Vault::resume(
            many.iter()
                .map(|v| (Kind::Pii(EntityType::Email), v.as_str())),
        );
        assert_eq!(
            big.redact(&r, "u20@example.com new@example.com").as_deref(),
            Some("<EMAIL_21> <EMAIL_33>")
        );
    }

    #[test]
    fn a_value_restored_into_json_text_is_escaped() {
        let r = redact(&[EntityType::PrivateKey]);
        let mut vault = Vault::new();
        let key = "-----BEGIN PRIVATE KEY-----\nMIIBVQIBADANBgkqhkiG9w0BAQEFAASCAT8wggE7AgEAAkEA\n-----END PRIVATE KEY-----";
        let redacted = vault.redact(&r, key);
        assert_eq!(redacted.as_deref(), Some("<PRIVATE_KEY_1>"));
        let restored = vault.restore(r#"{"key":"<PRIVATE_KEY_1>"}"#, true);
        let parsed: serde_json::Value =
            serde_json::from_str(&restored.unwrap_or_default()).unwrap_or_default();
        assert_eq!(parsed["key"], key);
    }

    #[test]
    fn a_placeholder_cut_anywhere_is_restored_whole_and_only_its_tail_waits() {
        let r = redact(&[EntityType::Email]);
        let mut vault = Vault::new();
        vault.redact(&r, "ann@example.com");
        let answer = "Write to <EMAIL_1> today <b>, a < b.";
        for cut in 0..answer.len() {
            for cut2 in cut..answer.len() {
                let mut stream = Restoring::new(false);
                let mut out = stream.push(&vault, &answer[..cut]);
                // Nothing held is longer than a placeholder, and no half placeholder leaks.
                assert!(!out.contains("<EM") || out.contains("<EMAIL_1>"));
                out += &stream.push(&vault, &answer[cut..cut2]);
                out += &stream.push(&vault, &answer[cut2..]);
                out += &stream.flush(&vault);
                assert_eq!(out, "Write to ann@example.com today <b>, a < b.");
            }
        }
        let mut stream = Restoring::new(false);
        assert_eq!(stream.push(&vault, "mail <EMA"), "mail ");
        assert!(stream.holds());
        assert_eq!(stream.push(&vault, "X>"), "<EMAX>");
        assert!(!stream.holds());
    }
}
