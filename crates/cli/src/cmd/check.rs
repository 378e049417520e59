//! `src check`: load each policy at or below the paths given ([`crate::discover`]), check it,
//! print every diagnostic (for a person, as JSON, as GitHub workflow commands or as a SARIF log:
//! [`CheckFormat`]), and a policy that cannot be read among them.

use crate::ci_report::{self, Finding};
use crate::cmd::policy::did_you_mean;
use crate::discover;
use crate::output::{Closed, Color};
use crate::Outcome;
use anyhow::{bail, Context, Result};
use src_compiler::check::LiveCatalog;
use src_compiler::hir::CheckedPolicy;
use src_compiler::{check, load, CheckOptions, EngineKind, PolicySource};
use src_dsl::ast::ItemKind;
use src_dsl::{codes, render, Diagnostic, SourceMap};
use src_runtime::catalog;
use src_runtime::models::{self, Role};
use src_runtime::upstream::Upstream;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Connect and answer time allowed to each backend asked with `--live`.
const LIVE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(clap::Args)]
pub struct Args {
    /// Policy directories or single `.sr` files; a directory's subdirectories that hold `.sr`
    /// files are policies too (default: the current directory).
    paths: Vec<PathBuf>,
    /// Use FILE as backend B's catalog (its `GET /v1/models` answer) instead of the declared one.
    /// (`--live` asks every backend instead, so the two do not go together.)
    #[arg(long = "catalog", value_name = "B=FILE", conflicts_with = "live")]
    catalogs: Vec<String>,
    /// Ask every backend that has a `url` for its catalog (`GET {url}/models`) instead of
    /// reading catalog files; an API key declared with `api_key = env(..)` is sent.
    #[arg(long)]
    live: bool,
    /// Extra certificate authorities (a PEM bundle) trusted for `https` backends with `--live`.
    #[arg(long, value_name = "FILE", requires = "live")]
    backend_ca: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t)]
    format: CheckFormat,
    /// An Envoy config that deploys the policy through `ext_proc`: warn when it fails open for a
    /// policy that enforces rules, when its `message_timeout` can cut off model signals, or when
    /// its routes send a model's requests anywhere but to the model's backend.
    #[arg(long, value_name = "FILE")]
    envoy: Option<PathBuf>,
    /// Treat warnings as errors.
    #[arg(long)]
    deny_warnings: bool,
    #[arg(long, value_enum, default_value_t)]
    color: Color,
}

/// How `src check` prints its diagnostics.
#[derive(Clone, Copy, Debug, Default, clap::ValueEnum, PartialEq, Eq)]
pub enum CheckFormat {
    /// Rendered for a person, on standard error.
    #[default]
    Human,
    /// `{"diagnostics": [...], "errors": N, "warnings": M}` on standard output.
    Json,
    /// GitHub Actions workflow commands (`::error file=..::..`), one per line on standard output.
    Github,
    /// A SARIF 2.1.0 log on standard output.
    Sarif,
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
    let catalog_overrides = parse_overrides(&args.catalogs)?;
    let live = if args.live {
        Some(LiveFetcher::new(args.backend_ca.as_deref())?)
    } else {
        None
    };
    let envoy = match &args.envoy {
        Some(path) => Some((path.display().to_string(), crate::cmd::envoy::read(path)?)),
        None => None,
    };
    let color = args.color.enabled_for_stderr();
    // Every policy is found and loaded first, so that a path that cannot be read is reported
    // with the rest rather than stopping the check.
    let mut sources = Vec::new();
    let mut unreadable = Vec::new();
    for root in discover::roots(&args.paths) {
        match discover::policies(&root) {
            Ok(found) => {
                for path in found {
                    match load(&path) {
                        Ok(source) => sources.push((path, source)),
                        Err(e) => unreadable.push((
                            e.path().to_path_buf(),
                            format!("cannot load `{}`: {e}", path.display()),
                        )),
                    }
                }
            }
            Err(e) => unreadable.push((root, format!("{e:#}"))),
        }
    }
    check_override_names(&catalog_overrides, &sources)?;
    let (mut errors, mut warnings) = (0, 0);
    let mut json_diagnostics = Vec::new();
    let mut findings = Vec::new();
    for (path, source) in &sources {
        let options = CheckOptions {
            catalog_overrides: catalog_overrides.clone(),
            live_catalogs: live
                .as_ref()
                .map(|fetcher| fetcher.catalogs(source))
                .unwrap_or_default(),
        };
        let mut outcome = check(source.clone(), &options);
        if let Some(policy) = &outcome.policy {
            outcome.diagnostics.extend(verify_models(policy));
            if let Some((file, gateway)) = &envoy {
                let compiled = src_compiler::compile(policy.clone(), EngineKind::Interp)
                    .with_context(|| format!("cannot compile `{}`", path.display()))?;
                let timeout = models::ModelOptions::from_env().timeout;
                outcome.diagnostics.extend(crate::cmd::envoy::diagnostics(
                    policy,
                    &compiled.program,
                    gateway,
                    file,
                    timeout,
                ));
            }
        }
        let (e, w) = src_dsl::diagnostic::tally(&outcome.diagnostics);
        errors += e;
        warnings += w;
        match args.format {
            CheckFormat::Github | CheckFormat::Sarif => findings.extend(
                outcome
                    .diagnostics
                    .iter()
                    .map(|d| Finding::new(d, &source.sources)),
            ),
            CheckFormat::Human | CheckFormat::Json => report(
                &outcome.diagnostics,
                &source.sources,
                args.format,
                color,
                &mut json_diagnostics,
            )?,
        }
    }
    match args.format {
        CheckFormat::Github | CheckFormat::Sarif => findings.extend(
            unreadable
                .iter()
                .map(|(path, why)| Finding::unreadable(path, why)),
        ),
        CheckFormat::Human | CheckFormat::Json => {
            for (_, why) in &unreadable {
                errln!("error: {why}")?;
            }
        }
    }
    match args.format {
        CheckFormat::Github => {
            for f in &findings {
                outln!("{}", ci_report::github_command(f))?;
            }
        }
        CheckFormat::Sarif => {
            let log = serde_json::to_string_pretty(&ci_report::sarif(&findings))
                .context("cannot write the SARIF log")?;
            outln!("{log}")?;
        }
        CheckFormat::Json => {
            let doc = serde_json::json!({
                "diagnostics": json_diagnostics,
                "errors": errors,
                "warnings": warnings,
            });
            outln!("{doc}")?;
        }
        CheckFormat::Human => {
            if errors + warnings > 0 {
                errln!("{errors} error(s), {warnings} warning(s)")?;
            } else if unreadable.is_empty() {
                let n = sources.len();
                errln!("ok: {n} polic{} checked", plural(n))?;
            }
        }
    }
    if !unreadable.is_empty() {
        return Ok(Outcome::Incomplete);
    }
    let failed = errors > 0 || (args.deny_warnings && warnings > 0);
    Ok(if failed {
        Outcome::Failure
    } else {
        Outcome::Success
    })
}

