//! The `.sr` compiler: loads a policy directory, resolves names, checks types and deployment data
//! (catalogs, classifier label sets), and turns the checked policy into one IR that a reference
//! interpreter and a Cranelift JIT both execute.

pub mod check;
pub mod compiled;
pub mod engine;
pub mod eval;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixture;
pub mod hir;
pub mod interp;
pub mod ir;
pub mod jit;
pub mod language;
pub mod load;
mod redis_url;
pub mod request;
pub mod testing;
pub mod text;

pub use check::{check, CheckOptions, CheckOutcome};
pub use compiled::{compile, CompileError, CompiledPolicy};
pub use engine::{DecisionEngine, EngineKind};
pub use load::{load, LoadError, PolicySource};
