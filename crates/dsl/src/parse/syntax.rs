//! Runs the pest grammar over one declaration and turns its failures into E001 diagnostics.
//!
//! Pest reports the grammar rules it would have accepted at the failing position; people want
//! "expected `}` or a field, found `xyz`". This module owns that translation, so the grammar's
//! rule names never leak into messages.

use super::split::Chunk;
use crate::codes;
use crate::diagnostic::Diagnostic;
use crate::span::{FileId, Span};
use pest::error::{ErrorVariant, InputLocation};
use pest::iterators::Pair;
use pest::Parser as _;

#[derive(pest_derive::Parser)]
#[grammar = "grammar.pest"]
pub(crate) struct Grammar;

/// Parses one declaration chunk; on failure returns the E001 diagnostic describing it.
pub(crate) fn parse_chunk<'i>(
    text: &'i str,
    chunk: &Chunk,
    file: FileId,
) -> Result<Pair<'i, Rule>, Box<Diagnostic>> {
    let source = text.get(chunk.start..chunk.end).unwrap_or_default();
    match Grammar::parse(Rule::item_file, source) {
        Ok(mut pairs) => pairs
            .next()
            .and_then(|file_pair| file_pair.into_inner().next())
            .ok_or_else(|| {
                Box::new(Diagnostic::error(
                    codes::SYNTAX,
                    "expected a declaration",
                    Span::new(file, chunk.start, chunk.end),
                ))
            }),
        Err(error) => Err(Box::new(describe(text, chunk, file, &error))),
    }
}

/// Readable names for what pest expected. Entries that mean the same to a reader share a name.
fn expected_name(rule: Rule) -> Option<&'static str> {
    Some(match rule {
        Rule::rbrace => "`}`",
        Rule::lbrace | Rule::body => "`{`",
        Rule::rparen => "`)`",
        Rule::lparen => "`(`",
        Rule::rbracket => "`]`",
        Rule::lbracket | Rule::label_list | Rule::list => "`[`",
        Rule::assign => "`=`",
        Rule::comma => "`,`",
        Rule::field
        | Rule::field_key
        | Rule::when_stmt
        | Rule::to_stmt
        | Rule::hold_stmt
        | Rule::skip_stmt
        | Rule::given_stmt
        | Rule::expect_stmt
        | Rule::header_stmt
        | Rule::headers_block
        | Rule::kw_when
        | Rule::kw_to
        | Rule::kw_hold
        | Rule::kw_skip
        | Rule::kw_given
        | Rule::kw_expect
        | Rule::kw_header
        | Rule::kw_headers => "a field",
        Rule::name | Rule::decl_name | Rule::given_pair => "a name",
        Rule::string | Rule::header_pair => "a string",
        Rule::number | Rule::priority_clause | Rule::priority_sign => "a number",
        Rule::expr
        | Rule::paren
        | Rule::call
        | Rule::op_not
        | Rule::op_neg
        | Rule::kw_true
        | Rule::kw_false => "an expression",
        Rule::field_value
        | Rule::replace_value
        | Rule::only_value
        | Rule::named_call
        | Rule::named_arg
        | Rule::bare_word
        | Rule::kw_replace
        | Rule::kw_only => "a value",
        Rule::op_or
        | Rule::op_and
        | Rule::op_eq
        | Rule::op_ne
        | Rule::op_le
        | Rule::op_lt
        | Rule::op_ge
        | Rule::op_gt
        | Rule::op_coalesce
        | Rule::op_add
        | Rule::op_sub
        | Rule::op_mul
        | Rule::op_div
        | Rule::is_test
        | Rule::in_test
        | Rule::kw_is
        | Rule::kw_in
        | Rule::field_access => "an operator",
        Rule::kw_priority => "`priority`",
        Rule::kw_else => "`else`",
        Rule::kw_model => "`model`",
        Rule::kw_blocked => "`blocked`",
        Rule::kw_signal | Rule::decl_kw | Rule::decl_item | Rule::signal_item | Rule::item_file => {
            "a declaration"
        }
        Rule::EOI => "the end of the declaration",
        _ => return None,
    })
}

/// The order names appear in a message: closers first, since they are the likeliest fix.
const NAME_ORDER: &[&str] = &[
    "`}`",
    "`)`",
    "`]`",
    "`{`",
    "`(`",
    "`[`",
    "`=`",
    "`,`",
    "`priority`",
    "`else`",
    "`model`",
    "`blocked`",
    "a field",
    "a declaration",
    "a name",
    "a value",
    "an expression",
    "a string",
    "a number",
    "an operator",
    "the end of the declaration",
];

