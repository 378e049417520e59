//! Request dispatch: decode the parameters, find the document's analysis and byte offset, call
//! the feature module, encode the answer.
//!
//! A request about a file the server does not know (not open, not a policy file on disk)
//! answers `null` or an empty list, never an error: editors ask about all kinds of files.
//!
//! What a request needs from the server (its analyses, its test runner) is the [`Host`] trait,
//! so this module does not depend on the server that calls it.

use crate::actions::{self, RUN_TESTS};
use crate::diagnostics::Checked;
use crate::workspace::{policy_key, Analysis, FileInfo, PolicyKey};
use crate::{completion, hover, navigate};
use lsp_server::{ErrorCode, Request, RequestId, ResponseError};
use lsp_types::request::{self as req, Request as _};
use lsp_types::{
    CodeActionOrCommand, GotoDefinitionResponse, Hover, HoverContents, MarkupContent, MarkupKind,
    Position, PrepareRenameResponse, TextDocumentPositionParams, Uri, WorkspaceEdit,
};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::sync::Arc;

/// What answering requests needs from the server.
pub(crate) trait Host {
    /// The current analysis of a policy.
    fn analysis(&mut self, key: &PolicyKey) -> Arc<Analysis>;
    /// The current analysis of a policy with its diagnostics in LSP form.
    fn checked(&mut self, key: &PolicyKey) -> (Arc<Analysis>, Arc<Checked>);
    /// The latest analysis of a policy in which every file parsed.
    fn last_good(&self, key: &PolicyKey) -> Option<Arc<Analysis>>;
    /// The analyses of every policy with an open document.
    fn all_analyses(&mut self) -> Vec<Arc<Analysis>>;
    /// Hands a test run to a worker, which answers request `id`; false when the runner stopped.
    fn submit_run(&mut self, id: RequestId, analysis: Arc<Analysis>, only: Option<String>) -> bool;
}

fn params<P: DeserializeOwned>(req: Request) -> Result<P, ResponseError> {
    serde_json::from_value(req.params).map_err(|e| ResponseError {
        code: ErrorCode::InvalidParams as i32,
        message: format!("invalid parameters: {e}"),
        data: None,
    })
}

fn encode(value: impl serde::Serialize) -> Result<Value, ResponseError> {
    serde_json::to_value(value).map_err(|e| ResponseError {
        code: ErrorCode::InternalError as i32,
        message: format!("cannot encode the answer: {e}"),
        data: None,
    })
}

fn failed(message: String) -> ResponseError {
    ResponseError {
        code: ErrorCode::RequestFailed as i32,
        message,
        data: None,
    }
}

/// A document's analysis, file and the byte offset of a position in it.
struct At {
    analysis: Arc<Analysis>,
    file: FileInfo,
    offset: usize,
}

fn locate(server: &mut impl Host, uri: &Uri, position: Position) -> Option<At> {
    let analysis = server.analysis(&policy_key(uri));
    let file = analysis.file(uri)?.clone();
    let offset = file.lines.offset(analysis.text(file.id), position);
    Some(At {
        analysis,
        file,
        offset,
    })
}

fn locate_doc(server: &mut impl Host, p: &TextDocumentPositionParams) -> Option<At> {
    locate(server, &p.text_document.uri, p.position)
}

