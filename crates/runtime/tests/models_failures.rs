//! A model policy that cannot run is refused at load with a diagnostic that says why — missing
//! directory, corrupt `model.onnx`, labels that differ from `id2label`, a guard whose unsafe
//! label cannot be told — never a panic, and the old policy keeps serving on a reload.

use std::path::Path;
use std::sync::Arc;

use src_runtime::models::{ModelOptions, OnnxModels};
use src_runtime::ServeError;
use src_testkit::models::{load_library, model_dir, start};
use src_testkit::TestResult;

const HEAD: &str = r#"
backend sim { url = "http://127.0.0.1:9/v1"  simulated = true }
model small { backend = sim  serves = "Qwen/Qwen3-0.6B" }
route default { to small }
"#;

/// Starts a server on `policy` and answers the load failure's text (message, codes, helps).
async fn refusal(dir: &Path, policy: &str) -> TestResult<String> {
    load_library()?;
    std::fs::write(dir.join("policy.sr"), format!("{HEAD}{policy}"))?;
    let models = Arc::new(OnnxModels::new(ModelOptions::default()));
    match start(dir, models).await {
        Ok(_) => Err("the server started".into()),
        Err(ServeError::Policy(failure)) => Ok(failure
            .diagnostics
            .iter()
            .map(|d| {
                let labels: Vec<&str> = d.labels.iter().map(|l| l.message.as_str()).collect();
                format!(
                    "{} {} | {} | {} | {}",
                    d.code,
                    d.message,
                    labels.join("; "),
                    d.notes.join("; "),
                    d.help.clone().unwrap_or_default()
                )
            })
            .chain([failure.message])
            .collect::<Vec<_>>()
            .join("\n")),
        Err(other) => Err(format!("unexpected error: {other}").into()),
    }
}

/// A copy of a model directory with `model.onnx` replaced.
fn copy_with_model(from: &Path, to: &Path, onnx: &[u8]) -> TestResult {
    std::fs::create_dir_all(to)?;
    for name in ["tokenizer.json", "config.json"] {
        std::fs::copy(from.join(name), to.join(name))?;
    }
    std::fs::write(to.join("model.onnx"), onnx)?;
    Ok(())
}

#[tokio::test]
async fn a_missing_model_directory_refuses_the_policy() -> TestResult {
    let dir = tempfile::tempdir()?;
    let text = refusal(
        dir.path(),
        r#"guard g { path = "nowhere/guard" }
           signal a = g(prompt)
           route risky priority 1 { when a > 0.5 to small }"#,
    )
    .await?;
    assert!(text.contains("E060"), "{text}");
    assert!(text.contains("guard `g` cannot run"), "{text}");
    assert!(text.contains("nowhere/guard"), "{text}");
    assert!(text.contains("scripts/models.sh"), "{text}");
    Ok(())
}

#[tokio::test]
async fn a_corrupt_model_file_refuses_the_policy() -> TestResult {
    let dir = tempfile::tempdir()?;
    let broken = dir.path().join("broken");
    copy_with_model(
        &model_dir("prompt_guard")?,
        &broken,
        b"this is not an onnx graph",
    )?;
    let text = refusal(
        dir.path(),
        r#"guard g { path = "broken" }
           signal a = g(prompt)
           route risky priority 1 { when a > 0.5 to small }"#,
    )
    .await?;
    assert!(text.contains("E060"), "{text}");
    assert!(text.contains("model.onnx"), "{text}");
    Ok(())
}

#[tokio::test]
async fn an_encoder_graph_declared_as_a_guard_is_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let wrong = dir.path().join("wrong");
    let guard = model_dir("prompt_guard")?;
    let onnx = std::fs::read(model_dir("minilm")?.join("model.onnx"))?;
    copy_with_model(&guard, &wrong, &onnx)?;
    let text = refusal(
        dir.path(),
        r#"guard g { path = "wrong" }
           signal a = g(prompt)
           route risky priority 1 { when a > 0.5 to small }"#,
    )
    .await?;
    assert!(text.contains("no `logits` output"), "{text}");
    assert!(text.contains("`last_hidden_state`"), "{text}");
    Ok(())
}

#[tokio::test]
async fn labels_that_differ_from_id2label_are_refused_naming_both_sets() -> TestResult {
    let dir = tempfile::tempdir()?;
    let domain = model_dir("domain")?;
    let text = refusal(
        dir.path(),
        &format!(
            r#"classifier d {{ path = "{}"  labels = [math, code, law, sports] }}
               signal t = d(prompt)
               route sporty priority 1 {{ when t is sports to small }}"#,
            domain.display()
        ),
    )
    .await?;
    assert!(text.contains("E042"), "{text}");
    assert!(text.contains("sports"), "{text}");
    assert!(text.contains("other"), "{text}");
    Ok(())
}

#[tokio::test]
async fn a_guard_without_a_clear_unsafe_label_is_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let odd = dir.path().join("odd");
    let guard = model_dir("prompt_guard")?;
    copy_with_model(&guard, &odd, &std::fs::read(guard.join("model.onnx"))?)?;
    let config =
        std::fs::read_to_string(guard.join("config.json"))?.replace("\"benign\"", "\"calm\"");
    std::fs::write(odd.join("config.json"), config)?;
    let text = refusal(
        dir.path(),
        r#"guard g { path = "odd" }
           signal a = g(prompt)
           route risky priority 1 { when a > 0.5 to small }"#,
    )
    .await?;
    assert!(text.contains("E042"), "{text}");
    assert!(text.contains("positive"), "{text}");
    Ok(())
}
