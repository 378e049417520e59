//! `language(TEXT)`: the label set (ISO 639-1 codes) and the detector behind it.
//!
//! Detection is `whatlang` (pure Rust, trigram based). Its ISO 639-3 codes are mapped to the
//! two-letter ISO 639-1 codes that policies write (`topic_lang is en`). Languages without a
//! 639-1 code keep no label. Text with no detectable language (empty, digits only) is `und`;
//! otherwise the detector's best guess is taken even at low confidence, since short prompts are
//! usually still guessed right.

use std::sync::OnceLock;

/// (ISO 639-3 code as whatlang reports it, ISO 639-1 label).
const CODES: &[(&str, &str)] = &[
    ("afr", "af"),
    ("aka", "ak"),
    ("amh", "am"),
    ("ara", "ar"),
    ("aze", "az"),
    ("bel", "be"),
    ("ben", "bn"),
    ("bul", "bg"),
    ("cat", "ca"),
    ("ces", "cs"),
    ("cmn", "zh"),
    ("dan", "da"),
    ("deu", "de"),
    ("ell", "el"),
    ("eng", "en"),
    ("epo", "eo"),
    ("est", "et"),
    ("fin", "fi"),
    ("fra", "fr"),
    ("guj", "gu"),
    ("heb", "he"),
    ("hin", "hi"),
    ("hrv", "hr"),
    ("hun", "hu"),
    ("hye", "hy"),
    ("ind", "id"),
    ("ita", "it"),
    ("jav", "jv"),
    ("jpn", "ja"),
    ("kan", "kn"),
    ("kat", "ka"),
    ("khm", "km"),
    ("kor", "ko"),
    ("lat", "la"),
    ("lav", "lv"),
    ("lit", "lt"),
    ("mal", "ml"),
    ("mar", "mr"),
    ("mkd", "mk"),
    ("mya", "my"),
    ("nep", "ne"),
    ("nld", "nl"),
    ("nob", "nb"),
    ("ori", "or"),
    ("pan", "pa"),
    ("pes", "fa"),
    ("pol", "pl"),
    ("por", "pt"),
    ("ron", "ro"),
    ("rus", "ru"),
    ("sin", "si"),
    ("slk", "sk"),
    ("slv", "sl"),
    ("sna", "sn"),
    ("spa", "es"),
    ("srp", "sr"),
    ("swe", "sv"),
    ("tam", "ta"),
    ("tel", "te"),
    ("tgl", "tl"),
    ("tha", "th"),
    ("tuk", "tk"),
    ("tur", "tr"),
    ("ukr", "uk"),
    ("urd", "ur"),
    ("uzb", "uz"),
    ("vie", "vi"),
    ("yid", "yi"),
    ("zul", "zu"),
];

/// The label for text whose language is undetermined.
pub const UNDETERMINED: &str = "und";

/// Every label `language()` can produce: the ISO 639-1 codes, then `und`.
pub fn labels() -> &'static [String] {
    static LABELS: OnceLock<Vec<String>> = OnceLock::new();
    LABELS.get_or_init(|| {
        CODES
            .iter()
            .map(|(_, two)| (*two).to_string())
            .chain(std::iter::once(UNDETERMINED.to_string()))
            .collect()
    })
}

/// Index into [`labels`] of the detected language of `text`.
pub fn detect(text: &str) -> usize {
    detect_scored(text).0
}

/// [`detect`] with the detector's confidence in [0, 1] (0 when it has no guess at all): the
/// value of `language(TEXT).confidence`.
pub fn detect_scored(text: &str) -> (usize, f64) {
    let undetermined = CODES.len();
    let Some(info) = whatlang::detect(text) else {
        return (undetermined, 0.0);
    };
    let confidence = info.confidence().clamp(0.0, 1.0);
    let three = info.lang().code();
    let label = CODES
        .iter()
        .position(|(c, _)| *c == three)
        .unwrap_or(undetermined);
    (label, confidence)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(text: &str) -> &'static str {
        &labels()[detect(text)]
    }

    #[test]
    fn detects_common_languages() {
        assert_eq!(
            label("The quick brown fox jumps over the lazy dog near the river bank"),
            "en"
        );
        assert_eq!(
            label("El rápido zorro marrón salta sobre el perro perezoso cerca del río"),
            "es"
        );
        assert_eq!(
            label("这是一个用中文写的句子，用来测试语言检测是否正确。"),
            "zh"
        );
    }

    #[test]
    fn empty_text_is_undetermined() {
        assert_eq!(label(""), UNDETERMINED);
    }

    #[test]
    fn labels_are_unique() {
        let mut l = labels().to_vec();
        l.sort();
        l.dedup();
        assert_eq!(l.len(), labels().len());
    }
}
