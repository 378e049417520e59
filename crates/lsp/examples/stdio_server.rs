//! The language server on stdio without the rest of the CLI (`src lsp` runs the same function);
//! handy for trying an editor against a fresh build: `cargo run -p src-lsp --example
//! stdio_server -- lsp`. Arguments are ignored.

fn main() -> std::process::ExitCode {
    match src_lsp::run_stdio() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
