//! The `.sr` policy language front end: text in, spanned AST and diagnostics out. Nothing here
//! knows what a name means: resolution and types belong to the compiler crate.
//!
//! Modules, and what each owns:
//!
//! - [`span`]: byte spans, [`FileId`] and the [`SourceMap`] of a policy's files;
//! - [`ast`]: the spanned tree of one file, with [`ast::shape`] (comparing trees ignoring
//!   spans, [`ast::EqShape`]) and [`ast::visit`] / [`ast::visit_mut`] (walking them);
//! - [`keywords`]: the language's reserved words and declaration keywords, in one list;
//! - [`parse`](mod@parse): text to tree and syntax diagnostics, never panicking ([`parse()`]);
//! - [`format`](mod@format): the canonical printer with its comments, checked against its own output
//!   ([`format::format_source`]);
//! - [`diagnostic`]: the one [`Diagnostic`] type every phase reports with;
//! - [`codes`]: the table of every diagnostic code and its title;
//! - [`render`]: diagnostics shown to people (ariadne) and machines (JSON).

pub mod ast;
pub mod codes;
pub mod diagnostic;
pub mod format;
pub mod keywords;
pub mod parse;
pub mod render;
pub mod span;

pub use diagnostic::{Diagnostic, Severity};
pub use parse::{parse, Parsed};
pub use span::{FileId, SourceMap, Span, Spanned};
