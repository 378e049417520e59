//! The parser's corpus: every file under `tests/corpus/parse/ok` and `tests/corpus/parse/err` is
//! its own test, discovered at run time, so adding a case needs no code.
//!
//! `ok` files must parse without a diagnostic; their snapshot is a readable dump of the tree
//! (expressions fully parenthesised, so precedence is visible). `err` files must give at least one
//! error; their snapshot lists the diagnostics and the declarations that still parsed, which shows
//! the recovery. Every result also passes the span checks of `parse_common`. The policies shipped
//! under `policies/` and `examples/`, and every ```` ```sr ```` block of `docs/*.md` (but the deliberately broken examples of `docs/diagnostics.md`), are parsed
//! too and must be clean.

mod parse_common;

use libtest_mimic::{Arguments, Failed, Trial};
use parse_common::dump::{at, dump};
use src_dsl::{parse, FileId, Parsed};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let args = Arguments::from_args();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest
        .parent()
        .and_then(Path::parent)
        .unwrap_or(manifest)
        .to_path_buf();
    let corpus = root.join("tests/corpus/parse");
    let mut trials = Vec::new();
    for (dir, kind, least) in [("ok", Kind::Ok, 12), ("err", Kind::Err, 20)] {
        let files = sr_files(&corpus.join(dir));
        // A moved or emptied corpus must fail, not pass with nothing run.
        let found = files.len();
        trials.push(Trial::test(
            format!("{dir}::corpus_is_present"),
            move || {
                if found >= least {
                    Ok(())
                } else {
                    Err(format!("expected at least {least} files in {dir}/, found {found}").into())
                }
            },
        ));
        for path in files {
            let name = format!("{dir}::{}", stem(&path));
            trials.push(Trial::test(name, move || run(&path, kind)));
        }
    }
    for dir in ["policies", "examples"] {
        for path in sr_files(&root.join(dir)) {
            let name = format!(
                "shipped::{}",
                path.strip_prefix(&root).unwrap_or(&path).display()
            );
            trials.push(Trial::test(name, move || run(&path, Kind::Shipped)));
        }
    }
    for (name, text) in doc_blocks(&root.join("docs")) {
        trials.push(Trial::test(name, move || {
            run_text(&text, Kind::Shipped, None)
        }));
    }
    libtest_mimic::run(&args, trials).exit();
}

#[derive(Clone, Copy)]
enum Kind {
    Ok,
    Err,
    Shipped,
}

/// The `.sr` files under `dir`, recursively, in a stable order.
fn sr_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "sr") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Every ```` ```sr ```` block of the Markdown files in `dir`, named `docs::FILE#LINE`.
fn doc_blocks(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        // The diagnostics reference shows broken policies on purpose; the compiler's check
        // corpus asserts each of them yields its documented code.
        .filter(|p| p.file_name().is_none_or(|n| n != "diagnostics.md"))
        .collect();
    files.sort();
    for path in files {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let mut block: Option<(usize, String)> = None;
        for (n, line) in text.lines().enumerate() {
            match &mut block {
                None if line.trim_start().starts_with("```sr") => {
                    block = Some((n + 1, String::new()))
                }
                Some((start, body)) if line.trim_start().starts_with("```") => {
                    out.push((
                        format!("docs::{}#{start}", stem(&path)),
                        std::mem::take(body),
                    ));
                    block = None;
                }
                Some((_, body)) => {
                    body.push_str(line);
                    body.push('\n');
                }
                None => {}
            }
        }
    }
    out
}

fn run(path: &Path, kind: Kind) -> Result<(), Failed> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    run_text(&text, kind, Some(path))
}

fn run_text(text: &str, kind: Kind, path: Option<&Path>) -> Result<(), Failed> {
    let text = text.to_string();
    let parsed = parse(&text, FileId(0));
    let problems = parse_common::span_problems(&text, &parsed);
    if !problems.is_empty() {
        return Err(format!("span problems:\n{}", problems.join("\n")).into());
    }
    let listing = diagnostics(&text, &parsed);
    match kind {
        Kind::Ok | Kind::Shipped if !parsed.diagnostics.is_empty() => {
            return Err(format!("expected no diagnostics, got:\n{listing}").into());
        }
        Kind::Err if !parsed.has_errors() => {
            return Err("expected at least one error, got none".into());
        }
        _ => {}
    }
    let snapshot = match kind {
        Kind::Ok => dump(&text, &parsed),
        Kind::Err => format!(
            "{listing}\nparsed: {}\n",
            parsed
                .file
                .items
                .iter()
                .map(|i| match i.kind.name() {
                    Some(n) => format!("{} {}", i.kind.keyword(), n.name),
                    None => i.kind.keyword().to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Kind::Shipped => return Ok(()),
    };
    let Some(path) = path else {
        return Err("a snapshot needs the file it was made from".into());
    };
    let dir = path.parent().unwrap_or(Path::new(".")).join("snapshots");
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(dir);
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.set_input_file(path);
    settings.bind(|| insta::assert_snapshot!(stem(path), snapshot));
    Ok(())
}

/// `CODE line:col-line:col message [help: ...]`, one diagnostic a line, secondary labels and
/// fixes indented under it.
fn diagnostics(text: &str, parsed: &Parsed) -> String {
    let mut out = String::new();
    for d in &parsed.diagnostics {
        let _ = write!(
            out,
            "{} {} {}",
            d.code,
            at(text, d.primary_span()),
            d.message
        );
        if let Some(help) = &d.help {
            let _ = write!(out, " [help: {help}]");
        }
        out.push('\n');
        for l in d.labels.iter().filter(|l| !l.primary) {
            let _ = writeln!(out, "  also {} {}", at(text, l.span), l.message);
        }
        for n in &d.notes {
            let _ = writeln!(out, "  note: {n}");
        }
        if let Some(fix) = &d.fix {
            let _ = writeln!(out, "  fix {} -> {:?}", at(text, fix.span), fix.replacement);
        }
    }
    out
}
