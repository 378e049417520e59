//! A detector's answer: entities read from a token-classification model's `logits`
//! (`[batch, seq, labels]`), by the one rule `scripts/models/reference.py --entities` also
//! implements (docs/models.md, "How a detector reads text"):
//!
//! - softmax per token; special tokens (`[CLS]`, `[SEP]`, `[PAD]`) are skipped;
//! - word pieces are grouped into words by the tokenizer's word ids, and a word takes the argmax
//!   label and probability of its **first** piece;
//! - an entity starts at a word labelled `B-X`, or at `I-X` when the previous word is not part
//!   of an `X` entity, and goes on over the following words labelled `I-X`;
//! - its score is the mean of its words' scores, its span runs from the start of its first
//!   word's first piece to the end of its last word's last piece, in UTF-8 bytes of the text.
//!
//! A text read in windows has the entities of every window; the same entity read by two
//! overlapping windows (same type, overlapping spans) is kept once, at the higher score.
//!
//! The memo keeps an answer as `f32`s: `[count, (type, start, end, score)…]`, `type` the index
//! in the model's entity types ([`src_compiler::bio::entity_types`]). Byte offsets are exact in
//! an `f32` up to 16 MiB of text, far past what a declaration's `windows` read.

use tokenizers::Encoding;

use super::model::softmax;
use src_compiler::bio;

/// One entity found in a text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Entity {
    /// Index in the model's entity types.
    pub kind: usize,
    /// Byte offsets in the text.
    pub start: usize,
    pub end: usize,
    pub score: f32,
}

/// What each of a model's labels says: `None` for `O` (and any label that is not BIO), else the
/// entity type's index and whether the label begins an entity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tags {
    pub types: Vec<String>,
    by_label: Vec<Option<(usize, bool)>>,
}

impl Tags {
    pub fn new(labels: &[String]) -> Tags {
        let types = bio::entity_types(labels);
        let by_label = labels
            .iter()
            .map(|l| {
                let t = bio::bio_type(l)?;
                let kind = types.iter().position(|x| x == t)?;
                Some((kind, bio::is_begin(l)))
            })
            .collect();
        Tags { types, by_label }
    }

    pub fn width(&self) -> usize {
        self.by_label.len()
    }
}

/// One token of an encoding, as the rule reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    /// The word it is a piece of; `None` for special and padding tokens.
    pub word: Option<u32>,
    pub start: usize,
    pub end: usize,
}

/// The tokens of an encoding (special tokens as `word: None`).
pub fn tokens(encoding: &Encoding) -> Vec<Token> {
    let special = encoding.get_special_tokens_mask();
    let mask = encoding.get_attention_mask();
    encoding
        .get_word_ids()
        .iter()
        .zip(encoding.get_offsets())
        .enumerate()
        .map(|(i, (&word, &(start, end)))| {
            let skipped =
                special.get(i).is_some_and(|&s| s != 0) || mask.get(i).is_some_and(|&m| m == 0);
            Token {
                word: if skipped { None } else { word },
                start,
                end,
            }
        })
        .collect()
}

/// A word: its first piece's label and probability, and its byte span.
struct Word {
    label: usize,
    score: f32,
    start: usize,
    end: usize,
}

/// The entities of one window: `logits` holds a row of `tags.width()` per token of `tokens`
/// (rows past them, padding, are ignored).
pub fn read(tokens: &[Token], logits: &[f32], tags: &Tags) -> Vec<Entity> {
    let width = tags.width().max(1);
    let mut words: Vec<Word> = Vec::new();
    let mut last: Option<u32> = None;
    for (token, row) in tokens.iter().zip(logits.chunks(width)) {
        let Some(word) = token.word else {
            last = None;
            continue;
        };
        if last == Some(word) {
            if let Some(w) = words.last_mut() {
                w.end = w.end.max(token.end);
            }
            continue;
        }
        last = Some(word);
        let probs = softmax(row);
        let (label, score) =
            probs
                .iter()
                .copied()
                .enumerate()
                .fold((0, f32::NEG_INFINITY), |best, (i, p)| {
                    if p > best.1 {
                        (i, p)
                    } else {
                        best
                    }
                });
        words.push(Word {
            label,
            score,
            start: token.start,
            end: token.end,
        });
    }
    let mut found = Vec::new();
    // The entity being read: its type, span, and its words' score sum and count.
    let mut open: Option<(usize, usize, usize, f32, usize)> = None;
    let close = |open: &mut Option<(usize, usize, usize, f32, usize)>, found: &mut Vec<Entity>| {
        if let Some((kind, start, end, sum, n)) = open.take() {
            found.push(Entity {
                kind,
                start,
                end,
                score: sum / n as f32,
            });
        }
    };
    for w in &words {
        match tags.by_label.get(w.label).copied().flatten() {
            None => close(&mut open, &mut found),
            Some((kind, begin)) => match &mut open {
                Some((k, _, end, sum, n)) if *k == kind && !begin => {
                    *end = w.end;
                    *sum += w.score;
                    *n += 1;
                }
                _ => {
                    close(&mut open, &mut found);
                    open = Some((kind, w.start, w.end, w.score, 1));
                }
            },
        }
    }
    close(&mut open, &mut found);
    found
}

