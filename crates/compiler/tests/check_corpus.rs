//! The checker's corpus and the diagnostics reference, each case its own test (discovered at run
//! time, so adding a case needs no code).
//!
//! `tests/corpus/check/{ok,err}/` hold cases: a `.sr` file, or a directory that is a multi-file
//! policy (with catalogs, model directories or test fixtures beside it). The first line of a
//! case (of its first file, for a directory) may say `# expect: E011, W001`; those codes must
//! be among the diagnostics. `err` cases must have an expect line and at least one error, and
//! their snapshot lists every diagnostic. `ok` cases must have no error; their snapshot lists
//! the warnings and an outline of the checked policy (signals in dependency order with their
//! types, routes in the order they are tried), which shows the defaults and the sorting.
//!
//! Two more tests keep the corpus and `docs/diagnostics.md` honest: every checker code appears
//! in some case, and every code has a documented section whose failing example really fails
//! with that code and whose fix really fixes it.

use libtest_mimic::{Arguments, Failed, Trial};
use src_compiler::hir::{BlockActionDef, CheckedPolicy, TExpr, TExprKind, Type};
use src_compiler::load::from_texts;
use src_compiler::{check, load, CheckOptions};
use src_dsl::{codes, Diagnostic, SourceMap};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .and_then(Path::parent)
        .unwrap_or(manifest)
        .to_path_buf()
}

fn corpus() -> PathBuf {
    workspace_root().join("tests/corpus/check")
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ok,
    Err,
}

/// The cases of `dir`: `.sr` files and directories, in name order.
fn cases(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() || p.extension().is_some_and(|e| e == "sr"))
        .collect();
    out.sort();
    out
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The codes of the `# expect:` line of a case, if it has one.
fn expected_codes(path: &Path) -> Result<Option<Vec<String>>, Failed> {
    let first = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "sr"))
            .collect();
        files.sort();
        files
            .into_iter()
            .next()
            .ok_or("a directory case without `.sr` files")?
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&first).map_err(|e| e.to_string())?;
    let line = text.lines().next().unwrap_or_default();
    Ok(line.strip_prefix("# expect:").map(|codes| {
        codes
            .split(',')
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .collect()
    }))
}

