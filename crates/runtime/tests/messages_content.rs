//! What a Messages request carries reaches an OpenAI-only backend, or is refused by name: text
//! documents reach the model and the routes, an image a tool returned follows its result, a
//! failed result says so, a PDF is a 400 in Anthropic's shape.

use hyper::Method;
use serde_json::{json, Value};
use src_testkit::{Answer, Router, TestResult, POLICY};

async fn messages(router: &Router, body: &Value, headers: &[(&str, &str)]) -> TestResult<Answer> {
    router
        .client
        .send(
            Method::POST,
            &router.url("/v1/messages"),
            body.to_string(),
            headers,
        )
        .await
}

/// The chat body the simulator received last.
fn last_sent(router: &Router) -> TestResult<Value> {
    let sims = router.sims();
    let received = sims
        .iter()
        .flat_map(|sim| sim.received())
        .filter(|r| r.path == "/v1/chat/completions")
        .last()
        .ok_or("the simulator received no chat request")?;
    Ok(serde_json::from_slice(&received.body)?)
}

#[tokio::test]
async fn a_text_document_reaches_the_model_and_the_routes() -> TestResult {
    let router = Router::start(POLICY).await?;
    let body = json!({"model": "auto", "max_tokens": 32, "messages": [{"role": "user", "content": [
        {"type": "document", "title": "crash.log",
         "source": {"type": "text", "media_type": "text/plain", "data": "the service died with a segfault"}},
        {"type": "text", "text": "what happened?"}
    ]}]});
    let answer = messages(&router, &body, &[]).await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    // The document's text is what the routes read: `coding` matches on it alone.
    assert_eq!(answer.header("x-sr-route"), Some("coding"));
    let sent = last_sent(&router)?;
    let user = sent["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        user["content"],
        json!([
            {"type": "text", "text": "crash.log"},
            {"type": "text", "text": "the service died with a segfault"},
            {"type": "text", "text": "what happened?"}
        ])
    );

    // A message of a document alone is not sent empty.
    let alone = json!({"model": "auto", "max_tokens": 32, "messages": [{"role": "user", "content": [
        {"type": "document", "source": {"type": "content", "content": "release notes: all green"}}
    ]}]});
    let answer = messages(&router, &alone, &[]).await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(
        last_sent(&router)?["messages"][0]["content"],
        json!([{"type": "text", "text": "release notes: all green"}])
    );
    Ok(())
}

#[tokio::test]
async fn a_pdf_for_an_openai_backend_is_refused_by_name() -> TestResult {
    let router = Router::start(POLICY).await?;
    let body = json!({"model": "auto", "max_tokens": 32, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "summarise this"},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"}}
    ]}]});
    let refused = messages(&router, &body, &[]).await?;
    assert_eq!(refused.status, 400, "{}", refused.text());
    let error = refused.json()?;
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("`messages[0].content[1]` is a `document` block with a `base64` source (application/pdf)"),
        "{message}"
    );
    let sent: usize = router.sims().iter().map(|s| s.received().len()).sum();
    assert_eq!(sent, 0, "nothing reached the backend");
    Ok(())
}

#[tokio::test]
async fn a_failed_result_and_a_returned_image_reach_the_model() -> TestResult {
    let router = Router::start(POLICY).await?;
    let body = json!({"model": "auto", "max_tokens": 32,
    "tools": [{"name": "screenshot", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": "take a screenshot"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "screenshot", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true, "content": [
                {"type": "text", "text": "the display is locked"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
            ]}
        ]}
    ]});
    let answer = messages(&router, &body, &[]).await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let sent = last_sent(&router)?;
    let sent = sent["messages"].as_array().cloned().unwrap_or_default();
    let tool = sent
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap_or_default();
    let content = tool["content"].as_str().unwrap_or_default();
    assert!(
        content.starts_with("Error: the display is locked"),
        "{tool}"
    );
    let last = sent.last().cloned().unwrap_or_default();
    assert_eq!(last["role"], "user", "{sent:?}");
    assert_eq!(
        last["content"][1],
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}})
    );
    Ok(())
}
