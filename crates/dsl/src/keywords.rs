//! The reserved words of the language, in one place for the parser, the formatter's tests and
//! the language server's completion.

/// Words that cannot name a declaration or stand as a bare name in an expression. The
/// declaration keywords come first.
pub const KEYWORDS: &[&str] = &[
    "backend",
    "model",
    "classifier",
    "guard",
    "encoder",
    "signal",
    "block",
    "route",
    "cache",
    "session",
    "protect",
    "failure",
    "router",
    "test",
    "when",
    "to",
    "else",
    "priority",
    "and",
    "or",
    "not",
    "is",
    "in",
    "true",
    "false",
    "hold",
    "given",
    "expect",
    "blocked",
];

/// Keywords that begin a top-level declaration.
pub const DECLARATION_KEYWORDS: &[&str] = KEYWORDS.split_at(14).0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declaration_keywords_are_the_declarations() {
        assert_eq!(DECLARATION_KEYWORDS.first(), Some(&"backend"));
        assert_eq!(DECLARATION_KEYWORDS.last(), Some(&"test"));
        assert!(!DECLARATION_KEYWORDS.contains(&"when"));
    }
}
