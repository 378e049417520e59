//! `src import`: translate another router's configuration into a policy directory, format it,
//! write `MIGRATION.md` beside it, and verify it: the output must check and its tests (the old
//! system's own expectations) must pass on both engines. Exit 0 when they do, 1 when not, 2 when
//! the input cannot be read at all.

use crate::import::{self, Case, Translation, Untranslated};
use crate::output::Color;
use crate::Outcome;
use anyhow::{bail, Context, Result};
use src_compiler::testing::{run_tests, Actual};
use src_compiler::{check, load, CheckOptions, EngineKind};
use src_dsl::{codes, format::format_source, render, FileId};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    from: From,
}

#[derive(clap::Subcommand)]
enum From {
    /// A LiteLLM proxy config (`model_list`, `litellm_settings`, `router_settings`).
    Litellm {
        /// The config file.
        config: PathBuf,
        #[command(flatten)]
        out: Out,
    },
    /// A vLLM Semantic Router recipe: its directory (`recipe.dsl`, `config.yaml`,
    /// `probes.yaml`), or its `recipe.dsl` or `config.yaml`.
    Vsr {
        /// The recipe directory or file.
        path: PathBuf,
        /// The recipe to translate when the file holds several (`RECIPE NAME` blocks, or
        /// `recipes[]` of `config.yaml`); the first by default.
        #[arg(long, value_name = "NAME")]
        recipe: Option<String>,
        #[command(flatten)]
        out: Out,
    },
}

#[derive(clap::Args)]
struct Out {
    /// The directory to write the policy into (created; it must be empty unless `--force`).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Write into a directory that is not empty, replacing the files the import writes.
    #[arg(long)]
    force: bool,
    #[arg(long, value_enum, default_value_t)]
    color: Color,
}

/// The policy file an import writes.
const POLICY_FILE: &str = "policy.sr";

pub fn run(args: Args) -> Result<Outcome> {
    let (source, out, translated) = match args.from {
        From::Litellm { config, out } => {
            let t = import::litellm::translate(&config)?;
            (format!("LiteLLM config `{}`", config.display()), out, t)
        }
        From::Vsr { path, recipe, out } => {
            let t = import::vsr::translate(&path, recipe.as_deref())?;
            let source = format!("vLLM Semantic Router recipe `{}`", path.display());
            (source, out, t)
        }
    };
    prepare(&out.out, out.force)?;
    let mut translated = translated;
    for (path, text) in &translated.files {
        write(&out.out.join(path), text)?;
    }
    let color = out.color.enabled_for_stderr();
    // A case that reaches a model-backed signal its source gave no value for is not a test of
    // the translation: it is taken out and reported, and the rest verified again.
    let verdict = loop {
        let mut text = translated.policy.clone();
        for case in &translated.tests {
            text.push('\n');
            text.push_str(&case.text);
        }
        write(&out.out.join(POLICY_FILE), &formatted(&text)?)?;
        let verdict = verify(&out.out, color)?;
        if verdict.needs_given.is_empty() {
            break verdict;
        }
        let (dropped, kept): (Vec<Case>, Vec<Case>) = std::mem::take(&mut translated.tests)
            .into_iter()
            .partition(|c| verdict.needs_given.iter().any(|(name, _)| name == &c.name));
        translated.tests = kept;
        for case in dropped {
            let why = verdict
                .needs_given
                .iter()
                .find(|(name, _)| name == &case.name)
                .map(|(_, why)| why.clone())
                .unwrap_or_default();
            translated.skip(
                &case.file,
                case.line,
                case.what,
                format!("{why}, and the source states no value for it"),
            );
        }
    };
    translated
        .untranslated
        .sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    if !verdict.rendered.is_empty() {
        err!("{}", verdict.rendered)?;
    }
    for f in &verdict.failed {
        errln!("FAIL {f}")?;
    }
    for u in &translated.untranslated {
        errln!("not translated: {}: {} ({})", at(u), u.what, u.why)?;
    }
    let report = migration(&source, &translated, &verdict);
    write(&out.out.join("MIGRATION.md"), &report)?;
    errln!(
        "wrote {} ({}; {} not translated, see {})",
        out.out.join(POLICY_FILE).display(),
        verdict.summary(),
        translated.untranslated.len(),
        out.out.join("MIGRATION.md").display()
    )?;
    Ok(if verdict.ok() {
        Outcome::Success
    } else {
        Outcome::Failure
    })
}

/// `text` in canonical form; a translation that does not parse is a fault of the importer.
fn formatted(text: &str) -> Result<String> {
    format_source(text, FileId(0)).map_err(|diagnostics| {
        let mut sources = src_dsl::SourceMap::new();
        sources.add(PathBuf::from(POLICY_FILE), text.to_string());
        anyhow::anyhow!(
            "the translation does not parse (a fault of the importer):\n{}",
            render::human(&diagnostics, &sources, false)
        )
    })
}

fn at(u: &Untranslated) -> String {
    if u.line == 0 {
        u.file.clone()
    } else {
        format!("{}:{}", u.file, u.line)
    }
}

