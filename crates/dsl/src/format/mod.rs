//! The canonical printer of `.sr` files (`src fmt`, the language server's formatting).
//!
//! The style has no options, so that every policy reads the same:
//!
//! - two-space indentation; every brace declaration is written over several lines, one field or
//!   statement per line, fields in the order of the language's grammar (`backend`: `url`,
//!   `catalog`, `api_key`, `timeout`, `simulated`, `api`; `route`: `when`, `to ... else ...`,
//!   `system_prompt`, `headers`, `reasoning`, `tools`, `cache`; and so on), whatever order the
//!   author used;
//! - `signal name = expr` on one line; every expression on one line, single spaces around binary
//!   operators, `f(a, b)`, lists `[a, b]`;
//! - number and duration literals exactly as written (`8k`, `10m`), strings re-escaped (`\"`,
//!   `\\`, `\n`, `\t`, `\u{..}` for other control characters, all other characters as
//!   themselves);
//! - parentheses where the author wrote them, plus any a tree built by a program needs to keep
//!   its meaning;
//! - one blank line between top-level declarations, except that declarations of the same keyword
//!   that were adjacent in the source (no blank line between them, as in a group of signals) stay
//!   adjacent; blank lines the author put between top-level comments and declarations are kept
//!   (at most one); no blank lines inside a body;
//! - comments are never lost: a comment on its own line goes before the declaration, field or
//!   statement that follows it, at its indentation; a comment at the end of a line stays at the
//!   end of the output line made from that code; a comment inside a multi-line expression moves
//!   before its statement; comments at the end of a body stay inside it, before `}`; comments at
//!   the end of the file stay there;
//! - no trailing whitespace, and a final newline.
//!
//! Formatting is idempotent: formatting formatted text changes nothing. It is also checked:
//! [`format_source`] parses its own output and refuses (E090, an internal error) rather than
//! return text whose tree differs from the input's (see `verify`).

mod comments;
mod expr;
mod items;
mod verify;

use crate::ast::{File, Item};
use crate::diagnostic::Diagnostic;
use crate::span::FileId;
use comments::Placed;
use std::ops::Range;

/// Prints a parsed file canonically, with its comments. `source` is the text the file was parsed
/// from: it tells where comments and blank lines were. A tree built by a program can be printed
/// with an empty `source`.
pub fn format_file(file: &File, source: &str) -> String {
    let placed = comments::classify(&file.comments, source);
    let mut groups: Vec<Group> = file
        .items
        .iter()
        .map(|item| {
            let extent = comments::tight(item.span.range(), source, &placed);
            Group {
                item,
                lines: items::item_lines(item, extent.clone(), source),
                extent,
                leading: Vec::new(),
            }
        })
        .collect();
    let extents: Vec<Range<usize>> = groups.iter().map(|g| g.extent.clone()).collect();
    let mut at_end = Vec::new();
    for c in placed {
        match owner(&extents, &c, source) {
            Owner::Inside(i) => comments::attach(&mut groups[i].lines, &c, source),
            Owner::Before(i) => groups[i].leading.push(c),
            Owner::End => at_end.push(c),
        }
    }
    emit(&groups, &at_end, source)
}

/// Parses and formats; refuses, returning the parse diagnostics, when the file has errors (a
/// broken file is never rewritten). It also refuses, with one internal error (E090), when the
/// formatted text would not parse back to the same tree and comments: a formatter bug must not
/// silently change a policy.
pub fn format_source(source: &str, file: FileId) -> Result<String, Vec<Diagnostic>> {
    let parsed = crate::parse(source, file);
    if parsed.diagnostics.iter().any(Diagnostic::is_error) {
        return Err(parsed.diagnostics);
    }
    let formatted = format_file(&parsed.file, source);
    match verify::unsound(&parsed.file, &formatted, file) {
        Some(internal) => Err(vec![internal]),
        None => Ok(formatted),
    }
}

/// One output line and the comments placed around it.
#[derive(Debug, Clone)]
struct Line {
    indent: usize,
    text: String,
    /// The source bytes this line was made from, when known.
    extent: Option<Range<usize>>,
    /// The indentation of comments placed before this line (deeper for a closing brace).
    comment_indent: usize,
    before: Vec<String>,
    trailing: Option<String>,
}

