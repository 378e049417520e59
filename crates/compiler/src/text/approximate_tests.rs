//! Unit tests and properties of `fuzzy`, `fuzzy_hits` and `bm25`: the distance against an
//! independent implementation, the documented examples, and `MIN = 1` as exact word runs.

use super::bm25::{AVGDL, B, K1};
use super::fuzzy::{osa_distance, osa_within, words_of};
use super::*;
use proptest::prelude::*;

fn fuzzy(phrases: &[&str], min: f64) -> FuzzySet {
    let phrases: Vec<String> = phrases.iter().map(|p| (*p).to_owned()).collect();
    FuzzySet::new(&phrases, min)
}

fn phrases(phrases: &[&str]) -> PhraseSet {
    let phrases: Vec<String> = phrases.iter().map(|p| (*p).to_owned()).collect();
    PhraseSet::new(&phrases)
}

#[test]
fn distance_counts_swaps_as_one_edit() {
    assert_eq!(osa_distance("urgnet", "urgent"), 1);
    assert_eq!(osa_distance("segfualt", "segfault"), 1);
    assert_eq!(osa_distance("kitten", "sitting"), 3);
    assert_eq!(osa_distance("", "abc"), 3);
    // Optimal string alignment edits no substring twice: not the unrestricted Damerau 2.
    assert_eq!(osa_distance("ca", "abc"), 3);
}

#[test]
fn documented_examples() {
    let urgent = fuzzy(&["urgent"], 0.8);
    assert!(urgent.any("this is urgnet"), "1 - 1/6 ≈ 0.83");
    assert!(!fuzzy(&["urgent"], 0.85).any("this is urgnet"));
    assert!(urgent.any("URGENTT please"), "1 - 1/7 ≈ 0.86");
    assert!(!urgent.any("an urge"), "1 - 2/6 ≈ 0.67");
    assert!(
        fuzzy(&["segfault"], 0.875).any("a segfualt"),
        "1 - 1/8 exactly"
    );
    assert!(!fuzzy(&["car"], 0.7).any("the cat"), "0.67");
    assert!(fuzzy(&["stack trace"], 0.8).any("a stak trace here"));
    assert!(!fuzzy(&["stack trace"], 0.95).any("a stak trace here"));
}

#[test]
fn threshold_meets_written_fractions() {
    // 1 - 1/5 and the literal 0.8 may round differently; the slack makes them equal.
    assert!(fuzzy(&["stack"], 0.8).any("stak"));
    assert!(fuzzy(&["abcdefghij"], 0.9).any("abcdefghiX"));
    assert!(fuzzy(&["abcdefghij"], 0.7).any("abcdefgXYZ"));
    assert!(!fuzzy(&["abcdefghij"], 0.71).any("abcdefgXYZ"));
}

#[test]
fn characters_not_bytes_after_folding() {
    // `ж` is 2 bytes: by bytes this would be 1 - 2/5.
    assert!(fuzzy(&["cafe"], 0.75).any("CAFЖ noir"));
    assert!(!fuzzy(&["cafe"], 0.76).any("CAFЖ noir"));
    // Accents on Latin letters fold away.
    assert!(fuzzy(&["cafe"], 1.0).any("CAFÉ noir"));
    // Folding as `contains`: `ß` = `ss`, so this is exact.
    assert!(fuzzy(&["strasse"], 1.0).any("Hauptstraße? nein: STRASSE"));
    assert!(fuzzy(&["ürgent"], 0.8).any("ÜRGNET"));
}

#[test]
fn a_run_has_as_many_words_as_the_phrase() {
    let two = fuzzy(&["reset password"], 0.9);
    assert!(two.any("please reset your password? no: reset passwort"));
    assert!(!two.any("reset"));
    assert!(!two.any("password reset"));
    // Punctuation separates words and is not compared.
    assert!(fuzzy(&["reset password"], 1.0).any("reset: password"));
    // A low word is carried by the others: (1 + 1 + 0.5) / 3 ≥ 0.8.
    assert!(fuzzy(&["alpha beta gamma"], 0.8).any("alpha beta gaXXa"));
    assert!(!fuzzy(&["alpha beta gamma"], 0.9).any("alpha beta gaXXa"));
}

