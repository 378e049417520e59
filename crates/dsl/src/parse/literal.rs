//! Reads literal tokens: numbers with `k`/`M` suffixes, durations, and string escapes.
//!
//! The grammar lexes every number-like token the same way (digits, an optional fraction, any
//! letters); this module decides what the token is, so that `12x` or `1.5h` gets a precise
//! "invalid literal" error at its own span instead of a vague syntax error.

use crate::ast::{Duration, Number};

/// What a number-like token turned out to be.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Numeric {
    Number(Number),
    Duration(Duration),
}

/// Why a literal is invalid; `at..end` are byte offsets into the token.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LiteralError {
    pub message: String,
    pub help: Option<String>,
    pub at: usize,
    pub end: usize,
}

impl LiteralError {
    fn whole(token: &str, message: String, help: Option<String>) -> Self {
        LiteralError {
            message,
            help,
            at: 0,
            end: token.len(),
        }
    }
}

const DURATION_UNITS: &[(&str, u64)] = &[
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

const SUFFIX_HELP: &str = "numbers take the suffix `k` (×1,000) or `M` (×1,000,000); durations \
                           are whole numbers with `ms`, `s`, `m`, `h` or `d`";

/// The milliseconds of a duration written as the language writes it (`250ms`, `30s`, `10m`), for
/// command-line flags that take durations: one syntax for policies and flags.
pub fn duration_millis(text: &str) -> Result<u64, String> {
    match read_numeric(text.trim()) {
        Ok(Numeric::Duration(d)) => Ok(d.millis),
        Ok(Numeric::Number(_)) => Err(format!(
            "`{text}` is not a duration: give a unit (`ms`, `s`, `m`, `h` or `d`), e.g. `{text}s`"
        )),
        Err(e) => Err(e.message),
    }
}

/// Reads a number-like token (`42`, `0.7`, `8k`, `1.5M`, `250ms`, `10m`).
pub(crate) fn read_numeric(token: &str) -> Result<Numeric, LiteralError> {
    let digits_end = token
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(token.len());
    let (digits, suffix) = token.split_at(digits_end);
    let (whole, fraction) = match digits.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (digits, None),
    };
    if whole.is_empty() || fraction.is_some_and(|f| f.is_empty() || f.contains('.')) {
        return Err(LiteralError::whole(
            token,
            format!("`{token}` is not a number"),
            None,
        ));
    }

    if let Some((_, unit_millis)) = DURATION_UNITS.iter().find(|(u, _)| *u == suffix) {
        if fraction.is_some() {
            let smaller = match suffix {
                "s" => "ms",
                "m" => "s",
                "h" => "m",
                "d" => "h",
                _ => "ms",
            };
            return Err(LiteralError::whole(
                token,
                format!("duration `{token}` is not a whole number"),
                Some(format!(
                    "write durations as whole numbers, in a smaller unit if needed (`{smaller}`)"
                )),
            ));
        }
        let millis = whole
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(*unit_millis))
            .ok_or_else(|| {
                LiteralError::whole(token, format!("duration `{token}` is too large"), None)
            })?;
        return Ok(Numeric::Duration(Duration {
            millis,
            text: token.to_string(),
        }));
    }

    let multiplier: u32 = match suffix {
        "" => 0,
        "k" => 3,
        "M" => 6,
        _ => {
            let fixed = ["k", "M", "ms", "s", "m", "h", "d"]
                .into_iter()
                .find(|s| s.eq_ignore_ascii_case(suffix));
            let help = match fixed {
                Some(s) => format!("did you mean `{digits}{s}`?"),
                None => SUFFIX_HELP.to_string(),
            };
            return Err(LiteralError {
                message: format!("unknown suffix `{suffix}` on number `{token}`"),
                help: Some(help),
                at: digits_end,
                end: token.len(),
            });
        }
    };

    let number = scale(whole, fraction, multiplier, token).ok_or_else(|| {
        LiteralError::whole(token, format!("number `{token}` is too large"), None)
    })?;
    Ok(Numeric::Number(number))
}

