//! The simulator's behaviour as a controllable upstream: prefix cache, determinism, queueing and
//! injected faults, over real HTTP on 127.0.0.1:0. No assertion depends on how fast the machine
//! is: simulated times come from response headers, waits are bounded polls.

use std::time::Duration;

use serde_json::{json, Value};
use src_runtime::headers::{SIM_FAULT, SIM_PREFILL_MS, SIM_QUEUE_MS};
use src_runtime::openai::{Usage, UsageScanner};
use src_runtime::sim::{ModelLoad, SimConfig, SimFaults, SimHandle, SimModel};
use src_testkit::sim::*;

fn cached(answer: &Value) -> Option<u64> {
    answer["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64()
}

/// Whether `sim` comes to hold `running` requests of [`MODEL`] and `waiting` in its queue.
async fn settles(sim: &SimHandle, running: usize, waiting: usize) -> bool {
    eventually(|| sim.load(MODEL) == Some(ModelLoad { running, waiting })).await
}

#[tokio::test]
async fn second_identical_request_hits_the_prefix_cache() -> TestResult {
    let (_sim, http) = sim(config()).await?;
    let body = chat_body(MODEL, &long_prompt("cache"));
    let first = http.chat(&body).await?;
    let second = http.chat(&body).await?;
    let (one, two) = (first.json()?, second.json()?);
    assert_eq!(cached(&one), Some(0));
    let hit = cached(&two).ok_or("no cached tokens")?;
    let prompt = two["usage"]["prompt_tokens"]
        .as_u64()
        .ok_or("no prompt tokens")?;
    assert!(hit > 0 && hit <= prompt, "{hit} of {prompt}");
    // Whole 16-token blocks only.
    assert_eq!(hit % 16, 0);
    assert!(second.header_f64(SIM_PREFILL_MS)? < first.header_f64(SIM_PREFILL_MS)?);
    // The cache changes cost, never content.
    assert_eq!(one["choices"], two["choices"]);

    // Another model keeps its own cache.
    let other = http
        .chat(&chat_body(SMALL, &long_prompt("cache")))
        .await?
        .json()?;
    assert_eq!(cached(&other), Some(0));
    Ok(())
}

#[tokio::test]
async fn a_growing_conversation_reuses_its_prefix_and_streams_report_it() -> TestResult {
    let (_sim, http) = sim(config()).await?;
    let first_turn = json!([{"role": "system", "content": long_prompt("system")},
                           {"role": "user", "content": "first question"}]);
    let body = json!({"model": MODEL, "messages": first_turn});
    let first = http.chat(&body).await?.json()?;
    let reply = first["choices"][0]["message"]["content"].clone();
    let mut messages = first_turn.as_array().cloned().ok_or("not an array")?;
    messages.push(json!({"role": "assistant", "content": reply}));
    messages.push(json!({"role": "user", "content": "second question"}));
    let streamed = json!({"model": MODEL, "messages": messages, "stream": true,
                          "stream_options": {"include_usage": true}});
    let response = http.open_chat(&[], &streamed).await?;
    let (frames, _) = frames(response).await;
    let mut scanner = UsageScanner::new();
    for frame in &frames {
        scanner.feed(frame);
    }
    scanner.finish();
    let usage = scanner.usage().ok_or("no usage in the stream")?;
    let first_prompt = first["usage"]["prompt_tokens"]
        .as_u64()
        .ok_or("no prompt tokens")?;
    let hit = usage.cached_tokens.ok_or("no cached tokens")?;
    // Everything up to the last whole block of the first turn is reused.
    assert!(
        hit > 0 && hit <= first_prompt,
        "{hit} cached of {first_prompt}"
    );
    assert!(first_prompt - hit < 16);
    Ok(())
}

#[tokio::test]
async fn prefix_cache_stays_within_its_block_bound() -> TestResult {
    let mut cfg = config();
    cfg.models[0].cache_blocks = 6;
    let (sim, http) = sim(cfg).await?;
    let first = chat_body(MODEL, &long_prompt("a"));
    http.chat(&first).await?;
    assert_eq!(sim.cached_blocks(MODEL), Some(6));
    for tag in ["b", "c", "d"] {
        http.chat(&chat_body(MODEL, &long_prompt(tag))).await?;
        assert!(sim.cached_blocks(MODEL).is_some_and(|n| n <= 6));
    }
    // Three other prompts pushed the first one out.
    assert_eq!(cached(&http.chat(&first).await?.json()?), Some(0));
    assert_eq!(sim.cached_blocks(SMALL), Some(0));
    assert_eq!(sim.cached_blocks("nope"), None);
    Ok(())
}

#[tokio::test]
async fn disabled_cached_token_reporting_is_absent_not_zero() -> TestResult {
    let mut cfg = config();
    cfg.models[0].report_cached_tokens = false;
    let (_sim, http) = sim(cfg).await?;
    let body = chat_body(MODEL, &long_prompt("quiet"));
    http.chat(&body).await?;
    let answer = http.chat(&body).await?;
    let json = answer.json()?;
    assert!(json["usage"].get("prompt_tokens_details").is_none());
    let usage = Usage::from_body(&answer.body).ok_or("no usage")?;
    assert_eq!(usage.cached_tokens, None);
    assert!(usage.prompt_tokens.is_some());
    Ok(())
}

#[tokio::test]
async fn answers_are_deterministic_under_the_seed() -> TestResult {
    let (_a, one) = sim(config()).await?;
    let (_b, two) = sim(config()).await?;
    let (_c, other_seed) = sim(SimConfig {
        seed: 43,
        ..config()
    })
    .await?;
    let mut differs = false;
    for prompt in ["one", "two", "three", "four"] {
        let body = chat_body(MODEL, prompt);
        let (x, y, z) = (
            one.chat(&body).await?.json()?,
            two.chat(&body).await?.json()?,
            other_seed.chat(&body).await?.json()?,
        );
        assert_eq!(x["choices"], y["choices"]);
        assert_eq!(x["usage"], y["usage"]);
        differs |= x["choices"] != z["choices"];
    }
    assert!(differs, "another seed gave the same answers");
    Ok(())
}

#[tokio::test]
async fn max_tokens_caps_the_answer() -> TestResult {
    let (_sim, http) = sim(config()).await?;
    let mut body = chat_body(MODEL, "short please");
    body["max_tokens"] = json!(2);
    let answer = http.chat(&body).await?.json()?;
    assert_eq!(answer["usage"]["completion_tokens"], 2);
    assert_eq!(answer["choices"][0]["finish_reason"], "length");
    let content = answer["choices"][0]["message"]["content"]
        .as_str()
        .ok_or("no content")?;
    assert!(content.starts_with(&format!("[{MODEL}] ")));
    Ok(())
}

#[tokio::test]
async fn error_fault_fails_before_any_answer() -> TestResult {
    let mut cfg = config();
    cfg.models[1].faults = Some(SimFaults {
        error_rate: 1.0,
        error_status: 503,
        ..SimFaults::default()
    });
    let (_sim, http) = sim(cfg).await?;
    let body = chat_body(MODEL, "hi");
    let forced = http.chat_with(&[(SIM_FAULT, "error")], &body).await?;
    assert_eq!(forced.status, 500);
    let error = forced.json()?;
    assert_eq!(error["error"]["code"], "simulated_fault");
    assert_eq!(error["error"]["type"], "server_error");
    let chosen = http.chat_with(&[(SIM_FAULT, "error=502")], &body).await?;
    assert_eq!(chosen.status, 502);
    // Configured per model: the small model always fails, the other never does.
    assert_eq!(http.chat(&chat_body(SMALL, "hi")).await?.status, 503);
    assert_eq!(http.chat(&chat_body(MODEL, "hi")).await?.status, 200);
    // The header also switches a configured fault off.
    let spared = http
        .chat_with(&[(SIM_FAULT, "none")], &chat_body(SMALL, "hi"))
        .await?;
    assert_eq!(spared.status, 200);
    Ok(())
}

#[tokio::test]
async fn stall_fault_delays_or_never_answers_and_leaving_frees_the_slot() -> TestResult {
    let (sim, http) = sim(config()).await?;
    let body = chat_body(MODEL, "wait for it");
    let delayed = http.chat_with(&[(SIM_FAULT, "stall=30")], &body).await?;
    assert_eq!(delayed.status, 200);
    assert!(delayed.json()?["choices"][0]["message"]["content"].is_string());

    let forever = tokio::spawn({
        let http = http.clone();
        async move {
            let request = http.open_chat(&[(SIM_FAULT, "stall")], &body);
            request.await.map(|r| r.status().as_u16())
        }
    });
    assert!(settles(&sim, 1, 0).await);
    // The stalled request holds its slot and sends nothing while the client waits.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!forever.is_finished());
    forever.abort();
    assert!(settles(&sim, 0, 0).await);
    Ok(())
}

#[tokio::test]
async fn a_whole_answer_sends_nothing_before_it_is_generated() -> TestResult {
    let mut cfg = config();
    // Far longer than any test runs: the answer is never ready.
    cfg.time_scale = 1.0;
    cfg.models[0].decode_ms_per_token = 1e9;
    let (sim, http) = sim(cfg).await?;
    let body = chat_body(MODEL, "slow");
    let request = http.open_chat(&[], &body);
    let headers = tokio::time::timeout(Duration::from_millis(100), request).await;
    assert!(
        headers.is_err(),
        "headers arrived before the answer was generated"
    );
    // The abandoned request gave its slot back.
    assert!(settles(&sim, 0, 0).await);
    Ok(())
}

#[tokio::test]
async fn disconnect_fault_breaks_a_stream_after_n_tokens() -> TestResult {
    let (_sim, http) = sim(config()).await?;
    let body = stream_body(MODEL, "drop me");
    let response = http
        .open_chat(&[(SIM_FAULT, "disconnect=3")], &body)
        .await?;
    assert_eq!(response.status(), 200);
    let (frames, error) = frames(response).await;
    assert!(error.is_some(), "the stream ended cleanly");
    let raw = frames.concat();
    let events = sse_data(&raw);
    assert!(!events.iter().any(|e| e == "[DONE]"));
    let tokens: Vec<String> = events
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .filter(|t| !t.is_empty())
        .collect();
    assert_eq!(tokens.len(), 3, "{tokens:?}");
    assert!(tokens[0].starts_with('['));
    Ok(())
}

#[tokio::test]
async fn disconnect_fault_truncates_a_whole_answer() -> TestResult {
    let mut cfg = config();
    cfg.faults = SimFaults {
        disconnect_rate: 1.0,
        ..SimFaults::default()
    };
    let (_sim, http) = sim(cfg).await?;
    let response = http.open_chat(&[], &chat_body(MODEL, "hi")).await?;
    assert_eq!(response.status(), 200);
    let (frames, error) = frames(response).await;
    assert!(error.is_some());
    assert!(serde_json::from_slice::<Value>(&frames.concat()).is_err());
    Ok(())
}

#[tokio::test]
async fn queue_waits_for_a_slot_and_rejects_beyond_its_limit() -> TestResult {
    let cfg = SimConfig {
        models: vec![SimModel {
            max_concurrency: 1,
            queue_limit: Some(1),
            ..SimModel::new(MODEL)
        }],
        time_scale: 0.001,
        ..SimConfig::default()
    };
    let (sim, http) = sim(cfg).await?;
    let body = chat_body(MODEL, "queued");
    let holder = tokio::spawn({
        let (http, body) = (http.clone(), body.clone());
        async move {
            let request = http.open_chat(&[(SIM_FAULT, "stall")], &body);
            request.await.map(|r| r.status().as_u16())
        }
    });
    assert!(eventually(|| sim.load(MODEL).is_some_and(|l| l.running == 1)).await);
    let waiter = tokio::spawn({
        let (http, body) = (http.clone(), body.clone());
        async move {
            let answer = http.chat_with(&[], &body).await?;
            Ok::<_, Error>((answer.status, answer.header_f64(SIM_QUEUE_MS).ok()))
        }
    });
    assert!(eventually(|| sim.load(MODEL).is_some_and(|l| l.waiting == 1)).await);
    let rejected = http.chat_with(&[], &body).await?;
    assert_eq!(rejected.status, 503);
    assert_eq!(rejected.json()?["error"]["code"], "service_unavailable");
    // Releasing the stalled request lets the queued one through, which reports its wait.
    holder.abort();
    let (status, queue_ms) = waiter.await??;
    assert_eq!(status, 200);
    assert!(queue_ms.is_some_and(|ms| ms > 0.0), "{queue_ms:?}");
    Ok(())
}
