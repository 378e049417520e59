//! The YAML the manifests are written in, emitted here rather than by a general serializer so
//! that no string can be read back as something else. Kubernetes (`kubectl`, the API server's
//! YAML decoder) and many tools read YAML 1.1, where `no`, `on`, `y`, `1:30` and `2026-01-01`
//! are not strings; a 1.2 serializer writes them bare. Here a string is written bare only when
//! it starts with a letter or `/`, holds nothing but letters, digits and `._/-`, and is not one of
//! YAML 1.1's booleans or null; every other one is double-quoted. Multi-line strings (the
//! policy files of a ConfigMap) are literal blocks, so they stay readable.

use serde_json::Value;
use std::fmt::Write;

/// One document in block style, ending with a newline.
pub fn document(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => write_map(&mut out, map, 0, false),
        Value::Array(items) if !items.is_empty() => write_seq(&mut out, items, 0),
        other => {
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
    out
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// The entries of `map` at `indent`; with `inline`, the first one follows a `- ` already written.
fn write_map(out: &mut String, map: &serde_json::Map<String, Value>, indent: usize, inline: bool) {
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 || !inline {
            pad(out, indent);
        }
        out.push_str(&string(key));
        out.push(':');
        match value {
            Value::Object(m) if !m.is_empty() => {
                out.push('\n');
                write_map(out, m, indent + 2, false);
            }
            Value::Array(items) if !items.is_empty() => {
                out.push('\n');
                write_seq(out, items, indent + 2);
            }
            Value::String(s) if literal_block(s) => write_literal(out, s, indent),
            other => {
                out.push(' ');
                out.push_str(&scalar(other));
                out.push('\n');
            }
        }
    }
}

fn write_seq(out: &mut String, items: &[Value], indent: usize) {
    for item in items {
        pad(out, indent);
        out.push('-');
        match item {
            Value::Object(m) if !m.is_empty() => {
                out.push(' ');
                write_map(out, m, indent + 2, true);
            }
            Value::Array(inner) if !inner.is_empty() => {
                out.push('\n');
                write_seq(out, inner, indent + 2);
            }
            other => {
                out.push(' ');
                out.push_str(&scalar(other));
                out.push('\n');
            }
        }
    }
}

/// A mapping value as a literal block with an explicit indentation indicator (so a first line
/// that starts with a space is kept as written) and the chomping that keeps its final newlines.
fn write_literal(out: &mut String, s: &str, indent: usize) {
    let body = s.trim_end_matches('\n');
    let trailing = s.len() - body.len();
    out.push_str(match trailing {
        0 => " |2-\n",
        1 => " |2\n",
        _ => " |2+\n",
    });
    for line in body.split('\n') {
        if !line.is_empty() {
            pad(out, indent + 2);
            out.push_str(line);
        }
        out.push('\n');
    }
    for _ in 1..trailing {
        out.push('\n');
    }
}

/// Whether `s` can be a literal block: it has several lines and nothing a block cannot hold.
fn literal_block(s: &str) -> bool {
    s.contains('\n') && s.chars().all(|c| c == '\n' || c == '\t' || printable(c))
}

/// Characters YAML lets stand for themselves (its `c-printable`, less the byte order mark and
/// the line separators other readers break lines at).
fn printable(c: char) -> bool {
    match c {
        ' '..='~' => true,
        '\u{0}'..='\u{9f}' => false,
        '\u{2028}' | '\u{2029}' | '\u{feff}' => false,
        '\u{fffe}' | '\u{ffff}' => false,
        _ => true,
    }
}

fn scalar(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string(s),
        Value::Array(_) => "[]".to_string(),
        Value::Object(_) => "{}".to_string(),
    }
}

/// YAML 1.1's words for booleans and null, which a bare string must not be.
const RESERVED: &[&str] = &["y", "n", "yes", "no", "true", "false", "on", "off", "null"];

/// `s` bare when no reader can take it for anything but that string, else double-quoted.
fn string(s: &str) -> String {
    let bare = s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '/')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'))
        && !RESERVED.iter().any(|w| w.eq_ignore_ascii_case(s));
    if bare {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if printable(c) => out.push(c),
            c => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_another_reader_could_mistype_are_quoted() {
        for s in [
            "no",
            "No",
            "YES",
            "on",
            "off",
            "y",
            "n",
            "true",
            "null",
            "~",
            "",
            "10",
            "1:30",
            "0.0.0.0:8801",
            "2026-01-01",
            "1e3",
            ".inf",
            "--save",
            "*a",
            "&a",
            "!t",
            "#c",
            "a: b",
            "a #b",
            "@x",
            "%x",
            "`x",
            "[x]",
            "{x}",
            "x,y",
            "'x'",
            "\"x\"",
            " x",
            "x ",
        ] {
            let written = string(s);
            assert!(
                written.starts_with('"'),
                "`{s}` was written bare: {written}"
            );
            let back: String = serde_json::from_str(&written).unwrap();
            assert_eq!(back, s);
        }
        for s in [
            "serve",
            "src-production",
            "app.kubernetes.io/name",
            "/etc/src/policy",
        ] {
            assert_eq!(string(s), s);
        }
    }

    #[test]
    fn unprintable_characters_are_escaped() {
        assert_eq!(string("a\u{7}\u{2028}é"), "\"a\\u0007\\u2028é\"");
    }

    #[test]
    fn blocks_keep_their_lines_and_final_newlines() {
        let doc = json!({"data": {
            "a": "x\n  y\n",
            "b": " lead\n\ntail",
            "c": "two\n\n",
        }, "list": [{"k": 1, "m": [true, null]}, [], "no"]});
        assert_eq!(
            document(&doc),
            "data:\n  a: |2\n    x\n      y\n  b: |2-\n     lead\n\n    tail\n  c: |2+\n    two\n\n\
             list:\n  - k: 1\n    m:\n      - true\n      - null\n  - []\n  - \"no\"\n"
        );
        let back: Value = serde_norway::from_str(&document(&doc)).unwrap();
        assert_eq!(back, doc);
    }
}