/// The entities of a text from those of its windows: each once, in text order, the same entity
/// read by two windows (same type, overlapping spans) kept at its higher score.
pub fn merge(windows: impl IntoIterator<Item = Vec<Entity>>) -> Vec<Entity> {
    let mut all: Vec<Entity> = windows.into_iter().flatten().collect();
    all.sort_by_key(|e| (e.start, e.end, e.kind));
    let mut kept: Vec<Entity> = Vec::with_capacity(all.len());
    for e in all {
        let same = kept
            .iter_mut()
            .find(|k| k.kind == e.kind && k.start < e.end && e.start < k.end);
        match same {
            Some(k) if e.score > k.score => *k = e,
            Some(_) => {}
            None => kept.push(e),
        }
    }
    kept.sort_by_key(|e| (e.start, e.end, e.kind));
    kept
}

/// The packed entities of a text's windows ([`pack`] rows) merged into one packed row; `None`
/// when a row is not such a list.
pub fn merge_rows(rows: &[Vec<f32>]) -> Option<Vec<f32>> {
    let windows = rows.iter().map(|r| unpack(r)).collect::<Option<Vec<_>>>()?;
    Some(pack(&merge(windows)))
}

/// Entities as the memo keeps them.
pub fn pack(entities: &[Entity]) -> Vec<f32> {
    let mut row = Vec::with_capacity(1 + 4 * entities.len());
    row.push(entities.len() as f32);
    for e in entities {
        row.extend([e.kind as f32, e.start as f32, e.end as f32, e.score]);
    }
    row
}