/// `SEVERITY CODE file:line:col message [help]`, one line per diagnostic; paths are shown
/// relative to the case.
fn listing(diagnostics: &[Diagnostic], sources: &SourceMap) -> String {
    let mut out = String::new();
    for d in diagnostics {
        let span = d.primary_span();
        let (line, col) = sources.line_col(span.file, span.start as usize);
        let file = sources
            .get(span.file)
            .and_then(|f| f.path.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let _ = write!(
            out,
            "{} {} {file}:{line}:{col} {}",
            d.severity.as_str(),
            d.code,
            d.message
        );
        if let Some(help) = &d.help {
            let _ = write!(out, " [{help}]");
        }
        out.push('\n');
    }
    out
}

fn type_name(policy: &CheckedPolicy, ty: Type) -> String {
    match ty {
        Type::Bool => "bool".into(),
        Type::Int => "int".into(),
        Type::Score => "score".into(),
        Type::Float => "float".into(),
        Type::Text => "text".into(),
        Type::OptText => "text?".into(),
        Type::Model => "model".into(),
        Type::Class(src_compiler::hir::ClassSet::Language) => "class<language>".into(),
        Type::Class(src_compiler::hir::ClassSet::Classifier(c)) => {
            format!("class<{}>", policy.classifiers[c.index()].name)
        }
    }
}

/// A text expression of headers, body fields and `??`, as written (others elided).
fn text_expr(e: &TExpr) -> String {
    match &e.kind {
        TExprKind::Header(h) => format!("header({h:?})"),
        TExprKind::Body(path) => format!("body({path:?})"),
        TExprKind::Coalesce(a, b) => format!("{} ?? {}", text_expr(a), text_expr(b)),
        TExprKind::Str(s) => format!("{s:?}"),
        _ => "...".to_string(),
    }
}

/// What a checked policy came to, in a few readable lines.
fn outline(policy: &CheckedPolicy) -> String {
    let mut out = String::new();
    for s in &policy.signals {
        let _ = writeln!(out, "signal {}: {}", s.name, type_name(policy, s.expr.ty));
    }
    for r in &policy.routes {
        let model = |m: &src_compiler::hir::ModelId| policy.models[m.index()].name.clone();
        let mut to = model(&r.to);
        if !r.fallbacks.is_empty() {
            let rest: Vec<String> = r.fallbacks.iter().map(model).collect();
            let _ = write!(to, " else {}", rest.join(", "));
        }
        if let Some(redact) = &r.redact {
            let _ = write!(to, " redact {}", redact.names().join(", "));
        }
        match r.priority {
            Some(p) => {
                let _ = writeln!(out, "route {} priority {p} -> {to}", r.name);
            }
            None => {
                let _ = writeln!(out, "route {} (default) -> {to}", r.name);
            }
        }
    }
    for b in &policy.blocks {
        match &b.action {
            BlockActionDef::Refuse { status, message } => {
                let _ = writeln!(out, "block {}: refuse {status} {message:?}", b.name);
            }
            BlockActionDef::Redirect(m) => {
                let redact = b.redact.as_ref().map(|r| r.names().join(", "));
                let _ = writeln!(
                    out,
                    "block {}: to {}{}",
                    b.name,
                    policy.models[m.index()].name,
                    redact.map(|r| format!(" redact {r}")).unwrap_or_default()
                );
            }
        }
    }
    if let Some(c) = &policy.cache {
        let _ = writeln!(
            out,
            "cache: threshold {} ttl {:?} store {:?} skip {}",
            c.threshold,
            c.ttl_ms,
            c.store,
            c.skip_when.is_some()
        );
    }
    if let Some(s) = &policy.session {
        let _ = writeln!(
            out,
            "session: id {} tenant {} ttl {}ms store {:?} missing {:?}",
            text_expr(&s.id),
            s.tenant.is_some(),
            s.ttl_ms,
            s.store,
            s.missing
        );
    }
    if let Some(p) = &policy.protect {
        let holds: Vec<&str> = p.holds.iter().map(|h| h.name.as_str()).collect();
        let _ = writeln!(out, "protect: {:?} {holds:?}", p.mode);
    }
    let f = &policy.failure;
    let _ = writeln!(
        out,
        "failure: FailureDef {{ classifier: {:?}, store: {:?}, backend: {:?} }}",
        f.classifier, f.store, f.backend
    );
    if let Some(c) = f.cooldown {
        let _ = writeln!(out, "cooldown: after {} for {}ms", c.after, c.millis);
    }
    let _ = writeln!(out, "router: {:?}", policy.router.names);
    for b in &policy.budgets {
        let per = match &b.per {
            src_compiler::hir::BudgetPerDef::Tenant => "tenant".to_string(),
            src_compiler::hir::BudgetPerDef::Text(e) => text_expr(e),
        };
        let _ = writeln!(
            out,
            "budget {}: per {per} window {}ms {} {} exceeded {:?}",
            b.name,
            b.window_ms,
            b.limit,
            b.unit.as_str(),
            b.exceeded
        );
    }
    for t in &policy.tests {
        let _ = writeln!(out, "test {}: {} given", t.name, t.givens.len());
    }
    out
}

fn snapshot(name: &str, path: &Path, text: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(corpus().join("snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_input_file(path);
    settings.bind(|| insta::assert_snapshot!(name, text));
}

fn run_case(path: &Path, kind: Kind) -> Result<(), Failed> {
    let source = load(path).map_err(|e| e.to_string())?;
    let outcome = check(source.clone(), &CheckOptions::default());
    let list = listing(&outcome.diagnostics, &source.sources);
    let found: BTreeSet<&str> = outcome.diagnostics.iter().map(|d| d.code.0).collect();
    let expected = expected_codes(path)?;
    for code in expected.iter().flatten() {
        if !found.contains(code.as_str()) {
            return Err(format!("expected {code}, got:\n{list}").into());
        }
    }
    let name = match kind {
        Kind::Ok => format!("ok__{}", stem(path)),
        Kind::Err => format!("err__{}", stem(path)),
    };
    match kind {
        Kind::Err => {
            if expected.is_none() {
                return Err("an err case must start with `# expect: CODE, ...`".into());
            }
            if !outcome.has_errors() {
                return Err(format!("expected errors, got:\n{list}").into());
            }
            if outcome.policy.is_some() {
                return Err("a policy came out of a check with errors".into());
            }
            snapshot(&name, path, &list);
        }
        Kind::Ok => {
            if outcome.has_errors() {
                return Err(format!("expected no errors, got:\n{list}").into());
            }
            let policy = outcome
                .policy
                .ok_or("no policy out of a check without errors")?;
            snapshot(&name, path, &format!("{list}---\n{}", outline(&policy)));
        }
    }
    Ok(())
}

/// Codes the checker reports (the parser's syntax codes, the runtime's and the deployment
/// checks' `W02x`, which need a gateway config, are covered by their own tests).
fn checker_codes() -> Vec<&'static str> {
    codes::ALL
        .iter()
        .map(|(c, _)| c.0)
        .filter(|c| {
            (c.starts_with('W') && !c.starts_with("W02"))
                || ["E01", "E02", "E03", "E04", "E05"]
                    .iter()
                    .any(|p| c.starts_with(p))
        })
        .collect()
}

fn coverage() -> Result<(), Failed> {
    let mut found = BTreeSet::new();
    for dir in ["ok", "err"] {
        for path in cases(&corpus().join(dir)) {
            let source = load(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let outcome = check(source, &CheckOptions::default());
            found.extend(outcome.diagnostics.iter().map(|d| d.code.0));
        }
    }
    let missing: Vec<&str> = checker_codes()
        .into_iter()
        .filter(|c| !found.contains(c))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("no corpus case produces {}", missing.join(", ")).into())
    }
}

/// One `## CODE title` section of `docs/diagnostics.md`: its `sr` blocks with their info words.
struct Section {
    code: String,
    blocks: Vec<(Vec<String>, String)>,
}

fn doc_sections(text: &str) -> Vec<Section> {
    let mut sections: Vec<Section> = Vec::new();
    let mut block: Option<(Vec<String>, String)> = None;
    for line in text.lines() {
        if let Some((words, body)) = &mut block {
            if line.trim_start().starts_with("```") {
                let done = (std::mem::take(words), std::mem::take(body));
                if let Some(s) = sections.last_mut() {
                    s.blocks.push(done);
                }
                block = None;
            } else {
                body.push_str(line);
                body.push('\n');
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("## ") {
            let code = rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
            sections.push(Section {
                code,
                blocks: Vec::new(),
            });
        } else if let Some(info) = line.trim_start().strip_prefix("```sr") {
            let words = info.split_whitespace().map(str::to_string).collect();
            block = Some((words, String::new()));
        }
    }
    sections
}

/// Checks a documentation example with the shared prelude (unless `standalone`), rooted at the
/// docs fixtures so catalogs and model directories resolve.
fn check_example(text: &str, standalone: bool) -> (Vec<Diagnostic>, String) {
    let root = corpus().join("fixtures");
    let mut files = vec![(root.join("example.sr"), text.to_string())];
    if !standalone {
        let prelude = std::fs::read_to_string(root.join("prelude.sr")).unwrap_or_default();
        files.push((root.join("prelude.sr"), prelude));
    }
    let source = from_texts(root, files);
    let outcome = check(source.clone(), &CheckOptions::default());
    let list = listing(&outcome.diagnostics, &source.sources);
    (outcome.diagnostics, list)
}

fn docs() -> Result<(), Failed> {
    let path = workspace_root().join("docs/diagnostics.md");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let sections = doc_sections(&text);
    let mut problems = Vec::new();
    let prelude = std::fs::read_to_string(corpus().join("fixtures/prelude.sr"))
        .map_err(|e| format!("prelude: {e}"))?;
    for line in prelude.lines().filter(|l| !l.starts_with('#')) {
        if !text.lines().any(|l| l == line) {
            problems.push(format!("the prelude shown in the document lacks `{line}`"));
        }
    }
    for (code, _) in codes::ALL {
        let Some(section) = sections.iter().find(|s| s.code == code.0) else {
            problems.push(format!("{}: no `## {} ...` section", code.0, code.0));
            continue;
        };
        let [(words, failing), (fix_words, fix), ..] = section.blocks.as_slice() else {
            problems.push(format!("{}: needs a failing ```sr block and a fix", code.0));
            continue;
        };
        let has = |w: &[String], word: &str| w.iter().any(|x| x == word);
        let (diags, list) = check_example(failing, has(words, "standalone"));
        if has(words, "serve") || has(words, "envoy") {
            // Reported by `src serve`, or by `check --envoy` with a gateway config, not by
            // `check` alone: the example must at least check cleanly.
            if diags.iter().any(Diagnostic::is_error) {
                problems.push(format!("{}: the example does not check:\n{list}", code.0));
            }
        } else {
            if !diags.iter().any(|d| d.code == *code) {
                problems.push(format!(
                    "{}: the failing example gives instead:\n{list}",
                    code.0
                ));
            }
            let others = diags.iter().any(|d| d.is_error() && d.code != *code);
            if others {
                problems.push(format!(
                    "{}: the failing example has other errors:\n{list}",
                    code.0
                ));
            }
        }
        let (diags, list) = check_example(fix, has(fix_words, "standalone"));
        if diags.iter().any(|d| d.is_error() || d.code == *code) {
            problems.push(format!("{}: the fix does not fix it:\n{list}", code.0));
        }
    }
    for s in &sections {
        if !codes::ALL.iter().any(|(c, _)| c.0 == s.code) {
            problems.push(format!("a section for the unknown code `{}`", s.code));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n").into())
    }
}

fn main() {
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    for (dir, kind, least) in [("ok", Kind::Ok, 10), ("err", Kind::Err, 50)] {
        let found = cases(&corpus().join(dir));
        let count = found.len();
        // A moved or emptied corpus must fail, not pass with nothing run.
        trials.push(Trial::test(
            format!("{dir}::corpus_is_present"),
            move || {
                if count >= least {
                    Ok(())
                } else {
                    Err(format!("expected at least {least} cases in {dir}/, found {count}").into())
                }
            },
        ));
        for path in found {
            let name = format!("{dir}::{}", stem(&path));
            trials.push(Trial::test(name, move || run_case(&path, kind)));
        }
    }
    trials.push(Trial::test("coverage::every_checker_code", coverage));
    trials.push(Trial::test("docs::every_code_documented", docs));
    let root = workspace_root();
    for dir in ["policies", "examples"] {
        for path in policy_dirs(&root.join(dir)) {
            let relative = path.strip_prefix(&root).unwrap_or(&path).display();
            let name = format!("shipped::{relative}");
            trials.push(Trial::test(name, move || {
                let source = load(&path).map_err(|e| e.to_string())?;
                let outcome = check(source.clone(), &CheckOptions::default());
                if outcome.has_errors() {
                    let list = listing(&outcome.diagnostics, &source.sources);
                    return Err(format!("errors in a shipped policy:\n{list}").into());
                }
                Ok(())
            }));
        }
    }
    libtest_mimic::run(&args, trials).exit();
}

/// Every directory under `top` that holds `.sr` files: a shipped policy (examples nest some).
fn policy_dirs(top: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![top.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        if entries
            .iter()
            .any(|p| p.extension().is_some_and(|e| e == "sr"))
        {
            found.push(dir.clone());
        }
        dirs.extend(entries.into_iter().filter(|p| p.is_dir()));
    }
    found.sort();
    found
}
