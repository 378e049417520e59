//! Go to definition, find references, rename and the symbol outlines, over every file of the
//! policy.
//!
//! All of them start from the symbol index: the occurrence under the cursor names a
//! [`SymbolKey`], and its declaration and uses are the occurrences with the same key. A rename
//! is refused unless the new name is an identifier that is neither a keyword nor a builtin.

use crate::symbols::{SymKind, SymbolKey};
use crate::workspace::Analysis;
use lsp_types::{DocumentSymbol, Location, SymbolKind, TextEdit, Uri};
use src_compiler::check::DeclKind;
use src_dsl::ast::ItemKind;
use src_dsl::{FileId, Span};
use std::collections::HashMap;

/// Whether `name` may name a declaration: an identifier that is neither a keyword nor a
/// builtin function or value.
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    let head_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    head_ok
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !src_dsl::keywords::KEYWORDS.contains(&name)
        && !src_compiler::vocabulary::is_reserved(name)
}

/// The key of the symbol under a byte offset.
pub fn key_at(analysis: &Analysis, file: FileId, offset: usize) -> Option<SymbolKey> {
    analysis
        .symbols
        .occurrence_at(file, offset)
        .map(|o| o.key.clone())
}

/// Where the symbol under the cursor is declared.
pub fn definition(analysis: &Analysis, file: FileId, offset: usize) -> Option<Location> {
    let key = key_at(analysis, file, offset)?;
    let decl = analysis.symbols.decl(&key)?;
    analysis.location(decl.name_span)
}

/// Every use of the symbol under the cursor (with its declaration when asked).
pub fn references(
    analysis: &Analysis,
    file: FileId,
    offset: usize,
    include_declaration: bool,
) -> Vec<Location> {
    let Some(key) = key_at(analysis, file, offset) else {
        return Vec::new();
    };
    analysis
        .symbols
        .occurrences_of(&key)
        .filter(|o| include_declaration || !o.is_decl)
        .filter_map(|o| analysis.location(o.span))
        .collect()
}

/// Why a rename was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenameError {
    #[error("nothing to rename here")]
    NoSymbol,
    #[error("`{0}` is not a valid name: use letters, digits and `_`, not a keyword or builtin")]
    InvalidName(String),
}

/// The span of the symbol a rename would start from.
pub fn prepare_rename(analysis: &Analysis, file: FileId, offset: usize) -> Option<Span> {
    analysis
        .symbols
        .occurrence_at(file, offset)
        .filter(|o| analysis.symbols.decl(&o.key).is_some())
        .map(|o| o.span)
}

/// The edits renaming the symbol under the cursor, by file.
pub fn rename(
    analysis: &Analysis,
    file: FileId,
    offset: usize,
    new_name: &str,
) -> Result<HashMap<Uri, Vec<TextEdit>>, RenameError> {
    let key = key_at(analysis, file, offset).ok_or(RenameError::NoSymbol)?;
    if analysis.symbols.decl(&key).is_none() {
        return Err(RenameError::NoSymbol);
    }
    if !is_valid_name(new_name) {
        return Err(RenameError::InvalidName(new_name.to_string()));
    }
    let mut edits: HashMap<Uri, Vec<TextEdit>> = HashMap::new();
    for occ in analysis.symbols.occurrences_of(&key) {
        if let Some(location) = analysis.location(occ.span) {
            edits
                .entry(location.uri)
                .or_default()
                .push(TextEdit::new(location.range, new_name.to_string()));
        }
    }
    Ok(edits)
}

fn lsp_kind(kind: SymKind) -> SymbolKind {
    let SymKind::Decl(kind) = kind else {
        return SymbolKind::ENUM_MEMBER;
    };
    // Exhaustive: a declaration kind the compiler gains must be given an editor symbol kind.
    match kind {
        DeclKind::Backend => SymbolKind::MODULE,
        DeclKind::Model => SymbolKind::CLASS,
        DeclKind::Classifier | DeclKind::Guard | DeclKind::Encoder | DeclKind::Detector => {
            SymbolKind::FUNCTION
        }
        DeclKind::Signal => SymbolKind::VARIABLE,
        DeclKind::Block => SymbolKind::EVENT,
        DeclKind::Route => SymbolKind::METHOD,
        DeclKind::Test => SymbolKind::CONSTANT,
        DeclKind::Budget => SymbolKind::OBJECT,
    }
}

/// The outline of one file: one symbol per declaration (sections under their keyword), labels
/// under their classifier.
#[expect(
    deprecated,
    reason = "`DocumentSymbol::deprecated` must still be written out"
)]
pub fn document_symbols(analysis: &Analysis, file: FileId) -> Vec<DocumentSymbol> {
    let Some(tree) = analysis.tree(file) else {
        return Vec::new();
    };
    let Some(info) = analysis.file_by_id(file) else {
        return Vec::new();
    };
    let text = analysis.text(file);
    let range = |s: Span| info.lines.range(text, s.range());
    let mut out = Vec::new();
    for item in &tree.items {
        let keyword = item.kind.keyword();
        let (name, selection) = match item.kind.name() {
            Some(ident) => (ident.name.clone(), ident.span),
            None => (keyword.to_string(), item.span),
        };
        let kind = analysis
            .symbols
            .decls
            .iter()
            .find(|d| d.item_span == item.span)
            .map(|d| lsp_kind(d.key.kind))
            .unwrap_or(SymbolKind::NAMESPACE);
        let children = match &item.kind {
            ItemKind::Classifier(c) => c.labels.as_ref().map(|labels| {
                labels
                    .value
                    .iter()
                    .map(|l| DocumentSymbol {
                        name: l.name.clone(),
                        detail: Some("label".to_string()),
                        kind: SymbolKind::ENUM_MEMBER,
                        tags: None,
                        deprecated: None,
                        range: range(l.span),
                        selection_range: range(l.span),
                        children: None,
                    })
                    .collect()
            }),
            _ => None,
        };
        out.push(DocumentSymbol {
            name,
            detail: Some(keyword.to_string()),
            kind,
            tags: None,
            deprecated: None,
            range: range(item.span),
            selection_range: range(selection),
            children,
        });
    }
    out
}

/// Declarations of every analysed policy whose name contains the query (case-insensitive).
#[expect(
    deprecated,
    reason = "`SymbolInformation::deprecated` must still be written out"
)]
pub fn workspace_symbols<'a>(
    analyses: impl IntoIterator<Item = &'a Analysis>,
    query: &str,
) -> Vec<lsp_types::SymbolInformation> {
    let query = query.to_lowercase();
    let mut out = Vec::new();
    for analysis in analyses {
        for decl in &analysis.symbols.decls {
            if !decl.key.name.to_lowercase().contains(&query) {
                continue;
            }
            if let Some(location) = analysis.location(decl.name_span) {
                out.push(lsp_types::SymbolInformation {
                    name: decl.key.name.clone(),
                    kind: lsp_kind(decl.key.kind),
                    tags: None,
                    deprecated: None,
                    location,
                    container_name: decl.key.owner.clone(),
                });
            }
        }
    }
    out
}
