//! Labels of class values: a classifier's declared `labels`, or the ISO 639-1 codes of
//! `language()`. A label is only meaningful against a class value, so it is resolved where one
//! is tested (`is`, `in`, `==`, a test's `given`) and must belong to that value's set (E022).

use super::names::nearest;
use super::{list_some, Checker};
use crate::hir::{ClassSet, LabelId};
use src_dsl::ast::Ident;
use src_dsl::{codes, Diagnostic};

impl Checker<'_> {
    pub(super) fn set_labels(&self, set: ClassSet) -> &[String] {
        match set {
            ClassSet::Classifier(c) => self
                .class_labels
                .get(c.index())
                .map_or(&[][..], |l| l.as_slice()),
            ClassSet::Language => crate::language::labels(),
        }
    }

    pub(super) fn set_name(&self, set: ClassSet) -> String {
        match set {
            ClassSet::Classifier(c) => self
                .decls
                .classifiers
                .get(c.index())
                .map_or_else(String::new, |c| c.name.name.clone()),
            ClassSet::Language => "language".to_string(),
        }
    }

    pub(super) fn label_index(&self, set: ClassSet, name: &str) -> Option<LabelId> {
        self.set_labels(set)
            .iter()
            .position(|l| l == name)
            .map(|i| LabelId(i as u32))
    }

    /// Resolves a label of `set`, reporting E022 when it is not one.
    pub(super) fn label(&mut self, set: ClassSet, ident: &Ident) -> Option<LabelId> {
        self.note_label(set, ident);
        let found = self.label_index(set, &ident.name);
        if found.is_none() {
            self.unknown_label(set, ident);
        }
        found
    }

    pub(super) fn unknown_label(&mut self, set: ClassSet, ident: &Ident) {
        let labels: Vec<&str> = self.set_labels(set).iter().map(String::as_str).collect();
        let name = self.set_name(set);
        let mut d = Diagnostic::error(
            codes::UNKNOWN_LABEL,
            format!("`{}` is not a label of `{name}`", ident.name),
            ident.span,
        )
        .with_label_message(format!("not in the labels of `{name}`"));
        d = match nearest(&ident.name, labels.iter().copied()) {
            Some(s) => d
                .with_help(format!("did you mean `{s}`?"))
                .with_fix(ident.span, s),
            None if labels.is_empty() => d.with_help(format!("`{name}` declares no labels")),
            None => d.with_help(format!(
                "the labels of `{name}` are {}",
                list_some(&labels, 12)
            )),
        };
        if let ClassSet::Classifier(c) = set {
            if let Some(decl) = self.decls.classifiers.get(c.index()) {
                if let Some(l) = &decl.labels {
                    d = d.with_secondary(l.span, "labels declared here");
                }
            }
        }
        self.report(d);
    }
}
