//! Declaration tables and name lookup: what each name denotes, and the errors of naming.
//!
//! Signals, models, classifiers, guards, encoders and detectors share one namespace because any of them can
//! appear in an expression (`topic`, `strong.cost`, `domain(prompt)`); backends, blocks, routes
//! and tests each have their own, as they are only named where that kind is expected. A name may
//! not be a builtin (`prompt`, `contains`, ...), so an expression never has to guess which one is
//! meant. Duplicates keep the first declaration; later ones are reported and left out of the
//! tables so that every reference resolves to exactly one declaration.

use super::{list_names, Checker};
use src_dsl::ast::{self, Ident, ItemKind};
use src_dsl::{codes, Diagnostic, FileId, Span};
use std::collections::{HashMap, HashSet};

/// The kinds of named declarations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Backend,
    Model,
    Classifier,
    Guard,
    Encoder,
    Detector,
    Signal,
    Block,
    Route,
    Test,
    Budget,
}

impl Kind {
    pub const ALL: [Kind; 11] = [
        Kind::Backend,
        Kind::Model,
        Kind::Classifier,
        Kind::Guard,
        Kind::Encoder,
        Kind::Detector,
        Kind::Signal,
        Kind::Block,
        Kind::Route,
        Kind::Test,
        Kind::Budget,
    ];

    /// The kind an item declares; `None` for a section (`cache`, `session`, ...), which
    /// declares no name.
    pub fn of_item(item: &ItemKind) -> Option<Kind> {
        Some(match item {
            ItemKind::Backend(_) => Kind::Backend,
            ItemKind::Model(_) => Kind::Model,
            ItemKind::Classifier(_) => Kind::Classifier,
            ItemKind::Guard(_) => Kind::Guard,
            ItemKind::Encoder(_) => Kind::Encoder,
            ItemKind::Detector(_) => Kind::Detector,
            ItemKind::Signal(_) => Kind::Signal,
            ItemKind::Block(_) => Kind::Block,
            ItemKind::Route(_) => Kind::Route,
            ItemKind::Test(_) => Kind::Test,
            ItemKind::Budget(_) => Kind::Budget,
            ItemKind::Cache(_)
            | ItemKind::Session(_)
            | ItemKind::Protect(_)
            | ItemKind::Failure(_)
            | ItemKind::Router(_) => return None,
        })
    }

    /// The kind's keyword: `model`, `signal`.
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Backend => "backend",
            Kind::Model => "model",
            Kind::Classifier => "classifier",
            Kind::Guard => "guard",
            Kind::Encoder => "encoder",
            Kind::Detector => "detector",
            Kind::Signal => "signal",
            Kind::Block => "block",
            Kind::Route => "route",
            Kind::Test => "test",
            Kind::Budget => "budget",
        }
    }

    /// "a model", "an encoder".
    pub(super) fn article(self) -> &'static str {
        match self {
            Kind::Encoder => "an encoder",
            Kind::Backend => "a backend",
            Kind::Model => "a model",
            Kind::Classifier => "a classifier",
            Kind::Guard => "a guard",
            Kind::Detector => "a detector",
            Kind::Signal => "a signal",
            Kind::Block => "a block",
            Kind::Route => "a route",
            Kind::Test => "a test",
            Kind::Budget => "a budget",
        }
    }

    /// Whether names of this kind can stand in expressions (and so share one namespace).
    pub fn in_value_namespace(self) -> bool {
        matches!(
            self,
            Kind::Model
                | Kind::Classifier
                | Kind::Guard
                | Kind::Encoder
                | Kind::Detector
                | Kind::Signal
        )
    }
}

/// Builtin functions and values, which no declaration in the expression namespace may take.
fn is_builtin(name: &str) -> bool {
    crate::vocabulary::is_reserved(name)
}

/// One named declaration of a kind, by its index in that kind's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sym {
    pub kind: Kind,
    pub index: usize,
}

