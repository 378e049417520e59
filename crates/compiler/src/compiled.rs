//! `compile`: a checked policy becomes a [`CompiledPolicy`], the immutable value the runtime
//! swaps in on reload and `src test` runs.
//!
//! Besides the lowered program and its engine, compiling prepares everything a request would
//! otherwise rebuild: one phrase automaton per phrase-list atom (the split phrase words of a
//! `fuzzy` list), one regex per regex atom, which atoms a `block` depends on (a failing model
//! behind a block fails closed by default), and the [`target`] table of what a request's `model`
//! names.

pub mod target;

use crate::engine::{DecisionEngine, EngineKind, Interpreter};
use crate::hir::CheckedPolicy;
use crate::ir::{lower, Atom, Inst, LowerError, NodeId, Program};
use crate::jit::{JitError, JitPolicy};
use crate::pii::Recognizers;
use crate::text::{FuzzySet, PhraseSet};
use regex::Regex;
use std::collections::HashMap;
use std::sync::Arc;
use target::Target;

#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error(transparent)]
    Lower(#[from] LowerError),
    #[error(transparent)]
    Jit(#[from] JitError),
    #[error("the personal data recognizers do not compile: {0}")]
    Pii(crate::pii::BuildError),
    #[error("regular expression {regex:?} does not compile: {message}")]
    Regex { regex: String, message: String },
}

/// Counts the tokens of a text for `tokens(TEXT)` (a declared tokenizer); without one the
/// documented estimate is used.
pub type TokenCounter = Arc<dyn Fn(&str) -> i64 + Send + Sync>;

/// What an atom needs at request time, prepared once.
#[derive(Debug, Clone)]
pub(crate) enum Matcher {
    None,
    Phrases(PhraseSet),
    /// Boxed: a fuzzy list carries its tables inline, several times the other variants.
    Fuzzy(Box<FuzzySet>),
    Regex(Regex),
    /// Boxed like `Fuzzy`: the recognizers carry a regex set and one regex per type.
    Pii(Box<Recognizers>),
}

/// A policy ready to evaluate requests. Immutable and `Send + Sync`.
pub struct CompiledPolicy {
    pub checked: CheckedPolicy,
    pub program: Arc<Program>,
    engine: Box<dyn DecisionEngine>,
    kind: EngineKind,
    pub(crate) matchers: Vec<Matcher>,
    /// Per atom: some `block` condition reads it.
    pub(crate) block_atoms: Vec<bool>,
    pub(crate) tokens: Option<TokenCounter>,
    /// What each name a request may put in `model` names.
    targets: HashMap<String, Target>,
}

impl std::fmt::Debug for CompiledPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledPolicy")
            .field("engine", &self.kind)
            .field("slots", &self.program.slot_count())
            .field("atoms", &self.program.atoms().len())
            .field("conditions", &self.program.conds().len())
            .finish_non_exhaustive()
    }
}

/// Lowers `checked` and builds the chosen engine for it.
pub fn compile(checked: CheckedPolicy, engine: EngineKind) -> Result<CompiledPolicy, CompileError> {
    let program = Arc::new(lower(&checked)?);
    let matchers = program
        .atoms()
        .iter()
        .map(|a| prepare(&a.atom))
        .collect::<Result<Vec<_>, _>>()?;
    let block_atoms = block_atoms(&program);
    let targets = target::targets(&checked);
    let kind = engine;
    let engine: Box<dyn DecisionEngine> = match kind {
        EngineKind::Interp => Box::new(Interpreter::new(Arc::clone(&program))),
        EngineKind::Jit => Box::new(JitPolicy::compile(&program)?),
    };
    Ok(CompiledPolicy {
        checked,
        program,
        engine,
        kind,
        matchers,
        block_atoms,
        tokens: None,
        targets,
    })
}

impl CompiledPolicy {
    pub fn engine(&self) -> &dyn DecisionEngine {
        &*self.engine
    }

    pub fn engine_kind(&self) -> EngineKind {
        self.kind
    }

    /// What the `model` value `name` names (`None`: neither a router name nor a declared model
    /// or alias).
    pub fn target(&self, name: &str) -> Option<Target> {
        self.targets.get(name).copied()
    }

    /// Uses `counter` for `tokens(TEXT)` (the policy's declared tokenizer).
    pub fn with_token_counter(mut self, counter: TokenCounter) -> Self {
        self.tokens = Some(counter);
        self
    }
}

fn prepare(atom: &Atom) -> Result<Matcher, CompileError> {
    let regex = |r: &String| {
        Regex::new(r).map_err(|e| CompileError::Regex {
            regex: r.clone(),
            message: e.to_string(),
        })
    };
    Ok(match atom {
        Atom::Contains(_, l)
        | Atom::Hits(_, l)
        | Atom::Density(_, l)
        | Atom::Sequence(_, l)
        | Atom::Bm25(_, l) => Matcher::Phrases(PhraseSet::new(l)),
        Atom::Fuzzy(_, l, min) | Atom::FuzzyHits(_, l, min) => {
            Matcher::Fuzzy(Box::new(FuzzySet::new(l, f64::from_bits(*min))))
        }
        Atom::Count(_, r) | Atom::Matches(_, r) => Matcher::Regex(regex(r)?),
        Atom::Pii(_, types) => Matcher::Pii(Box::new(
            Recognizers::new(types).map_err(CompileError::Pii)?,
        )),
        _ => Matcher::None,
    })
}

/// Which atoms some block condition reads (through `given` nodes too: they are read whenever
/// the signal is not given).
fn block_atoms(program: &Program) -> Vec<bool> {
    let mut used = vec![false; program.atoms().len()];
    let mut seen = vec![false; program.nodes().len()];
    let roots: Vec<NodeId> = program.conds()[..program.block_count()]
        .iter()
        .map(|c| c.root)
        .collect();
    let mut stack = roots;
    while let Some(n) = stack.pop() {
        if std::mem::replace(&mut seen[n.index()], true) {
            continue;
        }
        let inst = &program.nodes()[n.index()].inst;
        if let Inst::Load(slot) = inst {
            if let Some(a) = program.slot_atom(*slot) {
                used[a.index()] = true;
            }
        }
        stack.extend(inst.operands());
    }
    used
}
