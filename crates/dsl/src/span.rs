//! Source positions: byte spans into one file of a policy, and the set of files a policy is made of.
//!
//! Spans are byte offsets everywhere in the workspace. They are turned into characters only when a
//! diagnostic is rendered for a person or as JSON, and into UTF-16 only by the language server.

use serde::Serialize;
use std::path::PathBuf;

/// Index of a file inside a [`SourceMap`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize)]
pub struct FileId(pub u32);

/// A half-open byte range `[start, end)` in one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
pub struct Span {
    pub file: FileId,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(file: FileId, start: usize, end: usize) -> Self {
        Span {
            file,
            start: start as u32,
            end: end as u32,
        }
    }

    /// The smallest span covering both (same file assumed).
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }

    pub fn contains(self, offset: usize) -> bool {
        (self.start as usize) <= offset && offset <= (self.end as usize)
    }
}

/// A value together with where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

impl<T> Spanned<T> {
    pub fn new(value: T, span: Span) -> Self {
        Spanned { value, span }
    }
}

/// One source file of a policy.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub path: PathBuf,
    pub text: String,
}

/// All files of a policy, addressed by [`FileId`].
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, path: impl Into<PathBuf>, text: impl Into<String>) -> FileId {
        self.files.push(SourceFile {
            path: path.into(),
            text: text.into(),
        });
        FileId((self.files.len() - 1) as u32)
    }

    pub fn get(&self, id: FileId) -> Option<&SourceFile> {
        self.files.get(id.0 as usize)
    }

    pub fn files(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files
            .iter()
            .enumerate()
            .map(|(i, f)| (FileId(i as u32), f))
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// 1-based line and column (in characters) of a byte offset; offsets past the end or inside a
    /// multi-byte character are clamped to the previous character boundary.
    pub fn line_col(&self, id: FileId, offset: usize) -> (usize, usize) {
        match self.get(id) {
            Some(f) => line_col(&f.text, offset),
            None => (1, 1),
        }
    }
}

/// 1-based (line, column) of a byte offset in `text`, the column counted in characters.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let column = text[line_start..offset].chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_characters_not_bytes() {
        let text = "ab\n\u{00e9}\u{4e2d}x";
        // 'x' sits after a 2-byte and a 3-byte character on line 2.
        let x = text.find('x').unwrap();
        assert_eq!(line_col(text, x), (2, 3));
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, text.len()), (2, 4));
    }
}
