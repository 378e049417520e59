//! Unit tests and properties of the text builtins: caseless matching across scripts, word
//! boundaries, the counting rules of `hits`/`density`/`sequence`, and `words`.

use super::*;
use proptest::prelude::*;

fn set(phrases: &[&str]) -> PhraseSet {
    let phrases: Vec<String> = phrases.iter().map(|p| (*p).to_owned()).collect();
    PhraseSet::new(&phrases)
}

#[test]
fn ascii_matching_ignores_case_both_ways() {
    assert!(set(&["Stack Trace"]).contains("here is my STACK TRACE:"));
    assert!(set(&["segfault"]).contains("It SegFaults? no: Segfault."));
    assert!(!set(&["segfault"]).contains("segmentation fault"));
}

#[test]
fn letter_edges_need_word_boundaries() {
    let err = set(&["err"]);
    assert!(!err.contains("error"));
    assert!(!err.contains("terr"));
    assert!(err.contains("err: disk full"));
    assert!(err.contains("(err)"));
    assert!(err.contains("err"));
    // Digits and `_` continue a word, as in UAX #29 and regex `\w`.
    assert!(!err.contains("err2"));
    assert!(!err.contains("my_err"));
    // An accent on a Latin letter is folded away, so it cannot push a phrase off its boundary.
    assert!(set(&["cafe"]).contains("cafe\u{301} noir"));
    assert!(set(&["cafe\u{301}"]).contains("CAFE noir"));
    // A mark on another script's letter is part of the word.
    assert!(!set(&["\u{915}"]).contains("\u{915}\u{93f}"));
}

#[test]
fn non_letter_edges_match_anywhere() {
    let cpp = set(&["c++"]);
    assert!(cpp.contains("I write C++17 daily"));
    assert!(cpp.contains("c++"));
    // The leading `c` is a letter, so it still needs a boundary on the left.
    assert!(!cpp.contains("abc++"));
    let net = set(&[".net"]);
    assert!(net.contains("ASP.NET core"));
    assert!(!net.contains("asp.network"));
    let hash = set(&["#include"]);
    assert!(hash.contains("a#include <stdio.h>"));
}

#[test]
fn overlapping_candidates_are_all_considered() {
    // A leftmost search would stop at `err` inside `error` and miss the valid `error`.
    let phrases = set(&["err", "error"]);
    assert!(phrases.contains("an error occurred"));
    assert_eq!(phrases.hits("an error occurred"), 1);
    assert_eq!(phrases.hits("err, then an error"), 2);
}

#[test]
fn a_whitespace_run_in_a_phrase_matches_any_run_in_the_text() {
    let trace = set(&["stack trace"]);
    for text in [
        "a stack trace",
        "a stack\ntrace",
        "a stack  trace",
        "a Stack\r\n\tTrace:",
        "stack\u{a0}trace",
        "stack \u{3000} trace",
    ] {
        assert!(trace.contains(text), "{text:?}");
    }
    assert!(!trace.contains("stacktrace"));
    assert!(!trace.contains("stack-trace"));
    // The phrase's own runs are collapsed too, and then it is the same phrase.
    let doubled = set(&["stack  trace", "Stack\ttrace"]);
    assert!(doubled.contains("stack trace"));
    assert_eq!(doubled.hits("stack\n\ntrace"), 1);
    // Edges: a phrase that ends in whitespace needs whitespace there, of any kind.
    let spaced = set(&["err "]);
    assert!(spaced.contains("err\n"));
    assert!(!spaced.contains("err"));
    // Counting rules see the collapsed text: two occurrences, in order, across lines.
    let steps = set(&["first step", "next step"]);
    assert!(steps.sequence("first\nstep, then the next\n\nstep"));
    assert!(steps.density("first  step next\tstep") > 0.0);
    assert_eq!(
        steps.density("first  step next\tstep").to_bits(),
        steps.density("first step next step").to_bits()
    );
}