/// What [`pack`] wrote; `None` when the row is not such a list.
pub fn unpack(row: &[f32]) -> Option<Vec<Entity>> {
    let (count, rest) = row.split_first()?;
    let count = *count as usize;
    if rest.len() < 4 * count {
        return None;
    }
    Some(
        rest.chunks(4)
            .take(count)
            .map(|e| Entity {
                kind: e[0] as usize,
                start: e[1] as usize,
                end: e[2] as usize,
                score: e[3],
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags() -> Tags {
        let labels: Vec<String> = ["O", "B-PERSON", "I-PERSON", "B-LOCATION", "I-LOCATION"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        Tags::new(&labels)
    }

    /// A logits row putting `weight` on label `label` (of 5) and 0 elsewhere.
    fn row(label: usize, weight: f32) -> Vec<f32> {
        let mut r = vec![0.0; 5];
        r[label] = weight;
        r
    }

    fn prob(weight: f32) -> f32 {
        softmax(&row(0, weight))[0]
    }

    const O: usize = 0;
    const BP: usize = 1;
    const IP: usize = 2;
    const BL: usize = 3;
    const IL: usize = 4;

    /// Tokens over `text`, one per piece given as (word, piece text), specials at both ends.
    fn tokens_of(text: &str, pieces: &[(u32, &str)]) -> Vec<Token> {
        let mut out = vec![Token {
            word: None,
            start: 0,
            end: 0,
        }];
        let mut at = 0;
        for &(word, piece) in pieces {
            let start = at + text[at..].find(piece).expect("piece in text");
            at = start + piece.len();
            out.push(Token {
                word: Some(word),
                start,
                end: at,
            });
        }
        out.push(Token {
            word: None,
            start: 0,
            end: 0,
        });
        out
    }

    fn logits(rows: &[Vec<f32>]) -> Vec<f32> {
        // The [CLS] and [SEP] rows say B-PERSON loudly: they must be ignored.
        let mut all = row(BP, 9.0);
        for r in rows {
            all.extend(r);
        }
        all.extend(row(BP, 9.0));
        all
    }

    #[test]
    fn b_then_i_is_one_entity_scored_by_the_mean_of_its_words() {
        let text = "Ada Lovelace met Bob";
        let t = tokens_of(text, &[(0, "Ada"), (1, "Lovelace"), (2, "met"), (3, "Bob")]);
        let l = logits(&[row(BP, 4.0), row(IP, 2.0), row(O, 5.0), row(BP, 3.0)]);
        let found = read(&t, &l, &tags());
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!((found[0].kind, found[0].start, found[0].end), (0, 0, 12));
        assert_eq!(&text[found[0].start..found[0].end], "Ada Lovelace");
        assert!((found[0].score - (prob(4.0) + prob(2.0)) / 2.0).abs() < 1e-6);
        assert_eq!(&text[found[1].start..found[1].end], "Bob");
        assert!((found[1].score - prob(3.0)).abs() < 1e-6);
    }

    #[test]
    fn an_i_after_another_type_or_o_starts_an_entity_and_b_always_does() {
        let text = "Paris Ada Bob Lee x Eve";
        let t = tokens_of(
            text,
            &[
                (0, "Paris"),
                (1, "Ada"),
                (2, "Bob"),
                (3, "Lee"),
                (4, "x"),
                (5, "Eve"),
            ],
        );
        // Paris: B-LOCATION; Ada: I-PERSON after a location (starts); Bob: B-PERSON (starts
        // again); Lee: I-PERSON (continues Bob); x: O; Eve: I-PERSON after O (starts).
        let l = logits(&[
            row(BL, 3.0),
            row(IP, 3.0),
            row(BP, 3.0),
            row(IP, 3.0),
            row(O, 3.0),
            row(IP, 3.0),
        ]);
        let spans: Vec<(usize, &str)> = read(&t, &l, &tags())
            .iter()
            .map(|e| (e.kind, &text[e.start..e.end]))
            .collect();
        assert_eq!(
            spans,
            vec![(1, "Paris"), (0, "Ada"), (0, "Bob Lee"), (0, "Eve")]
        );
        // I-LOCATION continues only a location.
        let t = tokens_of("New York", &[(0, "New"), (1, "York")]);
        let l = logits(&[row(BL, 3.0), row(IL, 3.0)]);
        let found = read(&t, &l, &tags());
        assert_eq!((found.len(), found[0].start, found[0].end), (1, 0, 8));
    }

    #[test]
    fn a_word_takes_its_first_piece_s_label_and_spans_all_its_pieces() {
        // "Zoë Okonkwo" in pieces: Zo ##ë | Ok ##on ##kwo; the later pieces say O loudly.
        let text = "Zoë Okonkwo left";
        let t = tokens_of(
            text,
            &[
                (0, "Zo"),
                (0, "ë"),
                (1, "Ok"),
                (1, "on"),
                (1, "kwo"),
                (2, "left"),
            ],
        );
        let l = logits(&[
            row(BP, 2.0),
            row(O, 9.0),
            row(IP, 1.0),
            row(O, 9.0),
            row(O, 9.0),
            row(O, 2.0),
        ]);
        let found = read(&t, &l, &tags());
        assert_eq!(found.len(), 1, "{found:?}");
        // Multi-byte: `ë` is two bytes, so the span ends at byte 12, not char 11.
        assert_eq!((found[0].start, found[0].end), (0, 12));
        assert_eq!(&text[found[0].start..found[0].end], "Zoë Okonkwo");
        assert!((found[0].score - (prob(2.0) + prob(1.0)) / 2.0).abs() < 1e-6);
    }

    #[test]
    fn a_text_without_entities_has_none_and_padding_is_ignored() {
        let t = tokens_of("hello there", &[(0, "hello"), (1, "there")]);
        let mut l = logits(&[row(O, 2.0), row(O, 2.0)]);
        // Two padding rows past the tokens.
        l.extend(row(BP, 9.0));
        l.extend(row(BP, 9.0));
        assert!(read(&t, &l, &tags()).is_empty());
    }

    #[test]
    fn overlapping_windows_keep_an_entity_once_at_its_higher_score() {
        let e = |kind, start, end, score| Entity {
            kind,
            start,
            end,
            score,
        };
        let first = vec![e(0, 0, 3, 0.9), e(0, 10, 14, 0.6)];
        // The second window reads the tail again: the same person whole, at a higher score, and
        // a location over the same bytes (another type: kept).
        let second = vec![e(0, 10, 20, 0.8), e(1, 10, 14, 0.7), e(0, 30, 33, 0.5)];
        let merged = merge([first, second]);
        assert_eq!(
            merged,
            vec![
                e(0, 0, 3, 0.9),
                e(1, 10, 14, 0.7),
                e(0, 10, 20, 0.8),
                e(0, 30, 33, 0.5)
            ]
        );
        assert_eq!(unpack(&pack(&merged)), Some(merged));
        assert_eq!(unpack(&pack(&[])), Some(vec![]));
        assert_eq!(unpack(&[2.0, 0.0, 1.0, 2.0]), None);
    }
}
