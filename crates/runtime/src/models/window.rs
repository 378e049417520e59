//! Long texts read in windows: a model reads at most `max_length` tokens at once, so a text
//! longer than that is cut into overlapping windows, each run as its own row, and the rows are
//! aggregated into one answer per declaration.
//!
//! - **Windows.** The text's tokens (without special tokens) are cut into runs of `max_length`
//!   less the special tokens, and each run gets its special tokens back (`[CLS] … [SEP]`), so a
//!   window is exactly what the model reads of a short text. Each overlaps the previous one by
//!   [`overlap`] tokens — a quarter of its content (63 for the shipped models' 254) — so any
//!   passage of up to that many tokens is read whole by at least one window, wherever the cuts
//!   fall. The first window is the truncation a single call always made.
//! - **Bound.** At most `limit` windows per text are run (a declaration's `windows`, by default
//!   [`DEFAULT_WINDOWS`]); the answer also says whether the text goes on past them, so a
//!   declaration can tell a text read whole from one read only in part.
//! - **Aggregation.** A guard scores the highest unsafe probability of its windows and a
//!   `similarity` the highest cosine of any window to any example (the riskiest window wins);
//!   a classifier takes the mean of its windows' probabilities (a text is about what most of
//!   it is about; a topic present in one window only is a guard's job, not a classifier's).
//!
//! The memo keeps a text's rows packed in one `f32` slice: `[windows, width, row…]`.

use std::sync::Arc;

use tokenizers::{Encoding, PostProcessor, Tokenizer, TruncationDirection, TruncationParams};

use super::error::ModelError;
use super::model::softmax;

pub use src_compiler::window::{capacity, overlap, DEFAULT_WINDOWS};

/// How a declaration reads a text: windows of `window` tokens (special tokens included; `None`:
/// the model's `max_length`, and never more), at most `limit` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reading {
    pub window: Option<usize>,
    pub limit: usize,
}

impl Reading {
    /// One window of the model's `max_length`: the truncation of a single call.
    pub const FIRST: Reading = Reading {
        window: None,
        limit: 1,
    };
}

/// A text cut into windows: the first `limit` of them, and how many the text fills, counted up
/// to one past `limit` (tokenizing stops there, so a huge text costs no more than the bound).
#[derive(Debug)]
pub struct Cut {
    pub encodings: Vec<Encoding>,
    pub total: usize,
}

/// Cuts `text` into windows of `content` tokens plus the special tokens, overlapping by
/// [`overlap`], and keeps the first `limit` (at least one). `plain` is the model's tokenizer
/// without truncation or padding; its truncation is set here to stop one token past what the
/// windows read.
///
/// The windows are cut from the whole text's tokens rather than by the tokenizer's own
/// `stride` truncation, which (tokenizers 0.23) stops tokenizing at `max_length` and so never
/// yields the windows past the second.
pub fn cut(
    plain: &mut Tokenizer,
    text: &str,
    content: usize,
    limit: usize,
) -> Result<Cut, ModelError> {
    let content = content.max(1);
    let limit = limit.max(1);
    let reads = capacity(content, limit);
    let err = |e: tokenizers::Error| ModelError::Inference(format!("cannot tokenize: {e}"));
    // One token past what the windows read; `post_process` takes the special tokens off the
    // bound again, so a window keeps all of its tokens.
    let special = plain
        .get_post_processor()
        .map_or(0, |p| p.added_tokens(false));
    let stop = TruncationParams {
        max_length: reads + 1 + special,
        ..TruncationParams::default()
    };
    if plain.get_truncation().map(|t| t.max_length) != Some(stop.max_length) {
        plain.with_truncation(Some(stop)).map_err(err)?;
    }
    let mut all = plain.encode(text, false).map_err(err)?;
    drop(all.take_overflowing());
    let past = all.len() > reads;
    if past {
        all.truncate(reads, 0, TruncationDirection::Right);
        drop(all.take_overflowing());
    }
    all.truncate(content, overlap(content), TruncationDirection::Right);
    let rest = all.take_overflowing();
    let mut encodings = Vec::with_capacity(1 + rest.len());
    for window in std::iter::once(all).chain(rest) {
        encodings.push(plain.post_process(window, None, true).map_err(err)?);
    }
    let total = encodings.len() + usize::from(past);
    Ok(Cut { encodings, total })
}

/// Packs a text's rows (one per window run) and its window count for the memo.
pub fn pack(total: usize, rows: &[Vec<f32>]) -> Arc<[f32]> {
    let width = rows.first().map_or(0, Vec::len);
    let mut packed = Vec::with_capacity(2 + rows.len() * width);
    // Exact as an f32 up to 2^24 windows (4 billion tokens).
    packed.push(total as f32);
    packed.push(width as f32);
    for row in rows {
        packed.extend_from_slice(row);
    }
    packed.into()
}

