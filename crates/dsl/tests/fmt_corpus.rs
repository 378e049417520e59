//! The formatter over files on disk, each file its own test (discovered at run time).
//!
//! `tests/corpus/fmt/*.sr` are deliberately messy inputs; for each, the formatted output is an
//! insta snapshot (`tests/corpus/fmt/snapshots/`), formatting it again changes nothing, the
//! formatted text parses to the same tree (ignoring spans), and every comment survives. Every
//! `.sr` file of `policies/`, `examples/` and `tests/corpus/**/ok` is also checked to format
//! idempotently and to the same tree.

mod fmt_support;

use fmt_support::strip_spans;
use libtest_mimic::{Arguments, Failed, Trial};
use src_dsl::format::{format_file, format_source};
use src_dsl::{parse, FileId};
use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sr_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            sr_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "sr") {
            out.push(p);
        }
    }
}

/// The `.sr` files under every `ok` directory below `dir`.
fn ok_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths.into_iter().filter(|p| p.is_dir()) {
        if p.file_name().is_some_and(|n| n == "ok") {
            sr_files(&p, out);
        } else {
            ok_files(&p, out);
        }
    }
}

fn comment_texts(text: &str) -> Vec<String> {
    let mut texts: Vec<String> = parse(text, FileId(0))
        .file
        .comments
        .iter()
        .map(|c| c.text.trim_end().to_string())
        .collect();
    texts.sort();
    texts
}

/// Formats `text` and checks everything but the snapshot; returns the formatted text.
fn check(text: &str) -> Result<String, Failed> {
    let first =
        format_source(text, FileId(0)).map_err(|d| format!("the input does not parse: {d:#?}"))?;
    let second = format_source(&first, FileId(0))
        .map_err(|d| format!("the formatted text does not parse: {d:#?}\n{first}"))?;
    if first != second {
        return Err(format!("not idempotent:\n--- first\n{first}--- second\n{second}").into());
    }
    let before = strip_spans(&parse(text, FileId(0)).file);
    let after = strip_spans(&parse(&first, FileId(0)).file);
    if before != after {
        return Err(format!("the tree changed:\n{before:#?}\n---\n{after:#?}").into());
    }
    let (a, b) = (comment_texts(text), comment_texts(&first));
    if a != b {
        return Err(format!("comments changed:\n{a:#?}\n---\n{b:#?}").into());
    }
    if first.lines().any(|l| l.ends_with([' ', '\t'])) {
        return Err("trailing whitespace in the output".into());
    }
    if !first.is_empty() && !first.ends_with('\n') {
        return Err("no final newline".into());
    }
    Ok(first)
}

fn snapshot_case(path: PathBuf) -> Result<(), Failed> {
    let text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
    let formatted = check(&text)?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(workspace_root().join("tests/corpus/fmt/snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_input_file(&path);
    settings.bind(|| insta::assert_snapshot!(name, formatted));
    // `format_file` on a parsed tree is what `format_source` does; keep the two in step.
    let parsed = parse(&text, FileId(0));
    if format_file(&parsed.file, &text) != formatted {
        return Err("format_file and format_source disagree".into());
    }
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let root = workspace_root();
    let mut trials = Vec::new();

    let mut corpus = Vec::new();
    sr_files(&root.join("tests/corpus/fmt"), &mut corpus);
    for path in corpus {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        trials.push(Trial::test(format!("fmt::{name}"), move || {
            snapshot_case(path)
        }));
    }

    let mut others = Vec::new();
    sr_files(&root.join("policies"), &mut others);
    sr_files(&root.join("examples"), &mut others);
    ok_files(&root.join("tests/corpus"), &mut others);
    for path in others {
        let name = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .display()
            .to_string();
        trials.push(Trial::test(format!("idempotent::{name}"), move || {
            let text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
            check(&text).map(|_| ())
        }));
    }

    trials.push(Trial::test("refuses_broken_input", || {
        let broken = "signal a = (x\nroute default { to small }\n";
        match format_source(broken, FileId(0)) {
            Ok(out) => Err(format!("formatted a broken file:\n{out}").into()),
            Err(diags) if diags.iter().any(|d| d.is_error()) => Ok(()),
            Err(diags) => Err(format!("refused without an error: {diags:#?}").into()),
        }
    }));

    libtest_mimic::run(&args, trials).exit();
}
