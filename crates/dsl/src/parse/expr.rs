//! Builds expressions from the grammar's flat operand/operator sequence, applying precedence.
//!
//! The grammar leaves precedence to this module so that the shape of the tree, and its depth,
//! are decided by code that can refuse pathological input: comparisons do not chain (`a < b < c`
//! is an error, not `(a < b) < c`), and no tree grows deeper than [`MAX_DEPTH`], so every later
//! phase may recurse over expressions without fear for its stack.
//!
//! Precedence, loosest first: `or`, `and`, prefix `not`, comparisons with postfix `is`/`in`
//! (non-associative), `??`, `+ -`, `* /`, prefix `-`, then `.field` and calls.

use super::literal::{self, Numeric};
use super::syntax::Rule;
use super::Ctx;
use crate::ast::{BinOp, Expr, ExprKind, Ident, UnaryOp};
use crate::codes;
use crate::diagnostic::Diagnostic;
use crate::span::Span;
use pest::iterators::Pair;

/// The deepest expression tree the parser builds.
pub const MAX_DEPTH: usize = 256;

/// Binding strength of comparisons and of `is`/`in` (see [`BinOp::precedence`]).
const COMPARISON: u8 = 4;
/// `not` binds looser than comparisons and tighter than `and`.
const NOT: u8 = 3;

/// An expression with the depth of its tree.
struct Built {
    expr: Expr,
    depth: usize,
}

enum Tok {
    Prefix(UnaryOp, Span),
    Operand(Built),
    Infix(BinOp, Span),
    Is(Ident, Span),
    In(Vec<Ident>, Span),
}

/// Marks an expression that could not be built; its diagnostic has already been reported.
#[derive(Debug)]
pub(crate) struct Invalid;

/// Builds an `expr` pair.
pub(crate) fn build(cx: &mut Ctx<'_>, pair: Pair<'_, Rule>) -> Result<Expr, Invalid> {
    build_depth(cx, pair).map(|b| b.expr)
}

fn build_depth(cx: &mut Ctx<'_>, pair: Pair<'_, Rule>) -> Result<Built, Invalid> {
    let whole = cx.span(&pair);
    let mut toks = Vec::new();
    let mut failed = false;
    for p in pair.into_inner() {
        let span = cx.span(&p);
        let tok = match p.as_rule() {
            Rule::op_not => Tok::Prefix(UnaryOp::Not, span),
            Rule::op_neg => Tok::Prefix(UnaryOp::Neg, span),
            Rule::op_or => Tok::Infix(BinOp::Or, span),
            Rule::op_and => Tok::Infix(BinOp::And, span),
            Rule::op_eq => Tok::Infix(BinOp::Eq, span),
            Rule::op_ne => Tok::Infix(BinOp::Ne, span),
            Rule::op_lt => Tok::Infix(BinOp::Lt, span),
            Rule::op_le => Tok::Infix(BinOp::Le, span),
            Rule::op_gt => Tok::Infix(BinOp::Gt, span),
            Rule::op_ge => Tok::Infix(BinOp::Ge, span),
            Rule::op_coalesce => Tok::Infix(BinOp::Coalesce, span),
            Rule::op_add => Tok::Infix(BinOp::Add, span),
            Rule::op_sub => Tok::Infix(BinOp::Sub, span),
            Rule::op_mul => Tok::Infix(BinOp::Mul, span),
            Rule::op_div => Tok::Infix(BinOp::Div, span),
            Rule::is_test => match p.into_inner().find(|q| q.as_rule() == Rule::name) {
                Some(label) => Tok::Is(ident(cx, &label), span),
                None => {
                    failed = true;
                    continue;
                }
            },
            Rule::in_test => Tok::In(labels(cx, p), span),
            Rule::field_access => {
                let Some(field) = p.into_inner().next() else {
                    failed = true;
                    continue;
                };
                let field = ident(cx, &field);
                match toks.pop() {
                    Some(Tok::Operand(base)) if base.depth >= MAX_DEPTH => {
                        cx.report(too_deep(base.expr.span.to(field.span)));
                        failed = true;
                        continue;
                    }
                    Some(Tok::Operand(base)) => {
                        let span = base.expr.span.to(field.span);
                        let depth = base.depth + 1;
                        Tok::Operand(Built {
                            expr: Expr {
                                kind: ExprKind::Field(Box::new(base.expr), field),
                                span,
                            },
                            depth,
                        })
                    }
                    // The grammar puts field access right after an operand; an operand that
                    // failed to build leaves nothing to attach it to.
                    other => {
                        toks.extend(other);
                        failed = true;
                        continue;
                    }
                }
            }
            _ => match primary(cx, p) {
                Ok(built) => Tok::Operand(built),
                Err(Invalid) => {
                    failed = true;
                    continue;
                }
            },
        };
        toks.push(tok);
    }
    if failed {
        return Err(Invalid);
    }
    let mut climber = Climber {
        toks: toks.into_iter().peekable(),
        recursion: 0,
        too_deep: false,
        whole,
    };
    let built = climber.climb(cx, 0);
    if climber.too_deep {
        cx.report(too_deep(whole));
    }
    built
}