#[test]
fn hits_count_distinct_phrases() {
    let set = fuzzy(&["kubernetes", "Kubernetes", "terraform", "ansible"], 0.8);
    assert_eq!(set.hits("kubernets, kubernetes and terraform"), 2);
    assert_eq!(set.hits(""), 0);
    assert!(!set.any(""));
    // A phrase of punctuation only has no words and never matches.
    assert_eq!(fuzzy(&["!!!"], 0.5).hits("!!! ???"), 0);
}

#[test]
fn han_characters_are_words() {
    let set = fuzzy(&["编译错误"], 0.75);
    assert!(set.any("我的程序出现编译错误了"));
    assert!(set.any("我的程序出现编译错吴了"), "3 of 4 characters");
    assert!(!fuzzy(&["编译错误"], 0.8).any("我的程序出现编译错吴了"));
}

/// BM25 as docs/language.md writes it, from term counts.
fn bm25_formula(counts: &[u32], length: f64) -> f64 {
    let norm = K1 * (1.0 - B + B * length / AVGDL);
    counts
        .iter()
        .map(|&n| f64::from(n))
        .map(|n| n * (K1 + 1.0) / (n + norm))
        .sum()
}

#[test]
fn bm25_follows_the_documented_formula() {
    let set = phrases(&["debug", "code", "Code", "absent"]);
    let got = set.bm25("Debug this code, then debug again");
    let want = bm25_formula(&[2, 1], 6.0);
    assert!((got - want).abs() < 1e-12, "{got} != {want}");
    assert_eq!(set.bm25(""), 0.0);
    assert_eq!(set.bm25("nothing relevant"), 0.0);
    // Each term saturates below k1 + 1.
    let many = "code ".repeat(10_000);
    assert!(set.bm25(&many) < K1 + 1.0);
    // A longer text scores the same occurrence lower.
    assert!(set.bm25("code") > set.bm25(&format!("code {}", "word ".repeat(200))));
}

#[test]
fn words_are_runs_of_word_characters() {
    assert_eq!(
        words_of("Can't stop: C++17, snake_case!"),
        ["can", "t", "stop", "c", "17", "snake_case"]
    );
    assert_eq!(words_of("我的ok程序"), ["我", "的", "ok", "程", "序"]);
    assert_eq!(words_of("café\u{301} ẞ"), ["cafe", "ss"]);
    // A mark stays on a letter that is no look-alike (`и`); `г` reads as `r`.
    assert_eq!(words_of("кни\u{301}га"), ["кни\u{301}ra"]);
    assert!(words_of(" ... ").is_empty());
}

