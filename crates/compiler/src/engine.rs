//! The two decision engines behind one trait: the reference interpreter and the JIT.
//!
//! The runtime and `src test` hold a `dyn DecisionEngine` and never care which one runs; the
//! choice is made once, when a policy is compiled.

use crate::interp;
use crate::ir::{HoldOutcome, Outcome, Program, Row};
use crate::jit::JitPolicy;
use std::sync::Arc;

/// Scans a row: `decide` over blocks and routes, `hold` over `protect` holds.
pub trait DecisionEngine: Send + Sync {
    fn decide(&self, row: &Row) -> Outcome;
    fn hold(&self, row: &Row) -> HoldOutcome;
}

/// Which engine a compiled policy uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EngineKind {
    Interp,
    #[default]
    Jit,
}

impl EngineKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Interp => "interp",
            EngineKind::Jit => "jit",
        }
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The interpreter as an engine.
#[derive(Debug, Clone)]
pub struct Interpreter {
    program: Arc<Program>,
}

impl Interpreter {
    pub fn new(program: Arc<Program>) -> Interpreter {
        Interpreter { program }
    }
}

impl DecisionEngine for Interpreter {
    fn decide(&self, row: &Row) -> Outcome {
        interp::decide(&self.program, row)
    }

    fn hold(&self, row: &Row) -> HoldOutcome {
        interp::hold(&self.program, row)
    }
}

impl DecisionEngine for JitPolicy {
    fn decide(&self, row: &Row) -> Outcome {
        JitPolicy::decide(self, row)
    }

    fn hold(&self, row: &Row) -> HoldOutcome {
        JitPolicy::hold(self, row)
    }
}

#[cfg(test)]
mod tests;
