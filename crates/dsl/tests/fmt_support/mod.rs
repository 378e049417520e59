//! Normalising trees for comparison: the formatter moves text around, so two parses of "the
//! same" policy differ in every span. `strip_spans` sets every span to the default and drops the
//! comments; `strip_parens` also removes `Paren` nodes, for trees built by a program that may
//! lack the parentheses the printer has to add. Both are one [`VisitorMut`] pass, so they reach
//! every span the tree has without spelling the tree out here.

#![allow(
    dead_code,
    reason = "each test binary uses a different subset of the helpers"
)]

use src_dsl::ast::visit_mut::{walk_expr, VisitorMut};
use src_dsl::ast::*;
use src_dsl::Span;

/// The tree with every span zeroed and no comments.
pub fn strip_spans(file: &File) -> File {
    normalised(file, false)
}

/// As [`strip_spans`], and every `Paren` replaced by what it holds.
pub fn strip_parens(file: &File) -> File {
    normalised(file, true)
}

fn normalised(file: &File, unparen: bool) -> File {
    let mut f = file.clone();
    f.comments.clear();
    Normalise { unparen }.visit_file(&mut f);
    f
}

struct Normalise {
    unparen: bool,
}

impl VisitorMut for Normalise {
    fn visit_span(&mut self, span: &mut Span) {
        *span = Span::default();
    }

    fn visit_expr(&mut self, e: &mut Expr) {
        if self.unparen {
            while let ExprKind::Paren(inner) = &mut e.kind {
                let inner = std::mem::replace(inner.as_mut(), placeholder());
                *e = inner;
            }
        }
        walk_expr(self, e);
    }
}

fn placeholder() -> Expr {
    Expr {
        kind: ExprKind::Bool(false),
        span: Span::default(),
    }
}
