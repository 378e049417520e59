//! A lexical view of text that may not parse: words under the cursor, and the tokens of the
//! declaration around it.
//!
//! Completion runs on half-typed text (`route r priority 1 { when topic is |`), which the parser
//! rejects. This scanner never fails: it knows strings, comments, identifiers, numbers and
//! punctuation, tracks brace depth and which declaration keyword opened the current body, and
//! leaves all meaning to the caller.

use std::ops::Range;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokKind {
    Ident,
    Str,
    Number,
    /// One or two characters of punctuation (`{`, `=`, `==`, `??`).
    Punct,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub kind: TokKind,
    pub text: String,
    pub range: Range<usize>,
}

/// The identifier under or just before a byte offset.
pub fn word_at(text: &str, offset: usize) -> Option<(&str, Range<usize>)> {
    let offset = crate::position::floor_boundary(text, offset);
    let bytes = text.as_bytes();
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut start = offset;
    while start > 0 && is_word(bytes[start - 1]) {
        start -= 1;
    }
    let mut end = offset;
    while end < bytes.len() && is_word(bytes[end]) {
        end += 1;
    }
    if start == end || bytes[start].is_ascii_digit() {
        return None;
    }
    Some((&text[start..end], start..end))
}

/// Splits text into tokens, skipping whitespace and comments. `open_string` tells whether the
/// text ends inside a string literal or a comment.
pub fn tokenize(text: &str) -> (Vec<Token>, bool) {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    let mut open = false;
    while let Some((i, c)) = chars.next() {
        if c.is_whitespace() {
            continue;
        }
        if c == '#' {
            open = true;
            for (_, c) in chars.by_ref() {
                if c == '\n' {
                    open = false;
                    break;
                }
            }
            continue;
        }
        if c == '"' {
            let mut end = text.len();
            let mut escaped = false;
            open = true;
            for (j, c) in chars.by_ref() {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    end = j + 1;
                    open = false;
                    break;
                }
            }
            tokens.push(Token {
                kind: TokKind::Str,
                text: text[i..end].to_string(),
                range: i..end,
            });
            continue;
        }
        let word = c.is_ascii_alphanumeric() || c == '_';
        if word {
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if d.is_ascii_alphanumeric() || d == '_' || (c.is_ascii_digit() && d == '.') {
                    end = j + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            let kind = if c.is_ascii_digit() {
                TokKind::Number
            } else {
                TokKind::Ident
            };
            tokens.push(Token {
                kind,
                text: text[i..end].to_string(),
                range: i..end,
            });
            continue;
        }
        let mut end = i + c.len_utf8();
        if let Some(&(j, d)) = chars.peek() {
            let pair = [c, d];
            if matches!(
                pair,
                ['=', '='] | ['!', '='] | ['<', '='] | ['>', '='] | ['?', '?']
            ) {
                end = j + d.len_utf8();
                chars.next();
            }
        }
        tokens.push(Token {
            kind: TokKind::Punct,
            text: text[i..end].to_string(),
            range: i..end,
        });
    }
    (tokens, open)
}

/// Where the cursor sits, lexically.
#[derive(Debug, Clone, Default)]
pub struct CursorContext {
    /// The part of an identifier already typed before the cursor.
    pub prefix: String,
    /// The keyword of the enclosing declaration (`route`, `signal`, ...), if any.
    pub decl: Option<String>,
    /// Brace depth at the cursor (0 at top level; 1 inside a declaration body).
    pub depth: usize,
    /// The tokens of the enclosing declaration before the prefix, in order.
    pub before: Vec<Token>,
    /// Inside a string literal or a comment: nothing to complete.
    pub quiet: bool,
}

impl CursorContext {
    /// The `n`th token before the prefix (0 = the nearest).
    pub fn back(&self, n: usize) -> Option<&str> {
        let len = self.before.len();
        (n < len).then(|| self.before[len - 1 - n].text.as_str())
    }
}

/// The lexical context of a byte offset.
pub fn context_at(text: &str, offset: usize) -> CursorContext {
    let offset = crate::position::floor_boundary(text, offset);
    let (mut tokens, quiet) = tokenize(&text[..offset]);
    if quiet {
        return CursorContext {
            quiet: true,
            ..CursorContext::default()
        };
    }
    let mut prefix = String::new();
    if let Some(last) = tokens.last() {
        if last.kind == TokKind::Ident && last.range.end == offset {
            prefix = last.text.clone();
            tokens.pop();
        }
    }
    let mut depth = 0usize;
    let mut decl: Option<String> = None;
    let mut start = 0;
    for (i, t) in tokens.iter().enumerate() {
        match t.text.as_str() {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    decl = None;
                    start = i + 1;
                }
            }
            word if depth == 0
                && t.kind == TokKind::Ident
                && src_dsl::keywords::declaration(word).is_some()
                && !matches!(
                    tokens.get(i.wrapping_sub(1)).map(|t| t.text.as_str()),
                    Some("=")
                ) =>
            {
                decl = Some(word.to_string());
                start = i;
            }
            _ => {}
        }
    }
    CursorContext {
        prefix,
        decl,
        depth,
        before: tokens[start.min(tokens.len())..].to_vec(),
        quiet: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_context_knows_the_declaration_and_the_prefix() {
        let text = "signal a = true\nroute r priority 1 { when topic is ma";
        let cx = context_at(text, text.len());
        assert_eq!(cx.prefix, "ma");
        assert_eq!(cx.decl.as_deref(), Some("route"));
        assert_eq!(cx.depth, 1);
        assert_eq!(cx.back(0), Some("is"));
        assert_eq!(cx.back(1), Some("topic"));
    }

    #[test]
    fn strings_and_comments_are_quiet() {
        assert!(context_at("route r { to \"sm", 16).quiet);
        assert!(context_at("# route r { to", 14).quiet);
        assert!(!context_at("# c\nroute r { to ", 17).quiet);
    }

    #[test]
    fn words_are_found_around_the_offset() {
        let text = "when topic is math";
        assert_eq!(word_at(text, 7).map(|w| w.0), Some("topic"));
        assert_eq!(word_at(text, 10).map(|w| w.0), Some("topic"));
        assert_eq!(word_at("a  b", 2), None);
    }
}