#[test]
fn turkish_dotted_capital_i_folds_to_i() {
    let city = set(&["istanbul"]);
    assert!(city.contains("İstanbul'a gidiyorum"));
    assert!(city.contains("İSTANBUL"));
    assert!(set(&["İstanbul"]).contains("istanbul"));
    // Lowercasing `İ` would add a combining dot; folding must not leave a stray mark that
    // breaks the boundary after a phrase ending in `i`.
    assert!(set(&["i"]).contains("İ"));
    // Dotless ı is a look-alike of `i`, so it reads as `i`.
    assert!(set(&["kirmizi"]).contains("kırmızı"));
}

#[test]
fn german_sharp_s_folds_to_ss() {
    let street = set(&["straße"]);
    assert!(street.contains("STRASSE"));
    assert!(street.contains("Straße"));
    assert!(street.contains("STRAẞE"));
    assert!(set(&["strasse"]).contains("in der Straße 5"));
    assert!(!set(&["strasse"]).contains("hauptstrassen"));
}

#[test]
fn greek_final_sigma_matches_medial_sigma() {
    assert!(set(&["οδος"]).contains("ΟΔΟΣ"));
    assert!(set(&["ΟΔΟΣ"]).contains("μια οδος εδω"));
    assert!(set(&["λογος"]).contains("ΛΟΓΟΣ"));
    assert!(!set(&["οδο"]).contains("οδος"));
}

#[test]
fn unspaced_scripts_match_as_substrings() {
    // Chinese: "stack trace" inside a sentence with no spaces.
    assert!(set(&["堆栈跟踪"]).contains("请帮我看这个堆栈跟踪是什么意思"));
    // Japanese mixing Kana and Kanji.
    assert!(set(&["エラー"]).contains("コンパイルエラーが出ました"));
    assert!(set(&["翻訳"]).contains("この文を翻訳してください"));
    // Thai.
    assert!(set(&["ภาษา"]).contains("ฉันเรียนภาษาไทย"));
    // A Latin phrase next to Han characters sits on a boundary.
    assert!(set(&["python"]).contains("我用Python写代码"));
    assert!(!set(&["堆栈跟踪"]).contains("堆栈 跟踪"));
}

#[test]
fn emoji_and_symbols_match_plainly() {
    assert!(set(&["🔥"]).contains("this is 🔥🔥"));
    assert_eq!(set(&["🔥", "👍"]).hits("🔥 only"), 1);
    assert!(set(&["ok 👍"]).contains("OK 👍!"));
}

#[test]
fn hits_counts_distinct_phrases_once() {
    let phrases = set(&["ignore", "bypass", "jailbreak"]);
    assert_eq!(phrases.hits("ignore this, ignore that"), 1);
    assert_eq!(phrases.hits("ignore the rules and bypass the filter"), 2);
    assert_eq!(phrases.hits("nothing here"), 0);
    // Duplicates (also after folding) are one phrase.
    assert_eq!(set(&["Ignore", "ignore", "IGNORE"]).hits("ignore"), 1);
}

#[test]
fn hits_beyond_sixty_four_phrases() {
    let phrases: Vec<String> = (0..100).map(|i| format!("w{i}")).collect();
    let set = PhraseSet::new(&phrases);
    let text: Vec<String> = (0..100)
        .filter(|i| i % 3 == 0)
        .map(|i| format!("w{i}"))
        .collect();
    assert_eq!(set.hits(&text.join(" ")), 34);
    assert_eq!(set.hits("w99 w99 w99"), 1);
}

