//! `parse`: the text of one `.sr` file in, its spanned AST and every syntax diagnostic out.
//!
//! The phase runs in three steps, each in its own module:
//! 1. `split` cuts the file into top-level declarations (and collects comments), so that each
//!    declaration is parsed on its own and one error never hides the next declaration;
//! 2. `syntax` runs the pest grammar over each declaration and words its failures;
//! 3. `build` and `rules` (sharing `decl`, with `fields`, `expr` and `literal`) turn the generic
//!    parse tree into the typed AST, reporting unknown, duplicate, missing and malformed fields.
//!
//! `parse` never panics and always returns a tree; a declaration that cannot be read is left out
//! of it, and a field whose value has the wrong form is left `None`.

mod build;
mod decl;
mod expr;
mod fields;
mod literal;
mod rules;
mod split;
mod syntax;

pub use literal::duration_millis;

use crate::ast::File;
use crate::codes;
use crate::diagnostic::Diagnostic;
use crate::span::{FileId, Span};
use pest::iterators::Pair;
use split::ChunkKind;
use syntax::Rule;

/// The outcome of parsing one file: the tree (possibly missing broken declarations) and all
/// diagnostics, in source order.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub file: File,
    pub diagnostics: Vec<Diagnostic>,
}

impl Parsed {
    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Parses the text of one `.sr` file; spans in the result point into `text` under `file`.
pub fn parse(text: &str, file: FileId) -> Parsed {
    let split = split::split(text, file);
    let mut diagnostics = Vec::new();
    let mut items = Vec::new();
    for chunk in &split.chunks {
        match chunk.kind {
            ChunkKind::Stray => diagnostics.push(build::stray(text, chunk, file)),
            ChunkKind::Item => {
                if let Some(at) = chunk.too_deep {
                    diagnostics.push(
                        Diagnostic::error(
                            codes::SYNTAX,
                            format!(
                                "brackets are nested more than {} levels deep",
                                split::MAX_NESTING
                            ),
                            Span::new(file, at, at + 1),
                        )
                        .with_label_message("too deep here")
                        .with_help("split the expression into several signals"),
                    );
                    continue;
                }
                match syntax::parse_chunk(text, chunk, file) {
                    Ok(pair) => {
                        let mut cx = Ctx {
                            file,
                            base: chunk.start,
                            diagnostics: &mut diagnostics,
                        };
                        if let Some(item) = build::item(&mut cx, pair) {
                            items.push(item);
                        }
                    }
                    Err(diagnostic) => diagnostics.push(*diagnostic),
                }
            }
        }
    }
    diagnostics.sort_by_key(|d| {
        let span = d.primary_span();
        (span.start, span.end)
    });
    Parsed {
        file: File {
            items,
            comments: split.comments,
        },
        diagnostics,
    }
}

/// What every builder needs: where the current declaration sits, and where errors go.
pub(crate) struct Ctx<'d> {
    pub file: FileId,
    /// Byte offset of the current declaration in the file; pest positions are relative to it.
    pub base: usize,
    pub diagnostics: &'d mut Vec<Diagnostic>,
}

impl Ctx<'_> {
    /// The exact span of a pair: pest lets a rule that ends in an optional or repeated part
    /// keep the whitespace (and comments) skipped before it, so the end is taken from the pair's
    /// last token instead.
    pub fn span(&self, pair: &Pair<'_, Rule>) -> Span {
        let start = pair.as_span().start();
        let mut last = pair.clone();
        while let Some(inner) = last.clone().into_inner().last() {
            last = inner;
        }
        let end = last.as_span().end().max(start);
        Span::new(self.file, self.base + start, self.base + end)
    }

    pub fn report(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }
}