/// A packed answer, read back.
#[derive(Debug, Clone, Copy)]
pub struct Windows<'a> {
    /// Windows the whole text has.
    pub total: usize,
    width: usize,
    data: &'a [f32],
}

impl<'a> Windows<'a> {
    /// Reads what `pack` wrote; `None` when it is not such a slice.
    pub fn unpack(packed: &'a [f32]) -> Option<Windows<'a>> {
        let [total, width, data @ ..] = packed else {
            return None;
        };
        let (total, width) = (*total as usize, *width as usize);
        let whole = width > 0 && data.len() % width == 0 && !data.is_empty();
        (whole && total >= data.len() / width).then_some(Windows { total, width, data })
    }

    /// The rows of the windows that ran, in text order.
    pub fn rows(&self) -> impl Iterator<Item = &'a [f32]> {
        self.data.chunks(self.width)
    }

    /// How many windows ran.
    pub fn ran(&self) -> usize {
        self.data.len() / self.width
    }

    /// Whether the text has more windows than `limit`: part of it was never read.
    pub fn past(&self, limit: usize) -> bool {
        self.total > limit.max(1)
    }

    /// A guard's score: the highest probability of label `unsafe_index` in any window.
    pub fn guard(&self, unsafe_index: usize) -> Option<f32> {
        self.rows()
            .filter_map(|row| softmax(row).get(unsafe_index).copied())
            .reduce(f32::max)
    }

    /// A classifier's probabilities: the mean over its windows of each window's softmax.
    pub fn class(&self) -> Vec<f32> {
        let mut mean = vec![0f32; self.width];
        for row in self.rows() {
            mean.iter_mut().zip(softmax(row)).for_each(|(m, p)| *m += p);
        }
        let n = self.ran() as f32;
        mean.iter_mut().for_each(|m| *m /= n);
        mean
    }