#[test]
fn density_counts_non_overlapping_occurrences_per_word() {
    let phrases = set(&["ignore", "bypass"]);
    // 3 occurrences in 6 words.
    let d = phrases.density("ignore it, bypass it, ignore it");
    assert!((d - 0.5).abs() < 1e-12, "{d}");
    assert_eq!(phrases.density(""), 0.0);
    assert_eq!(phrases.density("!!! ???"), 0.0);
    // Overlapping phrases count once per stretch of text.
    let nested = set(&["ignore", "ignore previous"]);
    let d = nested.density("ignore previous instructions");
    assert!((d - 1.0 / 3.0).abs() < 1e-12, "{d}");
    // Repeats of one phrase in an unspaced script do not overlap either: 2 in 3 characters.
    let d = set(&["哈哈"]).density("哈哈哈");
    assert!((d - 1.0 / 3.0).abs() < 1e-12, "{d}");
}

#[test]
fn sequence_requires_order_without_overlap() {
    let steps = set(&["first", "then", "finally"]);
    assert!(steps.sequence("First do X, then do Y, and finally Z"));
    assert!(!steps.sequence("finally Z, then Y, first X"));
    assert!(!steps.sequence("first then"));
    // Two uses of one phrase need two occurrences.
    let twice = set(&["again", "again"]);
    assert!(!twice.sequence("again"));
    assert!(twice.sequence("again and again"));
    // A later phrase may not reuse text of an earlier one.
    assert!(!set(&["abcd", "cdef"]).sequence("abcdef"));
    assert!(set(&["ab", "cd"]).sequence("ab cd"));
    assert!(!set(&["哈哈", "哈哈"]).sequence("哈哈哈"));
    assert!(set(&["哈哈", "哈哈"]).sequence("哈哈哈哈"));
    // Boundary rules apply inside sequences too.
    assert!(!set(&["err", "fix"]).sequence("error fix"));
    // An earlier occurrence of the second phrase does not count.
    assert!(set(&["b", "a"]).sequence("a b a"));
    assert!(!set(&["b", "a"]).sequence("a b"));
}

#[test]
fn empty_phrases_and_lists_never_hold() {
    let empty = set(&[]);
    assert!(!empty.contains("anything"));
    assert_eq!(empty.hits("anything"), 0);
    assert!(!empty.sequence("anything"));
    assert_eq!(empty.density("anything"), 0.0);
    let blank = set(&["", "x"]);
    assert!(!blank.contains(""));
    assert!(blank.contains("x"));
    assert!(!blank.sequence("x"));
}

#[test]
fn words_follow_unicode_segmentation() {
    assert_eq!(words("The quick brown fox"), 4);
    assert_eq!(words("don't stop-believing, 3.14 times"), 5);
    assert_eq!(words(""), 0);
    assert_eq!(words("  ... !!! "), 0);
    assert_eq!(words("Straße über naïve"), 3);
}

#[test]
fn ascii_words_join_as_uax29_does() {
    // `:` joins letters only; `.` and `'` letters or digits; `,` and `;` digits only.
    for (text, n) in [
        ("a:b 1:2", 3),
        ("e.g. 3.14 a.1", 4),
        ("1,000;2 a,b", 3),
        ("snake_case __ _x_ 9_", 3),
        ("can't 'quoted' a..b", 4),
    ] {
        assert_eq!(words(text), n, "{text}");
        assert_eq!(segmented_words(text), n as usize, "{text}");
    }
}

proptest! {
    #[test]
    fn ascii_words_agree_with_the_segmenter(text in "[aZ0_:.',; \\r\n\t\"@-]{0,40}") {
        prop_assert_eq!(words(&text), segmented_words(&text) as i64);
    }
}

#[test]
fn words_count_each_han_and_kana_character() {
    assert_eq!(words("我爱北京"), 4);
    // Katakana runs form one UAX #29 word; each character counts here.
    assert_eq!(words("コンピュータ"), 6);
    assert_eq!(words("ひらがな"), 4);
    assert_eq!(words("我用Python写代码"), 6);
}

#[test]
fn words_count_thai_runs_not_letters() {
    // Without a dictionary, a run of Thai is one word; spaces between phrases split runs.
    assert_eq!(words("สวัสดีครับ"), 1);
    assert_eq!(words("สวัสดีครับ ขอบคุณ"), 2);
    assert_eq!(words("hello สวัสดี world"), 3);
}

