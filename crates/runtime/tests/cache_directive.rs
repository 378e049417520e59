//! The client's `x-sr-cache` request header through a real `src serve` with the repository's
//! MiniLM encoder: `no-store` keeps an answer out of the cache, `no-cache` answers from the
//! backend and refreshes the cache, both leave the cache out, and any other value is a 400 that
//! never reaches the backend.

use src_testkit::cache::{chat, serve, Answer, Served, PARAPHRASE, PASSWORD, PROVIDERS};
use src_testkit::TestResult;

async fn cached() -> TestResult<Served> {
    serve(&format!(
        "{PROVIDERS}\nroute default {{ to small }}\ncache {{ encoder = minilm  threshold = 0.9 }}\n"
    ))
    .await
}

async fn ask_with(served: &Served, prompt: &str, directive: &str) -> TestResult<Answer> {
    served
        .post_with(
            "/v1/chat/completions",
            &chat(prompt),
            "key-a",
            &[("x-sr-cache", directive)],
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_store_answers_without_keeping_the_answer() -> TestResult {
    let served = cached().await?;
    let first = ask_with(&served, PASSWORD, "no-store").await?;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.cache(), "miss");
    // Nothing was kept: the same prompt again misses, and only that answer is stored.
    let again = served.ask(PASSWORD, "key-a").await?;
    assert_eq!(again.cache(), "miss");
    served.stored(1.0).await?;
    assert_eq!(served.backend_requests(), 2);
    // A stored answer still answers a `no-store` request.
    let hit = ask_with(&served, PARAPHRASE, "no-store").await?;
    assert_eq!(hit.cache(), "hit");
    assert_eq!(served.backend_requests(), 2);
    let stored = served
        .metric("src_cache_stores_total", "result=\"stored\"")
        .await?;
    assert_eq!(stored, 1.0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_cache_goes_upstream_and_refreshes_the_entry() -> TestResult {
    let served = cached().await?;
    let first = served.ask(PASSWORD, "key-a").await?;
    assert_eq!(first.cache(), "miss");
    served.stored(1.0).await?;

    let fresh = ask_with(&served, PARAPHRASE, "No-Cache").await?;
    assert_eq!(fresh.status, 200, "{}", fresh.text());
    assert_eq!(fresh.cache(), "miss");
    assert_eq!(fresh.header("x-sr-path"), Some("upstream"));
    assert_eq!(fresh.header("x-sr-cache-score"), None);
    assert_eq!(served.backend_requests(), 2);
    // The fresh answer was stored beside the first.
    served.stored(2.0).await?;

    let hit = served.ask(PARAPHRASE, "key-a").await?;
    assert_eq!(hit.cache(), "hit");
    assert_eq!(served.backend_requests(), 2);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_directives_leave_the_cache_out() -> TestResult {
    let served = cached().await?;
    served.ask(PASSWORD, "key-a").await?;
    served.stored(1.0).await?;
    let answer = ask_with(&served, PASSWORD, "no-cache, no-store").await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.cache(), "bypass");
    assert_eq!(served.backend_requests(), 2);
    let bypassed = served
        .metric("src_cache_lookups_total", "result=\"bypass\"")
        .await?;
    assert_eq!(bypassed, 1.0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_directive_is_a_400_naming_the_header() -> TestResult {
    let served = cached().await?;
    let answer = ask_with(&served, PASSWORD, "no-cache, forever").await?;
    assert_eq!(answer.status, 400, "{}", answer.text());
    let error = &answer.json()["error"];
    assert_eq!(error["type"], "invalid_request_error");
    assert_eq!(error["param"], "x-sr-cache");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("no-cache, forever"), "{message}");
    assert_eq!(served.backend_requests(), 0);
    // The server goes on serving.
    let next = served.ask(PASSWORD, "key-a").await?;
    assert_eq!(next.status, 200, "{}", next.text());
    Ok(())
}