/// Exact word runs, computed independently of `FuzzySet` (for texts of the vocabulary below,
/// where words are letters and nothing unspaced stands next to another word).
fn exact_word_run(text: &str, phrase: &str) -> bool {
    let split = |s: &str| -> Vec<String> {
        fold(s)
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let (text, phrase) = (split(text), split(phrase));
    !phrase.is_empty()
        && text
            .windows(phrase.len())
            .any(|run| run == phrase.as_slice())
}

const VOCABULARY: &[&str] = &[
    "urgent", "urgnet", "outage", "Outage", "stack", "trace", "stak", "a", "ab", "ba", "straße",
    "strasse", "café", "cafe", "编", "译", "x",
];

fn sentence() -> impl Strategy<Value = String> {
    let word = proptest::sample::select(VOCABULARY);
    let sep = proptest::sample::select(&[" ", ", ", " - ", "\n", ": "][..]);
    proptest::collection::vec((word, sep), 0..12).prop_map(|parts| {
        parts
            .into_iter()
            .map(|(w, s)| format!("{w}{s}"))
            .collect::<String>()
    })
}

fn phrase() -> impl Strategy<Value = String> {
    let word = proptest::sample::select(VOCABULARY);
    proptest::collection::vec(word, 1..4).prop_map(|w| w.join(" "))
}

proptest! {
    #[test]
    fn min_one_is_exact_word_runs(text in sentence(), phrase in phrase()) {
        let set = FuzzySet::new(std::slice::from_ref(&phrase), 1.0);
        prop_assert_eq!(set.any(&text), exact_word_run(&text, &phrase));
    }

    #[test]
    fn min_one_is_contains_on_single_spaced_ascii_words(
        words in proptest::collection::vec(proptest::sample::select(&["ab", "ba", "abc", "b"][..]), 0..10),
        phrase in proptest::collection::vec(proptest::sample::select(&["ab", "ba", "abc", "b"][..]), 1..3),
    ) {
        let (text, phrase) = (words.join(" "), phrase.join(" "));
        let fuzzy = FuzzySet::new(std::slice::from_ref(&phrase), 1.0);
        let exact = PhraseSet::new(std::slice::from_ref(&phrase));
        prop_assert_eq!(fuzzy.any(&text), exact.contains(&text));
    }

    #[test]
    fn a_higher_threshold_matches_less(text in sentence(), phrase in phrase(), low in 0.05f64..1.0, step in 0.0f64..0.5) {
        let high = (low + step).min(1.0);
        let list = std::slice::from_ref(&phrase);
        if FuzzySet::new(list, high).any(&text) {
            prop_assert!(FuzzySet::new(list, low).any(&text));
        }
    }

    #[test]
    fn bounded_distance_agrees_with_strsim(a in "[abc]{0,8}", b in "[abc]{0,8}") {
        prop_assert_eq!(osa_distance(&a, &b), strsim::osa_distance(&a, &b));
    }

    #[test]
    fn long_and_unicode_words_agree_with_strsim(a in "[abé語]{0,70}", b in "[abé語]{0,70}", budget in 0usize..72) {
        // Past 64 characters a word no longer fits one column mask: either word may be the
        // pattern, or neither.
        let d = strsim::osa_distance(&a, &b);
        prop_assert_eq!(osa_within(&a, &b, budget), (d <= budget).then_some(d));
    }

    #[test]
    fn the_budget_only_cuts_distances_above_it(a in "[abc]{0,8}", b in "[abc]{0,8}", budget in 0usize..6) {
        let d = strsim::osa_distance(&a, &b);
        prop_assert_eq!(osa_within(&a, &b, budget), (d <= budget).then_some(d));
    }

    #[test]
    fn hits_count_what_any_sees(text in sentence(), list in proptest::collection::vec(phrase(), 1..5), min in 0.3f64..=1.0) {
        let set = FuzzySet::new(&list, min);
        let single = list
            .iter()
            .filter(|p| FuzzySet::new(std::slice::from_ref(*p), min).any(&text))
            .map(|p| words_of(p).join(" "))
            .collect::<std::collections::HashSet<_>>()
            .len();
        prop_assert_eq!(set.hits(&text) as usize, single);
        prop_assert_eq!(set.any(&text), single > 0);
    }
}

/// Words to misspell: ASCII, case, folding (`ß`, `İ`, final `ς`), combining marks, Greek,
/// Cyrillic and Han, which are words of one character each.
const BASES: &[&str] = &[
    "urgent",
    "outage",
    "segfault",
    "Kubernetes",
    "stack",
    "trace",
    "a",
    "to",
    "Straße",
    "İstanbul",
    "café",
    "cafe\u{301}",
    "ΣΟΦΟΣ",
    "σοφος",
    "привет",
    "编译",
    "错误",
    "naïve",
    "übermäßig",
    "x1",
    "snake_case",
];

/// Characters a typo brings in: case, accents, a Han character and a separator.
const TYPOS: &[char] = &['a', 'e', 'E', 'r', 'ü', 'ß', 'σ', '编', '1', '_', '-'];

/// A base word with a few random edits (insertions, deletions, substitutions, swaps).
fn misspelt() -> impl Strategy<Value = String> {
    let edit = (
        0u8..5,
        any::<prop::sample::Index>(),
        proptest::sample::select(TYPOS),
    );
    (
        proptest::sample::select(BASES),
        proptest::collection::vec(edit, 0..3),
    )
        .prop_map(|(base, edits)| {
            let mut chars: Vec<char> = base.chars().collect();
            for (kind, at, c) in edits {
                let i = at.index(chars.len() + 1);
                match kind {
                    0 => chars.insert(i, c),
                    1 if i < chars.len() => {
                        chars.remove(i);
                    }
                    2 if i < chars.len() => chars[i] = c,
                    3 if i + 1 < chars.len() => chars.swap(i, i + 1),
                    _ => {}
                }
            }
            chars.into_iter().collect()
        })
}

fn typed_text() -> impl Strategy<Value = String> {
    let sep = proptest::sample::select(&[" ", "  ", ", ", ". ", "\n", "'", "我"][..]);
    proptest::collection::vec((misspelt(), sep), 0..24)
        .prop_map(|parts| parts.into_iter().map(|(w, s)| w + s).collect())
}

fn typed_list() -> impl Strategy<Value = Vec<String>> {
    let phrase = proptest::collection::vec(misspelt(), 1..4).prop_map(|w| w.join(" "));
    proptest::collection::vec(phrase, 0..12)
}

fn threshold() -> impl Strategy<Value = f64> {
    prop_oneof![
        proptest::sample::select(&[0.2, 0.5, 0.6, 2.0 / 3.0, 0.7, 0.75, 0.8, 0.85, 0.9, 1.0][..]),
        0.05f64..=1.0,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_fast_matcher_agrees_with_the_reference(
        text in typed_text(),
        list in typed_list(),
        min in threshold(),
    ) {
        let want = super::fuzzy::reference::hits(&text, &list, min);
        for set in [FuzzySet::new(&list, min), FuzzySet::probing(&list, min)] {
            prop_assert_eq!(set.hits(&text) as usize, want);
            prop_assert_eq!(set.any(&text), want > 0);
            // The reach of each phrase says at which thresholds it matches.
            let reach = set.reach(&text);
            prop_assert_eq!(reach.iter().filter(|&&r| r >= min).count(), want);
        }
    }
}

#[test]
fn long_lists_probe_and_still_agree_with_the_reference() {
    // Enough phrase words of each length that probing beats comparing, as in the benchmark.
    let mut list: Vec<String> = Vec::new();
    for base in [
        "urgent",
        "outage",
        "segfault",
        "deadline",
        "Kubernetes",
        "Straße",
    ] {
        for c in ['a', 'e', 'o', 'ü', 'x', 'z', 'q', 'ß'] {
            list.push(format!("{base}{c}"));
            list.push(format!("{c}{base} stack"));
        }
    }
    let set = FuzzySet::new(&list, 0.8);
    assert!(set.probes(), "the plan for the list's lengths probes");
    for text in [
        "an urgnet outage: segfualt",
        "the STRASSE deadlnie ist jetzt",
        "qurgent stak and xoutage stack",
        "nothing near here at all",
    ] {
        let want = super::fuzzy::reference::hits(text, &list, 0.8);
        assert_eq!(set.hits(text) as usize, want, "{text}");
    }
    assert!(set.hits("qurgent stak and xoutage stack") > 0);
}

#[test]
fn repeated_words_are_looked_at_once_and_still_agree_with_the_reference() {
    // Long and short phrase words, so that both probed and compared lengths repeat.
    let list: Vec<String> = [
        "urgent",
        "outage",
        "deployment",
        "Kubernetes cluster",
        "database",
    ]
    .iter()
    .map(|p| p.to_string())
    .collect();
    for set in [FuzzySet::new(&list, 0.8), FuzzySet::probing(&list, 0.8)] {
        let filler = "the request failed again and again while nobody watched ".repeat(40);
        assert_eq!(set.hits(&filler), 0);
        for tail in [
            "",
            "an urgnet deploymnet",
            "kubernetse clustr",
            "the databse, the outage",
        ] {
            let text = format!("{filler}{tail} {filler}");
            let want = super::fuzzy::reference::hits(&text, &list, 0.8);
            assert_eq!(set.hits(&text) as usize, want, "{tail}");
            assert_eq!(set.any(&text), want > 0, "{tail}");
        }
        assert_eq!(set.hits(&format!("{filler} an urgnet deploymnet")), 2);
    }
}

#[test]
fn reach_is_the_best_mean_similarity() {
    let set = fuzzy(&["stack trace", "outage"], 0.9);
    let reach = set.reach("a stak trace, no outgae");
    // (0.8 + 1) / 2, and `outgae` is one swap from `outage`: 1 - 1/6.
    assert!((reach[0] - 0.9).abs() < 1e-6, "{reach:?}");
    assert!((reach[1] - (1.0 - 1.0 / 6.0)).abs() < 1e-6, "{reach:?}");
    assert!(set.any("a stak trace"), "reach 0.9 meets MIN 0.9");
    // A text shorter than a phrase reaches nothing of it.
    assert_eq!(set.reach("stack")[0], 0.0);
    assert_eq!(set.reach(""), [0.0, 0.0]);
}
