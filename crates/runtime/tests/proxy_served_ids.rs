//! A true drop-in for a Dynamo or vLLM frontend: clients keep sending the served ids they sent
//! the backend, and `src serve` takes an id bound to one logical model as that model, refuses
//! one bound to several, and lists them in `GET /v1/models`.

use serde_json::{json, Value};
use src_testkit::{Router, TestResult};

fn quickstart() -> TestResult<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/quickstart/policy.sr");
    Ok(std::fs::read_to_string(path)?)
}

fn named(model: &str, text: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": text}]})
}

#[tokio::test]
async fn the_quickstart_answers_a_served_id_as_its_model() -> TestResult {
    let router = Router::start(&quickstart()?).await?;
    // `strong` serves `Qwen/Qwen3-8B`; a plain prompt would route to `small`.
    let answer = router
        .chat(
            &named("Qwen/Qwen3-8B", "hello"),
            &[("x-request-id", "sid-1")],
        )
        .await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.header("x-sr-model"), Some("strong"));
    // Reported like any model the client names: no route decided.
    assert_eq!(answer.header("x-sr-route"), Some("-"));
    let line = router.log_line("sid-1").await?;
    assert_eq!(line["model"], "strong");
    assert_eq!(line["served"], "Qwen/Qwen3-8B");
    Ok(())
}

#[tokio::test]
async fn blocks_still_apply_to_a_served_id() -> TestResult {
    let text = r#"
backend sim { url = "http://127.0.0.1:9/v1"  simulated = true }
model small  { backend = sim  serves = "Qwen/Qwen3-0.6B" }
model strong { backend = sim  serves = "Qwen/Qwen3-8B" }
block secrets { when contains(prompt, ["password"])  status = 422 }
route default { to small else strong }
"#;
    let router = Router::start(text).await?;
    let answer = router
        .chat(&named("Qwen/Qwen3-8B", "my password is hunter2"), &[])
        .await?;
    assert_eq!(answer.status, 422, "{}", answer.text());
    assert_eq!(answer.header("x-sr-block"), Some("secrets"));
    Ok(())
}

#[tokio::test]
async fn a_served_id_bound_to_several_models_is_refused_naming_them() -> TestResult {
    let text = r#"
backend a { url = "http://127.0.0.1:9/v1"  simulated = true }
backend b { url = "http://127.0.0.1:9/v1"  simulated = true }
model small     { backend = a  serves = "Qwen/Qwen3-0.6B" }
model strong    { backend = a  serves = "Qwen/Qwen3-8B" }
model strong_eu { backend = b  serves = "Qwen/Qwen3-8B" }
route default { to small else strong, strong_eu }
"#;
    let router = Router::start(text).await?;
    let answer = router.chat(&named("Qwen/Qwen3-8B", "hello"), &[]).await?;
    assert_eq!(answer.status, 400, "{}", answer.text());
    let (message, code, kind) = answer.error()?;
    assert_eq!(
        (code.as_deref(), kind.as_str()),
        (Some("model_ambiguous"), "invalid_request_error")
    );
    assert!(message.contains("`strong`, `strong_eu`"), "{message}");
    assert_eq!(answer.json()?["error"]["param"], "model");
    // The one bound to a single model still works; the shared one is not listed.
    let small = router.chat(&named("Qwen/Qwen3-0.6B", "hello"), &[]).await?;
    assert_eq!(small.header("x-sr-model"), Some("small"));
    let list = router.get("/v1/models").await?.json()?;
    let served: Vec<(&str, &str)> = list["data"]
        .as_array()
        .ok_or("no data")?
        .iter()
        .filter(|m| m["owned_by"] == "src-served")
        .filter_map(|m| Some((m["id"].as_str()?, m["served_id_of"].as_str()?)))
        .collect();
    assert_eq!(served, [("Qwen/Qwen3-0.6B", "small")]);
    Ok(())
}