pub(crate) fn dispatch(server: &mut impl Host, request: Request) -> Result<Value, ResponseError> {
    match request.method.as_str() {
        req::HoverRequest::METHOD => {
            let p: lsp_types::HoverParams = params(request)?;
            let Some(at) = locate_doc(server, &p.text_document_position_params) else {
                return Ok(Value::Null);
            };
            let found = hover::hover(&at.analysis, at.file.id, at.offset);
            encode(found.map(|(markdown, span)| Hover {
                contents: HoverContents::Markup(MarkupContent {
                    kind: MarkupKind::Markdown,
                    value: markdown,
                }),
                range: at.analysis.location(span).map(|l| l.range),
            }))
        }
        req::GotoDefinition::METHOD => {
            let p: lsp_types::GotoDefinitionParams = params(request)?;
            let Some(at) = locate_doc(server, &p.text_document_position_params) else {
                return Ok(Value::Null);
            };
            let found = navigate::definition(&at.analysis, at.file.id, at.offset);
            encode(found.map(GotoDefinitionResponse::Scalar))
        }
        req::References::METHOD => {
            let p: lsp_types::ReferenceParams = params(request)?;
            let Some(at) = locate_doc(server, &p.text_document_position) else {
                return Ok(json!([]));
            };
            let include = p.context.include_declaration;
            encode(navigate::references(
                &at.analysis,
                at.file.id,
                at.offset,
                include,
            ))
        }
        req::PrepareRenameRequest::METHOD => {
            let p: TextDocumentPositionParams = params(request)?;
            let Some(at) = locate_doc(server, &p) else {
                return Ok(Value::Null);
            };
            let found = navigate::prepare_rename(&at.analysis, at.file.id, at.offset);
            encode(found.and_then(|span| {
                let l = at.analysis.location(span)?;
                Some(PrepareRenameResponse::Range(l.range))
            }))
        }
        req::Rename::METHOD => {
            let p: lsp_types::RenameParams = params(request)?;
            let Some(at) = locate_doc(server, &p.text_document_position) else {
                return Err(failed("no policy file here".to_string()));
            };
            let edits = navigate::rename(&at.analysis, at.file.id, at.offset, &p.new_name)
                .map_err(|e| failed(e.to_string()))?;
            encode(WorkspaceEdit {
                changes: Some(edits),
                ..Default::default()
            })
        }
        req::DocumentSymbolRequest::METHOD => {
            let p: lsp_types::DocumentSymbolParams = params(request)?;
            let uri = p.text_document.uri;
            let analysis = server.analysis(&policy_key(&uri));
            let Some(file) = analysis.file(&uri) else {
                return Ok(json!([]));
            };
            encode(navigate::document_symbols(&analysis, file.id))
        }
        req::WorkspaceSymbolRequest::METHOD => {
            let p: lsp_types::WorkspaceSymbolParams = params(request)?;
            let analyses = server.all_analyses();
            encode(navigate::workspace_symbols(
                analyses.iter().map(|a| a.as_ref()),
                &p.query,
            ))
        }
        req::Completion::METHOD => {
            let p: lsp_types::CompletionParams = params(request)?;
            let uri = &p.text_document_position.text_document.uri;
            let key = policy_key(uri);
            let Some(at) = locate(server, uri, p.text_document_position.position) else {
                return Ok(json!([]));
            };
            let last_good = server.last_good(&key);
            let mut analyses = vec![at.analysis.as_ref()];
            if let Some(good) = &last_good {
                analyses.push(good.as_ref());
            }
            let text = at.analysis.text(at.file.id);
            encode(completion::complete(text, at.offset, &analyses))
        }
        req::Formatting::METHOD => {
            let p: lsp_types::DocumentFormattingParams = params(request)?;
            let uri = p.text_document.uri;
            let analysis = server.analysis(&policy_key(&uri));
            let Some(file) = analysis.file(&uri) else {
                return Ok(Value::Null);
            };
            encode(actions::format_document(
                analysis.text(file.id),
                &file.lines,
            ))
        }
        req::CodeActionRequest::METHOD => {
            let p: lsp_types::CodeActionParams = params(request)?;
            let uri = p.text_document.uri;
            let (analysis, checked) = server.checked(&policy_key(&uri));
            let Some(file) = analysis.file(&uri) else {
                return Ok(json!([]));
            };
            let range = file.lines.byte_range(analysis.text(file.id), p.range);
            let found = actions::code_actions(&analysis, &checked.raw, file.id, range);
            encode(
                found
                    .into_iter()
                    .map(CodeActionOrCommand::CodeAction)
                    .collect::<Vec<_>>(),
            )
        }
        req::CodeLensRequest::METHOD => {
            let p: lsp_types::CodeLensParams = params(request)?;
            let uri = p.text_document.uri;
            let analysis = server.analysis(&policy_key(&uri));
            let Some(file) = analysis.file(&uri) else {
                return Ok(json!([]));
            };
            encode(actions::code_lenses(&analysis, file.id))
        }
        method => Err(ResponseError {
            code: ErrorCode::MethodNotFound as i32,
            message: format!("unsupported request `{method}`"),
            data: None,
        }),
    }
}

/// `workspace/executeCommand` (`src.runTests`): hands the run to a worker, which answers the
/// request when the tests have run.
pub(crate) fn execute_command(
    server: &mut impl Host,
    request: Request,
) -> Result<(), ResponseError> {
    let id = request.id.clone();
    let p: lsp_types::ExecuteCommandParams = params(request)?;
    if p.command != RUN_TESTS {
        return Err(failed(format!("unknown command `{}`", p.command)));
    }
    let uri = p
        .arguments
        .first()
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<Uri>().ok())
        .ok_or_else(|| failed(format!("`{RUN_TESTS}` needs a document URI")))?;
    let only = p
        .arguments
        .get(1)
        .and_then(Value::as_str)
        .map(str::to_string);
    let analysis = server.analysis(&policy_key(&uri));
    if server.submit_run(id, analysis, only) {
        Ok(())
    } else {
        Err(failed("the test runner has stopped".to_string()))
    }
}
