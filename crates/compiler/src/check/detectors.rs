//! `detector NAME { path = ".."  entities = [A, B]  threshold = 0.6 }` and its calls
//! `NAME(TEXT, [A])`.
//!
//! A detector is a token-classification model: its `config.json` labels tokens with BIO tags
//! (`B-PERSON`, `I-PERSON`, `O`), and the entity types are the tags without their prefix. The
//! declaration's `entities` are the types calls may ask about; each must be one the model tags
//! when its directory can be read (E104, with the nearest type as a fix), as a classifier's
//! `labels` must be its model's. A call names some of the declared types (E104 again, against the
//! declaration), so a typo is caught even where the model files are not (CI). The call is a
//! bool: some entity of the named types scores at least the declaration's `threshold`, a score
//! in (0, 1] (E045).

use super::names::nearest;
use super::types::texpr;
use super::{list_names, list_some, Checker};
use crate::bio::entity_types;
use crate::hir::{DetectorDef, DetectorId, TExpr, TExprKind, Type, DEFAULT_DETECTOR_THRESHOLD};
use src_dsl::ast::{Expr, ExprKind, Ident};
use src_dsl::{codes, Diagnostic, Span, Spanned};
use std::collections::HashMap;

impl Checker<'_> {
    /// The checked definitions of the `detector` declarations, by `DetectorId`.
    pub(super) fn check_detectors(&mut self) {
        for d in self.decls.detectors.clone() {
            let mut entities: Vec<String> = Vec::new();
            let mut seen: HashMap<&str, Span> = HashMap::new();
            for e in d.entities.iter().flat_map(|l| l.value.iter()) {
                if let Some(first) = seen.get(e.name.as_str()) {
                    self.report(
                        Diagnostic::error(
                            codes::DUPLICATE_NAME,
                            format!("entity type `{}` is listed twice", e.name),
                            e.span,
                        )
                        .with_label_message("listed again here")
                        .with_secondary(*first, "first listed here")
                        .with_help("remove one of them"),
                    );
                    continue;
                }
                seen.insert(&e.name, e.span);
                entities.push(e.name.clone());
            }
            let threshold = self.detector_threshold(&d.name, &d.threshold);
            let windows = self.windows(&d.name, &d.windows);
            let window = self.window(&d.name, &d.window);
            self.parts.detectors.push(DetectorDef {
                name: d.name.name.clone(),
                span: d.name.span,
                path: self.model_path(&d.path),
                entities,
                threshold,
                device: super::decls::device(&d.device),
                windows,
                window,
            });
        }
    }

    /// `threshold`: a score in (0, 1] (E045); a threshold of 0 would find an entity in every
    /// text.
    fn detector_threshold(
        &mut self,
        name: &Ident,
        threshold: &Option<Spanned<src_dsl::ast::Number>>,
    ) -> f64 {
        let Some(t) = threshold else {
            return DEFAULT_DETECTOR_THRESHOLD;
        };
        let v = t.value.value;
        if v > 0.0 && v <= 1.0 {
            return v;
        }
        self.report(super::decls::out_of_range(
            format!(
                "threshold of detector `{}` must be a score in (0, 1], found `{}`",
                name.name, t.value.text
            ),
            t.span,
            "write the least entity score that counts as found, e.g. `threshold = 0.6`",
        ));
        DEFAULT_DETECTOR_THRESHOLD
    }

    /// Each declared entity type against the types its model tags (E104), when the model's
    /// `config.json` can be read.
    pub(super) fn check_detector_dirs(&mut self) {
        for d in self.decls.detectors.clone() {
            let Some(labels) = self.model_labels("detector", &d.name, &d.path) else {
                continue;
            };
            let Some(declared) = &d.entities else {
                continue;
            };
            let types = entity_types(&labels);
            let config = self.config_shown(&d.path);
            for e in &declared.value {
                if types.contains(&e.name) {
                    continue;
                }
                let d = Diagnostic::error(
                    codes::UNKNOWN_ENTITY_TYPE,
                    format!(
                        "`{}` is not an entity type of detector `{}`'s model in `{config}`",
                        e.name, d.name.name
                    ),
                    e.span,
                )
                .with_label_message("no `B-`/`I-` label of this type in `id2label`")
                .with_note(if types.is_empty() {
                    format!(
                        "the model's labels ({}) name no entity type",
                        list_names(&labels)
                    )
                } else {
                    format!("the model's entity types: {}", list_names(&types))
                });
                let d = match nearest(&e.name, types.iter().map(String::as_str)) {
                    Some(s) => d
                        .with_help(format!("did you mean `{s}`?"))
                        .with_fix(e.span, s),
                    None => d.with_help("declare only types the model tags"),
                };
                self.report(d);
            }
        }
    }

    /// `D(TEXT, [TYPES])`, a call of detector `index`.
    pub(super) fn detector_call(
        &mut self,
        f: &Ident,
        index: usize,
        args: &[Expr],
        span: Span,
    ) -> Option<TExpr> {
        self.uses.detectors[index] = true;
        let usage = format!("{}(prompt, [TYPE, ...])", f.name);
        let list = match args {
            [_, list] => Some(list),
            _ => None,
        };
        let Some(ExprKind::List(items)) = list.map(|l| &l.kind) else {
            for a in args {
                if !matches!(a.kind, ExprKind::List(_)) {
                    let _ = self.expr(a, super::types::Hint::None);
                }
            }
            let d = match list {
                Some(l) => Diagnostic::error(
                    codes::WRONG_ARGUMENTS,
                    format!("the second argument of `{}` lists entity types", f.name),
                    l.span,
                )
                .with_label_message("not a list"),
                None => Diagnostic::error(
                    codes::WRONG_ARGUMENTS,
                    format!("`{}` takes 2 arguments, found {}", f.name, args.len()),
                    span,
                )
                .with_label_message("wrong number of arguments"),
            };
            self.report(d.with_help(format!("write `{usage}`")));
            return None;
        };
        let text = self.text_argument(f, &args[0]);
        let declared: Vec<String> = self
            .decls
            .detectors
            .get(index)
            .and_then(|d| d.entities.as_ref())
            .map(|l| l.value.iter().map(|e| e.name.clone()).collect())
            .unwrap_or_default();
        let mut entities: Vec<String> = Vec::with_capacity(items.len());
        let mut ok = true;
        if items.is_empty() {
            ok = false;
            self.report(
                Diagnostic::error(
                    codes::WRONG_ARGUMENTS,
                    format!("`{}` is asked about no entity type", f.name),
                    args[1].span,
                )
                .with_label_message("empty")
                .with_help(format!(
                    "list the types to find, of {}",
                    list_some(&declared, 12)
                )),
            );
        }
        for item in items {
            let ExprKind::Name(name) = &item.kind else {
                ok = false;
                self.report(
                    Diagnostic::error(
                        codes::WRONG_ARGUMENTS,
                        format!("an entity type of `{}` is a bare name", f.name),
                        item.span,
                    )
                    .with_label_message("not an entity type")
                    .with_help(format!("write `{usage}`")),
                );
                continue;
            };
            if declared.contains(&name.name) {
                if !entities.contains(&name.name) {
                    entities.push(name.name.clone());
                }
                continue;
            }
            ok = false;
            self.unknown_entity(f, index, name, &declared);
        }
        let text = text?;
        ok.then(|| {
            texpr(
                TExprKind::Detect {
                    detector: DetectorId(index as u32),
                    text: Box::new(text),
                    entities,
                },
                Type::Bool,
                span,
            )
        })
    }

    /// E104 for a call's (or a `redact`'s) type that the detector does not declare.
    pub(super) fn unknown_entity(
        &mut self,
        f: &Ident,
        index: usize,
        name: &Ident,
        declared: &[String],
    ) {
        let mut d = Diagnostic::error(
            codes::UNKNOWN_ENTITY_TYPE,
            format!(
                "`{}` is not an entity type of detector `{}`",
                name.name, f.name
            ),
            name.span,
        )
        .with_label_message(format!("not in the `entities` of `{}`", f.name));
        d = match nearest(&name.name, declared.iter().map(String::as_str)) {
            Some(s) => d
                .with_help(format!("did you mean `{s}`?"))
                .with_fix(name.span, s),
            None if declared.is_empty() => {
                d.with_help(format!("`{}` declares no entity types", f.name))
            }
            None => d.with_help(format!(
                "the entity types of `{}` are {}; declare a type in `entities` to ask about it",
                f.name,
                list_some(declared, 12)
            )),
        };
        if let Some(l) = self
            .decls
            .detectors
            .get(index)
            .and_then(|d| d.entities.as_ref())
        {
            d = d.with_secondary(l.span, "entities declared here");
        }
        self.report(d);
    }
}
