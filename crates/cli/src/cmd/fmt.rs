//! `src fmt`: rewrite `.sr` files in canonical form, or with `--check` list those that differ.

use crate::discover;
use crate::output::Color;
use crate::Outcome;
use anyhow::{Context, Result};
use src_dsl::{format::format_source, render, FileId, SourceMap};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Files or directories (searched recursively for `.sr` files; default: the current directory).
    paths: Vec<PathBuf>,
    /// Change nothing; list the files that would change and exit 1 if any.
    #[arg(long)]
    check: bool,
    #[arg(long, value_enum, default_value_t)]
    color: Color,
}

pub fn run(args: Args) -> Result<Outcome> {
    let mut files = Vec::new();
    for root in discover::roots(&args.paths) {
        files.extend(discover::sr_files(&root)?);
    }
    let mut differing = Vec::new();
    let mut broken = false;
    for file in &files {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read `{}`", file.display()))?;
        match format_source(&text, FileId(0)) {
            Ok(formatted) if formatted == text => {}
            Ok(formatted) => {
                if args.check {
                    outln!("{}", file.display())?;
                } else {
                    std::fs::write(file, formatted)
                        .with_context(|| format!("cannot write `{}`", file.display()))?;
                }
                differing.push(file.clone());
            }
            Err(diagnostics) => {
                let mut sources = SourceMap::new();
                sources.add(file.clone(), text);
                err!(
                    "{}",
                    render::human(&diagnostics, &sources, args.color.enabled_for_stderr())
                )?;
                broken = true;
            }
        }
    }
    if broken {
        errln!("some files were not formatted: they do not parse, or formatting would change what they say")?;
    }
    Ok(if broken || (args.check && !differing.is_empty()) {
        Outcome::Failure
    } else {
        Outcome::Success
    })
}
