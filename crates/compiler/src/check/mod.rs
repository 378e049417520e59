//! `check`: a parsed policy in, a [`CheckedPolicy`] (or every reason there is none) out.
//!
//! The phase resolves every name, types every expression, reads the deployment data the policy
//! points at (backend catalogs, model directories, test fixtures) and warns about parts that can
//! never matter. It never stops at the first problem: each step records what it could resolve and
//! marks the rest as poisoned (`None`), so one unknown name yields one diagnostic, not one per
//! use. The steps live in sibling modules, each an `impl Checker` block over the shared state
//! defined here:
//!
//! - `names`: the declaration tables, duplicate and reserved names, did-you-mean lookups;
//! - `decls`: backends, models, classifiers, guards and encoders;
//! - `signals`: dependency order, cycles, and signal typing;
//! - `types`, `builtins`, `labels`: expression typing;
//! - `routes` (ordering and priorities) and `implication` (routes that can never win);
//! - `sections`: `block`, `cache`, `session`, `protect`, `failure`, `router`;
//! - `wire`: what the server sends over the network (URLs, served ids, headers);
//! - `cases`: `test` declarations; `catalog`: files on disk; `unused`: unused warnings;
//! - `apis`: routes whose every model is on an Anthropic backend (Messages requests only);
//! - `name_table`: the names and types handed out with the outcome, for editors.

mod apis;
mod approximate;
mod budgets;
mod builtins;
mod cases;
mod catalog;
mod credentials;
mod decls;
mod detectors;
mod implication;
mod labels;
mod milvus;
mod name_table;
mod names;
mod pii;
mod routes;
mod sections;
mod signals;
mod stores;
mod types;
mod unused;
mod windows;
mod wire;

use crate::hir::{
    BackendDef, BlockDef, BudgetDef, CacheDef, CheckedPolicy, ClassifierDef, DetectorDef,
    EncoderDef, FailureDef, GuardDef, ModelDef, ProtectDef, RouteDef, RouterDef, SessionDef,
    SignalDef, TExpr, TestDef,
};
use crate::load::PolicySource;
pub use catalog::parse_catalog;
pub use name_table::{LabelUse, NameEntry, NameTable};
use names::Decls;
pub use names::{nearest, Kind as DeclKind};
use src_dsl::{Diagnostic, SourceMap};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// What `check` may be told besides the policy itself.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// Backend name to a catalog file (its `GET /v1/models` answer) used instead of the one the
    /// policy declares; the path is taken as given, not relative to the policy.
    pub catalog_overrides: HashMap<String, PathBuf>,
    /// Backend name to the catalog its URL answered just now (`src check --live`); takes
    /// precedence over files. The checker does no I/O for these: the caller asked.
    pub live_catalogs: HashMap<String, LiveCatalog>,
}

/// A backend's `GET {url}/models`, asked by the caller of `check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveCatalog {
    /// What was asked, for messages: the full URL.
    pub url: String,
    /// The answer's body, or why there is none (unreachable, an error status).
    pub answer: Result<String, String>,
}

/// The result of `check`: the checked policy when there are no errors, every diagnostic (the
/// parser's first, then the checker's, each sorted by file and offset), and the names as far as
/// they resolved.
#[derive(Debug, Clone)]
pub struct CheckOutcome {
    pub policy: Option<CheckedPolicy>,
    pub diagnostics: Vec<Diagnostic>,
    /// Partial when there are errors: what did resolve, for editors.
    pub names: NameTable,
}

impl CheckOutcome {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Checks a loaded policy.
pub fn check(source: PolicySource, options: &CheckOptions) -> CheckOutcome {
    let PolicySource {
        sources,
        root,
        files,
        diagnostics,
    } = source;
    let parsed = diagnostics.len();
    let (parts, mut diagnostics, names) = {
        let mut cx = Checker::new(&sources, &root, options, &files, diagnostics);
        cx.run();
        let names = cx.name_table();
        (cx.parts, cx.diags, names)
    };
    // What the parser found comes first: a declaration it could not read is missing from the
    // checker's view, so the checker's complaints about it (an unused signal, a model never
    // selected, a missing default route) follow from it. A stable sort keeps the emission order
    // of diagnostics at the same place.
    let in_order = |d: &Diagnostic| {
        let span = d.primary_span();
        (span.file, span.start)
    };
    let mut checked = diagnostics.split_off(parsed.min(diagnostics.len()));
    diagnostics.sort_by_key(in_order);
    checked.sort_by_key(in_order);
    diagnostics.append(&mut checked);
    let policy = if diagnostics.iter().any(Diagnostic::is_error) {
        None
    } else {
        parts.assemble(sources, root)
    };
    CheckOutcome {
        policy,
        diagnostics,
        names,
    }
}

/// The pieces of the checked policy as they are produced; `None` where a part had errors.
#[derive(Default)]
struct Parts {
    backends: Vec<BackendDef>,
    models: Vec<Option<ModelDef>>,
    classifiers: Vec<ClassifierDef>,
    guards: Vec<GuardDef>,
    encoders: Vec<EncoderDef>,
    detectors: Vec<DetectorDef>,
    /// By `SignalId` (dependency order).
    signals: Vec<Option<SignalDef>>,
    blocks: Vec<Option<BlockDef>>,
    /// Sorted: descending priority, the default last.
    routes: Vec<Option<RouteDef>>,
    cache: Option<Option<CacheDef>>,
    session: Option<Option<SessionDef>>,
    protect: Option<Option<ProtectDef>>,
    failure: Option<FailureDef>,
    router: Option<RouterDef>,
    tests: Vec<Option<TestDef>>,
    budgets: Vec<Option<BudgetDef>>,
}

impl Parts {
    fn assemble(self, sources: SourceMap, root: PathBuf) -> Option<CheckedPolicy> {
        Some(CheckedPolicy {
            sources,
            root,
            backends: self.backends,
            models: self.models.into_iter().collect::<Option<_>>()?,
            classifiers: self.classifiers,
            guards: self.guards,
            encoders: self.encoders,
            detectors: self.detectors,
            signals: self.signals.into_iter().collect::<Option<_>>()?,
            blocks: self.blocks.into_iter().collect::<Option<_>>()?,
            routes: self.routes.into_iter().collect::<Option<_>>()?,
            cache: self.cache.map_or(Some(None), |c| c.map(Some))?,
            session: self.session.map_or(Some(None), |s| s.map(Some))?,
            protect: self.protect.map_or(Some(None), |p| p.map(Some))?,
            failure: self.failure?,
            router: self.router?,
            tests: self.tests.into_iter().collect::<Option<_>>()?,
            budgets: self.budgets.into_iter().collect::<Option<_>>()?,
        })
    }
}

/// Which expressions may use `pinned`, `proposed` and `outcomes(pinned)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Normal,
    Protect,
}

