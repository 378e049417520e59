// The VS Code client: starts `src lsp` on stdio for `.sr` files and runs the server's
// "run tests" command (`src.runTests`) from its code lenses. The server registers its own file
// watchers (`*.sr` files of the workspace, and the catalogs its backends name wherever they
// are), so the client watches nothing on its own.
'use strict';

const vscode = require('vscode');
const { LanguageClient, TransportKind } = require('vscode-languageclient/node');

let client;

function activate(context) {
  const command = vscode.workspace.getConfiguration('src').get('path') || 'src';
  const server = { command, args: ['lsp'], transport: TransportKind.stdio };
  client = new LanguageClient(
    'src',
    'src policies',
    { run: server, debug: server },
    {
      documentSelector: [{ scheme: 'file', language: 'sr' }, { scheme: 'untitled', language: 'sr' }],
    },
  );
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
