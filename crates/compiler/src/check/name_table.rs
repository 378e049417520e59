//! What the checker resolved, handed out with every outcome, errors or not: each declared name
//! with its kind and type, and each label written against a class value with the set it was
//! resolved in.
//!
//! Editors need these answers while the policy does not check (`topic` is `class<domain>`, and
//! the `code` of `topic is code` is a label of `domain`, even with a typo three routes down), and
//! working them out again from the syntax would be a second type checker drifting from this one.
//! A name whose own definition has an error has no type here.

use super::names::{Decls, Kind};
use super::Checker;
use crate::hir::{ClassSet, Type};
use src_dsl::Span;

/// One declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct NameEntry {
    pub name: String,
    pub kind: Kind,
    /// The declared name.
    pub span: Span,
    /// The type of the value the name stands for (a signal, a model) or of a call of it (a
    /// classifier, a guard); `None` for other kinds and for signals with errors.
    pub ty: Option<Type>,
}

/// A label written where a class value is tested (`is`, `in`, `==`, a test's `given`), whether
/// or not it belongs to the set.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelUse {
    pub span: Span,
    pub name: String,
    pub set: ClassSet,
}

/// The checker's names: see the module documentation.
#[derive(Debug, Clone, Default)]
pub struct NameTable {
    /// Every declaration that resolves (duplicates left out), in declaration order by kind.
    pub entries: Vec<NameEntry>,
    /// Each classifier's name and declared labels, by `ClassifierId`.
    pub classifiers: Vec<(String, Vec<String>)>,
    /// Labels in the order they were resolved.
    pub labels: Vec<LabelUse>,
}

impl NameTable {
    /// The declaration of `name` in the expression namespace (signals, models, classifiers,
    /// guards, encoders).
    pub fn value(&self, name: &str) -> Option<&NameEntry> {
        self.entries
            .iter()
            .find(|e| e.name == name && e.kind.in_value_namespace())
    }

    /// The type of a signal or model (see [`NameEntry::ty`]).
    pub fn type_of(&self, name: &str) -> Option<Type> {
        self.value(name).and_then(|e| e.ty)
    }

    /// The classifier a label set belongs to; `None` for `language()`'s.
    pub fn classifier(&self, set: ClassSet) -> Option<&str> {
        match set {
            ClassSet::Classifier(c) => self.classifiers.get(c.index()).map(|c| c.0.as_str()),
            ClassSet::Language => None,
        }
    }

    /// The name of a label set as `class<..>` writes it.
    pub fn set_name(&self, set: ClassSet) -> &str {
        match set {
            ClassSet::Language => "language",
            ClassSet::Classifier(_) => self.classifier(set).unwrap_or(""),
        }
    }

    /// The labels of a set.
    pub fn set_labels(&self, set: ClassSet) -> &[String] {
        match set {
            ClassSet::Classifier(c) => self
                .classifiers
                .get(c.index())
                .map_or(&[][..], |c| c.1.as_slice()),
            ClassSet::Language => crate::language::labels(),
        }
    }

    /// A type as the language writes it: `class<domain>`, `text?`.
    pub fn type_name(&self, ty: Type) -> String {
        ty.written(|set| self.set_name(set).to_string())
    }
}

impl Checker<'_> {
    /// Records a label written against a value of `set`.
    pub(super) fn note_label(&mut self, set: ClassSet, ident: &src_dsl::ast::Ident) {
        self.label_uses.push(LabelUse {
            span: ident.span,
            name: ident.name.clone(),
            set,
        });
    }

    /// The names as far as they resolved.
    pub(super) fn name_table(&mut self) -> NameTable {
        let decls: &Decls<'_> = &self.decls;
        let mut entries = Vec::new();
        for kind in Kind::ALL {
            for (index, name) in decls.names_of(kind).into_iter().enumerate() {
                let ty = match kind {
                    Kind::Signal => self.signal_types.get(index).copied().flatten(),
                    Kind::Model => Some(Type::Model),
                    Kind::Classifier => Some(Type::Class(ClassSet::Classifier(
                        crate::hir::ClassifierId(index as u32),
                    ))),
                    Kind::Guard => Some(Type::Score),
                    Kind::Detector => Some(Type::Bool),
                    _ => None,
                };
                let span = decls.name_of(super::names::Sym { kind, index }).span;
                entries.push(NameEntry {
                    name: name.to_string(),
                    kind,
                    span,
                    ty,
                });
            }
        }
        let classifiers = decls
            .classifiers
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let labels = self.class_labels.get(i).cloned().unwrap_or_default();
                (c.name.name.clone(), labels)
            })
            .collect();
        NameTable {
            entries,
            classifiers,
            labels: std::mem::take(&mut self.label_uses),
        }
    }
}
