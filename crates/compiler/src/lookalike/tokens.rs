//! Splitting a question into the tokens the look-alike check reads: words (with inner
//! apostrophes, `can't`), numbers (digits with decimal points and thousands separators, in a
//! canonical spelling), and the few symbols that carry meaning (`$`, `€`, `£`, `¥`, `%`, `°`).
//! Everything else separates tokens; `.`, `?`, `!`, `:` and line breaks also end a sentence, so
//! the next word's capital says nothing about it being a name.

use crate::text::fold;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Word,
    Number,
    Symbol,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// Folded (lowercase) text; a number's canonical spelling.
    pub text: String,
    pub kind: Kind,
    /// The first token of a sentence.
    pub initial: bool,
    /// The word starts with an upper-case letter.
    pub capital: bool,
    /// Every letter of the word is upper case and it has at least two (`NASA`).
    pub acronym: bool,
    /// An upper-case letter after the first (`iPhone`, `OpenAI`).
    pub inner_capital: bool,
}

/// The symbols kept as tokens.
fn symbol(c: char) -> bool {
    matches!(c, '$' | '€' | '£' | '¥' | '%' | '°' | '₹')
}

fn apostrophe(c: char) -> bool {
    matches!(c, '\'' | '’')
}

/// The tokens of `text`, in order.
pub fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut initial = true;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() {
                let d = chars[i];
                let joins = matches!(d, '.' | ',')
                    && chars.get(i + 1).is_some_and(char::is_ascii_digit)
                    && i > start;
                if d.is_ascii_digit() || joins {
                    i += 1;
                } else {
                    break;
                }
            }
            let raw: String = chars[start..i].iter().collect();
            out.push(plain(number(&raw), Kind::Number, initial));
            initial = false;
        } else if c.is_alphabetic() {
            let start = i;
            while i < chars.len() {
                let d = chars[i];
                let inner = apostrophe(d) && chars.get(i + 1).is_some_and(|n| n.is_alphabetic());
                if d.is_alphabetic() || inner {
                    i += 1;
                } else {
                    break;
                }
            }
            let raw: String = chars[start..i].iter().collect();
            out.push(word(&raw, initial));
            initial = false;
        } else if symbol(c) {
            out.push(plain(c.to_string(), Kind::Symbol, initial));
            i += 1;
        } else {
            if matches!(c, '.' | '?' | '!' | ':' | ';' | '\n' | '"' | '“' | '”') {
                initial = true;
            }
            i += 1;
        }
    }
    out
}

fn plain(text: String, kind: Kind, initial: bool) -> Token {
    Token {
        text,
        kind,
        initial,
        capital: false,
        acronym: false,
        inner_capital: false,
    }
}

fn word(raw: &str, initial: bool) -> Token {
    // `France's` is about France; `it's`, `what's` lose a word no table holds.
    let raw = raw
        .strip_suffix("'s")
        .or_else(|| raw.strip_suffix("’s"))
        .unwrap_or(raw);
    let letters = raw.chars().filter(|c| c.is_alphabetic());
    let capital = raw.chars().next().is_some_and(char::is_uppercase);
    let acronym = letters.clone().count() >= 2 && letters.clone().all(char::is_uppercase);
    let inner_capital = !acronym && raw.chars().skip(1).any(char::is_uppercase);
    Token {
        text: fold(raw).replace('’', "'"),
        kind: Kind::Word,
        initial,
        capital,
        acronym,
        inner_capital,
    }
}

/// The canonical spelling of a number written with digits: thousands separators dropped (a
/// comma followed by exactly three digits; any other comma is a decimal comma), leading zeros
/// and trailing fractional zeros dropped, so `1,000`, `1000` and `01000.0` are one number.
pub fn number(raw: &str) -> String {
    let mut text = String::with_capacity(raw.len());
    let parts: Vec<&str> = raw.split(',').collect();
    for (k, part) in parts.iter().enumerate() {
        if k > 0 {
            let thousands = part.len() >= 3 && part[..3].bytes().all(|b| b.is_ascii_digit());
            let exact = part.split('.').next().is_some_and(|p| p.len() == 3);
            if !(thousands && exact) {
                text.push('.');
            }
        }
        text.push_str(part);
    }
    let (int, frac) = match text.split_once('.') {
        Some((int, frac)) => (int.to_owned(), frac.to_owned()),
        None => (text.clone(), String::new()),
    };
    // A second point (`1.2.3`, a version) keeps its text after the first as is.
    let int = int.trim_start_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    let frac = if frac.contains('.') {
        frac.as_str()
    } else {
        frac.trim_end_matches('0')
    };
    if frac.is_empty() {
        int.to_owned()
    } else {
        format!("{int}.{frac}")
    }
}
