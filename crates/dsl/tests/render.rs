//! The diagnostic renderer: human reports (snapshots, colour off) and the JSON shape.

use src_dsl::codes;
use src_dsl::render::{human, json_diagnostic, json_report};
use src_dsl::{Diagnostic, FileId, SourceMap, Span};

/// A policy whose second line is full of multi-byte characters, so that any byte/character mix-up
/// moves the labels on the lines after it.
const ROUTING: &str = "# routing — métier 中文 🚀\nsignal tôpic = domain(prompt)\nroute math priority 10 { when topic is mathh  to strong }\n";

fn span_of(text: &str, needle: &str, file: FileId) -> Span {
    let start = text
        .find(needle)
        .unwrap_or_else(|| panic!("`{needle}` not in the text"));
    Span::new(file, start, start + needle.len())
}

fn unknown_label(file: FileId) -> Diagnostic {
    Diagnostic::error(
        codes::UNKNOWN_LABEL,
        "`mathh` is not a label of classifier `domain`",
        span_of(ROUTING, "mathh", file),
    )
    .with_label_message("not a label of `domain`")
    .with_secondary(
        span_of(ROUTING, "domain(prompt)", file),
        "`tôpic` is a `class<domain>`",
    )
    .with_help("did you mean `math`?")
    .with_note("the labels of `domain` are `math`, `code` and `other`")
}

#[test]
fn human_report_places_labels_after_non_ascii_text() {
    let mut map = SourceMap::new();
    let f = map.add("policy/routing.sr", ROUTING);
    insta::assert_snapshot!(human(&[unknown_label(f)], &map, false));
}

#[test]
fn human_report_spans_files_and_severities() {
    let mut map = SourceMap::new();
    let providers_text = "# fournisseurs — 中文\nmodèl strong { backend = dynamo }\n";
    let providers = map.add("policy/providers.sr", providers_text);
    let routing = map.add("policy/routing.sr", ROUTING);
    let duplicate = Diagnostic::error(
        codes::DUPLICATE_NAME,
        "`strong` is declared twice",
        span_of(ROUTING, "strong", routing),
    )
    .with_label_message("used here")
    .with_secondary(
        span_of(providers_text, "strong", providers),
        "declared here",
    );
    let unused = Diagnostic::warning(
        codes::UNUSED_SIGNAL,
        "signal `tôpic` is never used",
        span_of(ROUTING, "tôpic", routing),
    )
    .with_help("remove it, or use it in a route");
    insta::assert_snapshot!(human(&[duplicate, unused], &map, false));
}

#[test]
fn colour_is_only_there_when_asked_for() {
    let mut map = SourceMap::new();
    let f = map.add("routing.sr", ROUTING);
    let plain = human(&[unknown_label(f)], &map, false);
    let coloured = human(&[unknown_label(f)], &map, true);
    assert!(!plain.contains('\x1b'));
    assert!(coloured.contains("\x1b["));
    assert!(coloured.contains("error[E022]"));
}

#[test]
fn human_never_panics_on_stale_spans() {
    let text = "é中\n🚀x\n";
    let mut map = SourceMap::new();
    let f = map.add("a.sr", text);
    let empty = map.add("empty.sr", "");
    for file in [f, empty, FileId(7)] {
        for start in 0..=text.len() + 2 {
            for end in 0..=text.len() + 2 {
                let d = Diagnostic::error(codes::SYNTAX, "x", Span::new(file, start, end))
                    .with_secondary(Span::new(f, end, start), "y");
                let out = human(&[d], &map, false);
                assert!(out.starts_with("error[E001]: x\n"), "{out}");
            }
        }
    }
}

#[test]
fn json_has_exact_keys_and_character_columns() {
    let mut map = SourceMap::new();
    let f = map.add("policy/routing.sr", ROUTING);
    let d = unknown_label(f);
    let v = json_diagnostic(&d, &map);
    let Some(obj) = v.as_object() else {
        panic!("not an object: {v}");
    };
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "code",
            "column",
            "end_column",
            "end_line",
            "file",
            "help",
            "line",
            "message",
            "severity"
        ]
    );
    // `mathh` sits on line 3; count its column by hand in characters.
    let line3 = ROUTING.lines().nth(2).unwrap_or_default();
    let col = line3[..line3.find("mathh").unwrap_or_default()]
        .chars()
        .count()
        + 1;
    assert!(col > 1);
    assert_eq!(v["line"], 3);
    assert_eq!(v["column"], col);
    assert_eq!(v["end_line"], 3);
    assert_eq!(v["end_column"], col + "mathh".len());
    assert_eq!(v["code"], "E022");
    assert_eq!(v["severity"], "error");
    assert_eq!(v["file"], "policy/routing.sr");
    assert_eq!(v["message"], d.message.as_str());
    assert_eq!(v["help"], "did you mean `math`?");

    // On line 2 the bytes and characters differ: `tôpic` starts after 7 characters, 7 bytes,
    // but `domain` after 16 characters and 17 bytes.
    let on_line2 = Diagnostic::warning(
        codes::UNUSED_MODEL_SOURCE,
        "w",
        span_of(ROUTING, "domain", f),
    );
    let v = json_diagnostic(&on_line2, &map);
    assert_eq!(
        (v["line"].clone(), v["column"].clone()),
        (2.into(), 16.into())
    );
    assert!(v["help"].is_null());
}

#[test]
fn json_report_counts_errors_and_warnings() {
    let mut map = SourceMap::new();
    let f = map.add("a.sr", "signal x = y\n");
    let diags = vec![
        Diagnostic::error(
            codes::UNKNOWN_NAME,
            "unknown name `y`",
            Span::new(f, 11, 12),
        ),
        Diagnostic::warning(
            codes::UNUSED_SIGNAL,
            "signal `x` is never used",
            Span::new(f, 7, 8),
        ),
        Diagnostic::warning(codes::UNUSED_SIGNAL, "again", Span::new(FileId(3), 0, 1)),
    ];
    let v = json_report(&diags, &map);
    assert_eq!(v["errors"], 1);
    assert_eq!(v["warnings"], 2);
    let Some(list) = v["diagnostics"].as_array() else {
        panic!("not a list: {v}");
    };
    assert_eq!(list.len(), 3);
    assert_eq!(list[0]["column"], 12);
    assert_eq!(list[1]["code"], "W001");
    assert!(list[2]["file"].is_null());
}
