//! The typo-tolerant and ranked phrase builtins: `fuzzy(t, [...], MIN)`,
//! `fuzzy_hits(t, [...], MIN)` and `bm25(t, [...])`.
//!
//! `MIN` must be a number literal in (0, 1] (E027): it is compiled into the policy with the
//! phrases, and keeping it a literal in the source lets tools rewrite it in place (calibration
//! fits it, the formatter keeps it as written).

use super::types::{texpr, Hint};
use super::Checker;
use crate::hir::{TExpr, TExprKind, Type};
use crate::vocabulary::Function;
use src_dsl::ast::{Expr, ExprKind, Ident, UnaryOp};
use src_dsl::{codes, Diagnostic, Span};

impl Checker<'_> {
    pub(super) fn approximate(
        &mut self,
        function: Function,
        f: &Ident,
        args: &[Expr],
        span: Span,
    ) -> Option<TExpr> {
        let text = self.text_argument(f, &args[0]);
        let phrases = self.phrases(f, &args[1]);
        let min = match args.get(2) {
            Some(arg) => Some(self.similarity_min(f, arg)?),
            None => None,
        };
        let (text, phrases) = (Box::new(text?), phrases?);
        Some(match (function, min) {
            (Function::Fuzzy, Some(min)) => {
                texpr(TExprKind::Fuzzy { text, phrases, min }, Type::Bool, span)
            }
            (Function::FuzzyHits, Some(min)) => {
                texpr(TExprKind::FuzzyHits { text, phrases, min }, Type::Int, span)
            }
            _ => texpr(TExprKind::Bm25 { text, phrases }, Type::Float, span),
        })
    }

    /// The threshold literal of `fuzzy`/`fuzzy_hits`.
    fn similarity_min(&mut self, f: &Ident, arg: &Expr) -> Option<f64> {
        let (problem, label) = match &arg.kind {
            ExprKind::Number(n) if n.value > 0.0 && n.value <= 1.0 => return Some(n.value),
            ExprKind::Number(n) => (
                format!(
                    "`{}` needs a threshold in (0, 1], found `{}`",
                    f.name, n.text
                ),
                "out of range",
            ),
            ExprKind::Unary(UnaryOp::Neg, inner) if matches!(inner.kind, ExprKind::Number(_)) => (
                format!(
                    "`{}` needs a threshold in (0, 1], found a negative number",
                    f.name
                ),
                "out of range",
            ),
            _ => {
                let _ = self.expr(arg, Hint::None);
                (
                    format!("`{}` needs its threshold as a number literal", f.name),
                    "not a number literal",
                )
            }
        };
        self.report(
            Diagnostic::error(codes::FUZZY_THRESHOLD, problem, arg.span)
                .with_label_message(label)
                .with_help(
                    "write the least mean word similarity a match needs, e.g. `0.8` (1 = exact words)",
                ),
        );
        None
    }
}
