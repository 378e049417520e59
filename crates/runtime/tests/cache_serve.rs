//! The response cache end to end through a real `src serve` with the repository's MiniLM
//! encoder: a paraphrase is answered from the cache without reaching the backend, while an
//! unrelated prompt, another API key, another system prompt or other sampling parameters miss;
//! a route with `cache = off` never caches; `skip when` skips (computing its model-backed
//! signal); a streaming chat request replays a stored answer as events, and a streamed answer is
//! stored too; `/v1/responses` and `/v1/messages` cache too (apart) and bypass when they
//! stream; a reload keeps the store and applies the new threshold; look-alike questions (swapped
//! units, a negation) that MiniLM scores above the threshold are verified misses; and
//! a cache the server cannot serve refuses the policy, while a TLS Redis store the checker
//! accepts loads.

use serde_json::{json, Value};
use src_testkit::cache::{
    chat, serve, write_policy, Answer, Served, PARAPHRASE, PASSWORD, PROVIDERS, UNRELATED,
};
use src_testkit::TestResult;

fn policy(cache: &str, routes: &str) -> String {
    format!(
        "{PROVIDERS}\n{routes}\nroute default {{ to small }}\ncache {{ encoder = minilm  {cache} }}\n"
    )
}

async fn basic() -> TestResult<Served> {
    serve(&policy("threshold = 0.9", "")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn look_alike_questions_are_verified_misses_and_paraphrases_still_hit() -> TestResult {
    // The threshold `examples/guarded` ships.
    let served = serve(&policy("threshold = 0.92", "")).await?;
    let cases = [
        ("convert 5 km to miles", "convert 5 miles to km"),
        (
            "Is it safe to mix bleach and ammonia?",
            "Is it unsafe to mix bleach and ammonia?",
        ),
    ];
    let mut upstream = 0;
    for (stored, look_alike) in cases {
        let first = served.ask(stored, "key-a").await?;
        assert_eq!(first.cache(), "miss");
        upstream += 1;
        served.stored(upstream as f64).await?;
        let refused = served.ask(look_alike, "key-a").await?;
        assert_eq!(refused.status, 200, "{:?}", refused.body);
        assert_eq!(refused.cache(), "miss-verified", "{look_alike}");
        assert_eq!(refused.header("x-sr-path"), Some("upstream"));
        assert_ne!(refused.body, first.body);
        upstream += 1;
        assert_eq!(served.backend_requests(), upstream);
        // Its own answer is stored, and answers it next time.
        served.stored(upstream as f64).await?;
        let again = served.ask(look_alike, "key-a").await?;
        assert_eq!(again.cache(), "hit");
        assert_eq!(again.body, refused.body);
    }
    let paraphrase = served.ask("convert 5 km to miles please", "key-a").await?;
    assert_eq!(paraphrase.cache(), "hit");
    assert_eq!(served.backend_requests(), upstream);
    let verified = served
        .metric("src_cache_lookups_total", "result=\"miss-verified\"")
        .await?;
    assert_eq!(verified, 2.0);
    assert!(served
        .log()
        .iter()
        .any(|line| line["cache"] == "miss-verified"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paraphrase_is_answered_from_the_cache_and_an_unrelated_prompt_is_not() -> TestResult {
    let served = basic().await?;
    let first = served.ask(PASSWORD, "key-a").await?;
    assert_eq!(first.status, 200, "{:?}", first.body);
    assert_eq!(first.cache(), "miss");
    assert_eq!(first.header("x-sr-path"), Some("upstream"));
    served.stored(1.0).await?;
    assert_eq!(served.backend_requests(), 1);

    let hit = served.ask(PARAPHRASE, "key-a").await?;
    assert_eq!(hit.status, 200, "{:?}", hit.body);
    assert_eq!(hit.cache(), "hit");
    assert_eq!(hit.header("x-sr-path"), Some("cache"));
    assert_eq!(hit.header("x-sr-model"), Some("small"));
    assert_eq!(hit.header("x-sr-route"), Some("default"));
    assert!(hit.header("x-sr-request-id").is_some());
    assert_eq!(hit.header("content-type"), Some("application/json"));
    let score: f64 = hit.header("x-sr-cache-score").unwrap_or("0").parse()?;
    assert!((0.9..=1.0).contains(&score), "score {score}");
    // The stored answer, byte for byte, and the backend was not asked.
    assert_eq!(hit.body, first.body);
    assert_eq!(served.backend_requests(), 1);

    let other = served.ask(UNRELATED, "key-a").await?;
    assert_eq!(other.status, 200);
    assert_eq!(other.cache(), "miss");
    assert_ne!(other.body, first.body);
    assert_eq!(served.backend_requests(), 2);

    let metrics = served.metrics().await?;
    let count = |result: &str| {
        src_testkit::models::sample(
            &metrics,
            "src_cache_lookups_total",
            &format!("result=\"{result}\""),
        )
    };
    assert_eq!((count("hit"), count("miss")), (1.0, 2.0), "{metrics}");
    assert!(
        src_testkit::models::sample(
            &metrics,
            "src_requests_total",
            "route=\"default\",model=\"small\",status=\"200\",path=\"cache\",door=\"chat\""
        ) == 1.0,
        "{metrics}"
    );
    served.stored(2.0).await?;
    let entries = served.metrics().await?;
    assert!(entries.contains("src_cache_entries 2"), "{entries}");

    let log = served.log();
    assert_eq!(log.len(), 3, "{log:?}");
    assert_eq!(log[0]["cache"], "miss");
    assert_eq!(log[0]["path"], "upstream");
    assert_eq!(log[1]["cache"], "hit");
    assert_eq!(log[1]["path"], "cache");
    assert_eq!(log[1]["model"], "small");
    assert_eq!(log[1]["status"], 200);
    assert!(
        log[1]["cache_score"].as_f64().unwrap_or(0.0) >= 0.9,
        "{log:?}"
    );
    // A hit claims no backend work: no prefix-cache evidence, no upstream timing.
    assert!(log[1]["cached_tokens"].is_null());
    assert!(log[1]["ttft_ms"].is_null());
    // The unrelated prompt was compared with the stored entry and missed.
    assert!(
        log[2]["cache_score"].as_f64().unwrap_or(1.0) < 0.5,
        "{log:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_system_prompts_history_and_parameters_scope_the_cache() -> TestResult {
    let served = basic().await?;
    let body = |system: &str, extra: Value| {
        let mut body = json!({"model": "auto", "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": PASSWORD},
        ]});
        if let (Some(obj), Value::Object(extra)) = (body.as_object_mut(), extra) {
            obj.extend(extra);
        }
        body
    };
    let stored = body("You are a support agent.", json!({"temperature": 0.2}));
    assert_eq!(served.chat(&stored, "key-a").await?.cache(), "miss");
    served.stored(1.0).await?;
    // The same request again (framing fields aside) hits.
    let mut same = stored.clone();
    same["stream"] = json!(false);
    same["user"] = json!("someone");
    assert_eq!(served.chat(&same, "key-a").await?.cache(), "hit");

    // Another API key never sees key-a's answers; a request without a key has no cache.
    assert_eq!(served.chat(&stored, "key-b").await?.cache(), "miss");
    assert_eq!(served.chat(&stored, "").await?.cache(), "bypass");
    // Another system prompt, other sampling parameters, another history: all miss.
    let other_system = body("You are a pirate.", json!({"temperature": 0.2}));
    assert_eq!(served.chat(&other_system, "key-a").await?.cache(), "miss");
    let other_params = body("You are a support agent.", json!({"temperature": 0.9}));
    assert_eq!(served.chat(&other_params, "key-a").await?.cache(), "miss");
    let mut longer = stored.clone();
    if let Some(messages) = longer["messages"].as_array_mut() {
        messages.insert(1, json!({"role": "user", "content": "hello"}));
        messages.insert(
            2,
            json!({"role": "assistant", "content": "hi, how can I help?"}),
        );
    }
    assert_eq!(served.chat(&longer, "key-a").await?.cache(), "miss");
    assert_eq!(served.backend_requests(), 6);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_with_cache_off_never_caches() -> TestResult {
    let routes = r#"route private priority 10 { when contains(prompt, ["password"])  to strong  cache = off }"#;
    let served = serve(&policy("threshold = 0.9", routes)).await?;
    for _ in 0..2 {
        let answer = served.ask(PASSWORD, "key-a").await?;
        assert_eq!(answer.status, 200);
        assert_eq!(answer.cache(), "bypass");
        assert_eq!(answer.header("x-sr-route"), Some("private"));
    }
    assert_eq!(served.backend_requests(), 2);
    // The encoder never ran for the bypassed requests.
    let metrics = served.metrics().await?;
    assert_eq!(
        src_testkit::models::sample(&metrics, "src_model_calls_total", "model=\"minilm\""),
        0.0,
        "{metrics}"
    );
    assert_eq!(
        src_testkit::models::sample(&metrics, "src_cache_lookups_total", "result=\"bypass\""),
        2.0
    );
    // Other routes still cache.
    served.ask(UNRELATED, "key-a").await?;
    served.stored(1.0).await?;
    assert_eq!(served.ask(UNRELATED, "key-a").await?.cache(), "hit");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_when_skips_the_cache_computing_its_model_signals() -> TestResult {
    let cache = r#"threshold = 0.9
      skip when request.tools > 0 or similarity(minilm, prompt, ["what time is it right now"]) > 0.7"#;
    let served = serve(&policy(cache, "")).await?;
    for _ in 0..2 {
        let answer = served.ask("What time is it now?", "key-a").await?;
        assert_eq!(answer.status, 200);
        assert_eq!(answer.cache(), "skip");
    }
    assert_eq!(served.backend_requests(), 2);
    let with_tools = json!({"model": "auto",
        "messages": [{"role": "user", "content": PASSWORD}],
        "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]});
    assert_eq!(served.chat(&with_tools, "key-a").await?.cache(), "skip");
    // A prompt the skip condition lets through is cached.
    assert_eq!(served.ask(PASSWORD, "key-a").await?.cache(), "miss");
    served.stored(1.0).await?;
    assert_eq!(served.ask(PARAPHRASE, "key-a").await?.cache(), "hit");
    assert_eq!(served.backend_requests(), 4);
    let metrics = served.metrics().await?;
    assert_eq!(
        src_testkit::models::sample(&metrics, "src_cache_lookups_total", "result=\"skip\""),
        3.0,
        "{metrics}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_a_similarity_signal_embedded_is_not_embedded_again() -> TestResult {
    let cache = r#"threshold = 0.9
      skip when similarity(minilm, prompt, ["what time is it right now"]) > 0.7"#;
    let served = serve(&policy(cache, "")).await?;
    let calls = |metrics: &str| {
        src_testkit::models::sample(metrics, "src_model_calls_total", "model=\"minilm\"")
    };
    let before = calls(&served.metrics().await?);
    // `skip when` embeds the prompt; the cache lookup reuses that embedding.
    assert_eq!(served.ask(PASSWORD, "key-a").await?.cache(), "miss");
    let after = calls(&served.metrics().await?);
    assert_eq!(after - before, 1.0, "one encoder call for the prompt");
    served.stored(1.0).await?;
    // A paraphrase: one call for its own prompt, and the lookup still finds the stored answer.
    assert_eq!(served.ask(PARAPHRASE, "key-a").await?.cache(), "hit");
    assert_eq!(calls(&served.metrics().await?) - after, 1.0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_chat_request_replays_a_stored_answer_as_events() -> TestResult {
    let served = basic().await?;
    let stored = served.ask(PASSWORD, "key-a").await?;
    served.stored(1.0).await?;
    let mut streaming = chat(PARAPHRASE);
    streaming["stream"] = json!(true);
    let hit = served.chat(&streaming, "key-a").await?;
    assert_eq!(hit.status, 200);
    assert_eq!(hit.cache(), "hit");
    assert_eq!(hit.header("content-type"), Some("text/event-stream"));
    let events = hit.events();
    assert_eq!(
        events.last().map(String::as_str),
        Some("[DONE]"),
        "{events:?}"
    );
    assert_eq!(hit.text(), stored.text());
    let chunks: Vec<Value> = events
        .iter()
        .filter_map(|e| serde_json::from_str(e).ok())
        .collect();
    assert!(chunks
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk"));
    let last = chunks.last().cloned().unwrap_or(Value::Null);
    assert_eq!(
        last["choices"][0]["finish_reason"],
        stored.json()["choices"][0]["finish_reason"]
    );
    assert_eq!(last["usage"], stored.json()["usage"]);
    assert_eq!(served.backend_requests(), 1);

    // A streaming miss goes upstream as a stream, and its answer, assembled, is stored: a
    // paraphrase then hits whether it streams or not, with the streamed text.
    let mut unrelated = chat(UNRELATED);
    unrelated["stream"] = json!(true);
    unrelated["stream_options"] = json!({"include_usage": true});
    let miss = served.chat(&unrelated, "key-a").await?;
    assert_eq!(miss.cache(), "miss");
    assert_eq!(miss.header("x-sr-path"), Some("upstream"));
    let streamed_text = miss.text();
    assert!(!streamed_text.is_empty());
    served.stored(2.0).await?;
    let whole = served.ask(UNRELATED, "key-a").await?;
    assert_eq!(whole.cache(), "hit");
    assert_eq!(whole.header("content-type"), Some("application/json"));
    assert_eq!(whole.json()["object"], "chat.completion");
    assert_eq!(whole.text(), streamed_text);
    assert!(whole.json()["usage"]["completion_tokens"]
        .as_u64()
        .is_some());
    let again = served.chat(&unrelated, "key-a").await?;
    assert_eq!(again.cache(), "hit");
    assert_eq!(again.text(), streamed_text);
    assert_eq!(served.backend_requests(), 2);
    Ok(())
}

/// Another API's requests (to `path`, built by `ask(text, stream)`) are cached as a chat request
/// is: a miss, then a paraphrase hits with the same answer; the same words as a chat request are
/// in a scope of their own, and a streaming request bypasses the cache. Returns the hit.
async fn another_api_caches_apart_and_bypasses_streams(
    path: &str,
    ask: impl Fn(&str, bool) -> Value,
) -> TestResult<Answer> {
    let served = basic().await?;
    let first = served.post(path, &ask(PASSWORD, false), "key-a").await?;
    assert_eq!(first.status, 200, "{:?}", first.body);
    assert_eq!(first.cache(), "miss");
    served.stored(1.0).await?;
    let hit = served.post(path, &ask(PARAPHRASE, false), "key-a").await?;
    assert_eq!(hit.cache(), "hit");
    assert_eq!(hit.body, first.body);
    assert_eq!(served.ask(PASSWORD, "key-a").await?.cache(), "miss");
    let streaming = served.post(path, &ask(PARAPHRASE, true), "key-a").await?;
    assert_eq!(streaming.status, 200);
    assert_eq!(streaming.cache(), "bypass");
    assert_eq!(served.backend_requests(), 3);
    Ok(hit)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_responses_api_caches_and_bypasses_when_it_streams() -> TestResult {
    let ask = |input: &str, stream: bool| json!({"model": "auto", "instructions": "Answer briefly.", "input": input, "stream": stream});
    another_api_caches_apart_and_bypasses_streams("/v1/responses", ask).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_messages_api_caches_its_translated_answers_apart_and_bypasses_when_it_streams(
) -> TestResult {
    let ask = |text: &str, stream: bool| {
        json!({"model": "auto", "max_tokens": 32, "system": "Answer briefly.", "stream": stream,
            "messages": [{"role": "user", "content": text}]})
    };
    let hit = another_api_caches_apart_and_bypasses_streams("/v1/messages", ask).await?;
    // The stored answer is the Messages one the client got, not the backend's chat completion.
    let stored: Value = serde_json::from_slice(&hit.body)?;
    assert_eq!(stored["type"], "message", "{stored}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_the_store_and_applies_the_new_threshold() -> TestResult {
    let served = basic().await?;
    served.ask(PASSWORD, "key-a").await?;
    served.stored(1.0).await?;
    assert_eq!(served.ask(PARAPHRASE, "key-a").await?.cache(), "hit");
    write_policy(served.dir.path(), &policy("threshold = 0.999", ""))?;
    served.server.reload().await;
    let started = std::time::Instant::now();
    while served.server.generation() < 2 {
        assert!(started.elapsed() < src_testkit::PATIENCE, "no reload");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // The paraphrase (≈ 0.99) is now too far; the very same prompt still hits the kept entry.
    assert_eq!(served.ask(PARAPHRASE, "key-a").await?.cache(), "miss");
    assert_eq!(served.ask(PASSWORD, "key-a").await?.cache(), "hit");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_the_server_cannot_serve_refuses_the_policy() -> TestResult {
    let missing = PROVIDERS.replace("{models}/minilm", "{models}/no-such-encoder");
    let text = format!(
        "{missing}\nroute default {{ to small }}\ncache {{ encoder = minilm  threshold = 0.9 }}\n"
    );
    let dir = tempfile::tempdir()?;
    write_policy(dir.path(), &text)?;
    match src_testkit::cache::start(dir.path()).await {
        Ok(_) => panic!("a cache whose encoder cannot load was served"),
        Err(err) => {
            let message = err.to_string();
            assert!(
                message.contains("E060") && message.contains("minilm"),
                "{message}"
            );
        }
    }
    let bad_url = policy(r#"threshold = 0.9  store = redis("http://not-redis")"#, "");
    write_policy(dir.path(), &bad_url)?;
    match src_testkit::cache::start(dir.path()).await {
        Ok(_) => panic!("a cache whose store cannot exist was served"),
        Err(err) => {
            let message = err.to_string();
            assert!(
                message.contains("cache") && message.contains("not-redis"),
                "{message}"
            );
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_redis_store_the_checker_accepts_is_served() -> TestResult {
    // Nothing listens there: the store fails open on each request, but the policy loads.
    let text = policy(
        r#"threshold = 0.9  store = redis("rediss://:secret@127.0.0.1:1/0")"#,
        "",
    );
    let served = serve(&text).await?;
    let answer = served.ask(PASSWORD, "key-a").await?;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    assert_eq!(answer.header("x-sr-path"), Some("upstream"));
    Ok(())
}
