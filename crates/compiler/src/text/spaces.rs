//! Whitespace runs for phrase matching: any run of whitespace inside a phrase matches any run of
//! whitespace in the text (`"stack trace"` matches `"stack\ntrace"` and `"stack  trace"`).
//!
//! Both sides are brought to one form, every run of whitespace written as a single space: the
//! phrases once at policy load, the text per request, and only when a phrase of the list holds
//! whitespace (a list of single words matches the same either way) and the text has a run to
//! rewrite. A prompt with single spaces only is searched as it is, without a copy; the check
//! is a vectorised pass over its bytes, and the rewrite of an ASCII text copies it in slices.
//! Whitespace is Unicode `White_Space` (`char::is_whitespace`): tabs, line breaks, no-break and
//! ideographic spaces among them.

/// `text` with every run of whitespace replaced by one space, or `None` when that changes
/// nothing (every run already is one space).
pub fn collapse_whitespace(text: &str) -> Option<String> {
    if !text.is_ascii() {
        return collapse_unicode(text);
    }
    let bytes = text.as_bytes();
    let found = ascii_runs(bytes);
    if !found.control && !found.doubled {
        return None;
    }
    // A lone tab or line break becomes a space in place, which keeps the length and runs
    // vectorised; only then are doubled spaces (indentation, blank lines, `\r\n`) squeezed.
    let spaced: Vec<u8> = if found.control {
        bytes
            .iter()
            .map(|&b| if is_control_space(b) { b' ' } else { b })
            .collect()
    } else {
        bytes.to_vec()
    };
    let squeezed = if found.doubled {
        squeeze_spaces(&spaced)
    } else {
        spaced
    };
    // ASCII in, ASCII out: the conversion cannot fail.
    String::from_utf8(squeezed).ok()
}

/// What an ASCII text has that single spaces do not: a tab, line break, vertical tab or form
/// feed (`control`), or two whitespace bytes in a row (`doubled`).
struct AsciiRuns {
    control: bool,
    doubled: bool,
}

fn ascii_runs(bytes: &[u8]) -> AsciiRuns {
    let space = |b: u8| is_control_space(b) | (b == b' ');
    // Folded without an early exit, so that the pass runs vectorised.
    let control = bytes
        .iter()
        .fold(false, |found, &b| found | is_control_space(b));
    let doubled = bytes
        .iter()
        .zip(bytes.iter().skip(1))
        .fold(false, |found, (&a, &b)| found | (space(a) & space(b)));
    AsciiRuns { control, doubled }
}

/// Every run of spaces in `spaced` (whitespace already written as spaces) cut to one, copying
/// the text between doubled spaces, which `memmem` finds.
fn squeeze_spaces(spaced: &[u8]) -> Vec<u8> {
    let doubled = memchr::memmem::Finder::new(b"  ");
    let mut out = Vec::with_capacity(spaced.len());
    let mut rest = spaced;
    while let Some(at) = doubled.find(rest) {
        // Keep the first space of the run, skip the others.
        let end = rest
            .iter()
            .skip(at + 1)
            .position(|&b| b != b' ')
            .map_or(rest.len(), |n| at + 1 + n);
        out.extend_from_slice(rest.get(..=at).unwrap_or_default());
        rest = rest.get(end..).unwrap_or_default();
    }
    out.extend_from_slice(rest);
    out
}

/// `collapse_whitespace` for text that is not ASCII, where whitespace can be any of Unicode's.
fn collapse_unicode(text: &str) -> Option<String> {
    let mut after_space = false;
    let changes = text.chars().any(|c| {
        let space = c.is_whitespace();
        let change = space && (c != ' ' || after_space);
        after_space = space;
        change
    });
    if !changes {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut in_run = false;
    for c in text.chars() {
        if c.is_whitespace() {
            if !in_run {
                out.push(' ');
                in_run = true;
            }
        } else {
            out.push(c);
            in_run = false;
        }
    }
    Some(out)
}

fn is_control_space(b: u8) -> bool {
    b.wrapping_sub(9) < 5
}

/// Whether a folded phrase holds whitespace, so that the text's runs matter to it.
pub fn has_whitespace(phrase: &str) -> bool {
    phrase.chars().any(char::is_whitespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_become_one_space() {
        assert_eq!(
            collapse_whitespace("stack\ntrace").as_deref(),
            Some("stack trace")
        );
        assert_eq!(
            collapse_whitespace("stack  trace").as_deref(),
            Some("stack trace")
        );
        assert_eq!(collapse_whitespace(" \t\r\n a").as_deref(), Some(" a"));
        assert_eq!(collapse_whitespace("a\u{a0}b").as_deref(), Some("a b"));
        assert_eq!(
            collapse_whitespace("字 \u{3000}字").as_deref(),
            Some("字 字")
        );
        assert_eq!(collapse_whitespace("a\u{2028}").as_deref(), Some("a "));
        assert_eq!(collapse_whitespace("x\t").as_deref(), Some("x "));
    }

    #[test]
    fn single_spaces_are_left_alone() {
        for text in [
            "",
            " ",
            "stack trace",
            " a b c ",
            "naïve café 字 字",
            "\u{1c}",
        ] {
            assert_eq!(collapse_whitespace(text), None, "{text:?}");
        }
    }

    #[test]
    fn the_ascii_path_collapses_as_the_general_one() {
        for text in [
            "a\n\nb",
            "  a \t b  ",
            "\r\n",
            "x\x0b\x0cy",
            "a  b\n c",
            "\n",
            "if x {\n    return;\n}\n",
            "a   ",
            "   ",
        ] {
            // The same text with one character that is not ASCII, which takes the general path.
            let general = collapse_unicode(&format!("{text}é"));
            let ascii = collapse_whitespace(text).map(|s| format!("{s}é"));
            assert_eq!(ascii, general, "{text:?}");
        }
    }

    #[test]
    fn every_whitespace_character_is_seen() {
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let text = format!("a{c}b");
            assert_eq!(
                collapse_whitespace(&text).is_some(),
                c.is_whitespace() && c != ' ',
                "U+{:04X}",
                u32::from(c)
            );
        }
    }
}