/// `whole.fraction × 10^exp`, exact when the digits allow it. `is_int` follows the text: a
/// literal without suffix is an integer when written without a fraction; with a suffix, when the
/// scaled value has no fraction left (`1.5M` is an integer, `1.2345k` is not).
fn scale(whole: &str, fraction: Option<&str>, exp: u32, token: &str) -> Option<Number> {
    let frac = fraction.unwrap_or("");
    let approx: f64 = format!("{whole}.{}e{exp}", if frac.is_empty() { "0" } else { frac })
        .parse()
        .ok()?;
    if !approx.is_finite() {
        return None;
    }
    let is_int = if exp == 0 {
        fraction.is_none()
    } else {
        // The fraction digits that survive the scaling must all be zero.
        frac.chars().skip(exp as usize).all(|c| c == '0')
    };
    let value = if is_int {
        // Rebuild the integer from its digits to avoid rounding through `x.y * 10^n`.
        let mut digits = String::with_capacity(whole.len() + exp as usize);
        digits.push_str(whole);
        for i in 0..exp as usize {
            digits.push(frac.as_bytes().get(i).map_or('0', |b| *b as char));
        }
        digits.parse::<f64>().ok().filter(|v| v.is_finite())?
    } else {
        approx
    };
    Some(Number {
        value,
        is_int,
        text: token.to_string(),
    })
}

/// The value kept for an invalid number-like token: a duration when it ends in a duration unit
/// (`1.5h`), else a number of its leading digits, so that later phases see the kind of value the
/// author meant and report nothing more (the token's own diagnostic already fails the parse).
pub(crate) fn fallback(token: &str) -> Numeric {
    let digits_end = token
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(token.len());
    let whole = token[..digits_end]
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite());
    let suffix = token.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    match DURATION_UNITS.iter().find(|(u, _)| *u == suffix) {
        Some((_, unit)) => Numeric::Duration(Duration {
            millis: token[..digits_end]
                .parse::<u64>()
                .map_or(u64::MAX, |n| n.saturating_mul(*unit)),
            text: token.to_string(),
        }),
        None => Numeric::Number(Number {
            value: whole.unwrap_or(0.0),
            is_int: false,
            text: token.to_string(),
        }),
    }
}

/// Decodes the body of a string literal (the text between the quotes). Every invalid escape is
/// reported; the value then keeps the escape's text as written.
pub(crate) fn read_string(body: &str) -> (String, Vec<LiteralError>) {
    let mut out = String::with_capacity(body.len());
    let mut errors = Vec::new();
    let mut chars = body.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some((_, e)) = chars.next() else {
            errors.push(LiteralError {
                message: "a string cannot end with `\\`".to_string(),
                help: Some("write a backslash as `\\\\`".to_string()),
                at,
                end: body.len(),
            });
            break;
        };
        match e {
            '"' => out.push('"'),
            '\\' => out.push('\\'),
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'u' => match read_unicode_escape(at, &mut chars) {
                Ok(c) => out.push(c),
                Err(err) => {
                    out.push_str(&body[at..err.end]);
                    errors.push(err);
                }
            },
            other => {
                let end = at + 1 + other.len_utf8();
                out.push_str(&body[at..end]);
                errors.push(LiteralError {
                    message: format!("unknown escape `\\{other}` in string"),
                    help: Some(
                        "strings accept the escapes `\\\"`, `\\\\`, `\\n`, `\\t` and `\\u{...}`; \
                         write a backslash as `\\\\`"
                            .to_string(),
                    ),
                    at,
                    end,
                });
            }
        }
    }
    (out, errors)
}

