//! Bringing another router's configuration over as a `.sr` policy: LiteLLM's proxy config
//! ([`litellm`]) and vLLM Semantic Router's recipes ([`vsr`]).
//!
//! A translator reads its input and returns a [`Translation`]: the policy text (unformatted;
//! the command formats it with the language's own formatter), the request files its `test`
//! blocks name, the questions a person must answer, and every construct it could not carry
//! over, each with the file and line it came from. It never guesses: what has no counterpart
//! is reported, not approximated silently.

pub mod emit;
pub mod lines;
pub mod litellm;
pub mod vsr;

use std::path::PathBuf;

/// What a translator produced from its input.
#[derive(Debug, Default)]
pub struct Translation {
    /// The policy, in `.sr` syntax, before formatting.
    pub policy: String,
    /// The `test` blocks, each with the input construct it came from: a case that needs a
    /// model-backed signal's value its source does not state is taken out by the command and
    /// reported (never guessed).
    pub tests: Vec<Case>,
    /// Other files the policy names (request bodies for `test` blocks), relative to the output
    /// directory.
    pub files: Vec<(PathBuf, String)>,
    /// Choices the translation made that a person should confirm or change.
    pub decisions: Vec<String>,
    /// Constructs of the input with no counterpart in the output.
    pub untranslated: Vec<Untranslated>,
}

/// One `test` block of the translation.
#[derive(Debug, Clone)]
pub struct Case {
    /// The test's name in the policy.
    pub name: String,
    /// The whole `test NAME { .. }` text.
    pub text: String,
    /// Where its expectation came from.
    pub file: String,
    pub line: usize,
    /// How the input names it (a probe id).
    pub what: String,
}

/// One construct of the input that the output does not carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untranslated {
    /// The input file, as given on the command line (or found in the recipe directory).
    pub file: String,
    /// 1-based line of the construct in that file (0 when the file as a whole is meant).
    pub line: usize,
    /// The construct, as the input names it (`router_settings.routing_strategy`).
    pub what: String,
    /// Why it was not translated, and what to do instead where there is something.
    pub why: String,
}

impl Translation {
    pub fn skip(
        &mut self,
        file: &str,
        line: usize,
        what: impl Into<String>,
        why: impl Into<String>,
    ) {
        self.untranslated.push(Untranslated {
            file: file.to_string(),
            line,
            what: what.into(),
            why: why.into(),
        });
    }
}

/// Why an input could not be translated at all.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read `{path}`: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("`{path}` is not valid YAML: {message}")]
    Yaml { path: String, message: String },
    #[error("{path}:{line}: {message}")]
    Shape {
        path: String,
        line: usize,
        message: String,
    },
}

/// Reads a file for a translator.
pub fn read(path: &std::path::Path) -> Result<String, ImportError> {
    std::fs::read_to_string(path).map_err(|source| ImportError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// Parses YAML text into a value, naming the file in the error.
pub fn yaml(path: &str, text: &str) -> Result<serde_norway::Value, ImportError> {
    serde_norway::from_str(text).map_err(|e| ImportError::Yaml {
        path: path.to_string(),
        message: e.to_string(),
    })
}
