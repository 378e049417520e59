//! What a Messages request carries reaches an OpenAI-only backend, or is refused by name: text
//! documents reach the model and the routes, an image a tool returned follows its result, a
//! failed result says so, a PDF is a 400 in Anthropic's shape; and every answer has whole
//! usage, the router's own count where the backend reported none, the same streamed or not.

use serde_json::{json, Value};
use src_testkit::upstream::{Reply, Seen, Upstream};
use src_testkit::{Answer, Router, TestResult, POLICY};

async fn messages(router: &Router, body: &Value, headers: &[(&str, &str)]) -> TestResult<Answer> {
    router.post("/v1/messages", body, headers).await
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

/// An OpenAI-compatible backend that reports no usage at all, whole or streamed.
fn no_usage(seen: &Seen) -> Reply {
    if seen.method == "GET" {
        return Reply::json(&json!({"object": "list", "data": []}));
    }
    if seen.body["stream"] == true {
        let chunk = |delta: Value, finish: Value| {
            let chunk = json!({"id": "chatcmpl-5", "object": "chat.completion.chunk", "model": "quiet",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
            format!("data: {chunk}\n\n")
        };
        let stream = [
            chunk(json!({"role": "assistant", "content": ""}), Value::Null),
            chunk(json!({"content": "the answer "}), Value::Null),
            chunk(json!({"content": "is 42"}), Value::Null),
            chunk(json!({}), json!("stop")),
            "data: [DONE]\n\n".to_owned(),
        ];
        return Reply::stream(stream.concat());
    }
    Reply::json(
        &json!({"id": "chatcmpl-5", "object": "chat.completion", "model": "quiet",
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "the answer is 42"}}]}),
    )
}

#[tokio::test]
async fn usage_is_whole_and_agrees_streamed_or_not() -> TestResult {
    let backend = Upstream::start(no_usage).await?;
    let policy = format!(
        "backend quiet {{ url = \"{}\" }}\nmodel m {{ backend = quiet  serves = \"quiet\" }}\nroute default {{ to m }}\n",
        backend.url
    );
    let router = Router::start(&policy).await?;
    let question = "what is six times seven?";
    let body = json!({"model": "auto", "max_tokens": 32, "messages": [{"role": "user", "content": question}]});
    let whole = messages(&router, &body, &[("x-request-id", "quiet-1")]).await?;
    assert_eq!(whole.status, 200, "{}", whole.text());
    // ⌈24 bytes / 4⌉ in, ⌈16 bytes / 4⌉ out.
    let expected = json!({"input_tokens": 6, "output_tokens": 4});
    assert_eq!(whole.json()?["usage"], expected);
    let line = router.log_line("quiet-1").await?;
    assert_eq!(
        (
            &line["prompt_tokens"],
            &line["completion_tokens"],
            &line["usage_estimated"]
        ),
        (&json!(6), &json!(4), &json!(true)),
        "{line}"
    );

    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let streamed = messages(&router, &streamed, &[("x-request-id", "quiet-2")]).await?;
    assert_eq!(streamed.status, 200, "{}", streamed.text());
    let events: Vec<Value> = streamed
        .text()
        .split("\n\n")
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    let start = events
        .iter()
        .find(|e| e["type"] == "message_start")
        .cloned()
        .unwrap_or_default();
    assert_eq!(start["message"]["usage"]["input_tokens"], 6, "{start}");
    let delta = events
        .iter()
        .find(|e| e["type"] == "message_delta")
        .cloned()
        .unwrap_or_default();
    assert_eq!(delta["usage"], expected, "{delta}");
    let line = router.log_line("quiet-2").await?;
    assert_eq!(
        (
            &line["prompt_tokens"],
            &line["completion_tokens"],
            &line["usage_estimated"]
        ),
        (&json!(6), &json!(4), &json!(true)),
        "{line}"
    );
    Ok(())
}