/// Creates `dir`, refusing one that holds files unless `force`.
fn prepare(dir: &Path, force: bool) -> Result<()> {
    if dir.exists() {
        if !dir.is_dir() {
            bail!("`{}` exists and is not a directory", dir.display());
        }
        let mut entries =
            std::fs::read_dir(dir).with_context(|| format!("cannot read `{}`", dir.display()))?;
        if entries.next().is_some() && !force {
            bail!(
                "`{}` is not empty; choose an empty directory or pass --force",
                dir.display()
            );
        }
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create `{}`", dir.display()))
}

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create `{}`", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write `{}`", path.display()))
}

/// What checking and testing the output came to.
struct Verdict {
    errors: usize,
    warnings: usize,
    passed: usize,
    failed: Vec<String>,
    /// Cases that reached a model-backed signal without a `given`, with what they reached.
    needs_given: Vec<(String, String)>,
    /// The check's diagnostics, rendered.
    rendered: String,
}

impl Verdict {
    fn ok(&self) -> bool {
        self.errors == 0 && self.failed.is_empty()
    }

    fn summary(&self) -> String {
        format!(
            "check: {} error(s), {} warning(s); tests on both engines: {} passed, {} failed",
            self.errors,
            self.warnings,
            self.passed,
            self.failed.len()
        )
    }
}

/// Checks the written policy (diagnostics on standard error) and runs its tests on both
/// engines, as `src check` and `src test` would.
fn verify(dir: &Path, color: bool) -> Result<Verdict> {
    let source = load(dir).with_context(|| format!("cannot load `{}`", dir.display()))?;
    let sources = source.sources.clone();
    let mut outcome = check(source, &CheckOptions::default());
    // A case the checker already sees reaching a model-backed signal without a `given` (E050)
    // is one to take out, not an error of the translation.
    let mut needs_given: Vec<(String, String)> = Vec::new();
    outcome.diagnostics.retain(|d| {
        if d.code != codes::TEST_MISSING_GIVEN {
            return true;
        }
        let mut quoted = d.message.split('`').skip(1).step_by(2);
        let (Some(test), Some(signal)) = (quoted.next(), quoted.next()) else {
            return true;
        };
        match needs_given.iter_mut().find(|(n, _)| n == test) {
            Some((_, why)) => why.push_str(&format!(", `{signal}`")),
            None => needs_given.push((
                test.to_string(),
                format!("the case reaches model-backed signal `{signal}`"),
            )),
        }
        false
    });
    let (errors, warnings) = src_dsl::diagnostic::tally(&outcome.diagnostics);
    let rendered = if outcome.diagnostics.is_empty() {
        String::new()
    } else {
        render::human(&outcome.diagnostics, &sources, color)
    };
    let mut verdict = Verdict {
        errors,
        warnings,
        passed: 0,
        failed: Vec::new(),
        needs_given,
        rendered,
    };
    if !verdict.needs_given.is_empty() {
        return Ok(verdict);
    }
    let Some(policy) = outcome.policy.filter(|_| errors == 0) else {
        return Ok(verdict);
    };
    for engine in [EngineKind::Interp, EngineKind::Jit] {
        let results = run_tests(&policy, engine).context("cannot compile the imported policy")?;
        for r in results {
            if let Actual::Error { code, message } = &r.actual {
                if *code == codes::TEST_MISSING_GIVEN {
                    if !verdict.needs_given.iter().any(|(n, _)| n == &r.name) {
                        verdict.needs_given.push((r.name.clone(), message.clone()));
                    }
                    continue;
                }
            }
            if r.passed {
                verdict.passed += 1;
            } else {
                let line = format!(
                    "`{}` [{}]: expected {}, got {}",
                    r.name,
                    r.engine.as_str(),
                    r.expected,
                    r.actual
                );
                verdict.failed.push(line);
            }
        }
    }
    Ok(verdict)
}

/// The text of `MIGRATION.md`.
fn migration(source: &str, t: &Translation, v: &Verdict) -> String {
    let mut m = String::new();
    let _ = writeln!(m, "# Migration report\n");
    let _ = writeln!(
        m,
        "`{POLICY_FILE}` was translated from the {source} by `src import`.\n"
    );
    let _ = writeln!(m, "## Verification\n\n{}.\n", v.summary());
    for f in &v.failed {
        let _ = writeln!(m, "- FAIL {f}");
    }
    if !v.failed.is_empty() {
        m.push('\n');
    }
    if !t.decisions.is_empty() {
        let _ = writeln!(m, "## To decide\n");
        for d in &t.decisions {
            let _ = writeln!(m, "- {d}");
        }
        m.push('\n');
    }
    let _ = writeln!(
        m,
        "Lines of `{POLICY_FILE}` marked `DECIDE` hold a choice a person must confirm.\n"
    );
    let _ = writeln!(m, "## Not translated\n");
    if t.untranslated.is_empty() {
        let _ = writeln!(m, "Everything was translated.");
    } else {
        let _ = writeln!(m, "| where | what | why |\n|---|---|---|");
        for u in &t.untranslated {
            let _ = writeln!(
                m,
                "| {} | {} | {} |",
                cell(&at(u)),
                cell(&u.what),
                cell(&u.why)
            );
        }
    }
    m
}

/// Text safe inside a Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}
