//! Who a tenant is, the same in every store: the credential in whatever form a client sends it
//! (`authorization: Bearer`, `Basic`, Azure's `api-key`, Anthropic's `x-api-key`), hashed, and
//! narrowed by the session's `tenant` expression when the policy has one. Two credentials never
//! share cached answers, stored responses or pins; one credential is one tenant whichever header
//! carries it; a request without a credential gets no cache and no stored responses unless the
//! policy says `router { anonymous = share }`.

use hyper::Method;
use serde_json::{json, Value};
use src_testkit::cache::{serve, PARAPHRASE, PASSWORD, PROVIDERS};
use src_testkit::{Router, TestResult};

fn cached_policy(extra: &str) -> String {
    format!("{PROVIDERS}\nroute default {{ to small }}\ncache {{ encoder = minilm  threshold = 0.9 }}\n{extra}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_answers_belong_to_one_credential_in_any_header() -> TestResult {
    let served = serve(&cached_policy("")).await?;
    let ask = |headers: &'static [(&'static str, &'static str)], prompt: &'static str| {
        let served = &served;
        async move {
            served
                .post_with(
                    "/v1/chat/completions",
                    &src_testkit::cache::chat(prompt),
                    "",
                    headers,
                )
                .await
        }
    };
    let first = ask(&[("api-key", "tenant-a")], PASSWORD).await?;
    assert_eq!((first.status, first.cache()), (200, "miss"));
    served.stored(1.0).await?;

    for (who, headers) in [
        ("another api-key", &[("api-key", "tenant-b")][..]),
        ("another x-api-key", &[("x-api-key", "tenant-c")][..]),
        (
            "a Basic credential",
            &[("authorization", "Basic dGVuYW50LWQ6cHc=")][..],
        ),
    ] {
        let other = ask(headers, PARAPHRASE).await?;
        assert_eq!(other.status, 200, "{who}");
        assert_eq!(
            other.cache(),
            "miss",
            "{who} must not read tenant-a's answer"
        );
    }
    let keyless = ask(&[], PARAPHRASE).await?;
    assert_eq!(
        (keyless.status, keyless.cache()),
        (200, "bypass"),
        "a request without a credential gets no cache"
    );
    let same = ask(&[("x-api-key", "tenant-a")], PARAPHRASE).await?;
    assert_eq!(
        same.cache(),
        "hit",
        "one credential is one tenant, whichever header"
    );
    let bearer = ask(&[("authorization", "Bearer tenant-a")], PARAPHRASE).await?;
    assert_eq!(bearer.cache(), "hit");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_fleet_shares_between_keyless_clients_when_it_says_so() -> TestResult {
    let served = serve(&cached_policy("router { anonymous = share }")).await?;
    let body = src_testkit::cache::chat(PASSWORD);
    let first = served
        .post_with("/v1/chat/completions", &body, "", &[])
        .await?;
    assert_eq!((first.status, first.cache()), (200, "miss"));
    served.stored(1.0).await?;
    let again = src_testkit::cache::chat(PARAPHRASE);
    let hit = served
        .post_with("/v1/chat/completions", &again, "", &[])
        .await?;
    assert_eq!(hit.cache(), "hit");
    let keyed = served
        .post_with("/v1/chat/completions", &again, "", &[("api-key", "k")])
        .await?;
    assert_eq!(
        keyed.cache(),
        "miss",
        "a keyed tenant never reads the open fleet's answers"
    );
    Ok(())
}

async fn send(
    router: &Router,
    method: Method,
    path: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> TestResult<(u16, Value)> {
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let answer = router
        .client
        .send(method, &router.url(path), body, headers)
        .await?;
    let json = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
    Ok((answer.status, json))
}

#[tokio::test]
async fn a_stored_response_is_its_credentials_alone() -> TestResult {
    let router = Router::start(src_testkit::POLICY).await?;
    let alice = [("x-api-key", "alice")];
    let create = json!({"model": "auto", "input": "remember the number 7"});
    let (status, stored) = send(&router, Method::POST, "/v1/responses", &create, &alice).await?;
    assert_eq!(status, 200, "{stored}");
    let id = stored["id"].as_str().ok_or("a response id")?.to_string();
    let path = format!("/v1/responses/{id}");
    let items = format!("{path}/input_items");

    let (status, _) = send(&router, Method::GET, &path, &Value::Null, &alice).await?;
    assert_eq!(status, 200, "the owner reads it");
    for (who, headers) in [
        ("bob", &[("x-api-key", "bob")][..]),
        ("bob by bearer", &[("authorization", "Bearer bob")][..]),
        ("nobody", &[][..]),
    ] {
        for p in [&path, &items] {
            let (status, body) = send(&router, Method::GET, p, &Value::Null, headers).await?;
            assert_eq!(status, 404, "{who} reads {p}: {body}");
        }
        let (status, _) = send(&router, Method::DELETE, &path, &Value::Null, headers).await?;
        assert_eq!(status, 404, "{who} deletes alice's response");
        // Continuing it: the id is not one the router holds for them, so nothing of alice's
        // conversation is expanded into their request.
        let next = json!({"model": "auto", "input": "what number?", "previous_response_id": id});
        let (_, _) = send(&router, Method::POST, "/v1/responses", &next, headers).await?;
    }
    let carried: Vec<String> = router
        .sims()
        .iter()
        .flat_map(|sim| sim.received())
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .filter(|body| body.contains("what number?") && body.contains("remember the number 7"))
        .collect();
    assert!(
        carried.is_empty(),
        "another tenant's continuation carried alice's conversation: {carried:?}"
    );
    let (status, _) = send(&router, Method::GET, &path, &Value::Null, &alice).await?;
    assert_eq!(status, 200, "still alice's after the others tried");
    let by_bearer = [("authorization", "Bearer alice")];
    let (status, _) = send(&router, Method::GET, &path, &Value::Null, &by_bearer).await?;
    assert_eq!(status, 200, "alice's key as a bearer token is alice");

    // Keyless: nothing is stored for it.
    let (status, open) = send(&router, Method::POST, "/v1/responses", &create, &[]).await?;
    assert_eq!(status, 200, "{open}");
    let open_id = open["id"].as_str().ok_or("an id")?;
    let (status, _) = send(
        &router,
        Method::GET,
        &format!("/v1/responses/{open_id}"),
        &Value::Null,
        &[],
    )
    .await?;
    assert_eq!(status, 404, "a keyless answer is not stored");
    Ok(())
}

#[tokio::test]
async fn a_tenant_header_narrows_a_credential_and_never_joins_two() -> TestResult {
    let policy = format!(
        "{}\nsession {{ id = header(\"x-session\")  tenant = header(\"x-tenant\") }}\n",
        src_testkit::POLICY
    );
    let router = Router::start(&policy).await?;
    let chat = json!({"model": "auto", "messages": [{"role": "user", "content": "hello"}]});
    let state = |headers: &[(&str, &str)]| {
        let router = &router;
        let chat = chat.clone();
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        async move {
            let pairs: Vec<(&str, &str)> = headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let answer = router.chat(&chat, &pairs).await?;
            TestResult::Ok(
                answer
                    .header("x-sr-session")
                    .unwrap_or_default()
                    .to_string(),
            )
        }
    };
    let a = [("api-key", "a"), ("x-session", "s1")];
    assert_eq!(state(&a).await?, "new");
    assert_eq!(state(&a).await?, "pinned");
    let b = [("api-key", "b"), ("x-session", "s1")];
    assert_eq!(
        state(&b).await?,
        "new",
        "key b has its own s1, without a tenant header"
    );
    let claimed = [
        ("api-key", "b"),
        ("x-session", "s1"),
        ("x-tenant", "anonymous"),
    ];
    assert_eq!(
        state(&claimed).await?,
        "new",
        "a claimed tenant name joins nobody"
    );
    let team = [
        ("api-key", "a"),
        ("x-session", "s1"),
        ("x-tenant", "team-1"),
    ];
    assert_eq!(
        state(&team).await?,
        "new",
        "the header narrows key a's tenant"
    );
    assert_eq!(state(&team).await?, "pinned");
    Ok(())
}
