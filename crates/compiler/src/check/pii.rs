//! `pii(TEXT, ["type", ...])`: the entity set is typed. Each name must be one of the built-in
//! recognizers' types (E100, with the nearest name as a fix); a type listed twice is a
//! warning (W055), the set keeps it once.
//!
//! `redact = ["type", ...]` on a route or a redirecting block names types the same way (E101
//! and W056, the same rules with codes of their own); an empty list redacts nothing (E102),
//! and a block that refuses forwards nothing to redact (E103).
//!
//! `redact` may also name a detector's entity types: `people.PERSON` (the detector must be
//! declared, the type among its `entities`: E104 with the nearest as a fix), or a bare `PERSON`
//! when exactly one detector declares it (none: E104; several: E105, naming them).

use super::builtins::usage;
use super::names::{nearest, Kind};
use super::types::texpr;
use super::{list_some, Checker};
use crate::hir::{TExpr, TExprKind, Type};
use crate::pii::{DetectorTypes, EntityType, Redact};
use src_dsl::ast::{Block, BlockAction, Expr, ExprKind, Ident, RedactType};
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
        redact: Option<&Spanned<Vec<RedactType>>>,
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
        let mut named: Vec<(&str, Span)> = Vec::new();
        let mut detectors: Vec<DetectorTypes> = Vec::new();
        let mut ok = true;
        for item in &list.value {
            let (detector, entity) = match item {
                RedactType::Pii(n) => {
                    named.push((n.value.as_str(), n.span));
                    continue;
                }
                RedactType::Entity { detector, entity } => (detector, entity),
            };
            let Some(index) = self.redact_detector(detector.as_ref(), entity) else {
                ok = false;
                continue;
            };
            let name = self.decls.detectors[index].name.name.clone();
            let at = match detectors.iter().position(|d| d.detector == index as u32) {
                Some(at) => at,
                None => {
                    detectors.push(DetectorTypes {
                        detector: index as u32,
                        name,
                        types: Vec::new(),
                    });
                    detectors.len() - 1
                }
            };
            let types = &mut detectors[at].types;
            if types.contains(&entity.name) {
                self.report(
                    Diagnostic::warning(
                        codes::REPEATED_REDACT_TYPE,
                        format!("`{}` is listed twice in `redact`", entity.name),
                        item.span(),
                    )
                    .with_label_message("listed before")
                    .with_help("remove the repeated name"),
                );
            } else {
                types.push(entity.name.clone());
            }
        }
        let types = self.entity_types(&named, "redact", Codes::REDACT, "redact = [\"email\", ...]");
        let types = types.filter(|_| ok)?;
        // The built-in patterns compile (the recognizers' unit tests say so).
        Redact::new(&types)
            .ok()
            .map(|r| Some(r.with_detectors(detectors)))
    }

    /// The detector whose `entity` a `redact` names: the one written before it, or the only
    /// one that declares it; `None` when there is none (reported).
    fn redact_detector(&mut self, detector: Option<&Ident>, entity: &Ident) -> Option<usize> {
        let declared = |d: &src_dsl::ast::Detector| -> Vec<String> {
            d.entities
                .as_ref()
                .map(|l| l.value.iter().map(|e| e.name.clone()).collect())
                .unwrap_or_default()
        };
        if let Some(detector) = detector {
            let index = self.resolve(detector, Kind::Detector)?;
            self.uses.detectors[index] = true;
            let types = declared(self.decls.detectors[index]);
            if types.contains(&entity.name) {
                return Some(index);
            }
            self.unknown_entity(detector, index, entity, &types);
            return None;
        }
        let owners: Vec<usize> = (0..self.decls.detectors.len())
            .filter(|&i| declared(self.decls.detectors[i]).contains(&entity.name))
            .collect();
        match owners.as_slice() {
            [one] => {
                self.uses.detectors[*one] = true;
                Some(*one)
            }
            [] => {
                self.no_detector_declares(entity);
                None
            }
            several => {
                let names: Vec<String> = several
                    .iter()
                    .map(|&i| self.decls.detectors[i].name.name.clone())
                    .collect();
                let mut d = Diagnostic::error(
                    codes::AMBIGUOUS_ENTITY_TYPE,
                    format!(
                        "`{}` is an entity type of several detectors: {}",
                        entity.name,
                        names
                            .iter()
                            .map(|n| format!("`{n}`"))
                            .collect::<Vec<_>>()
                            .join(" and ")
                    ),
                    entity.span,
                )
                .with_label_message("which detector reads it?")
                .with_help(format!(
                    "name the detector: {}",
                    names
                        .iter()
                        .map(|n| format!("`{n}.{}`", entity.name))
                        .collect::<Vec<_>>()
                        .join(" or ")
                ));
                for &i in several {
                    let decl = self.decls.detectors[i];
                    d = d.with_secondary(
                        decl.name.span,
                        format!("`{}` declares it", decl.name.name),
                    );
                }
                self.report(d);
                None
            }
        }
    }

    /// E104 for a bare `redact` name no detector declares (a built-in type written without
    /// quotes is told so).
    fn no_detector_declares(&mut self, entity: &Ident) {
        let all: Vec<String> = self
            .decls
            .detectors
            .iter()
            .flat_map(|d| d.entities.iter().flat_map(|l| l.value.iter()))
            .map(|e| e.name.clone())
            .collect();
        let d = Diagnostic::error(
            codes::UNKNOWN_ENTITY_TYPE,
            format!("no detector declares the entity type `{}`", entity.name),
            entity.span,
        )
        .with_label_message("not in any detector's `entities`");
        let d = if let Some(t) = EntityType::from_name(&entity.name) {
            d.with_help(format!("a built-in type is written as a string: `\"{t}\"`"))
                .with_fix(entity.span, format!("\"{t}\""))
        } else if let Some(s) = nearest(&entity.name, all.iter().map(String::as_str)) {
            d.with_help(format!("did you mean `{s}`?"))
                .with_fix(entity.span, s)
        } else if all.is_empty() {
            d.with_help("no detector is declared: declare one with this type in its `entities`, or write a built-in type such as `\"email\"`")
        } else {
            d.with_help(format!(
                "the detectors' entity types are {}",
                list_some(&all, 12)
            ))
        };
        self.report(d);
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
