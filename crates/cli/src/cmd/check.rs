//! `src check`: load each policy, check it, print every diagnostic.

use crate::output::{Color, Format};
use crate::Outcome;
use anyhow::{bail, Context, Result};
use src_compiler::hir::CheckedPolicy;
use src_compiler::{check, load, CheckOptions};
use src_dsl::{codes, render, Diagnostic, SourceMap};
use src_runtime::models::{self, Role};
use std::collections::HashMap;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Policy directories or single `.sr` files (default: the current directory).
    paths: Vec<PathBuf>,
    /// Use FILE as backend B's catalog (its `GET /v1/models` answer) instead of the declared one.
    #[arg(long = "catalog", value_name = "B=FILE")]
    catalogs: Vec<String>,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    /// Treat warnings as errors.
    #[arg(long)]
    deny_warnings: bool,
    #[arg(long, value_enum, default_value_t)]
    color: Color,
}

fn parse_overrides(pairs: &[String]) -> Result<HashMap<String, PathBuf>> {
    let mut map = HashMap::new();
    for pair in pairs {
        let Some((backend, file)) = pair.split_once('=') else {
            bail!("--catalog expects BACKEND=FILE, got `{pair}`");
        };
        if backend.is_empty() || file.is_empty() {
            bail!("--catalog expects BACKEND=FILE, got `{pair}`");
        }
        let path = PathBuf::from(file);
        if !path.is_file() {
            bail!("catalog file `{file}` for backend `{backend}` does not exist");
        }
        map.insert(backend.to_string(), path);
    }
    Ok(map)
}

pub fn run(args: Args) -> Result<Outcome> {
    let options = CheckOptions {
        catalog_overrides: parse_overrides(&args.catalogs)?,
    };
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let color = args.color.enabled_for_stderr();
    let (mut errors, mut warnings) = (0, 0);
    let mut json_diagnostics = Vec::new();
    for path in &paths {
        let source = load(path).with_context(|| format!("cannot load `{}`", path.display()))?;
        let mut outcome = check(source.clone(), &options);
        if let Some(policy) = &outcome.policy {
            outcome.diagnostics.extend(verify_models(policy));
        }
        let (e, w) = src_dsl::diagnostic::tally(&outcome.diagnostics);
        errors += e;
        warnings += w;
        report(
            &outcome.diagnostics,
            &source.sources,
            args.format,
            color,
            &mut json_diagnostics,
        );
    }
    match args.format {
        Format::Json => {
            let doc = serde_json::json!({
                "diagnostics": json_diagnostics,
                "errors": errors,
                "warnings": warnings,
            });
            println!("{doc}");
        }
        Format::Human => {
            if errors + warnings > 0 {
                eprintln!("{errors} error(s), {warnings} warning(s)");
            } else {
                eprintln!("ok: {} polic{} checked", paths.len(), plural(paths.len()));
            }
        }
    }
    let failed = errors > 0 || (args.deny_warnings && warnings > 0);
    Ok(if failed {
        Outcome::Failure
    } else {
        Outcome::Success
    })
}

/// Opens every model directory that exists with ONNX Runtime and checks that its graph fits the
/// declaration (inputs, `logits` width against `id2label`, an encoder's output). Runs only when
/// the ONNX Runtime library is available (`ORT_DYLIB_PATH`): the compiler's own checks of
/// `config.json` do not need it.
fn verify_models(policy: &CheckedPolicy) -> Vec<Diagnostic> {
    let declared = policy
        .classifiers
        .iter()
        .map(|c| (&c.path, Role::Classifier, &c.name, c.span))
        .chain(
            policy
                .guards
                .iter()
                .map(|g| (&g.path, Role::Guard, &g.name, g.span)),
        )
        .chain(
            policy
                .encoders
                .iter()
                .map(|e| (&e.path, Role::Encoder, &e.name, e.span)),
        );
    let present: Vec<_> = declared
        .map(|(path, role, name, span)| (policy.root.join(path), role, name, span))
        .filter(|(dir, ..)| dir.is_dir())
        .collect();
    if present.is_empty() || models::ensure_library().is_err() {
        return Vec::new();
    }
    present
        .into_iter()
        .filter_map(|(dir, role, name, span)| {
            models::verify(&dir, role).err().map(|e| {
                Diagnostic::error(
                    codes::MODEL_UNAVAILABLE,
                    format!("model directory of `{name}` does not fit its declaration: {e}"),
                    span,
                )
                .with_label_message("declared here")
                .with_help(format!(
                    "`{}` must hold a model of this kind",
                    dir.display()
                ))
            })
        })
        .collect()
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        "y"
    } else {
        "ies"
    }
}

fn report(
    diagnostics: &[Diagnostic],
    sources: &SourceMap,
    format: Format,
    color: bool,
    json: &mut Vec<serde_json::Value>,
) {
    match format {
        Format::Human => {
            if !diagnostics.is_empty() {
                eprint!("{}", render::human(diagnostics, sources, color));
            }
        }
        Format::Json => json.extend(
            diagnostics
                .iter()
                .map(|d| render::json_diagnostic(d, sources)),
        ),
    }
}
