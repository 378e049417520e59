//! `src`: the command-line front of the policy compiler and router.
//!
//! This file only parses arguments and maps outcomes to exit codes (0 success, 1 a policy problem
//! such as check errors or failing tests, 2 a usage or I/O error, 141 when standard output or
//! error was closed by its reader, the status of a command that `SIGPIPE` ended). The modules:
//!
//! - [`cmd::check`]: `src check`: load and check policies, print every diagnostic.
//! - [`cmd::fmt`]: `src fmt`: rewrite `.sr` files canonically, or list those that differ.
//! - [`cmd::test`]: `src test`: run `test` blocks on the interpreter, the JIT or both.
//! - [`cmd::explain`]: `src explain`: evaluate one request offline and show why it was decided so.
//! - [`cmd::doctor`]: `src doctor`: check the policy's backends live, model by model and route by
//!   route.
//! - [`cmd::manifest`]: `src manifest`: Envoy, Gateway API and Kubernetes manifests derived from
//!   the policy.
//! - [`cmd::serve`]: `src serve` and `src sim`: the proxy and the simulated backend, until stopped.
//! - [`cmd::replay`]: `src replay`: send session fixtures to an endpoint, judge every answer.
//! - [`cmd::eval`]: `src eval`: the same sessions through several policies on the simulator.
//! - [`cmd::calibrate`]: `src calibrate`: fit score thresholds on labelled requests, judged on a
//!   held-out split against cost-matched static baselines.
//! - [`cmd::whatif`]: `src whatif`: recorded traffic decided again under another policy.
//! - [`cmd::import`]: `src import`: a LiteLLM config or a vLLM Semantic Router recipe as a
//!   policy, verified; the translators are in [`import`].
//! - [`cmd::policy`]: loading and checking a policy for `test`, `explain` and `serve`.
//! - [`output`]: the colour choice and the `--format` switch the commands share, and the
//!   writing to standard output and error that every command does.
//! - [`discover`]: the `.sr` files and the policies below the paths `fmt`, `check` and `test`
//!   are given.
//!
//! `src lsp` is [`src_lsp::run_stdio`] and needs no module of its own.

#![deny(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a closed pipe makes `print!` panic; commands write with `output`'s macros"
)]

#[macro_use]
mod output;
mod ci_report;
mod cmd;
mod discover;
mod import;

use clap::{Parser, Subcommand};

/// The router allocates and frees small buffers on every request from several threads; mimalloc
/// keeps that off glibc's arena locks and consolidation passes (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "src",
    version,
    about = "Semantic-router policy compiler and OpenAI-compatible routing proxy"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Type-check policies against their catalogs and model directories.
    Check(cmd::check::Args),
    /// Format `.sr` files canonically, in place.
    Fmt(cmd::fmt::Args),
    /// Run the policies' `test` blocks on the interpreter and the JIT.
    Test(cmd::test::Args),
    /// Evaluate one request offline and show why the policy decided what it did.
    Explain(cmd::explain::Args),
    /// Check live that every backend serves what the policy sends it, and that routed
    /// requests reach the models the policy chooses.
    Doctor(cmd::doctor::Args),
    /// Write deployment manifests (Envoy, Gateway API HTTPRoutes, Kubernetes) from the policy.
    Manifest(cmd::manifest::Args),
    /// Serve the OpenAI-compatible routing proxy for a policy (hot-reloads on change).
    Serve(src_runtime::ServeArgs),
    /// Send recorded agent sessions to an endpoint and check every step and its continuity.
    Replay(cmd::replay::Args),
    /// Compare policies on the same sessions on the built-in simulator, paired and seeded.
    Eval(cmd::eval::Args),
    /// Fit the policy's score thresholds on labelled requests and compare the result with
    /// cost-matched static baselines on a held-out split.
    Calibrate(cmd::calibrate::Args),
    /// Decide the requests `src serve --record` recorded again under another policy.
    Whatif(cmd::whatif::Args),
    /// Translate a LiteLLM config or a vLLM Semantic Router recipe into a checked policy.
    Import(cmd::import::Args),
    /// Run the built-in simulated OpenAI-compatible backend on its own.
    Sim(cmd::serve::SimArgs),
    /// Run the language server over standard input and output (for editors).
    Lsp,
}

/// How a command ended, beyond "it worked".
pub enum Outcome {
    Success,
    /// The policy has problems (check errors, formatting differences, failing tests).
    Failure,
    /// Some inputs could not be read (reported already); the others were dealt with.
    Incomplete,
}

/// The exit status of a command that `SIGPIPE` ended (128 + 13), which is what a shell reports
/// for a program whose output pipe was closed early.
const CLOSED_PIPE: u8 = 141;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => cmd::check::run(args),
        Command::Fmt(args) => cmd::fmt::run(args),
        Command::Test(args) => cmd::test::run(args),
        Command::Explain(args) => cmd::explain::run(args),
        Command::Doctor(args) => cmd::doctor::run(args),
        Command::Manifest(args) => cmd::manifest::run(args),
        Command::Serve(args) => cmd::serve::serve(args),
        Command::Replay(args) => cmd::replay::run(args),
        Command::Eval(args) => cmd::eval::run(args),
        Command::Calibrate(args) => cmd::calibrate::run(args),
        Command::Whatif(args) => cmd::whatif::run(args),
        Command::Import(args) => cmd::import::run(args),
        Command::Sim(args) => cmd::serve::sim(args),
        Command::Lsp => src_lsp::run_stdio()
            .map(|()| Outcome::Success)
            .map_err(anyhow::Error::from),
    };
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Failure) => ExitCode::from(1),
        Ok(Outcome::Incomplete) => ExitCode::from(2),
        Err(err) => {
            let closed = err
                .chain()
                .find_map(|e| e.downcast_ref::<output::Closed>())
                .is_some_and(output::Closed::is_broken_pipe);
            if closed {
                return ExitCode::from(CLOSED_PIPE);
            }
            // Nothing is left to report a failure to write this to.
            let _ = errln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
