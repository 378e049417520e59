//! Byte offsets ↔ LSP positions (zero-based line, UTF-16 code unit column).
//!
//! Every span in the workspace is a byte range; the protocol counts columns in UTF-16 code units.
//! This is the only module that converts between the two, so that no handler counts columns with
//! `chars()` (wrong after any character outside the Basic Multilingual Plane) or with bytes
//! (wrong after any non-ASCII character). Positions from a client are never trusted: a line past
//! the end, a column past the end of its line or one that falls inside a surrogate pair are
//! clamped to the nearest character boundary before it.

use lsp_types::{Position, Range};

/// The line starts of one text, for repeated conversions.
#[derive(Debug, Clone)]
pub struct LineIndex {
    /// Byte offset of the first character of each line; always starts with 0.
    starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    /// The LSP position of a byte offset; offsets past the end or inside a character are moved
    /// back to the previous character boundary.
    pub fn position(&self, text: &str, offset: usize) -> Position {
        let offset = floor_boundary(text, offset);
        let line = self
            .starts
            .partition_point(|&s| s <= offset)
            .saturating_sub(1);
        let start = self.starts.get(line).copied().unwrap_or(0).min(offset);
        let column: usize = text[start..offset].chars().map(char::len_utf16).sum();
        Position::new(line as u32, column as u32)
    }

    /// The byte offset of an LSP position, clamped into the text.
    pub fn offset(&self, text: &str, position: Position) -> usize {
        let line = position.line as usize;
        let Some(&start) = self.starts.get(line) else {
            return text.len();
        };
        let end = self
            .starts
            .get(line + 1)
            .map(|&next| next.saturating_sub(1))
            .unwrap_or(text.len());
        let mut units = 0usize;
        for (i, c) in text[start..end].char_indices() {
            if c == '\r' && start + i + 1 == end {
                return start + i;
            }
            let next = units + c.len_utf16();
            if next > position.character as usize {
                return start + i;
            }
            units = next;
        }
        end
    }

    /// The LSP range of a byte range.
    pub fn range(&self, text: &str, range: std::ops::Range<usize>) -> Range {
        let start = self.position(text, range.start);
        let end = self.position(text, range.end.max(range.start));
        Range::new(start, end)
    }

    /// The byte range of an LSP range (start and end each clamped, end never before start).
    pub fn byte_range(&self, text: &str, range: Range) -> std::ops::Range<usize> {
        let start = self.offset(text, range.start);
        let end = self.offset(text, range.end).max(start);
        start..end
    }
}

/// The largest character boundary at or before `offset`, within the text.
pub fn floor_boundary(text: &str, offset: usize) -> usize {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_utf16_units_after_non_ascii_text() {
        // é is 2 bytes / 1 unit, 中 is 3 bytes / 1 unit, 😀 is 4 bytes / 2 units.
        let text = "ab\n# é中😀\nsignal x = true\n";
        let index = LineIndex::new(text);
        let x = text.find("x =").unwrap();
        assert_eq!(index.position(text, x), Position::new(2, 7));
        let after_emoji = text.find('\n').unwrap() + 1 + "# é中😀".len();
        assert_eq!(index.position(text, after_emoji), Position::new(1, 6));
        assert_eq!(index.offset(text, Position::new(1, 6)), after_emoji);
        assert_eq!(index.offset(text, Position::new(2, 7)), x);
    }

    #[test]
    fn round_trips_every_boundary() {
        let text = "é\n中😀x\r\n\n😀😀";
        let index = LineIndex::new(text);
        for (offset, _) in text.char_indices().chain([(text.len(), ' ')]) {
            if text[..offset].ends_with('\r') {
                continue;
            }
            let p = index.position(text, offset);
            assert_eq!(index.offset(text, p), offset, "offset {offset} at {p:?}");
        }
    }

    #[test]
    fn client_positions_are_clamped() {
        let text = "a😀b\nxy";
        let index = LineIndex::new(text);
        // Column 2 is the middle of the surrogate pair: it lands before the emoji.
        assert_eq!(index.offset(text, Position::new(0, 2)), 1);
        assert_eq!(index.offset(text, Position::new(0, 99)), "a😀b".len());
        assert_eq!(index.offset(text, Position::new(7, 0)), text.len());
        // Byte offsets inside a character move back to its start.
        assert_eq!(index.position(text, 2), Position::new(0, 1));
        assert_eq!(index.position(text, 999), Position::new(1, 2));
    }
}
