//! The default session identity, per door: what each API's agents send names their session, so
//! a policy with a bare `session {}` pins Anthropic agents (`metadata.user_id`), Responses
//! conversations (`conversation`, or a `previous_response_id` chain the router holds) and chat
//! clients (`user`, `prompt_cache_key`, the affinity headers) without saying how.

use serde_json::{json, Value};
use src_testkit::{Answer, Router, TestResult};

const POLICY: &str = r#"
backend sim { url = "http://127.0.0.1:9/v1"  simulated = true }
model small  { backend = sim  serves = "Qwen/Qwen3-0.6B" }
model strong { backend = sim  serves = "Qwen/Qwen3-8B" }
route coding priority 10 { when contains(prompt, ["segfault"])  to strong }
route default { to small }
session { ttl = 10m }
"#;

/// Posts with a key, as agents do (a keyless client's responses are not kept to chain on).
async fn post(router: &Router, path: &str, body: &Value) -> TestResult<Answer> {
    let key = [("authorization", "Bearer agent-key")];
    router.post(path, body, &key).await
}

/// The session state and model of an answer.
fn session(answer: &Answer) -> (Option<&str>, Option<&str>) {
    (answer.header("x-sr-session"), answer.header("x-sr-model"))
}

#[tokio::test]
async fn an_anthropic_agent_is_pinned_by_its_metadata_user_id() -> TestResult {
    let router = Router::start(POLICY).await?;
    let ask = |text: &str, user: &str| {
        json!({"model": "auto", "max_tokens": 16, "metadata": {"user_id": user},
            "messages": [{"role": "user", "content": text}]})
    };
    let first = post(
        &router,
        "/v1/messages",
        &ask("a segfault", "user_1_session_a"),
    )
    .await?;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(session(&first), (Some("new"), Some("strong")));
    // `hello` alone routes to `small`; the session keeps `strong`.
    let next = post(&router, "/v1/messages", &ask("hello", "user_1_session_a")).await?;
    assert_eq!(session(&next), (Some("switched"), Some("small")));
    let again = post(&router, "/v1/messages", &ask("hello", "user_1_session_a")).await?;
    assert_eq!(session(&again), (Some("pinned"), Some("small")));
    let other = post(&router, "/v1/messages", &ask("hello", "user_1_session_b")).await?;
    assert_eq!(session(&other), (Some("new"), Some("small")));
    let anonymous = json!({"model": "auto", "max_tokens": 16,
        "messages": [{"role": "user", "content": "hello"}]});
    let anonymous = post(&router, "/v1/messages", &anonymous).await?;
    assert_eq!(anonymous.header("x-sr-session"), Some("missing-identity"));
    Ok(())
}

#[tokio::test]
async fn chat_clients_are_pinned_by_user_or_prompt_cache_key() -> TestResult {
    let router = Router::start(POLICY).await?;
    for field in ["user", "prompt_cache_key"] {
        let mut body = json!({"model": "auto", "messages": [{"role": "user", "content": "hello"}]});
        body[field] = json!(format!("{field}-42"));
        let first = post(&router, "/v1/chat/completions", &body).await?;
        assert_eq!(first.status, 200, "{}", first.text());
        assert_eq!(session(&first), (Some("new"), Some("small")), "{field}");
        let second = post(&router, "/v1/chat/completions", &body).await?;
        assert_eq!(session(&second), (Some("pinned"), Some("small")), "{field}");
    }
    Ok(())
}

#[tokio::test]
async fn a_responses_conversation_is_one_session() -> TestResult {
    let router = Router::start(POLICY).await?;
    // A conversation object names the session.
    let named = json!({"model": "auto", "input": "hello", "conversation": {"id": "conv_1"}});
    let first = post(&router, "/v1/responses", &named).await?;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.header("x-sr-session"), Some("new"));

    // A chain of `previous_response_id`s the router holds is one session from its second turn:
    // every turn names its conversation's first response.
    let one = post(
        &router,
        "/v1/responses",
        &json!({"model": "auto", "input": "a segfault"}),
    )
    .await?;
    assert_eq!(session(&one), (Some("missing-identity"), Some("strong")));
    let one_id = one.json()?["id"].as_str().unwrap_or_default().to_owned();
    let two = json!({"model": "auto", "input": "thanks", "previous_response_id": one_id});
    let two = post(&router, "/v1/responses", &two).await?;
    assert_eq!(two.status, 200, "{}", two.text());
    assert_eq!(session(&two), (Some("new"), Some("small")));
    let two_id = two.json()?["id"].as_str().unwrap_or_default().to_owned();
    let three =
        json!({"model": "auto", "input": "a segfault again", "previous_response_id": two_id});
    let three = post(&router, "/v1/responses", &three).await?;
    assert_eq!(session(&three), (Some("switched"), Some("strong")));
    let three_id = three.json()?["id"].as_str().unwrap_or_default().to_owned();
    let four =
        json!({"model": "auto", "input": "a segfault still", "previous_response_id": three_id});
    let four = post(&router, "/v1/responses", &four).await?;
    assert_eq!(session(&four), (Some("pinned"), Some("strong")));
    Ok(())
}