/// `--catalog B=FILE` for a backend `B` that no policy checked declares would replace nothing:
/// a usage error, with the nearest declared name.
fn check_override_names(
    overrides: &HashMap<String, PathBuf>,
    sources: &[(PathBuf, PolicySource)],
) -> Result<()> {
    let declared: Vec<&str> = sources
        .iter()
        .flat_map(|(_, source)| source.files.iter())
        .flat_map(|(_, file)| file.items.iter())
        .filter_map(|item| match &item.kind {
            ItemKind::Backend(b) => Some(b.name.name.as_str()),
            _ => None,
        })
        .collect();
    let mut unknown: Vec<&String> = overrides
        .keys()
        .filter(|name| !declared.contains(&name.as_str()))
        .collect();
    unknown.sort();
    let Some(name) = unknown.first() else {
        return Ok(());
    };
    let hint = match did_you_mean(name, declared.iter().copied()) {
        hint if !hint.is_empty() => hint,
        _ if declared.is_empty() => "; no backend is declared".to_string(),
        _ => format!(
            "; the backends are {}",
            declared
                .iter()
                .map(|d| format!("`{d}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let declarer = if sources.len() == 1 {
        "the policy does not declare"
    } else {
        "none of the policies checked declares"
    };
    bail!("`--catalog {name}=..` names backend `{name}`, which {declarer}{hint}")
}

/// `--live`: asks backends for their catalogs with the router's own HTTP clients.
struct LiveFetcher {
    runtime: tokio::runtime::Runtime,
    upstream: Upstream,
}

impl LiveFetcher {
    fn new(backend_ca: Option<&Path>) -> Result<LiveFetcher> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        let tls = src_runtime::tls::client_config(backend_ca)
            .context("cannot set up TLS for backends")?;
        // The clients' connection pools need the runtime to exist when they are built.
        let upstream = runtime.block_on(async { Upstream::new(LIVE_TIMEOUT, tls, 0) });
        Ok(LiveFetcher { runtime, upstream })
    }

    /// Each non-simulated backend's live answer, by backend name.
    fn catalogs(&self, source: &PolicySource) -> HashMap<String, LiveCatalog> {
        let backends = source.files.iter().flat_map(|(_, file)| {
            file.items.iter().filter_map(|item| match &item.kind {
                ItemKind::Backend(b) if !b.simulated.as_ref().is_some_and(|s| s.value) => Some(b),
                _ => None,
            })
        });
        let mut out = HashMap::new();
        for backend in backends {
            let Some(url) = &backend.url else { continue };
            let key = backend
                .api_key
                .as_ref()
                .and_then(|k| std::env::var(&k.var.value).ok());
            let answer = self.runtime.block_on(catalog::fetch(
                &self.upstream,
                &url.value,
                key.as_deref(),
                LIVE_TIMEOUT,
            ));
            out.insert(
                backend.name.name.clone(),
                LiveCatalog {
                    url: format!("{}/models", url.value.trim_end_matches('/')),
                    answer,
                },
            );
        }
        out
    }
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
        )
        .chain(
            policy
                .detectors
                .iter()
                .map(|d| (&d.path, Role::Detector, &d.name, d.span)),
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
    format: CheckFormat,
    color: bool,
    json: &mut Vec<serde_json::Value>,
) -> Result<(), Closed> {
    match format {
        CheckFormat::Github | CheckFormat::Sarif => {}
        CheckFormat::Human => {
            if !diagnostics.is_empty() {
                err!("{}", render::human(diagnostics, sources, color))?;
            }
        }
        CheckFormat::Json => json.extend(
            diagnostics
                .iter()
                .map(|d| render::json_diagnostic(d, sources)),
        ),
    }
    Ok(())
}
