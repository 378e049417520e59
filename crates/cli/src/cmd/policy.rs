//! Loading and checking a policy for the commands that need a checked one (`test`, `explain`,
//! `serve`): diagnostics go to standard error, and a policy with errors stops the command. Also
//! the did-you-mean for names of the policy given on the command line.

use anyhow::{Context, Result};
use src_compiler::hir::CheckedPolicy;
use src_compiler::{check, load, CheckOptions, EngineKind};
use src_dsl::render;
use std::path::Path;

/// `--engine` for commands that run one engine.
#[derive(Clone, Copy, Debug, Default, clap::ValueEnum, PartialEq, Eq)]
pub enum Engine {
    Interp,
    #[default]
    Jit,
}

impl From<Engine> for EngineKind {
    fn from(e: Engine) -> Self {
        match e {
            Engine::Interp => EngineKind::Interp,
            Engine::Jit => EngineKind::Jit,
        }
    }
}

/// `"; did you mean `x`?"` for the declared name nearest to `name` (the checker's rule), or
/// nothing: the end of a message about a name the policy does not declare.
pub fn did_you_mean<'c>(name: &str, declared: impl IntoIterator<Item = &'c str>) -> String {
    src_compiler::check::nearest(name, declared)
        .map(|near| format!("; did you mean `{near}`?"))
        .unwrap_or_default()
}

/// The names of the policy's signals, for [`did_you_mean`].
pub fn signal_names(checked: &CheckedPolicy) -> impl Iterator<Item = &str> {
    checked.signals.iter().map(|s| s.name.as_str())
}

/// Loads and checks `path`. `Ok(None)` means the policy has errors (already printed).
pub fn load_checked(path: &Path, color: bool) -> Result<Option<CheckedPolicy>> {
    let source = load(path).with_context(|| format!("cannot load `{}`", path.display()))?;
    let sources = source.sources.clone();
    let outcome = check(source, &CheckOptions::default());
    let errors: Vec<_> = outcome
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .cloned()
        .collect();
    if !errors.is_empty() {
        err!("{}", render::human(&errors, &sources, color))?;
        errln!(
            "`{}` has {} error(s); run `src check` for details",
            path.display(),
            errors.len()
        )?;
    }
    Ok(outcome.policy)
}
