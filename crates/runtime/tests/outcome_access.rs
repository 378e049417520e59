//! Who may report outcomes (`session { outcomes = any | admin | keys }`) through a real
//! `src serve` with the session layer: `any` takes every report, `admin` only one carrying the
//! admin token in `x-sr-outcome-token`, `keys` only one carrying a key of `SRC_OUTCOME_KEYS`; a
//! refused report is a 401 in OpenAI's shape and is not counted.

use std::sync::Arc;

use serde_json::json;
use src_runtime::config::AdminToken;
use src_runtime::session::{SessionLayer, SessionOptions, SystemClock};
use src_testkit::{user, Router, TestResult};

const SID: (&str, &str) = ("x-session-id", "task-1");

fn policy(outcomes: &str) -> String {
    format!(
        r#"
backend sim {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model small {{ backend = sim  serves = "Qwen/Qwen3-0.6B" }}
route default {{ to small }}
session {{ ttl = 10m  {outcomes} }}
"#
    )
}

async fn start(outcomes: &str, admin: Option<&str>, keys: &[&str]) -> TestResult<Router> {
    let admin = admin.and_then(AdminToken::new);
    let keys: Vec<AdminToken> = keys.iter().filter_map(|k| AdminToken::new(*k)).collect();
    let router = Router::start_full(
        &policy(outcomes),
        |cfg| {
            cfg.admin_token = admin;
            cfg.outcome_keys = keys;
        },
        |parts| {
            parts.sessions = Arc::new(SessionLayer::new(
                Arc::new(SystemClock),
                SessionOptions::default(),
            ));
        },
    )
    .await?;
    // The session exists, pinned to `small`.
    let first = router.chat(&user("hello"), &[SID]).await?;
    assert_eq!(
        first.header("x-sr-session"),
        Some("new"),
        "{}",
        first.text()
    );
    Ok(router)
}

/// Reports a failure of the session's model with `headers`; the status and the count of
/// outcomes the answer reports.
async fn report(router: &Router, key: &str, headers: &[(&str, &str)]) -> TestResult<(u16, i64)> {
    let body = json!({"session": "task-1", "verdict": "fail", "idempotency_key": key});
    let mut all = vec![SID];
    all.extend_from_slice(headers);
    let answer = router.post("/v1/router/outcomes", &body, &all).await?;
    if answer.status != 200 {
        let (_, code, kind) = answer.error()?;
        assert_eq!(
            code.as_deref(),
            Some("invalid_api_key"),
            "{}",
            answer.text()
        );
        assert_eq!(kind, "invalid_request_error");
        return Ok((answer.status, -1));
    }
    let v = answer.json()?;
    Ok((answer.status, v["outcomes"]["count"].as_i64().unwrap_or(-1)))
}

#[tokio::test]
async fn any_takes_reports_from_any_client() -> TestResult {
    let router = start("", None, &[]).await?;
    assert_eq!(report(&router, "a", &[]).await?, (200, 1));
    let router = start("outcomes = any", None, &[]).await?;
    assert_eq!(report(&router, "a", &[]).await?, (200, 1));
    Ok(())
}

#[tokio::test]
async fn admin_takes_only_reports_with_the_admin_token() -> TestResult {
    let router = start("outcomes = admin", Some("adm-secret"), &[]).await?;
    assert_eq!(report(&router, "a", &[]).await?.0, 401);
    let wrong = [("x-sr-outcome-token", "adm-guess")];
    assert_eq!(report(&router, "b", &wrong).await?.0, 401);
    // The admin token as a bearer `authorization` is the tenant's header, not a reporter's.
    let bearer = [("authorization", "Bearer adm-secret")];
    assert_eq!(report(&router, "c", &bearer).await?.0, 401);
    let right = [("x-sr-outcome-token", "adm-secret")];
    // The refused reports were not counted.
    assert_eq!(report(&router, "d", &right).await?, (200, 1));
    Ok(())
}

#[tokio::test]
async fn keys_takes_only_reports_with_a_listed_key() -> TestResult {
    let router = start("outcomes = keys", Some("adm-secret"), &["k-one", "k-two"]).await?;
    assert_eq!(report(&router, "a", &[]).await?.0, 401);
    let admin = [("x-sr-outcome-token", "adm-secret")];
    assert_eq!(report(&router, "b", &admin).await?.0, 401);
    let second = [("x-sr-outcome-token", "k-two")];
    assert_eq!(report(&router, "c", &second).await?, (200, 1));
    let first = [("x-sr-outcome-token", "k-one")];
    assert_eq!(report(&router, "d", &first).await?, (200, 2));
    Ok(())
}

#[tokio::test]
async fn a_protected_endpoint_without_tokens_takes_no_report() -> TestResult {
    let router = start("outcomes = keys", None, &[]).await?;
    let body = json!({"session": "task-1", "verdict": "fail"});
    let answer = router
        .post(
            "/v1/router/outcomes",
            &body,
            &[SID, ("x-sr-outcome-token", "")],
        )
        .await?;
    assert_eq!(answer.status, 401, "{}", answer.text());
    let (message, _, _) = answer.error()?;
    assert!(message.contains("SRC_OUTCOME_KEYS"), "{message}");
    assert!(message.contains("none is set"), "{message}");
    Ok(())
}
