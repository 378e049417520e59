//! `src test`: run the `test` blocks of policies on the interpreter, the JIT, or both.

use super::policy::load_checked;
use crate::discover;
use crate::output::{Closed, Color};
use crate::Outcome;
use anyhow::{Context, Result};
use src_compiler::testing::{run_tests, CaseResult};
use src_compiler::EngineKind;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, Default, clap::ValueEnum, PartialEq, Eq)]
pub enum Engines {
    Interp,
    Jit,
    #[default]
    Both,
}

#[derive(clap::Args)]
pub struct Args {
    /// Policy directories or single `.sr` files; a directory's subdirectories that hold `.sr`
    /// files are policies too (default: the current directory).
    paths: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t)]
    engine: Engines,
    #[arg(long, value_enum, default_value_t)]
    color: Color,
}

pub fn run(args: Args) -> Result<Outcome> {
    let mut paths = Vec::new();
    for root in discover::roots(&args.paths) {
        paths.extend(discover::policies(&root)?);
    }
    let engines: &[EngineKind] = match args.engine {
        Engines::Interp => &[EngineKind::Interp],
        Engines::Jit => &[EngineKind::Jit],
        Engines::Both => &[EngineKind::Interp, EngineKind::Jit],
    };
    let color = args.color.enabled_for_stderr();
    let (mut passed, mut failed, mut broken) = (0usize, 0usize, 0usize);
    for path in &paths {
        let Some(checked) = load_checked(path, color)? else {
            broken += 1;
            continue;
        };
        for &engine in engines {
            let results = run_tests(&checked, engine)
                .with_context(|| format!("cannot compile `{}`", path.display()))?;
            for result in &results {
                if result.passed {
                    passed += 1;
                } else {
                    failed += 1;
                    print_failure(path, result)?;
                }
            }
        }
    }
    outln!("{passed} passed, {failed} failed")?;
    Ok(if failed > 0 || broken > 0 {
        Outcome::Failure
    } else {
        Outcome::Success
    })
}

fn print_failure(path: &std::path::Path, r: &CaseResult) -> Result<(), Closed> {
    outln!(
        "FAIL {} `{}` [{}]\n  expected: {}\n  actual:   {}",
        path.display(),
        r.name,
        r.engine.as_str(),
        r.expected,
        r.actual
    )?;
    let signals: Vec<String> = r
        .signals
        .iter()
        .map(|(name, value)| format!("{name} = {}", value.as_deref().unwrap_or("(not computed)")))
        .collect();
    if !signals.is_empty() {
        outln!("  signals:  {}", signals.join(", "))?;
    }
    Ok(())
}
