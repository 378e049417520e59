//! The decision corpus: every `tests/corpus/decide/*.sr` policy's `test` cases, each run on the
//! interpreter and on the JIT as its own named test. Adding a case needs no code: write a `test`
//! block in a corpus file.

#![allow(
    clippy::expect_used,
    reason = "helpers outside `#[test]` functions fail the test on an unexpected error"
)]

use libtest_mimic::{Arguments, Failed, Trial};
use src_compiler::testing::run_case;
use src_compiler::{check, compile, load, CheckOptions, EngineKind};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus/decide")
}

fn trials() -> Vec<Trial> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("the decision corpus directory exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sr"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "the decision corpus lost files");
    let mut trials = Vec::new();
    for file in files {
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let source = load(&file).expect("corpus file loads");
        let outcome = check(source, &CheckOptions::default());
        let Some(checked) = outcome.policy else {
            let messages: Vec<String> = outcome
                .diagnostics
                .iter()
                .map(|d| d.message.clone())
                .collect();
            trials.push(Trial::test(format!("{stem}::checks"), move || {
                Err(Failed::from(format!("policy has errors: {messages:?}")))
            }));
            continue;
        };
        assert!(!checked.tests.is_empty(), "{stem} has no test cases");
        for engine in [EngineKind::Interp, EngineKind::Jit] {
            let policy =
                Arc::new(compile(checked.clone(), engine).expect("corpus policy compiles"));
            for index in 0..policy.checked.tests.len() {
                let policy = Arc::clone(&policy);
                let name = format!(
                    "{stem}::{}::{}",
                    policy.checked.tests[index].name,
                    engine.as_str()
                );
                trials.push(Trial::test(name, move || {
                    let result = run_case(&policy, &policy.checked.tests[index]);
                    if result.passed {
                        Ok(())
                    } else {
                        Err(Failed::from(format!(
                            "expected {}, got {}; signals: {:?}",
                            result.expected, result.actual, result.signals
                        )))
                    }
                }));
            }
        }
    }
    trials
}

fn main() {
    let args = Arguments::from_args();
    libtest_mimic::run(&args, trials()).exit();
}
