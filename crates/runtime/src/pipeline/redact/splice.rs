//! The redacted body made in place: the texts the model reads are found in the body's own bytes
//! and only the strings that hold an entity are written again, so the rest of the body (key
//! order, numbers, whitespace, every field the router does not read) reaches the backend as it
//! was shaped, and no tree of the whole body is built or serialised.
//!
//! The texts are the strings [`super::redact_reparsed`] reads, visited in its order (the
//! conversation fields in [`super::CONVERSATION`]'s order, an object's members by key, as a
//! parsed `serde_json::Value` holds them), so the same values get the same placeholders. A body
//! this reader does not follow (not an object, a string that is not UTF-8 or whose escapes do
//! not decode, nesting deeper than serde_json reads) is left to that reference path.

use std::borrow::Cow;
use std::ops::Range;

use src_compiler::pii::{Redact, Vault};

use super::{CONVERSATION, NOT_TEXT};
use crate::pipeline::json_edit::Scanner;

/// serde_json's own nesting limit: a deeper body would not parse there either.
const MAX_DEPTH: usize = 128;

/// The bytes of placeholders the first entity makes room for (eight of sixteen bytes).
const PLACEHOLDER_ROOM: usize = 128;

/// The body is not one this reader follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Unread;

/// A string the model reads: its bytes in the body, quotes included, its text, and which of
/// the conversation fields it is in (its index in [`CONVERSATION`]).
struct Text<'a> {
    quoted: Range<usize>,
    text: Cow<'a, str>,
    field: usize,
}

/// A change to the body: the bytes at `at` replaced by `with` in the list of replacements.
struct Edit {
    at: Range<usize>,
    with: Range<usize>,
}

/// `body` with every entity of `redact` in its texts replaced, noting each in `vault`;
/// `Ok(None)` when it holds none. The vault is untouched when the body is [`Unread`].
pub(super) fn redact(
    body: &[u8],
    redact: &Redact,
    vault: &mut Vault,
) -> Result<Option<Vec<u8>>, Unread> {
    let texts = texts(body)?;
    // What replaces the body's bytes, each edit naming its part: placeholders where a text is
    // written as it was sent but for its entities, a whole string written again where it is not.
    let mut written: Vec<u8> = Vec::new();
    let mut edits: Vec<Edit> = Vec::new();
    for Text { quoted, text, .. } in texts {
        match text {
            // A string sent without escapes or control characters is what serde_json writes for
            // its text: only the entities' bytes change, each to a placeholder (`<`, capitals,
            // digits and `_`, which JSON writes as they are).
            Cow::Borrowed(inner) if !controls(inner) => {
                let base = quoted.start + 1;
                vault.redact_spans(redact, inner, |span, placeholder| {
                    if edits.is_empty() {
                        // A request carries a handful of entities: room for them at once.
                        written.reserve(PLACEHOLDER_ROOM);
                        edits.reserve(PLACEHOLDER_ROOM / 16);
                    }
                    let from = written.len();
                    push_placeholder(&mut written, placeholder);
                    edits.push(Edit {
                        at: base + span.start..base + span.end,
                        with: from..written.len(),
                    });
                });
            }
            text => {
                if let Some(redacted) = vault.redact(redact, &text) {
                    let from = written.len();
                    // A `str` serialised into a `Vec` cannot fail.
                    serde_json::to_writer(&mut written, redacted.as_str()).map_err(|_| Unread)?;
                    edits.push(Edit {
                        at: quoted,
                        with: from..written.len(),
                    });
                }
            }
        }
    }
    if edits.is_empty() {
        return Ok(None);
    }
    // Visited by key, written by position; the edits never overlap.
    edits.sort_unstable_by_key(|edit| edit.at.start);
    let mut out = Vec::with_capacity(body.len() + written.len());
    let mut at = 0;
    for Edit { at: replaced, with } in edits {
        out.extend_from_slice(&body[at..replaced.start]);
        out.extend_from_slice(&written[with]);
        at = replaced.end;
    }
    out.extend_from_slice(&body[at..]);
    Ok(Some(out))
}

/// Whether `text` holds a control character, which JSON writes escaped. Every byte is read
/// (no early exit), so the loop runs on whole vectors.
fn controls(text: &str) -> bool {
    text.bytes().fold(false, |found, b| found | (b < 0x20))
}

/// `placeholder` as it goes inside a JSON string: as it is, unless a detector's label holds
/// what JSON escapes.
fn push_placeholder(written: &mut Vec<u8>, placeholder: &str) {
    if !placeholder
        .bytes()
        .any(|b| matches!(b, b'"' | b'\\') || b < 0x20)
    {
        written.extend_from_slice(placeholder.as_bytes());
        return;
    }
    let quoted = serde_json::to_string(placeholder).unwrap_or_default();
    let inner = quoted.strip_prefix('"').and_then(|q| q.strip_suffix('"'));
    written.extend_from_slice(inner.unwrap_or_default().as_bytes());
}