fn expected_list(rules: &[Rule]) -> String {
    let mut names: Vec<&str> = rules.iter().filter_map(|r| expected_name(*r)).collect();
    // `(` is only ever expected as the start of a call's arguments after a name, which is noise
    // next to what the reader most likely missed.
    if names.len() > 1 {
        names.retain(|n| *n != "`(`");
    }
    // Where any expression may stand, the kinds of expression need no separate mention.
    if names.contains(&"an expression") || names.contains(&"a value") {
        names.retain(|n| !matches!(*n, "a name" | "a string" | "a number" | "`[`" | "`(`"));
    }
    if names.contains(&"a value") {
        names.retain(|n| *n != "an expression");
    }
    names.sort_by_key(|n| NAME_ORDER.iter().position(|o| o == n));
    names.dedup();
    match names.as_slice() {
        [] => "something else".to_string(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// A token found where something else was expected.
pub(crate) struct Found {
    pub start: usize,
    pub end: usize,
    /// The token as shown in a message (long tokens are cut short).
    pub shown: String,
    /// A string literal without its closing quote on the same line.
    pub unterminated: bool,
}

/// The token at byte `at` of `text`, read with the grammar's lexical rules.
pub(crate) fn token_at(text: &str, at: usize) -> Option<Found> {
    let rest = text.get(at..)?;
    let first = rest.chars().next()?;
    let mut unterminated = false;
    let len = if first.is_ascii_alphanumeric() || first == '_' {
        let n = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(rest.len());
        // Keep `1.5` together but stop a word at `.`, as the grammar does.
        if first.is_ascii_digit() {
            n
        } else {
            rest[..n].find('.').unwrap_or(n)
        }
    } else if first == '"' {
        let line = rest.find('\n').unwrap_or(rest.len());
        let mut escaped = false;
        let mut end = None;
        for (i, c) in rest[..line].char_indices().skip(1) {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    end = Some(i + 1);
                    break;
                }
                _ => escaped = false,
            }
        }
        unterminated = end.is_none();
        end.unwrap_or(line)
    } else if ["==", "!=", "<=", ">=", "??", "&&", "||"]
        .iter()
        .any(|op| rest.starts_with(op))
    {
        2
    } else {
        first.len_utf8()
    };
    let token = &rest[..len];
    let shown = if token.chars().count() > 32 {
        let mut s: String = token.chars().take(31).collect();
        s.push('…');
        s
    } else {
        token.to_string()
    };
    Some(Found {
        start: at,
        end: at + len,
        shown,
        unterminated,
    })
}

/// An operator as another language spells it, found where this language's was possible.
struct Respelled {
    /// Bytes of it in the text.
    len: usize,
    /// This language's operator, and what replaces the text.
    spelled: &'static str,
    replacement: &'static str,
    why: &'static str,
}

fn other_language_operator(text: &str, at: usize, positives: &[Rule]) -> Option<Respelled> {
    let rest = text.get(at..)?;
    // Where `==` could follow, so could `and` and `or`; where `not` could, an operand.
    let operator = positives.contains(&Rule::op_eq);
    let operand = positives.contains(&Rule::op_not) || positives.contains(&Rule::expr);
    let joined = "conditions are joined with `and` and `or`";
    let assign = rest.starts_with('=') && !rest.starts_with("=<") && !rest.starts_with("=>");
    let (len, spelled, replacement, why) = if operator && assign {
        (
            1,
            "==",
            "==",
            "`=` gives a field its value; a comparison is `==`",
        )
    } else if operator && rest.starts_with("&&") {
        (2, "and", "and", joined)
    } else if operator && rest.starts_with("||") {
        (2, "or", "or", joined)
    } else if operand && rest.starts_with('!') && !rest.starts_with("!=") {
        (1, "not", "not ", "a condition is negated with `not`")
    } else {
        return None;
    };
    Some(Respelled {
        len,
        spelled,
        replacement,
        why,
    })
}

fn describe(
    text: &str,
    chunk: &Chunk,
    file: FileId,
    error: &pest::error::Error<Rule>,
) -> Diagnostic {
    let local = match error.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    };
    let at = (chunk.start + local).min(chunk.end);
    let positives = match &error.variant {
        ErrorVariant::ParsingError { positives, .. } => positives.clone(),
        ErrorVariant::CustomError { .. } => {
            return Diagnostic::error(
                codes::SYNTAX,
                "declaration is too deeply nested to parse",
                Span::new(file, chunk.start, chunk.end),
            )
            .with_help("split the expression into several signals");
        }
    };
    let expected = expected_list(&positives);

    // At the end of the chunk, what follows is the next declaration (or the end of the file).
    let at_end = text.get(at..chunk.end).is_none_or(|s| s.trim().is_empty());
    let token = if at_end && chunk.end >= text.len() {
        None
    } else if at_end {
        token_at(text, chunk.end)
    } else {
        token_at(text, at)
    };
    let mut diagnostic = match token {
        None => Diagnostic::error(
            codes::SYNTAX,
            format!("expected {expected}, found the end of the file"),
            Span::new(file, text.len(), text.len()),
        )
        .with_label_message(format!("expected {expected}")),
        Some(found) if found.unterminated => Diagnostic::error(
            codes::SYNTAX,
            "unterminated string",
            Span::new(file, found.start, found.end),
        )
        .with_label_message("this string has no closing `\"`")
        .with_help("close the string on the same line; write a line break as `\\n`"),
        Some(Found {
            start, end, shown, ..
        }) => {
            let d = Diagnostic::error(
                codes::SYNTAX,
                format!("expected {expected}, found `{shown}`"),
                Span::new(file, start, end),
            )
            .with_label_message(format!("expected {expected}"));
            if shown.chars().next().is_some_and(|c| !c.is_ascii()) {
                d.with_help(
                    "names are ASCII letters, digits and `_`; other text belongs in strings",
                )
            } else if let Some(op) = other_language_operator(text, start, &positives) {
                d.with_help(format!("did you mean `{}`? {}", op.spelled, op.why))
                    .with_fix(Span::new(file, start, start + op.len), op.replacement)
            } else {
                d
            }
        }
    };
    if let Some(brace) = chunk.unclosed_brace.filter(|_| at_end) {
        diagnostic = diagnostic.with_secondary(
            Span::new(file, brace, brace + 1),
            "this `{` is never closed",
        );
    }
    diagnostic
}
