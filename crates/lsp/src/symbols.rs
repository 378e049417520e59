//! The symbol index of one policy: every declaration and every use of a name, with its span.
//!
//! The index is built from the syntax trees alone, so it exists even when the policy does not
//! check (a type error elsewhere must not switch off go-to-definition). Names resolve the way the
//! checker resolves them: backends, routes, blocks and tests each have their own namespace;
//! signals, models, classifiers, guards, encoders and detectors share the value namespace. A label belongs
//! to the classifier whose value it is tested against, which takes types to find: those come
//! from the checker's [`NameTable`], which resolves labels even in a policy with errors.

use src_compiler::check::DeclKind;
use src_compiler::NameTable;
use src_dsl::ast::{self, BlockAction, Expectation, ExprKind, ItemKind};
use src_dsl::{FileId, Span};
use std::collections::HashMap;

/// What kind of thing a name stands for: one of the compiler's declaration kinds, or a label
/// (which the compiler resolves without a declaration kind of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SymKind {
    Decl(DeclKind),
    /// A label of a classifier (`owner` names it; `None` for the `language` labels).
    Label,
}

impl SymKind {
    pub fn word(self) -> &'static str {
        match self {
            SymKind::Decl(kind) => kind.noun(),
            SymKind::Label => "label",
        }
    }
}

impl From<DeclKind> for SymKind {
    fn from(kind: DeclKind) -> SymKind {
        SymKind::Decl(kind)
    }
}

/// The identity of a symbol: two occurrences with equal keys name the same thing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SymbolKey {
    pub kind: SymKind,
    pub name: String,
    /// For labels: the classifier they belong to.
    pub owner: Option<String>,
}

/// One declaration.
#[derive(Debug, Clone)]
pub struct Decl {
    pub key: SymbolKey,
    pub name_span: Span,
    /// The whole declaration (for a label: the label itself).
    pub item_span: Span,
}

/// One written name and what it resolves to.
#[derive(Debug, Clone)]
pub struct Occurrence {
    pub key: SymbolKey,
    pub span: Span,
    pub is_decl: bool,
}

/// Every declaration and resolved name of a policy.
#[derive(Debug, Clone, Default)]
pub struct SymbolIndex {
    pub decls: Vec<Decl>,
    pub occurrences: Vec<Occurrence>,
    /// Classifier name → its labels.
    pub classifier_labels: HashMap<String, Vec<String>>,
    values: HashMap<String, DeclKind>,
}

impl SymbolIndex {
    /// Indexes the trees of every file of a policy, with the labels the checker resolved.
    pub fn build(files: &[(FileId, ast::File)], names: &NameTable) -> Self {
        let mut index = SymbolIndex::default();
        for (_, file) in files {
            for item in &file.items {
                index.declare(item);
            }
        }
        for (_, file) in files {
            for item in &file.items {
                index.resolve_item(item);
            }
        }
        for label in &names.labels {
            // `language()` labels have no declaration to lead to.
            if let Some(classifier) = names.classifier(label.set) {
                index.occurrences.push(Occurrence {
                    key: SymbolKey {
                        kind: SymKind::Label,
                        name: label.name.clone(),
                        owner: Some(classifier.to_string()),
                    },
                    span: label.span,
                    is_decl: false,
                });
            }
        }
        index
            .occurrences
            .sort_by_key(|o| (o.span.file, o.span.start));
        // The checker may resolve a label more than once; one occurrence is one place.
        index
            .occurrences
            .dedup_by(|a, b| a.span == b.span && a.key == b.key);
        index
    }

    fn declare(&mut self, item: &ast::Item) {
        let (Some(kind), Some(name)) = (DeclKind::of_item(&item.kind), item.kind.name()) else {
            return;
        };
        let key = SymbolKey {
            kind: kind.into(),
            name: name.name.clone(),
            owner: None,
        };
        self.push_decl(key, name.span, item.span);
        if kind.in_value_namespace() {
            self.values.entry(name.name.clone()).or_insert(kind);
        }
        if let ItemKind::Classifier(c) = &item.kind {
            let labels = c.labels.as_ref().map(|l| l.value.as_slice()).unwrap_or(&[]);
            for label in labels {
                let key = SymbolKey {
                    kind: SymKind::Label,
                    name: label.name.clone(),
                    owner: Some(c.name.name.clone()),
                };
                self.push_decl(key, label.span, label.span);
            }
            self.classifier_labels
                .entry(c.name.name.clone())
                .or_insert_with(|| labels.iter().map(|l| l.name.clone()).collect());
        }
    }

    fn push_decl(&mut self, key: SymbolKey, name_span: Span, item_span: Span) {
        self.occurrences.push(Occurrence {
            key: key.clone(),
            span: name_span,
            is_decl: true,
        });
        self.decls.push(Decl {
            key,
            name_span,
            item_span,
        });
    }

    /// The value-namespace kind of a name, when declared.
    pub fn value_kind(&self, name: &str) -> Option<DeclKind> {
        self.values.get(name).copied()
    }

    /// The first declaration of a symbol.
    pub fn decl(&self, key: &SymbolKey) -> Option<&Decl> {
        self.decls.iter().find(|d| &d.key == key)
    }

    /// Declarations of one kind, in declaration order.
    pub fn decls_of(&self, kind: DeclKind) -> impl Iterator<Item = &Decl> {
        self.decls
            .iter()
            .filter(move |d| d.key.kind == SymKind::Decl(kind))
    }