/// The texts [`redact`] reads in `body`, decoded (what a detector is run over).
pub(super) fn read_texts(body: &[u8]) -> Result<Vec<String>, Unread> {
    Ok(texts(body)?
        .into_iter()
        .map(|t| t.text.into_owned())
        .collect())
}

/// Every text of `body`'s conversation fields, in the order the reference path reads them: the
/// body is read once, each conversation field's value walked where it stands.
fn texts(body: &[u8]) -> Result<Vec<Text<'_>>, Unread> {
    let mut texts = Vec::new();
    // The members of the objects being walked, shared by every level.
    let mut members = Vec::new();
    let mut s = Scanner::at(body, 0);
    s.skip_ws();
    if !s.eat(b'{') {
        return Err(Unread);
    }
    s.skip_ws();
    if !s.eat(b'}') {
        loop {
            s.skip_ws();
            let key = s.string().ok_or(Unread)?;
            let key = decode(&body[key])?;
            s.skip_ws();
            if !s.eat(b':') {
                return Err(Unread);
            }
            s.skip_ws();
            // A key sent twice: every copy is read, whichever the backend takes.
            match CONVERSATION.iter().position(|field| *field == key) {
                Some(field) => {
                    let end = walk(body, s.pos(), 1, field, &mut texts, &mut members)?;
                    s = Scanner::at(body, end);
                }
                None => s.value().ok_or(Unread)?,
            }
            s.skip_ws();
            if s.eat(b',') {
                continue;
            }
            if s.eat(b'}') {
                break;
            }
            return Err(Unread);
        }
    }
    s.skip_ws();
    if s.pos() != body.len() {
        return Err(Unread);
    }
    // The fields in [`CONVERSATION`]'s order, each copy of one in the order sent.
    if !texts.is_sorted_by_key(|t| t.field) {
        texts.sort_by_key(|t| t.field);
    }
    Ok(texts)
}

/// The members of the object at `at` (each key with where its value starts), pushed onto
/// `members`; returns where the object ends.
fn members<'a>(
    body: &'a [u8],
    at: usize,
    members: &mut Vec<(Cow<'a, str>, usize)>,
) -> Result<usize, Unread> {
    let mut s = Scanner::at(body, at);
    s.skip_ws();
    if !s.eat(b'{') {
        return Err(Unread);
    }
    s.skip_ws();
    if s.eat(b'}') {
        return Ok(s.pos());
    }
    loop {
        s.skip_ws();
        let key = s.string().ok_or(Unread)?;
        let key = decode(&body[key])?;
        s.skip_ws();
        if !s.eat(b':') {
            return Err(Unread);
        }
        s.skip_ws();
        let start = s.pos();
        s.value().ok_or(Unread)?;
        members.push((key, start));
        s.skip_ws();
        if s.eat(b',') {
            continue;
        }
        if s.eat(b'}') {
            return Ok(s.pos());
        }
        return Err(Unread);
    }
}

/// Collects the texts of the value at `at` (as [`super::redact_value`] reads them), in
/// conversation field `field`, and returns where it ends. `members` is the walk's shared list
/// of object members: each object's are pushed on its end and taken off when it is done.
fn walk<'a>(
    body: &'a [u8],
    at: usize,
    depth: usize,
    field: usize,
    texts: &mut Vec<Text<'a>>,
    members: &mut Vec<(Cow<'a, str>, usize)>,
) -> Result<usize, Unread> {
    if depth > MAX_DEPTH {
        return Err(Unread);
    }
    let mut s = Scanner::at(body, at);
    s.skip_ws();
    match s.peek() {
        Some(b'"') => {
            let quoted = s.string().ok_or(Unread)?;
            let text = decode(&body[quoted.clone()])?;
            texts.push(Text {
                quoted,
                text,
                field,
            });
            Ok(s.pos())
        }
        Some(b'[') => {
            s.eat(b'[');
            s.skip_ws();
            if s.eat(b']') {
                return Ok(s.pos());
            }
            loop {
                let end = walk(body, s.pos(), depth + 1, field, texts, members)?;
                s = Scanner::at(body, end);
                s.skip_ws();
                if s.eat(b',') {
                    continue;
                }
                if s.eat(b']') {
                    return Ok(s.pos());
                }
                return Err(Unread);
            }
        }
        Some(b'{') => {
            let first = members.len();
            let end = self::members(body, s.pos(), members)?;
            // A parsed object's members come by key; a stable sort keeps a repeated key's
            // copies in the order sent.
            members[first..].sort_by(|(a, _), (b, _)| a.cmp(b));
            for i in first..members.len() {
                let (key, start) = &members[i];
                if !NOT_TEXT.contains(&key.as_ref()) {
                    let start = *start;
                    walk(body, start, depth + 1, field, texts, members)?;
                }
            }
            members.truncate(first);
            Ok(end)
        }
        _ => {
            s.value().ok_or(Unread)?;
            Ok(s.pos())
        }
    }
}

