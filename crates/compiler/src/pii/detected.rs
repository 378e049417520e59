//! What a `detector` finds, as a second source of spans for `redact`.
//!
//! A route's `redact` may name a detector's entity types (`people.PERSON`) beside the built-in
//! ones. The compiler cannot run the model, so a [`Redact`](super::Redact) only says which
//! detector reads which types ([`DetectorTypes`]); the runtime runs it over the request's
//! texts and hands the vault the spans it found ([`Detections`], by text). The vault merges them
//! with the recognizers' spans ([`merged`]) and numbers both alike: a placeholder's [`Kind`] is
//! a built-in type or a detector's type (`<PERSON_1>`).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use super::{EntityType, Found};

/// What a placeholder stands for: a built-in type, or an entity type a detector tags.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Pii(EntityType),
    /// As the model's labels write it (`PERSON`).
    Entity(Arc<str>),
}

impl Kind {
    /// The name a policy writes (`email`, `PERSON`).
    pub fn name(&self) -> &str {
        match self {
            Kind::Pii(t) => t.name(),
            Kind::Entity(t) => t,
        }
    }
}

impl From<EntityType> for Kind {
    fn from(t: EntityType) -> Kind {
        Kind::Pii(t)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The types of one detector that a `redact` replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetectorTypes {
    /// The detector's index among the policy's detectors.
    pub detector: u32,
    /// Its name, for what `explain` shows.
    pub name: String,
    /// Its entity types to replace, each once, in source order.
    pub types: Vec<String>,
}

/// One entity a detector found in a text: its byte span and type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detected {
    pub span: Range<usize>,
    pub kind: Arc<str>,
}

/// The entities the detectors found in one request's texts, by text.
#[derive(Debug, Clone, Default)]
pub struct Detections {
    by_text: HashMap<String, Vec<Detected>>,
}

impl Detections {
    /// Notes what was found in `text` (added to what was found there before).
    pub fn add(&mut self, text: &str, found: impl IntoIterator<Item = Detected>) {
        let mut found = found
            .into_iter()
            .filter(|d| {
                d.span.start < d.span.end
                    && d.span.end <= text.len()
                    && text.is_char_boundary(d.span.start)
                    && text.is_char_boundary(d.span.end)
            })
            .peekable();
        // A text without entities is not kept: the vault finds nothing for it either way.
        if found.peek().is_none() {
            return;
        }
        match self.by_text.get_mut(text) {
            Some(spans) => spans.extend(found),
            None => {
                self.by_text.insert(text.to_owned(), found.collect());
            }
        }
    }

    /// What was found in `text`: nothing for a text the detectors did not read.
    pub fn of(&self, text: &str) -> &[Detected] {
        self.by_text.get(text).map_or(&[], Vec::as_slice)
    }

    /// How many entities were found in all.
    pub fn len(&self) -> usize {
        self.by_text.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The spans to replace in a text: the recognizers' `found` and the detectors' `detected`,
/// ordered by start. Where two overlap the earlier one wins, and of two that start together the
/// longer (then the built-in type, then the type's name): the same spans always give the same
/// text.
pub(super) fn merged(found: &[Found], detected: &[Detected]) -> Vec<(Kind, Range<usize>)> {
    let mut all: Vec<(Kind, Range<usize>)> = found
        .iter()
        .map(|f| (Kind::Pii(f.kind), f.span.clone()))
        .chain(
            detected
                .iter()
                .map(|d| (Kind::Entity(Arc::clone(&d.kind)), d.span.clone())),
        )
        .collect();
    all.sort_by(|(ka, a), (kb, b)| {
        a.start
            .cmp(&b.start)
            .then(b.end.cmp(&a.end))
            .then_with(|| ka.cmp(kb))
    });
    let mut at = 0;
    all.retain(|(_, span)| {
        let keep = span.start >= at;
        if keep {
            at = span.end;
        }
        keep
    });
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detected(start: usize, end: usize, kind: &str) -> Detected {
        Detected {
            span: start..end,
            kind: kind.into(),
        }
    }

    #[test]
    fn overlapping_spans_keep_the_earlier_then_the_longer() {
        let found = vec![Found {
            span: 10..20,
            kind: EntityType::Email,
        }];
        let spans = merged(
            &found,
            &[
                detected(0, 4, "PERSON"),
                detected(0, 8, "LOCATION"),
                detected(15, 25, "PERSON"),
                detected(30, 35, "PERSON"),
            ],
        );
        let kinds: Vec<(String, Range<usize>)> = spans
            .into_iter()
            .map(|(k, s)| (k.name().to_owned(), s))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("LOCATION".to_owned(), 0..8),
                ("email".to_owned(), 10..20),
                ("PERSON".to_owned(), 30..35),
            ]
        );
    }

    #[test]
    fn a_vault_numbers_detected_names_with_the_built_in_types_and_restores_them() {
        use crate::pii::{Redact, Restoring, Vault};
        let redact = match Redact::new(&[EntityType::Email]) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        };
        let first = "Sarah Johnson (sarah@example.com) met Marco Rossi in Milan.";
        let second = "Ask Sarah Johnson.";
        let mut found = Detections::default();
        found.add(
            first,
            [
                detected(0, 13, "PERSON"),
                // Overlaps the address: the earlier span wins.
                detected(15, 20, "PERSON"),
                detected(38, 49, "PERSON"),
                detected(53, 58, "LOCATION"),
            ],
        );
        found.add(second, [detected(4, 17, "PERSON")]);
        let mut vault = Vault::with_detections(Arc::new(found));
        assert_eq!(
            vault.redact(&redact, first).as_deref(),
            Some("<PERSON_1> (<EMAIL_1>) met <PERSON_2> in <LOCATION_1>.")
        );
        assert_eq!(
            vault.redact(&redact, second).as_deref(),
            Some("Ask <PERSON_1>.")
        );
        assert_eq!(vault.redact(&redact, "nobody here"), None);
        let counts: Vec<(String, usize)> = vault
            .counts()
            .into_iter()
            .map(|(k, n)| (k.to_string(), n))
            .collect();
        assert_eq!(
            counts,
            vec![
                ("email".to_owned(), 1),
                ("LOCATION".to_owned(), 1),
                ("PERSON".to_owned(), 2)
            ]
        );
        let answer = "Dear <PERSON_2>, greetings from <LOCATION_1> and <PERSON_1>.";
        let whole = "Dear Marco Rossi, greetings from Milan and Sarah Johnson.";
        assert_eq!(vault.restore(answer, false).as_deref(), Some(whole));
        for cut in 0..answer.len() {
            let mut stream = Restoring::new(false);
            let mut out = stream.push(&vault, &answer[..cut]);
            out += &stream.push(&vault, &answer[cut..]);
            out += &stream.flush(&vault);
            assert_eq!(out, whole, "cut at {cut}");
        }
    }

    #[test]
    fn a_span_off_the_text_or_inside_a_character_is_dropped() {
        let mut d = Detections::default();
        d.add(
            "Zoë Müller",
            [
                detected(0, 4, "PERSON"),
                detected(0, 3, "PERSON"),
                detected(5, 40, "PERSON"),
            ],
        );
        assert_eq!(d.of("Zoë Müller"), &[detected(0, 4, "PERSON")]);
        assert!(d.of("other").is_empty());
        assert_eq!(d.len(), 1);
    }
}
