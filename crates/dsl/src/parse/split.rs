//! Splits a file into top-level declarations before pest runs, and collects every comment.
//!
//! Parsing each declaration on its own is the parser's error recovery: pest stops at the first
//! error of its input, so one broken declaration must not hide the others. The scanner knows just
//! enough of the lexical rules (strings, comments, braces) to find where declarations begin:
//! a declaration keyword outside any braces and brackets that begins a line (or directly follows
//! the `}` of the previous declaration). Inside unbalanced braces or brackets, a line that starts
//! with a whole declaration header (`route name priority 3 {`, `cache {`, `signal name =`) also
//! starts a new declaration, so a missing `}` or `)` costs one declaration, not the rest of the
//! file.
//!
//! It also measures `(`/`[` nesting, because pest recurses once per level and a pathological
//! input must be refused before it can exhaust the stack.

use crate::ast::Comment;
use crate::span::{FileId, Span};

/// Deepest `(`/`[` nesting the parser accepts.
pub(crate) const MAX_NESTING: usize = 128;

pub(crate) use crate::keywords::DECLARATION_KEYWORDS;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChunkKind {
    /// Starts with a declaration keyword.
    Item,
    /// Text between declarations that is not whitespace or comments.
    Stray,
}

#[derive(Debug, Clone)]
pub(crate) struct Chunk {
    pub kind: ChunkKind,
    pub start: usize,
    pub end: usize,
    /// The first `{` of the chunk when the chunk ends with it still open.
    pub unclosed_brace: Option<usize>,
    /// The first `(` or `[` nested deeper than [`MAX_NESTING`].
    pub too_deep: Option<usize>,
}

#[derive(Debug, Default)]
pub(crate) struct Split {
    pub chunks: Vec<Chunk>,
    pub comments: Vec<Comment>,
}

fn is_word_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_word_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The word starting at `at` (empty when none does).
fn word_at(bytes: &[u8], at: usize) -> &[u8] {
    if at >= bytes.len() || !is_word_start(bytes[at]) {
        return &[];
    }
    let end = bytes[at..]
        .iter()
        .position(|b| !is_word_char(*b))
        .map_or(bytes.len(), |n| at + n);
    &bytes[at..end]
}

fn skip_blanks(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() && (bytes[at] == b' ' || bytes[at] == b'\t') {
        at += 1;
    }
    at
}

fn is_declaration_keyword(word: &[u8]) -> bool {
    DECLARATION_KEYWORDS.iter().any(|k| k.as_bytes() == word)
}

/// Whether the line from `at` (a declaration keyword) reads as a whole declaration header:
/// `KW [NAME] [priority N] {` or `signal NAME =`. Used only to resynchronise inside unbalanced
/// braces, where a bare keyword may well be a field key (`backend = dynamo`).
fn is_header_line(bytes: &[u8], at: usize) -> bool {
    let keyword = word_at(bytes, at);
    let mut i = skip_blanks(bytes, at + keyword.len());
    if keyword == b"signal" {
        let name = word_at(bytes, i);
        if name.is_empty() {
            return false;
        }
        i = skip_blanks(bytes, i + name.len());
        return bytes.get(i) == Some(&b'=') && bytes.get(i + 1) != Some(&b'=');
    }
    let name = word_at(bytes, i);
    if !name.is_empty() && name != b"priority" {
        i = skip_blanks(bytes, i + name.len());
    }
    if word_at(bytes, i) == b"priority" {
        i = skip_blanks(bytes, i + "priority".len());
        while i < bytes.len() && is_word_char(bytes[i]) {
            i += 1;
        }
        i = skip_blanks(bytes, i);
    }
    bytes.get(i) == Some(&b'{')
}

/// The end of the string literal opening at `at`: after its closing quote, or at the line break
/// or end of text that leaves it unterminated (the grammar's rule for strings).
fn string_end(bytes: &[u8], at: usize) -> usize {
    let mut i = at + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return i + 1,
            b'\n' => return i,
            b'\\' if bytes.get(i + 1).is_some_and(|b| *b != b'\n') => i += 2,
            _ => i += 1,
        }
    }
    bytes.len()
}

struct Open {
    kind: ChunkKind,
    start: usize,
    nesting: usize,
    first_brace: Option<usize>,
    too_deep: Option<usize>,
}