/// Every declaration of the policy, duplicates left out, in declaration order (files in
/// lexicographic order of their names).
#[derive(Default)]
pub(super) struct Decls<'a> {
    pub backends: Vec<&'a ast::Backend>,
    pub models: Vec<&'a ast::Model>,
    pub classifiers: Vec<&'a ast::Classifier>,
    pub guards: Vec<&'a ast::Guard>,
    pub encoders: Vec<&'a ast::Encoder>,
    pub detectors: Vec<&'a ast::Detector>,
    pub signals: Vec<&'a ast::Signal>,
    pub blocks: Vec<&'a ast::Block>,
    pub routes: Vec<&'a ast::Route>,
    pub tests: Vec<&'a ast::Test>,
    pub budgets: Vec<&'a ast::Budget>,
    /// Singleton sections with the span of the whole section.
    pub cache: Option<(&'a ast::Cache, Span)>,
    pub session: Option<(&'a ast::Session, Span)>,
    pub protect: Option<(&'a ast::Protect, Span)>,
    pub failure: Option<(&'a ast::Failure, Span)>,
    pub router: Option<(&'a ast::Router, Span)>,
    /// Signals, models, classifiers, guards, encoders, detectors.
    values: HashMap<&'a str, Sym>,
    backend_names: HashMap<&'a str, usize>,
    block_names: HashMap<&'a str, usize>,
    route_names: HashMap<&'a str, usize>,
    test_names: HashMap<&'a str, usize>,
    budget_names: HashMap<&'a str, usize>,
    /// Names declared more than once, or declared with a builtin's name: a use of one that
    /// does not fit what the name resolves to may have meant the other declaration, so it is not
    /// reported again.
    duplicated: HashSet<&'a str>,
    /// Where the policy starts, for diagnostics about something missing altogether.
    pub start: Span,
}

impl<'a> Decls<'a> {
    /// Builds the tables, reporting duplicate names (E010), duplicate sections (E012) and
    /// builtin names used for declarations (E015).
    pub(super) fn collect(files: &'a [(FileId, ast::File)], diags: &mut Vec<Diagnostic>) -> Self {
        let mut d = Decls::default();
        if let Some((file, _)) = files.first() {
            d.start = Span::new(*file, 0, 0);
        }
        for (_, file) in files {
            for item in &file.items {
                d.add(item, diags);
            }
        }
        d
    }

    fn add(&mut self, item: &'a ast::Item, diags: &mut Vec<Diagnostic>) {
        let Some(kind) = Kind::of_item(&item.kind) else {
            match &item.kind {
                ItemKind::Cache(c) => section(&mut self.cache, c, item, diags),
                ItemKind::Session(s) => section(&mut self.session, s, item, diags),
                ItemKind::Protect(p) => section(&mut self.protect, p, item, diags),
                ItemKind::Failure(f) => section(&mut self.failure, f, item, diags),
                ItemKind::Router(r) => section(&mut self.router, r, item, diags),
                _ => {}
            }
            return;
        };
        let Some(name) = item.kind.name() else {
            return;
        };
        if kind.in_value_namespace() && is_builtin(&name.name) {
            self.duplicated.insert(&name.name);
            diags.push(
                Diagnostic::error(
                    codes::RESERVED_NAME,
                    format!("`{}` is a builtin name", name.name),
                    name.span,
                )
                .with_label_message(format!("cannot name {} `{}`", kind.article(), name.name))
                .with_help(format!("rename the {}", kind.noun())),
            );
            return;
        }
        if let Some(first) = self.first_span(kind, &name.name) {
            self.duplicated.insert(&name.name);
            let message = match self.lookup_any(&name.name) {
                Some(other) if other.kind != kind => format!(
                    "`{}` is already declared as {}",
                    name.name,
                    other.kind.article()
                ),
                _ => format!("`{}` is declared twice", name.name),
            };
            diags.push(
                Diagnostic::error(codes::DUPLICATE_NAME, message, name.span)
                    .with_label_message("declared again here")
                    .with_secondary(first, "first declared here")
                    .with_help(format!(
                        "rename one of them, or remove this {}",
                        kind.noun()
                    )),
            );
            return;
        }
        let index = match &item.kind {
            ItemKind::Backend(x) => push(&mut self.backends, x),
            ItemKind::Model(x) => push(&mut self.models, x),
            ItemKind::Classifier(x) => push(&mut self.classifiers, x),
            ItemKind::Guard(x) => push(&mut self.guards, x),
            ItemKind::Encoder(x) => push(&mut self.encoders, x),
            ItemKind::Detector(x) => push(&mut self.detectors, x),
            ItemKind::Signal(x) => push(&mut self.signals, x),
            ItemKind::Block(x) => push(&mut self.blocks, x),
            ItemKind::Route(x) => push(&mut self.routes, x),
            ItemKind::Test(x) => push(&mut self.tests, x),
            ItemKind::Budget(x) => push(&mut self.budgets, x),
            _ => return,
        };
        let key = name.name.as_str();
        match kind {
            Kind::Backend => self.backend_names.insert(key, index),
            Kind::Block => self.block_names.insert(key, index),
            Kind::Route => self.route_names.insert(key, index),
            Kind::Test => self.test_names.insert(key, index),
            Kind::Budget => self.budget_names.insert(key, index),
            _ => self
                .values
                .insert(key, Sym { kind, index })
                .map(|s| s.index),
        };
    }

    /// The span of an earlier declaration `name` would clash with.
    fn first_span(&self, kind: Kind, name: &str) -> Option<Span> {
        let index = match kind {
            Kind::Backend => self.backend_names.get(name).copied(),
            Kind::Block => self.block_names.get(name).copied(),
            Kind::Route => self.route_names.get(name).copied(),
            Kind::Test => self.test_names.get(name).copied(),
            Kind::Budget => self.budget_names.get(name).copied(),
            _ => {
                let sym = self.values.get(name)?;
                return Some(self.name_of(*sym).span);
            }
        }?;
        Some(self.name_of(Sym { kind, index }).span)
    }

    /// The declared name of a symbol.
    pub(super) fn name_of(&self, sym: Sym) -> &'a Ident {
        match sym.kind {
            Kind::Backend => &self.backends[sym.index].name,
            Kind::Model => &self.models[sym.index].name,
            Kind::Classifier => &self.classifiers[sym.index].name,
            Kind::Guard => &self.guards[sym.index].name,
            Kind::Encoder => &self.encoders[sym.index].name,
            Kind::Detector => &self.detectors[sym.index].name,
            Kind::Signal => &self.signals[sym.index].name,
            Kind::Block => &self.blocks[sym.index].name,
            Kind::Route => &self.routes[sym.index].name,
            Kind::Test => &self.tests[sym.index].name,
            Kind::Budget => &self.budgets[sym.index].name,
        }
    }

    /// Whether a name was declared more than once (see `duplicated`).
    pub(super) fn is_duplicated(&self, name: &str) -> bool {
        self.duplicated.contains(name)
    }

    /// A name in the expression namespace.
    pub(super) fn value(&self, name: &str) -> Option<Sym> {
        self.values.get(name).copied()
    }

    /// A name in the namespace of `kind`, if it is declared as that kind.
    pub(super) fn get(&self, kind: Kind, name: &str) -> Option<usize> {
        match kind {
            Kind::Backend => self.backend_names.get(name).copied(),
            Kind::Block => self.block_names.get(name).copied(),
            Kind::Route => self.route_names.get(name).copied(),
            Kind::Test => self.test_names.get(name).copied(),
            Kind::Budget => self.budget_names.get(name).copied(),
            _ => self
                .values
                .get(name)
                .filter(|s| s.kind == kind)
                .map(|s| s.index),
        }
    }

    /// What a name denotes in any namespace (expression names first).
    pub(super) fn lookup_any(&self, name: &str) -> Option<Sym> {
        if let Some(sym) = self.values.get(name) {
            return Some(*sym);
        }
        let tables = [
            (Kind::Route, &self.route_names),
            (Kind::Block, &self.block_names),
            (Kind::Backend, &self.backend_names),
            (Kind::Test, &self.test_names),
            (Kind::Budget, &self.budget_names),
        ];
        tables
            .into_iter()
            .find_map(|(kind, t)| t.get(name).map(|&index| Sym { kind, index }))
    }

    /// Names of one kind, in declaration order.
    pub(super) fn names_of(&self, kind: Kind) -> Vec<&'a str> {
        fn names<'x, T>(v: &[&'x T], name: impl Fn(&'x T) -> &'x Ident) -> Vec<&'x str> {
            v.iter().map(|x| name(x).name.as_str()).collect()
        }
        match kind {
            Kind::Backend => names(&self.backends, |x| &x.name),
            Kind::Model => names(&self.models, |x| &x.name),
            Kind::Classifier => names(&self.classifiers, |x| &x.name),
            Kind::Guard => names(&self.guards, |x| &x.name),
            Kind::Encoder => names(&self.encoders, |x| &x.name),
            Kind::Detector => names(&self.detectors, |x| &x.name),
            Kind::Signal => names(&self.signals, |x| &x.name),
            Kind::Block => names(&self.blocks, |x| &x.name),
            Kind::Route => names(&self.routes, |x| &x.name),
            Kind::Test => names(&self.tests, |x| &x.name),
            Kind::Budget => names(&self.budgets, |x| &x.name),
        }
    }
}

