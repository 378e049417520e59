//! When a session's owner is lost: two real simulator backends behind a real `src serve`, the
//! pinned model's backend stopped in the middle of a session, and what `owner_lost` makes of
//! the next call (503 with `Retry-After` and the pin kept, or a fallback reported as a switch).
//! Also session identities read from the request body.

use serde_json::{json, Value};
use src_runtime::sim::{SimConfig, SimHandle, SimModel};
use src_testkit::{Answer, Router, TestResult};

const SMALL: &str = "Qwen/Qwen3-0.6B";
const STRONG: &str = "Qwen/Qwen3-8B";

async fn sim(id: &str) -> TestResult<SimHandle> {
    let cfg = SimConfig {
        models: vec![SimModel::new(id)],
        time_scale: 0.0,
        ..SimConfig::default()
    };
    Ok(SimHandle::spawn(cfg).await?)
}

/// `small` on one simulator, `strong` on another, the default route `to small else strong`.
fn policy(small: &SimHandle, strong: &SimHandle, protect: &str) -> String {
    format!(
        r#"
backend a {{ url = "{}/v1"  timeout = 2s }}
backend b {{ url = "{}/v1"  timeout = 2s }}
model small  {{ backend = a  serves = "{SMALL}" }}
model strong {{ backend = b  serves = "{STRONG}" }}
route default {{ to small else strong }}
session {{ ttl = 10m }}
{protect}
"#,
        small.base_url(),
        strong.base_url()
    )
}

fn plain(text: &str) -> Value {
    json!({"model": "auto", "messages": [{"role": "user", "content": text}]})
}

/// A turn inside a tool loop: the last message answers the assistant's tool call.
fn tool_turn() -> Value {
    json!({"model": "auto", "messages": [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt b.txt"}
    ]})
}

async fn turn(router: &Router, body: &Value, session: &str, id: &str) -> TestResult<Answer> {
    router
        .chat(body, &[("x-session-id", session), ("x-request-id", id)])
        .await
}

/// Chat completions a simulator received (the router's health probes aside).
fn chats(sim: &SimHandle) -> usize {
    sim.received()
        .iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .count()
}

async fn metrics(router: &Router) -> TestResult<String> {
    Ok(router.admin_get("/metrics").await?.text())
}

fn state(a: &Answer) -> (u16, Option<&str>, Option<&str>, Option<&str>) {
    (
        a.status,
        a.header("x-sr-model"),
        a.header("x-sr-session"),
        a.header("x-sr-switch-reason"),
    )
}

