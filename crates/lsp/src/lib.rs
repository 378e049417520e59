//! The language server for `.sr` policies (`src lsp`): diagnostics, hover, navigation,
//! completion, formatting, quick fixes and test runs, answered from the same parse and check that
//! `src check` runs. What the language defines (declarations, fields, builtins, types) is read
//! from `src_dsl::keywords`, `src_compiler::vocabulary` and the checker's names, never kept here.
//!
//! - [`server`]: the message loop, the analysis cache, debounced diagnostics, panic isolation;
//! - `requests`: decodes each request and calls its feature, through a small `Host` trait;
//! - [`workspace`]: open documents, the policy each belongs to, and its [`workspace::Analysis`];
//! - [`diagnostics`]: the checker's diagnostics as LSP diagnostics, file by file;
//! - [`symbols`]: every declaration and use of a name, for navigation and hover;
//! - [`hover`]: what the name under the cursor is;
//! - [`navigate`]: definition, references, rename, document and workspace symbols;
//! - [`completion`]: what fits at the cursor, from its [`lexical`] context;
//! - [`lexical`]: tokens and the enclosing declaration of text that may not parse;
//! - [`actions`]: formatting, quick fixes from diagnostic fixes, "run tests" code lenses;
//! - [`runs`]: test runs on worker threads, answered when they finish;
//! - [`watch`]: the client's file watchers and the policies a changed file affects;
//! - [`position`]: byte offsets to and from the protocol's UTF-16 positions;
//! - [`uri`]: `file:` URIs to and from paths.

// `lsp_types::WorkspaceEdit` keys its edits by `Uri`, whose parsed form clippy sees as interior
// mutability; `Uri` hashes and compares by its immutable string, so the map is sound.
#![expect(
    clippy::mutable_key_type,
    reason = "`Uri` keys hash and compare by their immutable string"
)]

pub mod actions;
pub mod completion;
pub mod diagnostics;
pub mod hover;
pub mod lexical;
pub mod navigate;
pub mod position;
mod requests;
pub mod runs;
pub mod server;
pub mod symbols;
pub mod uri;
pub mod watch;
pub mod workspace;

pub use runs::RunHook;
pub use server::{serve, Config};

use lsp_types::{
    CodeActionKind, CodeActionOptions, CodeActionProviderCapability, CodeLensOptions,
    CompletionOptions, ExecuteCommandOptions, HoverProviderCapability, OneOf, RenameOptions,
    SaveOptions, ServerCapabilities, TextDocumentSyncCapability, TextDocumentSyncKind,
    TextDocumentSyncOptions, TextDocumentSyncSaveOptions,
};

/// Why the server stopped abnormally. The cause of each is its `source`, not part of its
/// message, so that a chain printed whole (`{:#}`) says it once.
#[derive(Debug, thiserror::Error)]
pub enum LspError {
    #[error("language server protocol error")]
    Protocol(#[from] lsp_server::ProtocolError),
    #[error("language server i/o error")]
    Io(#[from] std::io::Error),
    #[error("cannot encode a message")]
    Json(#[from] serde_json::Error),
    #[error("the client disconnected")]
    Disconnected,
}

/// Runs the server on stdin/stdout until the client exits (`src lsp`).
pub fn run_stdio() -> Result<(), LspError> {
    let (connection, io_threads) = lsp_server::Connection::stdio();
    serve(connection, Config::default())?;
    io_threads.join()?;
    Ok(())
}

/// What the server announces in its `initialize` answer.
pub fn capabilities() -> ServerCapabilities {
    ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Options(
            TextDocumentSyncOptions {
                open_close: Some(true),
                change: Some(TextDocumentSyncKind::INCREMENTAL),
                save: Some(TextDocumentSyncSaveOptions::SaveOptions(SaveOptions {
                    include_text: Some(false),
                })),
                ..Default::default()
            },
        )),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        definition_provider: Some(OneOf::Left(true)),
        references_provider: Some(OneOf::Left(true)),
        rename_provider: Some(OneOf::Right(RenameOptions {
            prepare_provider: Some(true),
            work_done_progress_options: Default::default(),
        })),
        document_symbol_provider: Some(OneOf::Left(true)),
        workspace_symbol_provider: Some(OneOf::Left(true)),
        completion_provider: Some(CompletionOptions {
            trigger_characters: Some(vec![" ".into(), ".".into(), "[".into(), ",".into()]),
            ..Default::default()
        }),
        document_formatting_provider: Some(OneOf::Left(true)),
        code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
            code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
            ..Default::default()
        })),
        code_lens_provider: Some(CodeLensOptions {
            resolve_provider: Some(false),
        }),
        execute_command_provider: Some(ExecuteCommandOptions {
            commands: vec![actions::RUN_TESTS.to_string()],
            ..Default::default()
        }),
        ..Default::default()
    }
}