    /// The highest cosine of any window to any of `examples` (unit vectors, as encoders answer).
    pub fn similarity<'e>(&self, examples: impl IntoIterator<Item = &'e [f32]>) -> Option<f32> {
        let examples: Vec<&[f32]> = examples.into_iter().collect();
        self.rows()
            .flat_map(|row| {
                examples
                    .iter()
                    .map(move |e| e.iter().zip(row).map(|(a, b)| a * b).sum::<f32>())
            })
            .reduce(f32::max)
    }

    /// One embedding for the whole text (the response cache's key): the mean of its windows'
    /// embeddings, which the caller scales back to unit length.
    pub fn mean(&self) -> Vec<f32> {
        let mut mean = vec![0f32; self.width];
        for row in self.rows() {
            mean.iter_mut().zip(row).for_each(|(m, x)| *m += x);
        }
        mean
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use tokenizers::models::wordlevel::WordLevel;
    use tokenizers::pre_tokenizers::whitespace::Whitespace;
    use tokenizers::processors::bert::BertProcessing;

    /// A word-level tokenizer over `w0 … w999` with BERT's special tokens.
    fn tokenizer() -> Tokenizer {
        let mut vocab: HashMap<String, u32> = HashMap::new();
        for (i, t) in ["[PAD]", "[UNK]", "[CLS]", "[SEP]"].iter().enumerate() {
            vocab.insert((*t).to_string(), i as u32);
        }
        for i in 0..1000u32 {
            vocab.insert(format!("w{i}"), 4 + i);
        }
        let model = WordLevel::builder()
            .vocab(vocab.into_iter().collect())
            .unk_token("[UNK]".into())
            .build()
            .unwrap();
        let mut t = Tokenizer::new(model);
        t.with_pre_tokenizer(Some(Whitespace {}));
        t.with_post_processor(Some(BertProcessing::new(
            ("[SEP]".into(), 3),
            ("[CLS]".into(), 2),
        )));
        t
    }

    fn words(n: usize) -> String {
        (0..n)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn tokens(e: &Encoding) -> Vec<&str> {
        e.get_tokens().iter().map(String::as_str).collect()
    }

    #[test]
    fn windows_overlap_by_half_and_cover_the_text() {
        // 10 tokens a window: 8 of content, 4 of overlap, advancing by 4.
        let mut t = tokenizer();
        let text = words(20);
        let cut = cut(&mut t, &text, 8, 100).unwrap();
        assert_eq!(cut.total, 4);
        let shown: Vec<Vec<&str>> = cut.encodings.iter().map(tokens).collect();
        let window = |from: usize| {
            let mut w = vec!["[CLS]".to_string()];
            w.extend((from..from + 8).map(|i| format!("w{i}")));
            w.push("[SEP]".to_string());
            w
        };
        assert_eq!(shown, vec![window(0), window(4), window(8), window(12)]);
        // Each window's offsets point back into the text where its first word is.
        for (i, e) in cut.encodings.iter().enumerate() {
            let (start, end) = e.get_offsets()[1];
            assert_eq!(&text[start..end], format!("w{}", 4 * i));
        }
    }

    #[test]
    fn a_short_text_is_one_window() {
        let mut t = tokenizer();
        let cut = cut(&mut t, &words(8), 8, 16).unwrap();
        assert_eq!(cut.total, 1);
        assert_eq!(cut.encodings.len(), 1);
        assert_eq!(cut.encodings[0].len(), 10);
        let empty = super::cut(&mut t, "", 8, 16).unwrap();
        assert_eq!(
            (empty.total, tokens(&empty.encodings[0])),
            (1, vec!["[CLS]", "[SEP]"])
        );
    }

    #[test]
    fn the_bound_keeps_the_first_windows_and_says_the_text_goes_on() {
        let mut t = tokenizer();
        // 1000 words advancing by 4: starts 0, 4, …, 992 (992 + 8 = 1000).
        let whole = cut(&mut t, &words(1000), 8, 1000).unwrap();
        assert_eq!((whole.total, whole.encodings.len()), (249, 249));
        let last = tokens(&whole.encodings[248]);
        assert_eq!((last[1], last[8]), ("w992", "w999"));
        // Bounded to 5: the 5 first windows, and one more counted.
        let bounded = cut(&mut t, &words(1000), 8, 5).unwrap();
        assert_eq!((bounded.total, bounded.encodings.len()), (6, 5));
        assert_eq!(tokens(&bounded.encodings[4])[1], "w16");
        assert_eq!(bounded.encodings[4].len(), 10);
        // Exactly what 5 windows read (8 + 4 × 4 words) is not past the bound; one more word is.
        assert_eq!(capacity(8, 5), 24);
        assert_eq!(cut(&mut t, &words(24), 8, 5).unwrap().total, 5);
        assert_eq!(cut(&mut t, &words(25), 8, 5).unwrap().total, 6);
        // A limit of 0 still reads the first window.
        assert_eq!(cut(&mut t, &words(1000), 8, 0).unwrap().encodings.len(), 1);
    }

    #[test]
    fn packed_answers_read_back() {
        let rows = vec![vec![0.0, 2.0], vec![3.0, 0.0]];
        let packed = pack(7, &rows);
        let w = Windows::unpack(&packed).unwrap();
        assert_eq!((w.total, w.ran()), (7, 2));
        assert!(w.past(1) && !w.past(7));
        assert_eq!(
            w.rows().collect::<Vec<_>>(),
            vec![&[0.0, 2.0][..], &[3.0, 0.0][..]]
        );
        assert!(Windows::unpack(&[1.0]).is_none());
        assert!(Windows::unpack(&[1.0, 3.0, 0.5, 0.5]).is_none(), "ragged");
        assert!(
            Windows::unpack(&[1.0, 1.0, 0.5, 0.5]).is_none(),
            "more rows than windows"
        );
    }

    #[test]
    fn guards_and_similarity_take_the_riskiest_window_classifiers_the_mean() {
        // Window 1 is benign, window 2 unsafe (label 1).
        let packed = pack(2, &[vec![2.0, -2.0], vec![-1.0, 1.0]]);
        let w = Windows::unpack(&packed).unwrap();
        let unsafe_p = softmax(&[-1.0, 1.0])[1];
        assert_eq!(w.guard(1), Some(unsafe_p));
        let mean = w.class();
        let expect = (softmax(&[2.0, -2.0])[0] + softmax(&[-1.0, 1.0])[0]) / 2.0;
        assert!((mean[0] - expect).abs() < 1e-6, "{mean:?}");
        assert!((mean.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        let e1: &[f32] = &[1.0, 0.0];
        let e2: &[f32] = &[0.0, 1.0];
        let rows = pack(2, &[vec![0.6, 0.8], vec![1.0, 0.0]]);
        let w = Windows::unpack(&rows).unwrap();
        assert_eq!(w.similarity([e2]), Some(0.8));
        assert_eq!(w.similarity([e1, e2]), Some(1.0));
        assert_eq!(w.mean(), vec![1.6, 0.8]);
    }
}