#[tokio::test]
async fn a_lost_owner_fails_a_tool_loop_turn_and_keeps_the_pin() -> TestResult {
    let (small, strong) = (sim(SMALL).await?, sim(STRONG).await?);
    let protect = r#"protect { hold "tool call in flight" when request.tool_loop }"#;
    let router = Router::start(&policy(&small, &strong, protect)).await?;
    let first = turn(&router, &plain("hello"), "s1", "o-1").await?;
    assert_eq!(state(&first), (200, Some("small"), Some("new"), None));

    small.shutdown().await?;
    // Inside a tool loop the default is `fail`: 503, retry on the same owner.
    let lost = turn(&router, &tool_turn(), "s1", "o-2").await?;
    assert_eq!(lost.status, 503, "{}", lost.text());
    assert_eq!(lost.header("retry-after"), Some("1"));
    assert_eq!(lost.header("x-sr-session"), Some("pinned"));
    let (message, code, kind) = lost.error()?;
    assert_eq!(
        (code.as_deref(), kind.as_str()),
        (Some("owner_lost"), "server_error")
    );
    assert!(message.contains("`small`"), "{message}");
    assert_eq!(chats(&strong), 0, "the fallback was not tried");
    assert!(metrics(&router)
        .await?
        .contains(r#"src_session_owner_lost_total{model="small",action="fail"} 1"#));

    // Outside a tool loop the default is `fallback`: answered, reported as a switch.
    let moved = turn(&router, &plain("and now?"), "s1", "o-3").await?;
    assert_eq!(
        state(&moved),
        (200, Some("strong"), Some("switched"), Some("owner-lost"))
    );
    assert_eq!(moved.header("x-sr-fallbacks"), Some("small:connect"));
    let line = router.log_line("o-3").await?;
    assert_eq!(
        (&line["session"], &line["switch_reason"]),
        (&json!("switched"), &json!("owner-lost"))
    );
    assert!(metrics(&router)
        .await?
        .contains(r#"src_session_owner_lost_total{model="small",action="fallback"} 1"#));

    // `fallback` does not move the pin: the next tool-loop turn still belongs to `small`.
    let again = turn(&router, &tool_turn(), "s1", "o-4").await?;
    assert_eq!(
        (again.status, again.header("x-sr-session")),
        (503, Some("pinned"))
    );
    Ok(())
}

#[tokio::test]
async fn owner_lost_move_hands_the_session_to_the_fallback() -> TestResult {
    let (small, strong) = (sim(SMALL).await?, sim(STRONG).await?);
    let protect = r#"protect {
  owner_lost = move
  hold "tool call in flight" when request.tool_loop
}"#;
    let router = Router::start(&policy(&small, &strong, protect)).await?;
    let first = turn(&router, &plain("hello"), "s2", "m-1").await?;
    assert_eq!(state(&first), (200, Some("small"), Some("new"), None));
    small.shutdown().await?;
    let lost = turn(&router, &tool_turn(), "s2", "m-2").await?;
    assert_eq!(
        state(&lost),
        (200, Some("strong"), Some("switched"), Some("owner-lost"))
    );
    assert!(metrics(&router)
        .await?
        .contains(r#"src_session_owner_lost_total{model="small",action="move"} 1"#));
    // The pin is `strong` now: the route proposes `small` again, and the tool-loop hold keeps
    // the session on its new owner without touching `small`.
    let next = turn(&router, &tool_turn(), "s2", "m-3").await?;
    assert_eq!(state(&next), (200, Some("strong"), Some("held"), None));
    assert_eq!(next.header("x-sr-fallbacks"), None);
    Ok(())
}

#[tokio::test]
async fn observe_mode_reports_the_failure_it_would_answer_and_falls_back() -> TestResult {
    let (small, strong) = (sim(SMALL).await?, sim(STRONG).await?);
    let protect = r#"protect {
  mode = observe
  hold "tool call in flight" when request.tool_loop
}"#;
    let router = Router::start(&policy(&small, &strong, protect)).await?;
    turn(&router, &plain("hello"), "s3", "v-1").await?;
    small.shutdown().await?;
    let lost = turn(&router, &tool_turn(), "s3", "v-2").await?;
    assert_eq!(
        state(&lost),
        (200, Some("strong"), Some("observed"), Some("owner-lost"))
    );
    assert_eq!(lost.header("x-sr-protection"), Some("owner-lost"));
    let line = router.log_line("v-2").await?;
    assert_eq!(line["protection"], "owner-lost");
    assert!(metrics(&router)
        .await?
        .contains(r#"src_session_owner_lost_total{model="small",action="observed"} 1"#));
    Ok(())
}

#[tokio::test]
async fn a_body_field_is_a_session_identity() -> TestResult {
    let (small, strong) = (sim(SMALL).await?, sim(STRONG).await?);
    let text = format!(
        r#"
backend a {{ url = "{}/v1" }}
backend b {{ url = "{}/v1" }}
model small  {{ backend = a  serves = "{SMALL}" }}
model strong {{ backend = b  serves = "{STRONG}" }}
route coding priority 10 {{ when contains(prompt, ["segfault"])  to strong }}
route default {{ to small }}
session {{ id = header("x-session-id") ?? body("user")  missing = reject }}
protect {{ hold "keep the task on its model" when true }}
"#,
        small.base_url(),
        strong.base_url()
    );
    let router = Router::start(&text).await?;
    let with_user = |text: &str, user: &str| json!({"model": "auto", "user": user, "messages": [{"role": "user", "content": text}]});
    let first = router.chat(&with_user("hello", "alice"), &[]).await?;
    assert_eq!(state(&first), (200, Some("small"), Some("new"), None));
    // Same `user`, no header: the same session, whose pin the hold keeps.
    let second = router.chat(&with_user("a segfault", "alice"), &[]).await?;
    assert_eq!(state(&second), (200, Some("small"), Some("held"), None));
    // Another `user` is another session.
    let other = router.chat(&with_user("a segfault", "bob"), &[]).await?;
    assert_eq!(state(&other), (200, Some("strong"), Some("new"), None));
    // Neither a header nor the field: no identity, and this policy rejects it.
    let none = router.chat(&plain("a segfault"), &[]).await?;
    assert_eq!(none.status, 400, "{}", none.text());
    let (message, _, _) = none.error()?;
    assert!(
        message.ends_with("send `x-session-id` or the body field `user`"),
        "{message}"
    );
    Ok(())
}