/// What a JSON string (quotes included) says: its bytes as they are when it has no escape.
fn decode(quoted: &[u8]) -> Result<Cow<'_, str>, Unread> {
    if quoted.contains(&b'\\') {
        serde_json::from_slice::<String>(quoted)
            .map(Cow::Owned)
            .map_err(|_| Unread)
    } else {
        quoted
            .get(1..quoted.len().saturating_sub(1))
            .and_then(|inner| std::str::from_utf8(inner).ok())
            .map(Cow::Borrowed)
            .ok_or(Unread)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{redact_body, redact_reparsed};
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;
    use src_compiler::pii::EntityType;

    fn redact() -> Redact {
        Redact::new(&[
            EntityType::Email,
            EntityType::Phone,
            EntityType::IpAddress,
            EntityType::Iban,
        ])
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn only_the_strings_that_held_an_entity_are_written_again() {
        let body = br#"{ "model" : "m",  "temperature": 1.50, "messages":[
            {"role":"user", "content":"mail ann@example.com \u00e9 or +44 20 7946 0958\n"},
            {"role": "assistant", "content": "nothing \"here\""}], "user": "ann@example.com" }"#;
        let mut vault = Vault::new();
        let out = redact_body(body, &redact(), &mut vault).unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&out),
            r#"{ "model" : "m",  "temperature": 1.50, "messages":[
            {"role":"user", "content":"mail <EMAIL_1> é or <PHONE_1>\n"},
            {"role": "assistant", "content": "nothing \"here\""}], "user": "ann@example.com" }"#
        );
        assert_eq!(vault.replaced(), 2);
    }

    #[test]
    fn a_key_sent_twice_is_redacted_in_every_copy() {
        let body = br#"{"messages":[{"content":"a@example.com","content":"b@example.com"}],
            "messages":[{"content":"c@example.com"}]}"#;
        let mut vault = Vault::new();
        let out = redact_body(body, &redact(), &mut vault).unwrap_or_default();
        let out = String::from_utf8_lossy(&out);
        assert!(!out.contains("@example.com"), "{out}");
        assert_eq!(vault.counts(), vec![(EntityType::Email.into(), 3)]);
    }

    #[test]
    fn a_body_it_does_not_read_is_left_to_the_reference_and_the_vault_untouched() {
        for body in [
            &br#"["ann@example.com"]"#[..],
            br#"{"messages":"ann@example.com"} trailing"#,
            br#"{"messages":["ann@example.com", "\ud800"]}"#,
            br#"{"messages":["ann@example.com""#,
        ] {
            let mut vault = Vault::new();
            assert_eq!(super::redact(body, &redact(), &mut vault), Err(Unread));
            assert!(vault.is_empty());
        }
        let deep = format!(
            r#"{{"messages":{}"ann@example.com"{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let mut vault = Vault::new();
        assert_eq!(
            super::redact(deep.as_bytes(), &redact(), &mut vault),
            Err(Unread)
        );
        // The reference cannot read that body either: it is sent as it is, as before.
        assert_eq!(redact_body(deep.as_bytes(), &redact(), &mut vault), None);
    }

    /// A JSON value with its members in the order generated.
    #[derive(Debug, Clone)]
    enum Node {
        Text(String),
        Number(&'static str),
        List(Vec<Node>),
        Object(Vec<(String, Node)>),
    }

    fn write(node: &Node, pretty: bool, out: &mut String) {
        let gap = if pretty { "\n  " } else { "" };
        match node {
            Node::Text(t) => out.push_str(&serde_json::to_string(t).unwrap_or_default()),
            Node::Number(n) => out.push_str(n),
            Node::List(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(gap);
                    write(item, pretty, out);
                }
                out.push(']');
            }
            Node::Object(members) => {
                out.push('{');
                for (i, (key, value)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(gap);
                    out.push_str(&serde_json::to_string(key).unwrap_or_default());
                    out.push_str(if pretty { " : " } else { ":" });
                    write(value, pretty, out);
                }
                out.push('}');
            }
        }
    }

    fn text() -> impl Strategy<Value = String> {
        // Several values of each type, so the order values are met in decides their numbers.
        let piece = prop::sample::select(vec![
            "hi ",
            " ann@example.com ",
            " bob@example.org ",
            " cy@example.net ",
            " +44 20 7946 0958 ",
            " (212) 555-0100.",
            " 192.168.0.1 ",
            " 10.0.0.7 ",
            " DE89 3704 0044 0532 0130 00",
            "order 12345678",
            "\n",
            "\"quoted\"",
            "back\\slash",
            "é ü",
            "\u{1F600}",
            "\u{7}",
            "<EMAIL_1>",
        ]);
        prop::collection::vec(piece, 0..5).prop_map(|p| p.concat())
    }

    fn node() -> impl Strategy<Value = Node> {
        let leaf = prop_oneof![
            4 => text().prop_map(Node::Text),
            1 => prop::sample::select(vec!["1", "1.50", "-2e3", "true", "null"]).prop_map(Node::Number),
        ];
        let key = prop::sample::select(vec![
            "role",
            "content",
            "text",
            "type",
            "id",
            "name",
            "arguments",
            "input",
            "data",
            "url",
            "zeta",
            "alpha",
            "beta",
            "tool_call_id",
            "output",
            "content",
            "zeta",
        ]);
        leaf.prop_recursive(4, 32, 5, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Node::List),
                prop::collection::vec((key.clone(), inner), 0..5).prop_map(|members| {
                    // serde keeps the last of a repeated key: the reference is compared on
                    // objects without repeats.
                    let mut seen = std::collections::HashSet::new();
                    let members = members
                        .into_iter()
                        .rev()
                        .filter(|(k, _)| seen.insert(*k))
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect::<Vec<_>>();
                    Node::Object(members.into_iter().rev().collect())
                }),
            ]
        })
    }

    fn body() -> impl Strategy<Value = Node> {
        let key = prop::sample::select(vec![
            "model",
            "messages",
            "input",
            "instructions",
            "system",
            "prompt",
            "temperature",
            "user",
            "metadata",
        ]);
        prop::collection::vec((key, node()), 0..6).prop_map(|members| {
            let mut seen = std::collections::HashSet::new();
            Node::Object(
                members
                    .into_iter()
                    .filter(|(k, _)| seen.insert(*k))
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect(),
            )
        })
    }

    /// `body` with each text that held an entity redacted whole and written again, in place.
    fn rewritten(body: &[u8], redact: &Redact, vault: &mut Vault) -> Option<Vec<u8>> {
        let mut edits = Vec::new();
        for Text { quoted, text, .. } in texts(body).ok()? {
            if let Some(redacted) = vault.redact(redact, &text) {
                edits.push((quoted, serde_json::to_vec(&redacted).ok()?));
            }
        }
        if edits.is_empty() {
            return None;
        }
        edits.sort_by_key(|(quoted, _)| quoted.start);
        let (mut out, mut at) = (Vec::new(), 0);
        for (quoted, json) in edits {
            out.extend_from_slice(&body[at..quoted.start]);
            out.extend_from_slice(&json);
            at = quoted.end;
        }
        out.extend_from_slice(&body[at..]);
        Some(out)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// In place or through a tree, the backend reads the same body, with the same
        /// placeholders for the same values, and the vaults hold the same.
        #[test]
        fn in_place_sends_what_the_reparsed_body_sends(body in body(), pretty in any::<bool>()) {
            let mut bytes = String::new();
            write(&body, pretty, &mut bytes);
            let r = redact();
            let (mut spliced, mut reparsed) = (Vault::new(), Vault::new());
            let out = super::redact(bytes.as_bytes(), &r, &mut spliced);
            let reference = redact_reparsed(bytes.as_bytes(), &r, &mut reparsed);
            let out = match out {
                Ok(out) => out,
                Err(Unread) => panic!("not read: {bytes}"),
            };
            prop_assert_eq!(out.is_some(), reference.is_some());
            let parse = |b: &[u8]| serde_json::from_slice::<Value>(b).ok();
            if let (Some(out), Some(reference)) = (&out, &reference) {
                prop_assert_eq!(parse(out), parse(reference));
                prop_assert!(parse(out).is_some());
            }
            prop_assert_eq!(spliced.counts(), reparsed.counts());
            prop_assert_eq!(spliced.replaced(), reparsed.replaced());
            // Placeholders written into a string as sent give the bytes of the whole string
            // redacted and written again.
            let mut rewritten_vault = Vault::new();
            prop_assert_eq!(out, rewritten(bytes.as_bytes(), &r, &mut rewritten_vault));
        }
    }
}
