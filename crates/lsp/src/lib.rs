//! The language server for `.sr` policies (`src lsp`).
//!
//! It publishes the diagnostics of `src check` for the whole policy directory of each open file
//! (open buffers override what is on disk, and files changed on disk are read again when the
//! client reports them), and answers hover, go to definition, references, rename, symbols,
//! completion, formatting, quick fixes and "run tests" code lenses. Spans stay byte offsets
//! until [`position`] turns them into the protocol's UTF-16 positions.
//!
//! The modules split by concern: [`server`] owns the loop and the debounce, `requests`
//! dispatches, [`workspace`] gathers and analyses policies, [`watch`] follows files changed on
//! disk, [`runs`] runs tests off the server thread, and each feature has its module.

// `lsp_types::WorkspaceEdit` keys its edits by `Uri`, whose parsed form clippy sees as interior
// mutability; `Uri` hashes and compares by its immutable string, so the map is sound.
#![expect(
    clippy::mutable_key_type,
    reason = "`Uri` keys hash and compare by their immutable string"
)]

pub mod actions;
pub mod builtins;
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
pub mod types;
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

/// Why the server stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum LspError {
    #[error("language server protocol error: {0}")]
    Protocol(#[from] lsp_server::ProtocolError),
    #[error("language server i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("cannot encode a message: {0}")]
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
