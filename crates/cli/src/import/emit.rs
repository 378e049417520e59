//! Writing `.sr` text: identifiers made from foreign names, quoted strings, numbers, and the
//! allocation of names that must be unique within one namespace.

use src_dsl::keywords::KEYWORDS;
use std::collections::HashSet;

/// Names an expression reads as builtins: a declaration named so would be shadowed or refused.
const BUILTINS: &[&str] = &[
    "prompt",
    "history",
    "system",
    "request",
    "header",
    "body",
    "api_key",
    "contains",
    "hits",
    "count",
    "density",
    "sequence",
    "fuzzy",
    "fuzzy_hits",
    "bm25",
    "words",
    "language",
    "matches",
    "pii",
    "tokens",
    "similarity",
    "pinned",
    "proposed",
    "outcomes",
    "budget",
    "min",
    "max",
    "default",
    "env",
    "redis",
    "memory",
];

/// An identifier (`[A-Za-z_][A-Za-z0-9_]*`, not a reserved word) made from `raw`: every run of
/// other characters becomes one `_`.
pub fn ident(raw: &str) -> String {
    let mut out = String::new();
    for c in raw.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let trimmed = out.trim_matches('_');
    let mut id = if trimmed.is_empty() {
        "unnamed".to_string()
    } else {
        trimmed.to_string()
    };
    if id.starts_with(|c: char| c.is_ascii_digit()) {
        id.insert_str(0, "m_");
    }
    if KEYWORDS.contains(&id.as_str()) || BUILTINS.contains(&id.as_str()) {
        id.push('_');
    }
    id
}

/// A string literal for `text`.
pub fn quote(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:X}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A list of string literals: `["a", "b"]`.
pub fn quote_list<S: AsRef<str>>(items: &[S]) -> String {
    let parts: Vec<String> = items.iter().map(|s| quote(s.as_ref())).collect();
    format!("[{}]", parts.join(", "))
}

/// A float literal (always with a fraction, so it reads as a float or a score).
pub fn float(x: f64) -> String {
    let text = format!("{x}");
    if text.contains('.') || text.contains('e') {
        text
    } else {
        format!("{text}.0")
    }
}

/// A duration literal for `ms` milliseconds, in whole seconds when it is some.
pub fn duration_ms(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// A float literal rounded to ten decimals (prices per token are tiny and print with binary
/// noise otherwise).
pub fn short_float(x: f64) -> String {
    let text = format!("{x:.10}");
    let text = text.trim_end_matches('0');
    if text.ends_with('.') {
        format!("{text}0")
    } else {
        text.to_string()
    }
}

/// The text of a comment: one `# ` line per line of `text`, indented by `indent`.
pub fn comment(indent: &str, text: &str) -> String {
    text.lines()
        .map(|line| format!("{indent}# {line}\n"))
        .collect()
}

/// Unique identifiers within one namespace.
#[derive(Debug, Default)]
pub struct Names {
    taken: HashSet<String>,
}

impl Names {
    /// Marks `name` as taken without handing it out (a name another namespace already uses).
    pub fn reserve(&mut self, name: &str) {
        self.taken.insert(name.to_string());
    }

    /// A fresh identifier made from `raw`, suffixed `_2`, `_3`… when already taken.
    pub fn fresh(&mut self, raw: &str) -> String {
        let base = ident(raw);
        let mut name = base.clone();
        let mut n = 2;
        while self.taken.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        self.taken.insert(name.clone());
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_valid_and_unique() {
        assert_eq!(ident("gpt-4o"), "gpt_4o");
        assert_eq!(ident("openai/gpt-4o-mini"), "openai_gpt_4o_mini");
        assert_eq!(ident("3b-model"), "m_3b_model");
        assert_eq!(ident("route"), "route_");
        assert_eq!(ident("prompt"), "prompt_");
        assert_eq!(ident("--"), "unnamed");
        let mut names = Names::default();
        assert_eq!(names.fresh("a-b"), "a_b");
        assert_eq!(names.fresh("a b"), "a_b_2");
        assert_eq!(names.fresh("a.b"), "a_b_3");
    }

    #[test]
    fn strings_and_numbers_are_literals() {
        assert_eq!(quote("say \"hi\"\\\n"), "\"say \\\"hi\\\"\\\\\\n\"");
        assert_eq!(quote_list(&["a", "b"]), "[\"a\", \"b\"]");
        assert_eq!(float(1.0), "1.0");
        assert_eq!(float(0.25), "0.25");
        assert_eq!(short_float(0.1e-6 * 1000.0), "0.0001");
        assert_eq!(short_float(2.0), "2.0");
        assert_eq!(duration_ms(45_000), "45s");
        assert_eq!(duration_ms(1_500), "1500ms");
    }
}
