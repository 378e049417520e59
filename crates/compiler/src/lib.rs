//! The `.sr` compiler: a policy directory in, an immutable [`CompiledPolicy`] out, and the two
//! engines that decide requests with it.
//!
//! The top-level modules form layers: a module uses only modules of lower layers, never one of
//! its own layer or above, so no two modules import each other, however indirectly. Unit tests
//! follow the same rule, so a test that runs two siblings lives in the module above both (the
//! semantics tables that run the interpreter and the JIT are `engine`'s). From the bottom:
//!
//! 0. Leaves, using no other module of the crate:
//!    - [`load`](mod@load): `.sr` files from disk, parsed, with their source map.
//!    - [`text`]: the text builtins: phrase matching, `words`, `tokens`, regexes.
//!    - [`language`]: `language(TEXT)`: its label set and detector.
//!    - [`pii`]: `pii(TEXT, [types])`: the built-in recognizers of personal data and secrets.
//!    - [`bio`]: a `detector` model's BIO labels and the entity types they tag.
//!    - [`request`]: the facts of one OpenAI-style request that policies read.
//!    - `redis_url`: the Redis store URLs the checker accepts, resolved into the HIR.
//!    - `redis_target`: a store's Redis topology (one server, a Cluster, a Sentinel set) over
//!      those URLs.
//! 1. Over the leaves:
//!    - [`hir`]: the checked policy: names resolved to table indices, every expression typed.
//!    - [`lookalike`]: the response cache's check that a stored question asks what the request
//!      asks (numbers, units, dates, polarity, names), over `text`'s folding.
//! 2. Over the HIR:
//!    - [`vocabulary`]: the language's builtins (name, signature, doc, snippet), read by the
//!      checker, the language server and the docs' table.
//!    - `fixture` (unit tests, `fixtures` feature): checked policies built without the parser.
//!    - [`failover`]: the failover machine: which candidate is sent next, and how attempts end.
//!    - [`continuity`]: the switch protocol: how a switch away from a session's pin settles.
//! 3. The phases on either side of the HIR, `check` making it and `lower` reading it:
//!    - [`check`](mod@check): names, types, catalogs and model directories; every diagnostic.
//!    - [`ir`]: `lower` into the one IR both engines run, its listing, the row of slots they
//!      read.
//! 4. The two engines, siblings over the IR:
//!    - [`interp`]: the reference interpreter, the executable meaning of the IR.
//!    - [`jit`]: the Cranelift JIT; its `abi` module holds the workspace's only `unsafe`.
//! 5. [`engine`]: the [`DecisionEngine`] trait that puts both engines behind one interface.
//! 6. [`compiled`]: `compile`: the lowered program with its engine, phrase automata, regexes
//!    and the table of what a request's `model` names.
//! 7. [`eval`]: staged evaluation of a request, computing only the atoms its decision needs.
//! 8. [`procedure`]: the request procedure every front door drives: blocks, the model asked
//!    for, routes, cache and session asks, the order of models to try; IO-free.
//! 9. [`testing`]: a policy's `test` blocks, run offline on a chosen engine.
//! 10. [`explain`]: one request decided offline with its trace, for `src explain` and the
//!     console.

pub mod bio;
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
pub mod lookalike;
mod milvus_target;
pub mod pii;
pub mod procedure;
mod redis_target;
mod redis_url;
pub mod request;
pub mod testing;
pub mod text;
pub mod vocabulary;
pub mod window;

pub use check::{check, CheckOptions, CheckOutcome, NameTable};
pub use compiled::{compile, CompileError, CompiledPolicy};
pub use engine::{DecisionEngine, EngineKind};
pub use load::{load, LoadError, PolicySource};
pub use procedure::{Decision, Next, Procedure, ProcedureError};