/// What was referenced from where, for the unused-declaration warnings.
#[derive(Debug, Default)]
struct Uses {
    /// By signal declaration index: used by a condition or another signal (not by `given`).
    signals: Vec<bool>,
    classifiers: Vec<bool>,
    guards: Vec<bool>,
    encoders: Vec<bool>,
    detectors: Vec<bool>,
    /// Selected by a route, a fallback, a block redirect or a test's `model`.
    models: Vec<bool>,
}

/// The state every checking step shares.
struct Checker<'a> {
    sources: &'a SourceMap,
    root: &'a Path,
    options: &'a CheckOptions,
    diags: Vec<Diagnostic>,
    decls: Decls<'a>,
    parts: Parts,
    uses: Uses,
    scope: Scope,
    /// Labels of each classifier, by `ClassifierId` (as declared; empty when missing).
    class_labels: Vec<Vec<String>>,
    /// Signal type by declaration index; `None` until typed, and for signals with errors.
    signal_types: Vec<Option<crate::hir::Type>>,
    /// `SignalId` (position in dependency order) by declaration index.
    signal_ids: Vec<crate::hir::SignalId>,
    /// Signal declaration indices referenced while typing the current signal.
    signal_deps: Option<Vec<usize>>,
    /// Typed definitions by `SignalId`, kept for test reachability and route implication.
    signal_exprs: Vec<Option<TExpr>>,
    /// Declaration indices of the routes in checked order (descending priority, default last).
    route_order: Vec<usize>,
    /// Labels written against class values, for the [`NameTable`].
    label_uses: Vec<LabelUse>,
}

impl<'a> Checker<'a> {
    fn new(
        sources: &'a SourceMap,
        root: &'a Path,
        options: &'a CheckOptions,
        files: &'a [(src_dsl::FileId, src_dsl::ast::File)],
        mut diags: Vec<Diagnostic>,
    ) -> Self {
        let decls = Decls::collect(files, &mut diags);
        let uses = Uses {
            signals: vec![false; decls.signals.len()],
            classifiers: vec![false; decls.classifiers.len()],
            guards: vec![false; decls.guards.len()],
            encoders: vec![false; decls.encoders.len()],
            detectors: vec![false; decls.detectors.len()],
            models: vec![false; decls.models.len()],
        };
        Checker {
            sources,
            root,
            options,
            diags,
            decls,
            parts: Parts::default(),
            uses,
            scope: Scope::Normal,
            class_labels: Vec::new(),
            signal_types: Vec::new(),
            signal_ids: Vec::new(),
            signal_deps: None,
            signal_exprs: Vec::new(),
            route_order: Vec::new(),
            label_uses: Vec::new(),
        }
    }

    fn report(&mut self, diagnostic: Diagnostic) {
        self.diags.push(diagnostic);
    }

    fn error_count(&self) -> usize {
        self.diags.iter().filter(|d| d.is_error()).count()
    }

    fn run(&mut self) {
        self.check_backends();
        self.check_models();
        self.check_model_sources();
        self.check_detectors();
        self.check_signals();
        self.check_budgets();
        self.check_blocks();
        self.check_routes();
        self.check_sections();
        self.check_tests();
        self.check_deployment_files();
        if self.error_count() == 0 {
            self.check_shadowed_routes();
        }
        self.check_apis();
        self.check_unused();
        self.check_client_credentials();
        if self.error_count() == 0 {
            self.check_model_windows();
        }
    }

    /// A path written in the policy, resolved against the policy root.
    fn resolve_path(&self, written: &str) -> PathBuf {
        self.root.join(written)
    }
}

/// `a`, `b` and `c` (each in backticks), for messages.
fn list_names<S: AsRef<str>>(names: &[S]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{}`", n.as_ref())).collect();
    match quoted.len() {
        0 => String::new(),
        1 => quoted[0].clone(),
        n => format!("{} and {}", quoted[..n - 1].join(", "), quoted[n - 1]),
    }
}

/// Like [`list_names`], but at most `max` names, then "and N more".
fn list_some<S: AsRef<str>>(names: &[S], max: usize) -> String {
    if names.len() <= max {
        return list_names(names);
    }
    let shown: Vec<String> = names[..max]
        .iter()
        .map(|n| format!("`{}`", n.as_ref()))
        .collect();
    format!("{} and {} more", shown.join(", "), names.len() - max)
}

/// A string as a `.sr` string literal, for machine-applicable fixes.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod unit_tests;