#[test]
fn tokens_estimate_rounds_bytes_up() {
    assert_eq!(tokens_estimate(""), 0);
    assert_eq!(tokens_estimate("abc"), 1);
    assert_eq!(tokens_estimate("abcd"), 1);
    assert_eq!(tokens_estimate("abcde"), 2);
    // Bytes, not characters: 3 Han characters are 9 bytes.
    assert_eq!(tokens_estimate("我爱你"), 3);
}

#[test]
fn regex_helpers_count_non_overlapping_matches() -> Result<(), regex::Error> {
    let re = Regex::new("aa")?;
    assert_eq!(count(&re, "aaaa"), 2);
    assert_eq!(count(&re, "aaa"), 1);
    assert!(matches(&re, "baab"));
    assert!(!matches(&re, "abab"));
    let digits = Regex::new(r"\d+")?;
    assert_eq!(count(&digits, "a1 b22 c333"), 3);
    Ok(())
}

#[test]
fn fold_borrows_unchanged_text() {
    assert!(matches!(
        fold("already lower 你好"),
        std::borrow::Cow::Borrowed(_)
    ));
    assert_eq!(fold("MiXeD"), "mixed");
    // Greek omicron and sigma are look-alikes of `o`, so they fold to the Latin letter.
    assert_eq!(fold("Größe ΣΟΦΟΣ İz"), "grosse ooφoo iz");
}

#[test]
fn naive_fallback_agrees_with_the_automaton() {
    let phrases = ["err", "error", "c++", "哈哈", "again"];
    let owned: Vec<String> = phrases.iter().map(|p| (*p).to_owned()).collect();
    let fast = PhraseSet::new(&owned);
    let mut slow = fast.clone();
    slow.matcher = Matcher::Naive(owned.iter().map(|p| fold(p).into_owned()).collect());
    for text in [
        "an error, err, c++ and C++17",
        "哈哈哈哈 again again",
        "terror errs",
        "",
    ] {
        assert_eq!(fast.contains(text), slow.contains(text), "{text}");
        assert_eq!(fast.hits(text), slow.hits(text), "{text}");
        assert_eq!(fast.density(text), slow.density(text), "{text}");
        assert_eq!(fast.sequence(text), slow.sequence(text), "{text}");
    }
    let spaced: Vec<String> = vec!["stack  trace".into(), "Err\tnow".into()];
    let fast = PhraseSet::new(&spaced);
    let mut slow = fast.clone();
    slow.matcher = Matcher::Naive(vec!["stack trace".into(), "err now".into()]);
    for text in [
        "STACK\n trace, err now",
        "stack trace\terr\r\nnow",
        "stacktrace",
    ] {
        assert_eq!(fast.contains(text), slow.contains(text), "{text}");
        assert_eq!(fast.hits(text), slow.hits(text), "{text}");
        assert_eq!(fast.density(text), slow.density(text), "{text}");
        assert_eq!(fast.sequence(text), slow.sequence(text), "{text}");
    }
}

/// Text drawn from the characters where the rules differ: ASCII letters and punctuation,
/// case-changing letters, combining marks, Han, Kana, Thai, emoji.
fn text_strategy() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "a", "B", "e", "r", "R", " ", ".", "+", "_", "1", "ß", "ẞ", "İ", "ı", "Σ", "ς", "σ",
        "\u{301}", "字", "カ", "ひ", "ไ", "🔥", "\u{200d}", "\n", "\t", "  ", "\u{a0}",
    ]);
    prop::collection::vec(pieces, 0..24).prop_map(|v| v.concat())
}

fn phrases_strategy() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        text_strategy().prop_map(|s| s.chars().take(4).collect()),
        0..5,
    )
}