/// Reads `{HEX}` after `\u` (the backslash at byte `at` of the string's body).
fn read_unicode_escape(
    at: usize,
    chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
) -> Result<char, LiteralError> {
    let help = Some("write a code point as `\\u{1F600}`: 1 to 6 hex digits in braces".to_string());
    let bad = |end: usize, message: String| LiteralError {
        message,
        help: help.clone(),
        at,
        end,
    };
    if chars.next_if(|(_, c)| *c == '{').is_none() {
        return Err(bad(at + 2, "`\\u` must be followed by `{`".to_string()));
    }
    let mut hex = String::new();
    let mut end = at + 3;
    loop {
        match chars.next_if(|(_, c)| *c != '"') {
            Some((i, '}')) => {
                end = i + 1;
                break;
            }
            Some((i, c)) if c.is_ascii_hexdigit() && hex.len() < 8 => {
                hex.push(c);
                end = i + 1;
            }
            Some((_, c)) if !c.is_ascii_hexdigit() => {
                return Err(bad(
                    end,
                    format!("`\\u{{...}}` takes hex digits, found `{c}`"),
                ));
            }
            _ => return Err(bad(end, "unterminated `\\u{...}` escape".to_string())),
        }
    }
    if hex.is_empty() || hex.len() > 6 {
        return Err(bad(end, format!("`\\u{{{hex}}}` needs 1 to 6 hex digits")));
    }
    u32::from_str_radix(&hex, 16)
        .ok()
        .and_then(char::from_u32)
        .ok_or_else(|| bad(end, format!("`\\u{{{hex}}}` is not a unicode scalar value")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_durations_use_the_language_units() {
        assert_eq!(duration_millis("250ms"), Ok(250));
        assert_eq!(duration_millis("30s"), Ok(30_000));
        assert_eq!(duration_millis("2m"), Ok(120_000));
        assert!(duration_millis("30").is_err_and(|e| e.contains("give a unit")));
        assert!(duration_millis("1.5s").is_err());
        assert!(duration_millis("soon").is_err());
    }

    fn number(token: &str) -> Number {
        match read_numeric(token) {
            Ok(Numeric::Number(n)) => n,
            other => panic!("{token}: {other:?}"),
        }
    }

    fn duration(token: &str) -> u64 {
        match read_numeric(token) {
            Ok(Numeric::Duration(d)) => {
                assert_eq!(d.text, token);
                d.millis
            }
            other => panic!("{token}: {other:?}"),
        }
    }

    #[test]
    fn plain_numbers() {
        let n = number("42");
        assert_eq!((n.value, n.is_int, n.text.as_str()), (42.0, true, "42"));
        let n = number("0.7");
        assert_eq!((n.value, n.is_int), (0.7, false));
        let n = number("1.0");
        assert_eq!((n.value, n.is_int), (1.0, false));
        assert_eq!(number("007").value, 7.0);
    }

    #[test]
    fn suffixes_scale_and_decide_integrality() {
        let n = number("8k");
        assert_eq!((n.value, n.is_int, n.text.as_str()), (8000.0, true, "8k"));
        let n = number("1.5M");
        assert_eq!((n.value, n.is_int), (1_500_000.0, true));
        let n = number("0.5k");
        assert_eq!((n.value, n.is_int), (500.0, true));
        let n = number("1.2345k");
        assert_eq!((n.value, n.is_int), (1234.5, false));
        let n = number("1.2340k");
        assert_eq!((n.value, n.is_int), (1234.0, true));
        assert_eq!(number("128k").as_int(), Some(128_000));
        assert_eq!(number("0.000001M").as_int(), Some(1));
    }

    #[test]
    fn durations_in_every_unit() {
        assert_eq!(duration("250ms"), 250);
        assert_eq!(duration("30s"), 30_000);
        assert_eq!(duration("10m"), 600_000);
        assert_eq!(duration("1h"), 3_600_000);
        assert_eq!(duration("7d"), 604_800_000);
        assert_eq!(duration("0s"), 0);
    }

    #[test]
    fn minutes_and_millions_differ_by_case() {
        assert_eq!(duration("10m"), 600_000);
        assert_eq!(number("10M").value, 10_000_000.0);
    }

    #[test]
    fn bad_numbers_point_at_the_problem() {
        let e = read_numeric("12x").unwrap_err();
        assert_eq!((e.at, e.end), (2, 3));
        assert!(e.message.contains("`x`"), "{}", e.message);
        let e = read_numeric("10K").unwrap_err();
        assert_eq!(e.help.as_deref(), Some("did you mean `10k`?"));
        let e = read_numeric("1.5h").unwrap_err();
        assert!(e.message.contains("whole number"), "{}", e.message);
        assert!(read_numeric("99999999999999999999d").is_err());
        assert!(read_numeric(&"9".repeat(400)).is_err());
        assert!(read_numeric("1e5").is_err());
    }

    #[test]
    fn string_escapes() {
        let (s, errors) = read_string(r#"a\"b\\c\nd\te\u{1F600}\u{e9}"#);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(s, "a\"b\\c\nd\te\u{1F600}\u{e9}");
    }

    #[test]
    fn bad_escapes_are_reported_at_their_span() {
        let body = r#"ok \q then \u{110000} and \u{zz} \u12"#;
        let (_, errors) = read_string(body);
        let spans: Vec<&str> = errors.iter().map(|e| &body[e.at..e.end]).collect();
        assert_eq!(spans, vec![r"\q", r"\u{110000}", r"\u{", r"\u"]);
        assert!(errors[0].message.contains("`\\q`"), "{}", errors[0].message);
        let (_, errors) = read_string(r"\u{}");
        assert_eq!(errors.len(), 1);
        let (_, errors) = read_string(r"\u{1234567}");
        assert_eq!(errors.len(), 1);
    }

    #[test]
    fn escapes_after_multibyte_text_keep_byte_offsets() {
        let body = "é中\\x";
        let (s, errors) = read_string(body);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].at, "é中".len());
        assert_eq!(&body[errors[0].at..errors[0].end], "\\x");
        assert_eq!(s, "é中\\x");
    }
}
