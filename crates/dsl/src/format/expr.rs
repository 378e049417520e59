//! Printing expressions and literals on one line.
//!
//! Author parentheses are `Paren` nodes and are printed as such; on top of that a child gets
//! parentheses whenever printing it bare would make the parser build a different tree (a tree
//! built by a program rather than parsed can lack them). Binding strength follows the grammar,
//! loosest first: `or`, `and`, `not`, comparisons with `is`/`in`, `??`, `+ -`, `* /`, unary `-`,
//! then `.field` and calls. Comparisons do not chain, so a comparison inside a comparison is
//! always parenthesised.
//!
//! A prefix `not` reaches to the right over every comparison and arithmetic operator that
//! follows it (`a == not b + c` is `a == not (b + c)`), so whether a `not` operand needs
//! parentheses depends on what is printed after it: each expression is written knowing the
//! binding strength of the operator that follows it (`next`, 0 when none does). Where nothing it
//! would reach follows, a `not` stays bare, as the author wrote it (`a == not b`, `-not b`):
//! adding parentheses there would change the tree the text parses to.

use crate::ast::{BinOp, Expr, ExprKind, Ident, Number, UnaryOp};

const NOT: u8 = 3;
const COMPARE: u8 = 4;
const NEG: u8 = 8;
const POSTFIX: u8 = 9;

/// The expression as canonical source text.
pub(super) fn expr(e: &Expr) -> String {
    let mut out = String::new();
    write_expr(&mut out, e, 0);
    out
}

fn precedence(e: &Expr) -> u8 {
    match &e.kind {
        ExprKind::Binary(op, _, _) => op.precedence(),
        ExprKind::Unary(UnaryOp::Not, _) => NOT,
        ExprKind::Is(..) | ExprKind::In(..) => COMPARE,
        ExprKind::Unary(UnaryOp::Neg, _) => NEG,
        ExprKind::Bool(_)
        | ExprKind::Number(_)
        | ExprKind::Str(_)
        | ExprKind::Duration(_)
        | ExprKind::List(_)
        | ExprKind::Name(_)
        | ExprKind::Field(..)
        | ExprKind::Call(..)
        | ExprKind::Paren(_) => POSTFIX,
    }
}

fn is_comparison(op: BinOp) -> bool {
    op.precedence() == COMPARE
}

/// Writes `e`, parenthesised when `wrap` says its binding is too loose for where it stands;
/// `next` is the binding strength of the operator printed after it.
fn write_child(out: &mut String, e: &Expr, wrap: bool, next: u8) {
    if wrap {
        out.push('(');
        write_expr(out, e, 0);
        out.push(')');
    } else {
        write_expr(out, e, next);
    }
}

/// Whether `e`, an operand of a tighter operator, can be printed bare because it is a `not`
/// that nothing printed after it would be read into (the parser reads the operand of `not` up to
/// the first operator looser than comparisons).
fn bare_not(e: &Expr, next: u8) -> bool {
    matches!(e.kind, ExprKind::Unary(UnaryOp::Not, _)) && next <= NOT
}

fn write_expr(out: &mut String, e: &Expr, next: u8) {
    match &e.kind {
        ExprKind::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        ExprKind::Number(n) => out.push_str(&number(n)),
        ExprKind::Str(s) => out.push_str(&string(s)),
        ExprKind::Duration(d) => out.push_str(&d.text),
        ExprKind::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_expr(out, item, 0);
            }
            out.push(']');
        }
        ExprKind::Name(id) => out.push_str(&id.name),
        ExprKind::Field(base, field) => {
            // A literal stays bare too: a number's fraction needs digits and a field name starts
            // with a letter, so `0.u` reads as the field `u` of `0`, as it was written.
            write_child(out, base, precedence(base) < POSTFIX, POSTFIX);
            out.push('.');
            out.push_str(&field.name);
        }
        ExprKind::Call(f, args) => {
            out.push_str(&f.name);
            out.push('(');
            for (i, arg) in args.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_expr(out, arg, 0);
            }
            out.push(')');
        }
        ExprKind::Unary(UnaryOp::Not, inner) => {
            out.push_str("not ");
            write_child(out, inner, precedence(inner) < NOT, next);
        }
        ExprKind::Unary(UnaryOp::Neg, inner) => {
            out.push('-');
            let wrap = precedence(inner) < NEG && !bare_not(inner, next);
            write_child(out, inner, wrap, next);
        }
        ExprKind::Binary(op, lhs, rhs) => {
            let p = op.precedence();
            let (wrap_l, wrap_r) = if is_comparison(*op) {
                (precedence(lhs) <= p, precedence(rhs) <= p)
            } else {
                // Left-associative: an equal-strength operator on the right needs parentheses.
                (precedence(lhs) < p, precedence(rhs) <= p)
            };
            let wrap_r = wrap_r && !bare_not(rhs, next);
            write_child(out, lhs, wrap_l, p);
            out.push(' ');
            out.push_str(op.symbol());
            out.push(' ');
            write_child(out, rhs, wrap_r, next);
        }
        ExprKind::Is(inner, label) => {
            write_child(out, inner, precedence(inner) <= COMPARE, COMPARE);
            out.push_str(" is ");
            out.push_str(&label.name);
        }
        ExprKind::In(inner, labels) => {
            write_child(out, inner, precedence(inner) <= COMPARE, COMPARE);
            out.push_str(" in ");
            out.push_str(&ident_list(labels));
        }
        ExprKind::Paren(inner) => write_child(out, inner, true, 0),
    }
}

