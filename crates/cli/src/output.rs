//! Shared output settings: colour choice and the `--format` switch; and how every command
//! writes to standard output and standard error (`out!`, `outln!`, `err!`, `errln!`): like
//! `print!` and `eprint!`, but a failed write (a closed pipe) is an error the command returns, not
//! a panic. `main` denies `print!` and friends so that no other path is left.

use clap::ValueEnum;
use std::io::IsTerminal;

#[derive(Clone, Copy, Debug, Default, ValueEnum, PartialEq, Eq)]
pub enum Color {
    #[default]
    Auto,
    Always,
    Never,
}

impl Color {
    /// Whether to colour text written to standard error.
    pub fn enabled_for_stderr(self) -> bool {
        match self {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => {
                std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
            }
        }
    }
}

#[derive(Clone, Copy, Debug, Default, ValueEnum, PartialEq, Eq)]
pub enum Format {
    #[default]
    Human,
    Json,
}

/// Standard output or standard error could not be written. `print!` would panic here; the
/// commands return this instead, and `main` ends quietly when the reader has gone away (a closed
/// pipe: `src explain .. | head`), as a command killed by `SIGPIPE` would.
#[derive(Debug, thiserror::Error)]
#[error("cannot write to {stream}: {reason}")]
pub struct Closed {
    stream: &'static str,
    reason: String,
    broken_pipe: bool,
}

impl Closed {
    fn new(stream: &'static str, err: &std::io::Error) -> Closed {
        Closed {
            stream,
            reason: src_compiler::load::io_reason(err),
            broken_pipe: err.kind() == std::io::ErrorKind::BrokenPipe,
        }
    }

    /// Whether the reader closed its end: nothing is wrong, and nobody is left to tell.
    pub fn is_broken_pipe(&self) -> bool {
        self.broken_pipe
    }
}

/// Writes to standard output and flushes, so that a closed pipe is noticed at the write that
/// meets it. Use `out!` and `outln!`.
pub fn write_stdout(args: std::fmt::Arguments<'_>) -> Result<(), Closed> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_fmt(args)
        .and_then(|()| out.flush())
        .map_err(|e| Closed::new("standard output", &e))
}

/// Writes to standard error. Use `err!` and `errln!`.
pub fn write_stderr(args: std::fmt::Arguments<'_>) -> Result<(), Closed> {
    use std::io::Write as _;
    std::io::stderr()
        .lock()
        .write_fmt(args)
        .map_err(|e| Closed::new("standard error", &e))
}

/// `print!` that returns [`Closed`] instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!($($arg)*))
    };
}

/// `println!` that returns [`Closed`] instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` that returns [`Closed`] instead of panicking.
macro_rules! err {
    ($($arg:tt)*) => {
        $crate::output::write_stderr(format_args!($($arg)*))
    };
}

/// `eprintln!` that returns [`Closed`] instead of panicking.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::write_stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}
