//! Without the ONNX Runtime library a model policy is refused with a message that names
//! `ORT_DYLIB_PATH` and `scripts/models.sh`, never a panic. Its own test binary: the library is
//! loaded at most once per process, and this process must never load it.

use std::sync::Arc;

use src_runtime::models::{load_from, ModelOptions, OnnxModels};
use src_runtime::{Components, ServeError};
use src_testkit::TestResult;

#[tokio::test]
async fn a_missing_library_refuses_model_policies_and_serves_the_rest() -> TestResult {
    let err = load_from(std::path::Path::new("/nowhere/libonnxruntime.so"))
        .err()
        .ok_or("a missing file loaded")?;
    assert!(
        err.contains("ORT_DYLIB_PATH") && err.contains("not a file"),
        "{err}"
    );
    let not_a_library = std::env::current_exe()?;
    let err = load_from(&not_a_library)
        .err()
        .ok_or("an executable loaded as ONNX Runtime")?;
    assert!(err.contains("cannot load ONNX Runtime"), "{err}");

    std::env::set_var("ORT_DYLIB_PATH", "/nowhere/libonnxruntime.so.1.31.1");
    let dir = tempfile::tempdir()?;
    let head = r#"
        backend sim { url = "http://127.0.0.1:9/v1"  simulated = true }
        model small { backend = sim  serves = "Qwen/Qwen3-0.6B" }
        route default { to small }
    "#;
    std::fs::write(
        dir.path().join("policy.sr"),
        format!("{head}\nguard g {{ path = \"m\" }}\nsignal a = g(prompt)\nroute r priority 1 {{ when a > 0.5 to small }}"),
    )?;
    let models = || Components {
        models: Arc::new(OnnxModels::new(ModelOptions::default())),
        sessions: Arc::new(src_runtime::hooks::NoSessions),
        log: src_runtime::log::RequestLog::Off,
        links: Default::default(),
    };
    let cfg = src_testkit::config(dir.path());
    match src_runtime::spawn(cfg.clone(), models()).await {
        Err(ServeError::Policy(failure)) => {
            let d = failure.diagnostics.first().ok_or("no diagnostic")?;
            assert_eq!(d.code.to_string(), "E060");
            assert!(d.message.contains("ORT_DYLIB_PATH"), "{}", d.message);
            let help = d.help.clone().unwrap_or_default();
            assert!(help.contains("scripts/models.sh"), "{help}");
        }
        Ok(_) => return Err("a model policy started without ONNX Runtime".into()),
        Err(other) => return Err(format!("unexpected error: {other}").into()),
    }

    // A policy without models needs no library.
    std::fs::write(dir.path().join("policy.sr"), head)?;
    let server = src_runtime::spawn(cfg, models()).await?;
    server.shutdown().await?;
    Ok(())
}