    /// The occurrence under a byte offset of a file (a name touching the offset on either side).
    pub fn occurrence_at(&self, file: FileId, offset: usize) -> Option<&Occurrence> {
        let hits = self
            .occurrences
            .iter()
            .filter(|o| o.span.file == file && o.span.contains(offset));
        // Prefer the name that starts at or before the offset and ends after it.
        let mut best: Option<&Occurrence> = None;
        for o in hits {
            if best.is_none() || (o.span.end as usize) > offset {
                best = Some(o);
            }
        }
        best
    }

    /// Every occurrence of a symbol, declarations included.
    pub fn occurrences_of<'a>(
        &'a self,
        key: &'a SymbolKey,
    ) -> impl Iterator<Item = &'a Occurrence> {
        self.occurrences.iter().filter(move |o| &o.key == key)
    }

    fn reference(&mut self, kind: DeclKind, ident: &ast::Ident) {
        self.occurrences.push(Occurrence {
            key: SymbolKey {
                kind: kind.into(),
                name: ident.name.clone(),
                owner: None,
            },
            span: ident.span,
            is_decl: false,
        });
    }

    fn resolve_item(&mut self, item: &ast::Item) {
        match &item.kind {
            ItemKind::Model(m) => {
                if let Some(b) = &m.backend {
                    self.reference(DeclKind::Backend, b);
                }
            }
            ItemKind::Signal(s) => self.expr(&s.expr),
            ItemKind::Block(b) => {
                if let Some(w) = &b.when {
                    self.expr(w);
                }
                if let BlockAction::Redirect { model } = &b.action {
                    self.reference(DeclKind::Model, model);
                }
            }
            ItemKind::Route(r) => {
                if let Some(w) = &r.when {
                    self.expr(w);
                }
                for m in r.to.iter().chain(&r.fallbacks) {
                    self.reference(DeclKind::Model, m);
                }
            }
            ItemKind::Cache(c) => {
                if let Some(e) = &c.encoder {
                    self.reference(DeclKind::Encoder, e);
                }
                if let Some(w) = &c.skip_when {
                    self.expr(w);
                }
            }
            ItemKind::Session(s) => {
                for e in s.id.iter().chain(&s.tenant) {
                    self.expr(e);
                }
            }
            ItemKind::Protect(p) => {
                for h in &p.holds {
                    self.expr(&h.when);
                }
            }
            ItemKind::Test(t) => self.test(t),
            ItemKind::Budget(b) => {
                if let Some(ast::BudgetPer::Expr(e)) = &b.per {
                    self.expr(e);
                }
                if let Some(ast::Exceeded::To(model)) = b.exceeded.as_ref().map(|e| &e.value) {
                    self.reference(DeclKind::Model, model);
                }
            }
            ItemKind::Backend(_)
            | ItemKind::Classifier(_)
            | ItemKind::Guard(_)
            | ItemKind::Encoder(_)
            | ItemKind::Detector(_)
            | ItemKind::Failure(_)
            | ItemKind::Router(_) => {}
        }
    }

    fn test(&mut self, t: &ast::Test) {
        for g in &t.givens {
            // `given NAME = SHARE` stubs a budget when NAME is one and no signal is.
            let budget = self.value_kind(&g.signal.name).is_none()
                && self
                    .decls_of(DeclKind::Budget)
                    .any(|d| d.key.name == g.signal.name);
            let kind = if budget {
                DeclKind::Budget
            } else {
                DeclKind::Signal
            };
            self.reference(kind, &g.signal);
            // A bare name given to a signal is a label (resolved by the checker), not a use.
            if !matches!(g.value.kind, ExprKind::Name(_)) {
                self.expr(&g.value);
            }
        }
        if let Some(expect) = &t.expect {
            match &expect.value {
                Expectation::Route { route, model } => {
                    self.reference(DeclKind::Route, route);
                    if let Some(m) = model {
                        self.reference(DeclKind::Model, m);
                    }
                }
                Expectation::Blocked { block, model } => {
                    self.reference(DeclKind::Block, block);
                    if let Some(m) = model {
                        self.reference(DeclKind::Model, m);
                    }
                }
                Expectation::Rejected { budget } => self.reference(DeclKind::Budget, budget),
            }
        }
    }

    fn expr(&mut self, e: &ast::Expr) {
        match &e.kind {
            ExprKind::Name(ident) => {
                if let Some(kind) = self.value_kind(&ident.name) {
                    self.reference(kind, ident);
                }
            }
            ExprKind::Field(inner, _) => self.expr(inner),
            ExprKind::Call(f, args) => {
                if let Some(kind) = self.value_kind(&f.name) {
                    self.reference(kind, f);
                }
                for (i, a) in args.iter().enumerate() {
                    match (&a.kind, f.name.as_str(), i) {
                        (ExprKind::Name(enc), "similarity", 0) => {
                            self.reference(DeclKind::Encoder, enc);
                        }
                        (ExprKind::Name(budget), "budget", 0) => {
                            self.reference(DeclKind::Budget, budget);
                        }
                        _ => self.expr(a),
                    }
                }
            }
            ExprKind::List(items) => {
                for i in items {
                    self.expr(i);
                }
            }
            ExprKind::Unary(_, x) | ExprKind::Paren(x) => self.expr(x),
            // Labels (`is code`, `== math`) come from the checker; see `build`.
            ExprKind::Binary(_, a, b) => {
                self.expr(a);
                self.expr(b);
            }
            ExprKind::Is(x, _) | ExprKind::In(x, _) => self.expr(x),
            ExprKind::Bool(_) | ExprKind::Number(_) | ExprKind::Str(_) | ExprKind::Duration(_) => {}
        }
    }
}
