//! A forgiving type inference over the syntax tree, for hover texts and label resolution.
//!
//! The checker types expressions precisely but only hands out a typed tree when the whole policy
//! is free of errors; an editor needs "`topic` is `class<domain>`" while the user is still
//! typing elsewhere. This inference follows docs/language.md, "Expressions and types" without
//! reporting anything: whatever it cannot tell is [`Ty::Unknown`]. Signal cycles are cut by a
//! depth bound.

use crate::symbols::{SymKind, SymbolIndex};
use src_dsl::ast::{BinOp, Expr, ExprKind, UnaryOp};

/// The types of docs/language.md, "Expressions and types", plus "cannot tell".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ty {
    Bool,
    Int,
    Score,
    Float,
    Text,
    OptText,
    /// `class<C>`; `None` is the `language` label set.
    Class(Option<String>),
    Model,
    Unknown,
}

impl std::fmt::Display for Ty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ty::Bool => f.write_str("bool"),
            Ty::Int => f.write_str("int"),
            Ty::Score => f.write_str("score"),
            Ty::Float => f.write_str("float"),
            Ty::Text => f.write_str("text"),
            Ty::OptText => f.write_str("text?"),
            Ty::Class(Some(c)) => write!(f, "class<{c}>"),
            Ty::Class(None) => f.write_str("class<language>"),
            Ty::Model => f.write_str("model"),
            Ty::Unknown => f.write_str("?"),
        }
    }
}

/// Signals nest at most this deep before inference gives up (a cycle, or an absurd chain).
const MAX_DEPTH: usize = 64;

/// The type of an expression, as far as the syntax and the declarations tell.
pub fn infer(e: &Expr, index: &SymbolIndex) -> Ty {
    infer_at(e, index, 0)
}

fn infer_at(e: &Expr, index: &SymbolIndex, depth: usize) -> Ty {
    if depth > MAX_DEPTH {
        return Ty::Unknown;
    }
    let sub = |x: &Expr| infer_at(x, index, depth + 1);
    match &e.kind {
        ExprKind::Bool(_) => Ty::Bool,
        ExprKind::Number(n) if n.is_int => Ty::Int,
        ExprKind::Number(_) => Ty::Float,
        ExprKind::Str(_) => Ty::Text,
        ExprKind::Duration(_) | ExprKind::List(_) => Ty::Unknown,
        ExprKind::Name(ident) => match ident.name.as_str() {
            "prompt" | "history" | "system" => Ty::Text,
            "api_key" => Ty::OptText,
            "pinned" | "proposed" => Ty::Model,
            name => match index.value_kind(name) {
                Some(SymKind::Signal) => index
                    .signal_exprs
                    .get(name)
                    .map(|x| infer_at(x, index, depth + 1))
                    .unwrap_or(Ty::Unknown),
                Some(SymKind::Model) => Ty::Model,
                _ => Ty::Unknown,
            },
        },
        ExprKind::Field(inner, field) => match (&inner.kind, field.name.as_str()) {
            (ExprKind::Name(r), f) if r.name == "request" => match f {
                "stream" | "tool_loop" => Ty::Bool,
                _ => Ty::Int,
            },
            (_, "confidence") => Ty::Score,
            (_, "cost") => Ty::Float,
            (_, "fail_rate") => Ty::Score,
            (_, "count") => Ty::Int,
            _ => Ty::Unknown,
        },
        ExprKind::Call(f, args) => match f.name.as_str() {
            "header" => Ty::OptText,
            "contains" | "sequence" | "matches" => Ty::Bool,
            "hits" | "count" | "words" | "tokens" => Ty::Int,
            "density" => Ty::Float,
            "language" => Ty::Class(None),
            "similarity" => Ty::Score,
            "min" | "max" => arith(args.first().map(sub), args.get(1).map(sub)),
            name => match index.value_kind(name) {
                Some(SymKind::Classifier) => Ty::Class(Some(name.to_string())),
                Some(SymKind::Guard) => Ty::Score,
                _ => Ty::Unknown,
            },
        },
        ExprKind::Unary(UnaryOp::Not, _) | ExprKind::Is(..) | ExprKind::In(..) => Ty::Bool,
        ExprKind::Unary(UnaryOp::Neg, x) => match sub(x) {
            Ty::Int => Ty::Int,
            _ => Ty::Float,
        },
        ExprKind::Paren(x) => sub(x),
        ExprKind::Binary(op, a, b) => match op {
            BinOp::Or | BinOp::And => Ty::Bool,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => Ty::Bool,
            BinOp::Coalesce => match sub(b) {
                Ty::Text => Ty::Text,
                _ => Ty::OptText,
            },
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div => arith(Some(sub(a)), Some(sub(b))),
        },
    }
}

fn arith(a: Option<Ty>, b: Option<Ty>) -> Ty {
    match (a, b) {
        (Some(Ty::Int), Some(Ty::Int)) => Ty::Int,
        _ => Ty::Float,
    }
}