fn push<'a, T>(v: &mut Vec<&'a T>, x: &'a T) -> usize {
    v.push(x);
    v.len() - 1
}

fn section<'a, T>(
    slot: &mut Option<(&'a T, Span)>,
    value: &'a T,
    item: &'a ast::Item,
    diags: &mut Vec<Diagnostic>,
) {
    let keyword = item.kind.keyword();
    match slot {
        Some((_, first)) => diags.push(
            Diagnostic::error(
                codes::DUPLICATE_SECTION,
                format!("`{keyword}` is declared twice"),
                keyword_span(item),
            )
            .with_label_message("declared again here")
            .with_secondary(keyword_span_of(*first, keyword), "first declared here")
            .with_help(format!(
                "a policy has at most one `{keyword}`: merge the two into one"
            )),
        ),
        None => *slot = Some((value, item.span)),
    }
}

fn keyword_span(item: &ast::Item) -> Span {
    keyword_span_of(item.span, item.kind.keyword())
}

fn keyword_span_of(span: Span, keyword: &str) -> Span {
    let end = (span.start as usize + keyword.len()).min(span.end as usize);
    Span::new(span.file, span.start as usize, end)
}

/// The candidate closest to `name`, when it is close enough to be a likely typo: a
/// case-insensitive match, or at most a third of the name's length in edits. The checker's
/// did-you-mean, and the one for names that tools take on their command line.
pub fn nearest<'c>(name: &str, candidates: impl IntoIterator<Item = &'c str>) -> Option<&'c str> {
    let lower = name.to_lowercase();
    let limit = (name.chars().count() / 3).max(1);
    let mut best: Option<(usize, &'c str)> = None;
    for c in candidates {
        if c == name {
            continue;
        }
        // Optimal string alignment: a swap of two letters (`maht`) is one edit.
        let d = strsim::osa_distance(&lower, &c.to_lowercase());
        if d > limit {
            continue;
        }
        let better = match best {
            None => true,
            Some((bd, bc)) => d < bd || (d == bd && c < bc),
        };
        if better {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// The candidate most similar to `target` by normalised edit distance, when at least half of it
/// matches (for catalog ids, which are long and often differ only in a version or a case).
pub(super) fn most_similar<'c>(
    target: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<&'c str> {
    let lower = target.to_lowercase();
    let mut best: Option<(f64, &'c str)> = None;
    for c in candidates {
        let s = strsim::normalized_levenshtein(&lower, &c.to_lowercase());
        if s < 0.5 {
            continue;
        }
        if best.is_none_or(|(bs, bc)| s > bs || (s == bs && c < bc)) {
            best = Some((s, c));
        }
    }
    best.map(|(_, c)| c)
}

impl Checker<'_> {
    /// Resolves a name that must denote a declaration of `want`, reporting E013 when it names
    /// another kind and E011 (with a did-you-mean among names of `want`) when it names nothing.
    pub(super) fn resolve(&mut self, ident: &Ident, want: Kind) -> Option<usize> {
        if let Some(index) = self.decls.get(want, &ident.name) {
            return Some(index);
        }
        if self.decls.is_duplicated(&ident.name) {
            return None;
        }
        if let Some(other) = self.decls.lookup_any(&ident.name) {
            let d = Diagnostic::error(
                codes::WRONG_KIND,
                format!(
                    "`{}` is {}, not {}",
                    ident.name,
                    other.kind.article(),
                    want.article()
                ),
                ident.span,
            )
            .with_label_message(format!("expected {}", want.article()))
            .with_secondary(
                self.decls.name_of(other).span,
                format!("`{}` is declared here", ident.name),
            );
            let d = self.with_suggestion(d, ident, &self.decls.names_of(want));
            self.report(d);
            return None;
        }
        self.unknown(ident, want.noun(), &self.decls.names_of(want));
        None
    }

    /// Reports E011 for `ident`, suggesting the nearest of `candidates`.
    pub(super) fn unknown(&mut self, ident: &Ident, what: &str, candidates: &[&str]) {
        let d = Diagnostic::error(
            codes::UNKNOWN_NAME,
            format!("unknown {what} `{}`", ident.name),
            ident.span,
        )
        .with_label_message(format!("no {what} of this name"));
        let d = match self.with_suggestion(d, ident, candidates) {
            d if d.help.is_some() => d,
            d if candidates.is_empty() => d.with_help(format!("no {what} is declared")),
            d if candidates.len() <= 8 => {
                d.with_help(format!("declared: {}", list_names(candidates)))
            }
            d => d,
        };
        self.report(d);
    }

    /// Adds "did you mean" help and its fix when a candidate is close to `ident`.
    pub(super) fn with_suggestion(
        &self,
        d: Diagnostic,
        ident: &Ident,
        candidates: &[&str],
    ) -> Diagnostic {
        match nearest(&ident.name, candidates.iter().copied()) {
            Some(s) => d
                .with_help(format!("did you mean `{s}`?"))
                .with_fix(ident.span, s),
            None => d,
        }
    }
}
