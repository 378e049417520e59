//! `pii(TEXT, ["type", ...])`: the entity set is typed. Each name must be one of the built-in
//! recognizers' types (E100, with the nearest name as a fix); a type listed twice is a
//! warning (W055), the set keeps it once.
//!
//! `redact = ["type", ...]` on a route or a redirecting block names types the same way (E101
//! and W056, the same rules with codes of their own); an empty list redacts nothing (E102),
//! and a block that refuses forwards nothing to redact (E103).

use super::builtins::usage;
use super::names::nearest;
use super::types::texpr;
use super::{list_some, Checker};
use crate::hir::{TExpr, TExprKind, Type};
use crate::pii::{EntityType, Redact};
use src_dsl::ast::{Block, BlockAction, Expr, ExprKind, Ident};
use src_dsl::{codes, Diagnostic, Span, Spanned};

impl Checker<'_> {
    pub(super) fn pii(&mut self, f: &Ident, args: &[Expr], span: Span) -> Option<TExpr> {
        let text = self.text_argument(f, &args[0]);
        let names = self.phrases(f, &args[1]);
        let (text, names) = (Box::new(text?), names?);
        let ExprKind::List(items) = &args[1].kind else {
            return None;
        };
        let named: Vec<(&str, Span)> = names
            .iter()
            .zip(items)
            .map(|(name, item)| (name.as_str(), item.span))
            .collect();
        let types = self.entity_types(&named, &f.name, Codes::PII, usage(&f.name))?;
        Some(texpr(TExprKind::Pii { text, types }, Type::Bool, span))
    }

    /// A route's `redact`: `Some(None)` when it has none, `None` when it is in error.
    pub(super) fn redact(
        &mut self,
        owner: &Ident,
        redact: Option<&Spanned<Vec<Spanned<String>>>>,
    ) -> Option<Option<Redact>> {
        let Some(list) = redact else {
            return Some(None);
        };
        if list.value.is_empty() {
            self.report(
                Diagnostic::error(
                    codes::EMPTY_REDACT,
                    format!("`redact` of `{}` lists no type", owner.name),
                    list.span,
                )
                .with_label_message("empty")
                .with_help("list the types to replace, such as `[\"email\", \"phone\"]`, or remove `redact`"),
            );
            return None;
        }
        let named: Vec<(&str, Span)> = list
            .value
            .iter()
            .map(|n| (n.value.as_str(), n.span))
            .collect();
        let types =
            self.entity_types(&named, "redact", Codes::REDACT, "redact = [\"email\", ...]")?;
        // The built-in patterns compile (the recognizers' unit tests say so).
        Redact::new(&types).ok().map(Some)
    }

    /// A block's `redact`, which only a redirect (`to MODEL`) can have.
    pub(super) fn block_redact(&mut self, b: &Block) -> Option<Option<Redact>> {
        if let (Some(list), BlockAction::Refuse { .. }) = (&b.redact, &b.action) {
            self.report(
                Diagnostic::error(
                    codes::REDACT_ON_REFUSAL,
                    format!("block `{}` refuses, so it forwards nothing to redact", b.name.name),
                    list.span,
                )
                .with_label_message("nothing is forwarded")
                .with_help("remove `redact`, or redirect with `to MODEL` in place of `status` and `message`"),
            );
            return None;
        }
        self.redact(&b.name, b.redact.as_ref())
    }

    /// The entity types `names` spell, each once; `None` when one is unknown (reported).
    fn entity_types(
        &mut self,
        names: &[(&str, Span)],
        place: &str,
        codes: Codes,
        usage: &str,
    ) -> Option<Vec<EntityType>> {
        let all: Vec<&str> = EntityType::ALL.iter().map(|t| t.name()).collect();
        let mut types = Vec::with_capacity(names.len());
        let mut ok = true;
        for &(name, span) in names {
            match EntityType::from_name(name) {
                Some(t) if types.contains(&t) => self.report(
                    Diagnostic::warning(
                        codes.repeated,
                        format!("`{name}` is listed twice in `{place}`"),
                        span,
                    )
                    .with_label_message("listed before")
                    .with_help("remove the repeated name"),
                ),
                Some(t) => types.push(t),
                None => {
                    ok = false;
                    let d = Diagnostic::error(
                        codes.unknown,
                        format!("`{name}` is not a personal data type"),
                        span,
                    )
                    .with_label_message("unknown type");
                    let d = match nearest(name, all.iter().copied()) {
                        Some(s) => d
                            .with_help(format!("did you mean `{s}`?"))
                            .with_fix(span, format!("{s:?}")),
                        None => d.with_help(format!(
                            "the types are {}; write `{usage}`",
                            list_some(&all, all.len()),
                        )),
                    };
                    self.report(d);
                }
            }
        }
        ok.then_some(types)
    }
}

/// The codes a list of types reports under, by where it is written.
#[derive(Clone, Copy)]
struct Codes {
    unknown: codes::Code,
    repeated: codes::Code,
}

impl Codes {
    const PII: Codes = Codes {
        unknown: codes::UNKNOWN_PII_TYPE,
        repeated: codes::REPEATED_PII_TYPE,
    };
    const REDACT: Codes = Codes {
        unknown: codes::UNKNOWN_REDACT_TYPE,
        repeated: codes::REPEATED_REDACT_TYPE,
    };
}