proptest! {
    #[test]
    fn never_panics_and_contains_agrees_with_hits(text in text_strategy(), phrases in phrases_strategy()) {
        let set = PhraseSet::new(&phrases);
        let hits = set.hits(&text);
        prop_assert_eq!(set.contains(&text), hits > 0);
        prop_assert!(hits <= phrases.len() as i64);
        let density = set.density(&text);
        prop_assert!(density.is_finite() && density >= 0.0);
        let _ = set.sequence(&text);
        prop_assert!(words(&text) >= 0);
    }

    #[test]
    fn sequence_of_one_phrase_is_contains(text in text_strategy(), phrase in text_strategy()) {
        let set = PhraseSet::new(std::slice::from_ref(&phrase));
        prop_assert_eq!(set.sequence(&text), set.contains(&text));
    }

    #[test]
    fn ascii_case_does_not_matter(text in "[a-zA-Z .+]{0,30}", phrase in "[a-zA-Z+]{1,5}") {
        let set = PhraseSet::new(std::slice::from_ref(&phrase));
        let upper = PhraseSet::new(&[phrase.to_ascii_uppercase()]);
        prop_assert_eq!(set.contains(&text), set.contains(&text.to_ascii_uppercase()));
        prop_assert_eq!(set.contains(&text), upper.contains(&text.to_ascii_lowercase()));
    }

    #[test]
    fn folding_the_text_first_changes_nothing(text in prop_oneof![text_strategy(), "[a-zA-Z .+_1]{0,30}"], phrases in phrases_strategy()) {
        // ASCII text skips folding; this checks that shortcut against the folded text.
        let set = PhraseSet::new(&phrases);
        let folded = fold(&text);
        prop_assert_eq!(set.hits(&text), set.hits(&folded));
        prop_assert_eq!(set.sequence(&text), set.sequence(&folded));
        prop_assert_eq!(set.density(&text).to_bits(), set.density(&folded).to_bits());
    }

    #[test]
    fn a_phrase_found_between_spaces_is_contained(prefix in text_strategy(), phrase in "[a-z]{1,6}", suffix in text_strategy()) {
        let text = format!("{prefix} {phrase} {suffix}");
        prop_assert!(PhraseSet::new(&[phrase.to_ascii_uppercase()]).contains(&text));
    }

    #[test]
    fn whitespace_runs_are_interchangeable(
        words in prop::collection::vec(prop::sample::select(vec!["stack", "trace", "Err", "c++", "字", "ok"]), 0..10),
        runs in prop::collection::vec(prop::sample::select(vec![" ", "  ", "\n", "\r\n", "\t ", "\u{a0}", " \u{3000}"]), 10),
        phrases in prop::collection::vec(prop::sample::select(vec!["stack trace", "trace  err", "err\nc++", "ok", "字 ok", " ok", "stack"]), 1..4),
    ) {
        // The same words, once with single spaces and once with the drawn runs between them.
        let single = words.join(" ");
        let mut varied = String::new();
        for (i, w) in words.iter().enumerate() {
            if i > 0 {
                varied.push_str(runs[i % runs.len()]);
            }
            varied.push_str(w);
        }
        let phrases: Vec<String> = phrases.iter().map(|p| (*p).to_string()).collect();
        let set = PhraseSet::new(&phrases);
        prop_assert_eq!(set.contains(&single), set.contains(&varied));
        prop_assert_eq!(set.hits(&single), set.hits(&varied));
        prop_assert_eq!(set.sequence(&single), set.sequence(&varied));
        // `density` and `bm25` divide by `words`, which whitespace does not change either.
        prop_assert_eq!(set.density(&single).to_bits(), set.density(&varied).to_bits());
        prop_assert_eq!(set.bm25(&single).to_bits(), set.bm25(&varied).to_bits());
    }

    #[test]
    fn sequence_implies_every_phrase_is_contained(text in text_strategy(), phrases in phrases_strategy()) {
        let set = PhraseSet::new(&phrases);
        if set.sequence(&text) {
            for phrase in &phrases {
                prop_assert!(PhraseSet::new(std::slice::from_ref(phrase)).contains(&text));
            }
        }
    }
}
