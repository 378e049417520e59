//! `pii(TEXT, ["type", ...])`: the entity set is typed. Each name must be one of the built-in
//! recognizers' types (E100, with the nearest name as a fix); a type listed twice is a
//! warning (W055), the set keeps it once.

use super::builtins::usage;
use super::names::nearest;
use super::types::texpr;
use super::{list_some, Checker};
use crate::hir::{TExpr, TExprKind, Type};
use crate::pii::EntityType;
use src_dsl::ast::{Expr, ExprKind, Ident};
use src_dsl::{codes, Diagnostic, Span};

impl Checker<'_> {
    pub(super) fn pii(&mut self, f: &Ident, args: &[Expr], span: Span) -> Option<TExpr> {
        let text = self.text_argument(f, &args[0]);
        let names = self.phrases(f, &args[1]);
        let (text, names) = (Box::new(text?), names?);
        let ExprKind::List(items) = &args[1].kind else {
            return None;
        };
        let all: Vec<&str> = EntityType::ALL.iter().map(|t| t.name()).collect();
        let mut types = Vec::with_capacity(names.len());
        let mut ok = true;
        for (name, item) in names.iter().zip(items) {
            match EntityType::from_name(name) {
                Some(t) if types.contains(&t) => self.report(
                    Diagnostic::warning(
                        codes::REPEATED_PII_TYPE,
                        format!("`{name}` is listed twice in `{}`", f.name),
                        item.span,
                    )
                    .with_label_message("listed before")
                    .with_help("remove the repeated name"),
                ),
                Some(t) => types.push(t),
                None => {
                    ok = false;
                    let d = Diagnostic::error(
                        codes::UNKNOWN_PII_TYPE,
                        format!("`{name}` is not a personal data type"),
                        item.span,
                    )
                    .with_label_message("unknown type");
                    let d = match nearest(name, all.iter().copied()) {
                        Some(s) => d
                            .with_help(format!("did you mean `{s}`?"))
                            .with_fix(item.span, format!("{s:?}")),
                        None => d.with_help(format!(
                            "the types are {}; write `{}`",
                            list_some(&all, all.len()),
                            usage(&f.name)
                        )),
                    };
                    self.report(d);
                }
            }
        }
        ok.then(|| texpr(TExprKind::Pii { text, types }, Type::Bool, span))
    }
}
