//! Where a client's credentials go (`client_auth`, docs/language.md, "`backend`"): four real
//! HTTP backends (standalone simulators) behind one `src serve`, and what each received when a
//! client sent `authorization`, `x-api-key` and a cookie. Without an `api_key` a backend is sent
//! the client's credentials unless it says `client_auth = drop`; with one, its own key replaces
//! the client's and the others are dropped unless it says `client_auth = forward`; a cookie
//! never travels.

use serde_json::json;
use src_runtime::sim::{SimConfig, SimHandle, SimModel};
use src_testkit::{Router, TestResult};

const KEY_VAR: &str = "SRC_TEST_CLIENT_CREDENTIALS_KEY";
const BACKEND_KEY: &str = "sk-backend-own";
const CLIENT_KEY: &str = "sk-client-7f3a";

async fn sim(id: &str) -> TestResult<SimHandle> {
    let cfg = SimConfig {
        models: vec![SimModel::new(id)],
        time_scale: 0.0,
        ..SimConfig::default()
    };
    Ok(SimHandle::spawn(cfg).await?)
}

struct Backends {
    open: SimHandle,
    dropper: SimHandle,
    keyed: SimHandle,
    keyed_forward: SimHandle,
}

async fn start() -> TestResult<(Router, Backends)> {
    std::env::set_var(KEY_VAR, BACKEND_KEY);
    let backends = Backends {
        open: sim("open-id").await?,
        dropper: sim("dropper-id").await?,
        keyed: sim("keyed-id").await?,
        keyed_forward: sim("keyed-forward-id").await?,
    };
    let policy = format!(
        r#"
backend open          {{ url = "{}/v1" }}
backend dropper       {{ url = "{}/v1"  client_auth = drop }}
backend keyed         {{ url = "{}/v1"  api_key = env("{KEY_VAR}") }}
backend keyed_forward {{ url = "{}/v1"  api_key = env("{KEY_VAR}")  client_auth = forward }}
model open          {{ backend = open           serves = "open-id" }}
model dropper       {{ backend = dropper        serves = "dropper-id" }}
model keyed         {{ backend = keyed          serves = "keyed-id" }}
model keyed_forward {{ backend = keyed_forward  serves = "keyed-forward-id" }}
route default {{ to open }}
"#,
        backends.open.base_url(),
        backends.dropper.base_url(),
        backends.keyed.base_url(),
        backends.keyed_forward.base_url(),
    );
    Ok((Router::start(&policy).await?, backends))
}

/// Asks `model` with the client's credentials and a cookie; what its backend received.
async fn ask(
    router: &Router,
    model: &str,
    backend: &SimHandle,
) -> TestResult<src_runtime::sim::ReceivedRequest> {
    let body = json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});
    let bearer = format!("Bearer {CLIENT_KEY}");
    let answer = router
        .chat(
            &body,
            &[
                ("authorization", &bearer),
                ("x-api-key", CLIENT_KEY),
                ("api-key", CLIENT_KEY),
                ("cookie", "session=browser-secret"),
            ],
        )
        .await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    // Readiness probes (`GET /models`) reach the backends too; the request is the one POST.
    let received: Vec<_> = chat_requests(backend);
    assert_eq!(received.len(), 1, "one request to the backend of `{model}`");
    Ok(received.into_iter().next().ok_or("nothing received")?)
}

fn chat_requests(backend: &SimHandle) -> Vec<src_runtime::sim::ReceivedRequest> {
    backend
        .received()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect()
}

#[tokio::test]
async fn a_backend_without_a_key_is_sent_the_clients_credentials_but_no_cookie() -> TestResult {
    let (router, backends) = start().await?;
    let got = ask(&router, "open", &backends.open).await?;
    let bearer = format!("Bearer {CLIENT_KEY}");
    assert_eq!(got.header("authorization"), Some(bearer.as_str()));
    assert_eq!(got.header("x-api-key"), Some(CLIENT_KEY));
    assert_eq!(got.header("api-key"), Some(CLIENT_KEY));
    assert_eq!(got.header("cookie"), None);
    Ok(())
}