fn too_deep(span: Span) -> Diagnostic {
    Diagnostic::error(
        codes::SYNTAX,
        format!("expression is nested more than {MAX_DEPTH} levels deep"),
        span,
    )
    .with_help("split the expression into several signals")
}

pub(crate) fn ident(cx: &Ctx<'_>, pair: &Pair<'_, Rule>) -> Ident {
    Ident {
        name: pair.as_str().to_string(),
        span: cx.span(pair),
    }
}

/// The names of a `label_list` (or of the `in_test` holding one).
fn labels(cx: &Ctx<'_>, pair: Pair<'_, Rule>) -> Vec<Ident> {
    let mut out = Vec::new();
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::name => out.push(ident(cx, &p)),
            Rule::label_list => out.extend(labels(cx, p)),
            _ => {}
        }
    }
    out
}

fn leaf(kind: ExprKind, span: Span) -> Built {
    Built {
        expr: Expr { kind, span },
        depth: 1,
    }
}

/// The `expr` children of a pair, built in order; every failure is reported, not just the first.
fn children(cx: &mut Ctx<'_>, pair: Pair<'_, Rule>) -> Result<(Vec<Expr>, usize), Invalid> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut failed = false;
    for p in pair.into_inner().filter(|p| p.as_rule() == Rule::expr) {
        match build_depth(cx, p) {
            Ok(b) => {
                depth = depth.max(b.depth);
                out.push(b.expr);
            }
            Err(Invalid) => failed = true,
        }
    }
    if failed {
        Err(Invalid)
    } else {
        Ok((out, depth))
    }
}

fn primary(cx: &mut Ctx<'_>, pair: Pair<'_, Rule>) -> Result<Built, Invalid> {
    let span = cx.span(&pair);
    let built = match pair.as_rule() {
        Rule::kw_true => leaf(ExprKind::Bool(true), span),
        Rule::kw_false => leaf(ExprKind::Bool(false), span),
        Rule::name => leaf(ExprKind::Name(ident(cx, &pair)), span),
        Rule::number => leaf(numeric(cx, pair.as_str(), span), span),
        Rule::string => leaf(ExprKind::Str(string(cx, pair.as_str(), span)), span),
        Rule::paren => {
            let (mut inner, depth) = children(cx, pair)?;
            let inner = inner.pop().ok_or(Invalid)?;
            Built {
                expr: Expr {
                    kind: ExprKind::Paren(Box::new(inner)),
                    span,
                },
                depth: depth + 1,
            }
        }
        Rule::list => {
            let (items, depth) = children(cx, pair)?;
            Built {
                expr: Expr {
                    kind: ExprKind::List(items),
                    span,
                },
                depth: depth + 1,
            }
        }
        Rule::call => {
            let callee = pair
                .clone()
                .into_inner()
                .find(|p| p.as_rule() == Rule::name)
                .map(|p| ident(cx, &p))
                .ok_or(Invalid)?;
            let (args, depth) = children(cx, pair)?;
            Built {
                expr: Expr {
                    kind: ExprKind::Call(callee, args),
                    span,
                },
                depth: depth + 1,
            }
        }
        _ => return Err(Invalid),
    };
    if built.depth > MAX_DEPTH {
        // Children were within the limit (or they would have failed already), so this is the
        // one place that reports it.
        cx.report(too_deep(span));
        return Err(Invalid);
    }
    Ok(built)
}

/// A number or duration token; an invalid one is reported and kept with a best-effort value so
/// that the rest of the declaration can still be checked.
pub(crate) fn numeric(cx: &mut Ctx<'_>, token: &str, span: Span) -> ExprKind {
    match literal::read_numeric(token) {
        Ok(Numeric::Number(n)) => ExprKind::Number(n),
        Ok(Numeric::Duration(d)) => ExprKind::Duration(d),
        Err(e) => {
            let at = Span::new(
                span.file,
                span.start as usize + e.at,
                span.start as usize + e.end,
            );
            let mut d = Diagnostic::error(codes::INVALID_LITERAL, e.message, at);
            if let Some(help) = e.help {
                d = d.with_help(help);
            }
            cx.report(d);
            match literal::fallback(token) {
                Numeric::Number(n) => ExprKind::Number(n),
                Numeric::Duration(d) => ExprKind::Duration(d),
            }
        }
    }
}