/// A number as written (`8k` stays `8k`); a tree built without text prints its value.
pub(super) fn number(n: &Number) -> String {
    if !n.text.is_empty() {
        return n.text.clone();
    }
    match n.as_int() {
        Some(i) => i.to_string(),
        None => format!("{:?}", n.value),
    }
}

/// A string literal with the language's escapes: `\"`, `\\`, `\n`, `\t`, and `\u{..}` for any
/// other control character; everything else (all of Unicode) is written as itself.
pub(super) fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `[a, b]` of identifiers.
pub(super) fn ident_list(ids: &[Ident]) -> String {
    let names: Vec<&str> = ids.iter().map(|i| i.name.as_str()).collect();
    format!("[{}]", names.join(", "))
}

/// `["a", "b"]` of strings.
pub(super) fn string_list<'a>(items: impl IntoIterator<Item = &'a String>) -> String {
    let parts: Vec<String> = items.into_iter().map(|s| string(s)).collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::Span;

    fn e(kind: ExprKind) -> Expr {
        Expr {
            kind,
            span: Span::default(),
        }
    }
    fn name(n: &str) -> Expr {
        e(ExprKind::Name(Ident {
            name: n.into(),
            span: Span::default(),
        }))
    }
    fn bin(op: BinOp, l: Expr, r: Expr) -> Expr {
        e(ExprKind::Binary(op, Box::new(l), Box::new(r)))
    }

    #[test]
    fn adds_parentheses_only_where_the_tree_needs_them() {
        let sub = bin(BinOp::Sub, name("a"), bin(BinOp::Sub, name("b"), name("c")));
        assert_eq!(expr(&sub), "a - (b - c)");
        let left = bin(BinOp::Sub, bin(BinOp::Sub, name("a"), name("b")), name("c"));
        assert_eq!(expr(&left), "a - b - c");
        let mixed = bin(BinOp::Mul, bin(BinOp::Add, name("a"), name("b")), name("c"));
        assert_eq!(expr(&mixed), "(a + b) * c");
        let cmp = bin(BinOp::Eq, bin(BinOp::Lt, name("a"), name("b")), name("c"));
        assert_eq!(expr(&cmp), "(a < b) == c");
        let not = e(ExprKind::Unary(
            UnaryOp::Not,
            Box::new(bin(BinOp::Or, name("a"), name("b"))),
        ));
        assert_eq!(expr(&not), "not (a or b)");
        let and_not = bin(BinOp::And, name("a"), not);
        assert_eq!(expr(&and_not), "a and not (a or b)");
    }

    fn not(x: Expr) -> Expr {
        e(ExprKind::Unary(UnaryOp::Not, Box::new(x)))
    }

    fn neg(x: Expr) -> Expr {
        e(ExprKind::Unary(UnaryOp::Neg, Box::new(x)))
    }

    /// Found by fuzzing: `-s == not s` was printed `-s == (not s)`, a different tree (E090).
    #[test]
    fn a_not_stays_bare_where_nothing_follows_it() {
        let eq = bin(BinOp::Eq, neg(name("s")), not(name("s")));
        assert_eq!(expr(&eq), "-s == not s");
        assert_eq!(expr(&neg(not(name("s")))), "-not s");
        let and = bin(
            BinOp::And,
            bin(BinOp::Add, name("a"), not(name("b"))),
            name("c"),
        );
        assert_eq!(expr(&and), "a + not b and c");
    }

    #[test]
    fn a_not_is_parenthesised_where_it_would_reach_further() {
        let sub = bin(
            BinOp::Sub,
            bin(BinOp::Add, name("a"), not(name("b"))),
            name("c"),
        );
        assert_eq!(expr(&sub), "a + (not b) - c");
        let is = e(ExprKind::Is(
            Box::new(neg(not(name("b")))),
            Ident {
                name: "x".into(),
                span: Span::default(),
            },
        ));
        assert_eq!(expr(&is), "-(not b) is x");
        let field = e(ExprKind::Field(
            Box::new(not(name("b"))),
            Ident {
                name: "cost".into(),
                span: Span::default(),
            },
        ));
        assert_eq!(expr(&field), "(not b).cost");
    }

    /// Found by fuzzing: `0.u` was printed `(0).u`, a different tree (E090).
    #[test]
    fn a_literal_before_a_dot_stays_bare() {
        for text in ["0", "1.5", "2k", "10m"] {
            let number = e(ExprKind::Number(Number {
                value: 0.0,
                is_int: false,
                text: text.into(),
            }));
            let field = e(ExprKind::Field(
                Box::new(number),
                Ident {
                    name: "u".into(),
                    span: Span::default(),
                },
            ));
            assert_eq!(expr(&field), format!("{text}.u"));
        }
    }

    #[test]
    fn strings_are_re_escaped() {
        assert_eq!(
            string("a\"b\\c\nd\te\u{1}ü"),
            "\"a\\\"b\\\\c\\nd\\te\\u{1}ü\""
        );
    }
}