impl Line {
    fn new(
        indent: usize,
        text: String,
        extent: Option<Range<usize>>,
        comment_indent: usize,
    ) -> Self {
        Line {
            indent,
            text,
            extent,
            comment_indent,
            before: Vec::new(),
            trailing: None,
        }
    }
}

/// A top-level declaration with the own-line comments that precede it.
struct Group<'a> {
    item: &'a Item,
    /// The item's source bytes, without any whitespace or comments its span may end with.
    extent: Range<usize>,
    leading: Vec<Placed>,
    lines: Vec<Line>,
}

enum Owner {
    /// Inside the item (or trailing its last line).
    Inside(usize),
    /// On its own line before the item.
    Before(usize),
    End,
}

fn owner(items: &[Range<usize>], c: &Placed, src: &str) -> Owner {
    let span = |r: &Range<usize>| (r.start, r.end);
    if let Some(i) = items.iter().position(|it| {
        let (s, e) = span(it);
        s <= c.start && c.start < e
    }) {
        return Owner::Inside(i);
    }
    if let Some(code_end) = c.code_end {
        let last = items
            .iter()
            .enumerate()
            .filter(|(_, it)| span(it).0 < code_end)
            .max_by_key(|(_, it)| span(it).0);
        if let Some((i, it)) = last {
            let end = span(it).1;
            if end <= c.start && comments::only_closers(src, end, code_end) {
                return Owner::Inside(i);
            }
        }
    }
    items
        .iter()
        .enumerate()
        .filter(|(_, it)| span(it).0 > c.start)
        .min_by_key(|(_, it)| span(it).0)
        .map_or(Owner::End, |(i, _)| Owner::Before(i))
}

/// True when the source between two offsets holds a blank line.
fn blank_between(src: &str, from: usize, to: usize) -> bool {
    let Some(gap) = src.get(from..to) else {
        return false;
    };
    let parts: Vec<&str> = gap.split('\n').collect();
    parts.len() > 2
        && parts[1..parts.len() - 1]
            .iter()
            .any(|p| p.trim().is_empty())
}

fn emit(groups: &[Group], at_end: &[Placed], src: &str) -> String {
    let mut out = String::new();
    // Source end of the last element written, to look for the author's blank lines.
    let mut prev_end: Option<usize> = None;
    let mut prev_item: Option<&Group> = None;
    for g in groups {
        let item_start = g.extent.start;
        let mut first = true;
        for c in &g.leading {
            let blank = match (first, prev_item) {
                (true, Some(p)) => separate_items(p, g, src),
                _ => prev_end.is_some_and(|e| blank_between(src, e, c.start)),
            };
            push_blank(&mut out, blank);
            push_comment(&mut out, 0, &c.text);
            prev_end = Some(c.start);
            first = false;
        }
        let blank = match (first, prev_item) {
            (true, Some(p)) => separate_items(p, g, src),
            _ => prev_end.is_some_and(|e| blank_between(src, e, item_start)),
        };
        push_blank(&mut out, blank);
        for line in &g.lines {
            for c in &line.before {
                push_comment(&mut out, line.comment_indent, c);
            }
            push_indent(&mut out, line.indent);
            out.push_str(&line.text);
            if let Some(t) = &line.trailing {
                out.push_str(" #");
                out.push_str(t);
            }
            out.push('\n');
        }
        prev_end = Some(g.extent.end);
        prev_item = Some(g);
    }
    for c in at_end {
        let blank = prev_end.is_some_and(|e| blank_between(src, e, c.start));
        push_blank(&mut out, blank);
        push_comment(&mut out, 0, &c.text);
        prev_end = Some(c.start);
    }
    out
}

/// Whether a blank line separates two consecutive declarations: always, except between
/// declarations of one keyword that the author wrote without a blank line between them.
fn separate_items(prev: &Group, next: &Group, src: &str) -> bool {
    prev.item.kind.keyword() != next.item.kind.keyword()
        || blank_between(src, prev.extent.end, next.extent.start)
}

fn push_blank(out: &mut String, blank: bool) {
    if blank && !out.is_empty() {
        out.push('\n');
    }
}

fn push_indent(out: &mut String, indent: usize) {
    for _ in 0..indent {
        out.push_str("  ");
    }
}

fn push_comment(out: &mut String, indent: usize, text: &str) {
    push_indent(out, indent);
    out.push('#');
    out.push_str(text);
    out.push('\n');
}