/// A string token with its quotes; every bad escape is reported at its own span.
pub(crate) fn string(cx: &mut Ctx<'_>, token: &str, span: Span) -> String {
    let body = token
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(token);
    let (value, errors) = literal::read_string(body);
    for e in errors {
        let start = span.start as usize + 1;
        let mut d = Diagnostic::error(
            codes::INVALID_LITERAL,
            e.message,
            Span::new(span.file, start + e.at, start + e.end),
        );
        if let Some(help) = e.help {
            d = d.with_help(help);
        }
        cx.report(d);
    }
    value
}

/// Precedence climbing over the token sequence of one `expr`.
struct Climber<I: Iterator<Item = Tok>> {
    toks: std::iter::Peekable<I>,
    recursion: usize,
    too_deep: bool,
    whole: Span,
}

impl<I: Iterator<Item = Tok>> Climber<I> {
    /// The binding strength of the next operator, if an operator comes next.
    fn next_precedence(&mut self) -> Option<u8> {
        match self.toks.peek()? {
            Tok::Infix(op, _) => Some(op.precedence()),
            Tok::Is(..) | Tok::In(..) => Some(COMPARISON),
            _ => None,
        }
    }

    fn node(&mut self, kind: ExprKind, span: Span, depth: usize) -> Result<Built, Invalid> {
        if depth > MAX_DEPTH {
            self.too_deep = true;
            return Err(Invalid);
        }
        Ok(Built {
            expr: Expr { kind, span },
            depth,
        })
    }

    fn climb(&mut self, cx: &mut Ctx<'_>, min: u8) -> Result<Built, Invalid> {
        self.recursion += 1;
        if self.recursion > MAX_DEPTH {
            self.too_deep = true;
            return Err(Invalid);
        }
        let result = self.climb_inner(cx, min);
        self.recursion -= 1;
        result
    }

    fn climb_inner(&mut self, cx: &mut Ctx<'_>, min: u8) -> Result<Built, Invalid> {
        let mut lhs = self.unary(cx)?;
        // Set once `lhs` is an unparenthesised comparison built by this loop.
        let mut compared: Option<Span> = None;
        while let Some(prec) = self.next_precedence() {
            if prec < min {
                break;
            }
            let Some(tok) = self.toks.next() else { break };
            if let Some(first) = compared.filter(|_| prec >= COMPARISON) {
                let (what, at) = match &tok {
                    Tok::Infix(op, at) => (format!("`{}`", op.symbol()), *at),
                    Tok::Is(_, at) => ("`is`".to_string(), *at),
                    Tok::In(_, at) => ("`in`".to_string(), *at),
                    _ => ("this".to_string(), self.whole),
                };
                cx.report(
                    Diagnostic::error(
                        codes::SYNTAX,
                        format!("{what} cannot follow a comparison without parentheses"),
                        at,
                    )
                    .with_secondary(first, "this comparison")
                    .with_help("join conditions with `and`/`or`, or add parentheses"),
                );
                return Err(Invalid);
            }
            lhs = match tok {
                Tok::Infix(op, _) => {
                    // Left-associative: the right side only takes tighter operators.
                    let rhs = self.climb(cx, prec + 1)?;
                    let span = lhs.expr.span.to(rhs.expr.span);
                    let depth = lhs.depth.max(rhs.depth) + 1;
                    let kind = ExprKind::Binary(op, Box::new(lhs.expr), Box::new(rhs.expr));
                    self.node(kind, span, depth)?
                }
                Tok::Is(label, at) => {
                    let span = lhs.expr.span.to(at);
                    let depth = lhs.depth + 1;
                    self.node(ExprKind::Is(Box::new(lhs.expr), label), span, depth)?
                }
                Tok::In(labels, at) => {
                    let span = lhs.expr.span.to(at);
                    let depth = lhs.depth + 1;
                    self.node(ExprKind::In(Box::new(lhs.expr), labels), span, depth)?
                }
                Tok::Prefix(..) | Tok::Operand(_) => return Err(Invalid),
            };
            compared = (prec == COMPARISON).then_some(lhs.expr.span);
        }
        Ok(lhs)
    }

    /// Prefix operators and the operand they apply to.
    fn unary(&mut self, cx: &mut Ctx<'_>) -> Result<Built, Invalid> {
        match self.toks.next() {
            Some(Tok::Operand(b)) => Ok(b),
            Some(Tok::Prefix(op, at)) => {
                self.recursion += 1;
                if self.recursion > MAX_DEPTH {
                    self.too_deep = true;
                    return Err(Invalid);
                }
                let operand = match op {
                    // `not a == b` is `not (a == b)`.
                    UnaryOp::Not => self.climb(cx, NOT + 1),
                    // `-a * b` is `(-a) * b`.
                    UnaryOp::Neg => self.unary(cx),
                };
                self.recursion -= 1;
                let operand = operand?;
                let span = at.to(operand.expr.span);
                let depth = operand.depth + 1;
                self.node(ExprKind::Unary(op, Box::new(operand.expr)), span, depth)
            }
            _ => Err(Invalid),
        }
    }
}