/// Splits `text` into declaration chunks and stray text, in source order.
pub(crate) fn split(text: &str, file: FileId) -> Split {
    let bytes = text.as_bytes();
    let mut out = Split::default();
    let mut open: Option<Open> = None;
    let mut depth = 0usize;
    // Only whitespace since the last line break, or since a declaration's closing `}`.
    let mut at_line_start = true;
    let mut after_item = false;
    let mut i = 0;

    let close = |open: &mut Option<Open>, end: usize, depth: usize, out: &mut Split| {
        if let Some(o) = open.take() {
            out.chunks.push(Chunk {
                kind: o.kind,
                start: o.start,
                end,
                unclosed_brace: if depth > 0 { o.first_brace } else { None },
                too_deep: o.too_deep,
            });
        }
    };

    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\n' => {
                at_line_start = true;
                i += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' => {
                i += 1;
                continue;
            }
            // U+FEFF, the byte-order mark some editors write first; the grammar skips it too.
            0xEF if bytes[i..].starts_with(&[0xEF, 0xBB, 0xBF]) => {
                i += 3;
                continue;
            }
            b'#' => {
                let end = bytes[i..]
                    .iter()
                    .position(|c| *c == b'\n')
                    .map_or(bytes.len(), |n| i + n);
                let body_end = if end > i + 1 && bytes[end - 1] == b'\r' {
                    end - 1
                } else {
                    end
                };
                out.comments.push(Comment {
                    text: text.get(i + 1..body_end).unwrap_or_default().to_string(),
                    span: Span::new(file, i, body_end),
                });
                i = end;
                continue;
            }
            _ => {}
        }

        // A declaration starts here?
        if is_word_start(b) && (at_line_start || after_item) {
            let word = word_at(bytes, i);
            let nesting = open.as_ref().map_or(0, |o| o.nesting);
            // Inside unbalanced brackets a keyword is a typo more often than a new declaration,
            // unless the whole line reads as a declaration header.
            let balanced = depth == 0 && nesting == 0;
            if is_declaration_keyword(word) && (balanced || is_header_line(bytes, i)) {
                close(&mut open, i, depth, &mut out);
                depth = 0;
                open = Some(Open {
                    kind: ChunkKind::Item,
                    start: i,
                    nesting: 0,
                    first_brace: None,
                    too_deep: None,
                });
                at_line_start = false;
                after_item = false;
                i += word.len();
                continue;
            }
        }
        at_line_start = false;
        after_item = false;

        let chunk = open.get_or_insert(Open {
            kind: ChunkKind::Stray,
            start: i,
            nesting: 0,
            first_brace: None,
            too_deep: None,
        });
        match b {
            b'"' => {
                i = string_end(bytes, i);
                continue;
            }
            b'{' => {
                if depth == 0 {
                    chunk.first_brace = Some(i);
                }
                depth += 1;
            }
            b'}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    after_item = true;
                    if chunk.kind == ChunkKind::Item {
                        close(&mut open, i + 1, 0, &mut out);
                    }
                }
            }
            b'(' | b'[' => {
                chunk.nesting += 1;
                if chunk.nesting > MAX_NESTING && chunk.too_deep.is_none() {
                    chunk.too_deep = Some(i);
                }
            }
            b')' | b']' => chunk.nesting = chunk.nesting.saturating_sub(1),
            _ if is_word_start(b) || b.is_ascii_digit() => {
                // Skip the whole word so that a keyword inside it never starts a declaration.
                while i < bytes.len() && is_word_char(bytes[i]) {
                    i += 1;
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    close(&mut open, bytes.len(), depth, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str) -> Vec<(ChunkKind, &str)> {
        split(text, FileId(0))
            .chunks
            .iter()
            .map(|c| (c.kind, text[c.start..c.end].trim_end()))
            .collect()
    }

    #[test]
    fn declarations_begin_at_line_start_keywords() {
        let text = "model a { backend = b }\nsignal s = x and\n  y\nroute r { to a }";
        assert_eq!(
            pieces(text),
            vec![
                (ChunkKind::Item, "model a { backend = b }"),
                (ChunkKind::Item, "signal s = x and\n  y"),
                (ChunkKind::Item, "route r { to a }"),
            ]
        );
    }

    #[test]
    fn a_missing_brace_costs_one_declaration() {
        let text = "route a { to x\nroute b { to y }\n";
        let chunks = split(text, FileId(0)).chunks;
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].unclosed_brace, Some(8));
        assert_eq!(chunks[1].unclosed_brace, None);
    }

    #[test]
    fn field_keys_that_are_keywords_do_not_split() {
        let text = "model a {\nbackend = b\nmodel = c\n}";
        assert_eq!(pieces(text), vec![(ChunkKind::Item, text)]);
    }

    #[test]
    fn strings_and_comments_hide_braces() {
        let text = "route a { # }\n system_prompt = \"}\" to x }\nrouter { }";
        let out = split(text, FileId(0));
        assert_eq!(out.chunks.len(), 2);
        assert_eq!(out.comments.len(), 1);
        assert_eq!(out.comments[0].text, " }");
        assert_eq!(&text[out.comments[0].span.range()], "# }");
    }

    #[test]
    fn stray_text_is_its_own_chunk() {
        let text = "rout a { to x } cache { }\nhello\nmodel m { }";
        assert_eq!(
            pieces(text),
            vec![
                (ChunkKind::Stray, "rout a { to x }"),
                (ChunkKind::Item, "cache { }"),
                (ChunkKind::Stray, "hello"),
                (ChunkKind::Item, "model m { }"),
            ]
        );
    }

    #[test]
    fn keywords_inside_brackets_do_not_split_unless_they_start_a_header() {
        let text = "signal s = f(a,\nmodel)\nsignal t = g(\nsignal u = x\n";
        assert_eq!(
            pieces(text),
            vec![
                (ChunkKind::Item, "signal s = f(a,\nmodel)"),
                (ChunkKind::Item, "signal t = g("),
                (ChunkKind::Item, "signal u = x"),
            ]
        );
    }

    #[test]
    fn a_byte_order_mark_is_whitespace() {
        let text = "\u{FEFF}model m { }";
        assert_eq!(pieces(text), vec![(ChunkKind::Item, "model m { }")]);
    }

    #[test]
    fn deep_nesting_is_found() {
        let text = format!("signal s = {}x", "(".repeat(MAX_NESTING + 1));
        let deep = split(&text, FileId(0));
        assert_eq!(deep.chunks[0].too_deep, Some(11 + MAX_NESTING));
        let text = format!("signal s = {}x", "(".repeat(MAX_NESTING));
        assert_eq!(split(&text, FileId(0)).chunks[0].too_deep, None);
    }
}
