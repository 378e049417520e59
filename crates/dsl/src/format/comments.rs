//! Putting comments back: deciding, for each `#` comment of the source, which output line it
//! belongs before or after.
//!
//! The AST keeps comments in one flat list with spans. A comment is either *own-line* (only
//! whitespace before it on its line) or *trailing* (code before it). A trailing comment stays at
//! the end of the output line made from the code it follows; an own-line comment goes before the
//! line made from the code after it; a comment inside a statement that spans several lines (an
//! expression broken over lines) goes before that statement, because the statement is printed
//! on one line. Everything is decided from byte positions, so reordered fields keep their
//! comments.

use super::Line;
use crate::ast::Comment;
use std::ops::Range;

/// A comment with the positions the placement rules need.
#[derive(Debug, Clone)]
pub(super) struct Placed {
    /// The text after `#`, trailing whitespace removed (the output never ends a line in spaces).
    pub text: String,
    /// Byte offset of the `#`.
    pub start: usize,
    /// Byte offset just after the comment's text (before its line ending).
    pub end: usize,
    /// For a trailing comment, the offset just after the last code character before it.
    pub code_end: Option<usize>,
}

/// Classifies every comment, in source order.
pub(super) fn classify(comments: &[Comment], src: &str) -> Vec<Placed> {
    let mut out: Vec<Placed> = comments
        .iter()
        .map(|c| {
            let start = hash_offset(c, src);
            let line_start = src
                .get(..start)
                .and_then(|before| before.rfind('\n'))
                .map(|i| i + 1)
                .unwrap_or(0);
            let code_end = src
                .get(line_start..start)
                .map(str::trim_end)
                .filter(|code| !code.is_empty())
                .map(|code| line_start + code.len());
            let end = src
                .get(start..)
                .and_then(|rest| rest.find('\n'))
                .map_or(src.len(), |i| start + i);
            let end = start + src.get(start..end).map_or(0, |t| t.trim_end().len());
            Placed {
                text: c.text.trim_end().to_string(),
                start,
                end,
                code_end,
            }
        })
        .collect();
    out.sort_by_key(|c| c.start);
    out
}

/// Where the `#` is: the span may or may not include it, so look.
fn hash_offset(c: &Comment, src: &str) -> usize {
    let s = c.span.start as usize;
    if src.get(s..).is_some_and(|r| r.starts_with('#')) {
        s
    } else if s > 0 && src.get(s - 1..s) == Some("#") {
        s - 1
    } else {
        s
    }
}

/// True when only closing punctuation and spaces, on one line, separate two offsets: the code
/// between is part of what came before (a list's `]`, a call's `)`, a `,`).
pub(super) fn only_closers(src: &str, from: usize, to: usize) -> bool {
    match src.get(from..to) {
        Some(between) => between
            .chars()
            .all(|c| matches!(c, ' ' | '\t' | ',' | ')' | ']' | '}' | ';')),
        None => from == to,
    }
}

/// Attaches a comment that lies within an item to one of that item's lines.
pub(super) fn attach(lines: &mut [Line], c: &Placed, src: &str) {
    if lines.is_empty() {
        return;
    }
    if let Some(code_end) = c.code_end {
        // The line whose code starts last before the code this comment follows.
        let owner = best(lines, |e| e.start < code_end, |e| e.start);
        if let Some(i) = owner {
            let extent = lines[i].extent.clone().unwrap_or(0..0);
            if extent.end > c.start {
                lines[i].before.push(c.text.clone());
                return;
            }
            if only_closers(src, extent.end, code_end) {
                if lines[i].trailing.is_none() {
                    lines[i].trailing = Some(c.text.clone());
                } else {
                    lines[i].before.push(c.text.clone());
                }
                return;
            }
        }
    }
    let target = best(
        lines,
        |e| e.start <= c.start && c.start < e.end,
        |e| e.start,
    )
    .or_else(|| best(lines, |e| e.start > c.start, |e| usize::MAX - e.start))
    .unwrap_or(lines.len() - 1);
    lines[target].before.push(c.text.clone());
}

/// The index of the line with an extent that satisfies `keep` and has the highest `key`.
fn best(
    lines: &[Line],
    keep: impl Fn(&Range<usize>) -> bool,
    key: impl Fn(&Range<usize>) -> usize,
) -> Option<usize> {
    lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| l.extent.as_ref().map(|e| (i, e)))
        .filter(|(_, e)| keep(e))
        .max_by_key(|(_, e)| key(e))
        .map(|(i, _)| i)
}

/// `range` without the whitespace and comments it may end with: a declaration's span can run on
/// over the trivia after it, and that trivia is not the declaration's code.
pub(super) fn tight(range: Range<usize>, src: &str, comments: &[Placed]) -> Range<usize> {
    let start = range.start;
    let mut end = range.end.max(start);
    loop {
        let Some(text) = src.get(start..end) else {
            return start..end;
        };
        end = start + text.trim_end().len();
        match comments
            .iter()
            .find(|c| c.start >= start && c.start < end && c.end == end)
        {
            Some(c) => end = c.start,
            None => return start..end,
        }
    }
}
