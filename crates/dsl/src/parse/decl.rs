//! What every declaration builder shares: where a declaration's E004 points ([`Decl`]), and
//! reading statements (`when ...`, `to ...`) that must not be written as `key = value`.
//!
//! It sits below both `build` (deployment declarations and headers) and `rules`
//! (request-deciding declarations and tests), so that neither needs the other for these helpers
//! and the two stay out of an import circle.

use super::fields::{Entry, EntryKind, Fields};
use super::Ctx;
use crate::ast::Expr;
use crate::codes;
use crate::diagnostic::Diagnostic;
use crate::span::Span;

/// Where E004 points and how it names the declaration.
pub(super) struct Decl {
    pub at: Span,
    pub what: String,
}

impl Decl {
    pub fn require(&self, cx: &mut Ctx<'_>, fields: &Fields, keys: &[(&str, &str)]) {
        fields.require(cx, keys, &self.what, self.at);
    }
}

/// Takes a statement (`when ...`, `to ...`); a `key = value` written for it is an E005.
pub(super) fn statement(
    cx: &mut Ctx<'_>,
    fields: &mut Fields,
    key: &str,
    form: &str,
) -> Option<Entry> {
    let entry = fields.take(key)?;
    if let EntryKind::Field(_) = entry.kind {
        cx.report(
            Diagnostic::error(
                codes::INVALID_FIELD_VALUE,
                format!("`{key}` is written without `=`"),
                entry.span,
            )
            .with_help(format!("write `{form}`")),
        );
        return None;
    }
    Some(entry)
}

/// The condition of a `when` statement, when the declaration has a well-formed one.
pub(super) fn when(cx: &mut Ctx<'_>, fields: &mut Fields) -> Option<Expr> {
    match statement(cx, fields, "when", "when CONDITION")?.kind {
        EntryKind::When(e) => e,
        _ => None,
    }
}