#[tokio::test]
async fn client_auth_drop_sends_no_client_credential() -> TestResult {
    let (router, backends) = start().await?;
    let got = ask(&router, "dropper", &backends.dropper).await?;
    for name in ["authorization", "x-api-key", "api-key", "cookie"] {
        assert_eq!(
            got.header(name),
            None,
            "`{name}` reached a dropping backend"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_backend_with_its_own_key_gets_only_that_key_by_default() -> TestResult {
    let (router, backends) = start().await?;
    let got = ask(&router, "keyed", &backends.keyed).await?;
    let own = format!("Bearer {BACKEND_KEY}");
    assert_eq!(got.header("authorization"), Some(own.as_str()));
    assert_eq!(got.header("x-api-key"), None);
    assert_eq!(got.header("api-key"), None);
    assert_eq!(got.header("cookie"), None);
    Ok(())
}

#[tokio::test]
async fn client_auth_forward_beside_a_key_keeps_the_other_credentials() -> TestResult {
    let (router, backends) = start().await?;
    let got = ask(&router, "keyed_forward", &backends.keyed_forward).await?;
    // The backend's own key still replaces the client's `authorization`.
    let own = format!("Bearer {BACKEND_KEY}");
    assert_eq!(got.header("authorization"), Some(own.as_str()));
    assert_eq!(got.header("x-api-key"), Some(CLIENT_KEY));
    assert_eq!(got.header("cookie"), None);
    // And the other backends saw nothing of this request.
    assert!(chat_requests(&backends.open).is_empty());
    assert!(chat_requests(&backends.dropper).is_empty());
    Ok(())
}

/// A backend that rejects the router's key and echoes it (`Incorrect API key provided: Bearer
/// sk-…`, in the body and a header) does not hand the key to the client.
#[tokio::test]
async fn a_backend_error_echoing_the_routers_key_reaches_the_client_without_it() -> TestResult {
    const ECHO_VAR: &str = "SRC_TEST_ECHOED_BACKEND_KEY";
    const ECHOED: &str = "sk-echoed-backend-key-91c2";
    std::env::set_var(ECHO_VAR, ECHOED);
    let upstream = src_testkit::upstream::Upstream::start(|seen| {
        let sent = seen
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let mut reply = src_testkit::upstream::Reply::json(&json!({"error": {
            "message": format!("Incorrect API key provided: {sent}"),
            "type": "invalid_request_error", "code": "invalid_api_key"}}));
        reply.status = 401;
        reply.with_header("x-echo", "Bearer sk-echoed-backend-key-91c2")
    })
    .await?;
    let policy = format!(
        r#"
backend openai {{ url = "{}"  api_key = env("{ECHO_VAR}") }}
model m {{ backend = openai  serves = "m-id" }}
route default {{ to m }}
"#,
        upstream.url
    );
    let router = Router::start(&policy).await?;
    let answer = router.chat(&src_testkit::user("hi"), &[]).await?;
    assert_eq!(answer.status, 401, "{}", answer.text());
    let sent = upstream.posts();
    assert!(
        sent.iter().any(|s| s
            .headers
            .get("authorization")
            .is_some_and(|v| v == &format!("Bearer {ECHOED}")[..])),
        "the backend got the key"
    );
    let text = answer.text();
    assert!(!text.contains(ECHOED), "{text}");
    assert!(
        text.contains("Incorrect API key provided: Bearer <redacted>"),
        "{text}"
    );
    assert_eq!(answer.json()?["error"]["code"], "invalid_api_key");
    for (name, value) in &answer.headers {
        assert!(
            !value.to_str().unwrap_or_default().contains(ECHOED),
            "{name}"
        );
    }
    Ok(())
}
