//! The `.sr` compiler: a policy directory in, an immutable [`CompiledPolicy`] out, and the two
//! engines that decide requests with it. The modules, phases first, in order:
//!
//! - [`load`](mod@load): `.sr` files from disk, parsed, with their source map.
//! - [`check`](mod@check): names, types, catalogs and model directories; every diagnostic.
//! - [`hir`]: the checked policy: names resolved to table indices, every expression typed.
//! - [`ir`]: `lower` into the one IR both engines run, its listing, the row of slots they read.
//! - [`compiled`]: `compile`: the lowered program with its engine, phrase automata and regexes.
//! - [`engine`]: the [`DecisionEngine`] trait that puts both engines behind one interface.
//! - [`interp`]: the reference interpreter, the executable meaning of the IR.
//! - [`jit`]: the Cranelift JIT; its `abi` module holds the workspace's only `unsafe`.
//! - [`request`]: the facts of one OpenAI-style request that policies read.
//! - [`eval`]: staged evaluation of a request, computing only the atoms its decision needs.
//! - [`procedure`]: the request procedure every front door drives: blocks, the model asked
//!   for, routes, cache and session asks, the order of models to try; IO-free.
//! - [`text`]: the text builtins: phrase matching, `words`, `tokens`, regexes.
//! - [`language`]: `language(TEXT)`: its label set and detector.
//! - [`continuity`]: the switch protocol: how a switch away from a session's pin settles.
//! - [`failover`]: the failover machine: which candidate is sent next, and how attempts end.
//! - [`explain`]: one request decided offline with its trace, for `src explain` and the console.
//! - [`testing`]: a policy's `test` blocks, run offline on a chosen engine.
//! - [`vocabulary`]: the language's builtins (name, signature, doc, snippet), read by the
//!   checker, the language server and the docs' table.
//! - `redis_url`: the Redis store URLs the checker accepts, resolved into the HIR.
//! - `fixture` (unit tests, `fixtures` feature): checked policies built without the parser.

pub mod check;
pub mod compiled;
pub mod continuity;
pub mod engine;
pub mod eval;
pub mod explain;
pub mod failover;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixture;
pub mod hir;
pub mod interp;
pub mod ir;
pub mod jit;
pub mod language;
pub mod load;
pub mod procedure;
mod redis_url;
pub mod request;
pub mod testing;
pub mod text;
pub mod vocabulary;

pub use check::{check, CheckOptions, CheckOutcome, NameTable};
pub use compiled::{compile, CompileError, CompiledPolicy};
pub use engine::{DecisionEngine, EngineKind};
pub use load::{load, LoadError, PolicySource};
pub use procedure::{Decision, Next, Procedure, ProcedureError};
