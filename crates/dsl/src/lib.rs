//! The `.sr` policy language front end: text in, spanned AST and diagnostics out.
//!
//! `parse` turns one file into an [`ast::File`]; `format` prints a file back canonically with its
//! comments; `render` shows diagnostics to people (ariadne) and machines (JSON). Nothing here
//! knows what a name means: resolution and types belong to the compiler crate.

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
