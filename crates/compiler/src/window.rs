//! How much of one text a model-backed signal reads: windows of `window` tokens (special tokens
//! included; by default the model's `max_length` for a classifier and [`DETECTOR_WINDOW`] for a
//! guard or encoder), each overlapping the previous one by half its content, at most a
//! declaration's `windows` of them. The runtime cuts texts by these rules; `src check` uses them
//! to tell when a text can be longer than a declaration reads (W050).
//!
//! Guards and `similarity` read short windows because they pool: a model that averages its
//! tokens scores a short injection inside 250 tokens of filler as the filler (measured in
//! docs/models.md), so a window must be of the order of what it detects.

/// Windows a model reads of one text unless its declaration says `windows = N`.
pub const DEFAULT_WINDOWS: usize = 128;
/// The most `windows` a declaration may ask for.
pub const MAX_WINDOWS: usize = 4096;
/// Tokens per window of a guard or encoder unless its declaration says `window = N`.
pub const DETECTOR_WINDOW: usize = 32;
/// The fewest tokens a declared `window` may hold.
pub const MIN_WINDOW: usize = 8;
/// A model's window when its `config.json` names none (nor `max_position_embeddings`).
pub const DEFAULT_MAX_LENGTH: usize = 512;
/// Special tokens a BERT-style tokenizer adds to each window (`[CLS]`, `[SEP]`).
pub const SPECIAL_TOKENS: usize = 2;

/// The overlap of consecutive windows holding `content` tokens each (the window less its
/// special tokens): half, so a window advances by half its content and any passage of up to
/// half a window is read whole by at least one window, wherever the cuts fall.
pub fn overlap(content: usize) -> usize {
    content / 2
}

/// How many tokens the first `windows` windows read, special tokens aside: what a text may
/// hold to be read whole.
pub fn capacity(content: usize, windows: usize) -> usize {
    match windows {
        0 => 0,
        n => content + (n - 1) * (content - overlap(content)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_advance_by_half_their_content() {
        // A guard's 32-token window: 30 of content, 15 of overlap.
        assert_eq!(overlap(30), 15);
        assert_eq!(capacity(30, 1), 30);
        assert_eq!(capacity(30, 2), 45);
        assert_eq!(capacity(30, DEFAULT_WINDOWS), 30 + 127 * 15);
        // A classifier's 256-token window: 254 of content, advancing by 127.
        assert_eq!(capacity(254, 3), 254 + 2 * 127);
        assert_eq!(capacity(1, 5), 5);
        assert_eq!(capacity(254, 0), 0);
    }
}
