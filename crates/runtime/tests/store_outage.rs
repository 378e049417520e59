//! A real `redis-server` killed and started again under a router whose sessions live on it:
//! while it is down the store's circuit breaker skips it (calls are counted, not sent, so no
//! request waits for a connection to fail), the outage is logged once, a tool loop pinned
//! before it keeps its model on this replica's copy of the pin (`failure.store = open`) or is
//! refused (`closed`), and once Redis is back no request fails on a connection that died with
//! the old server — even a connection nothing used while Redis was away, whose first command
//! after the restart meets a "broken pipe" and is sent again on a fresh connection.
//!
//! Nothing here asserts about time: what a skipped call saved is read from the router's
//! counters. The first test prints one client's median latency while Redis is up and while it
//! is down, measured in the same run (the figure in docs/benchmarks.md).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use src_runtime::log::RequestLog;
use src_testkit::log_lines::Written;
use src_testkit::redis::RedisServer;
use src_testkit::sessions::{pinned_policy, tool_loop};
use src_testkit::{user, Router, TestResult, PATIENCE};

const SID: &str = "x-session-id";
/// Requests sent while Redis is down.
const DURING: usize = 40;

fn policy(url: &str, failure: &str) -> String {
    pinned_policy(&format!("redis(\"{url}\")"), failure)
}

/// Every log line the process writes at `info` or above, as JSON, shared by the tests of this
/// binary (a tracing subscriber is process-wide); each test reads the lines naming its Redis.
fn captured() -> &'static Written {
    static LINES: OnceLock<Written> = OnceLock::new();
    LINES.get_or_init(|| {
        let lines = Written::default();
        let sink = lines.clone();
        let _ = tracing_subscriber::fmt()
            .json()
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || sink.clone())
            .try_init();
        lines
    })
}

/// The captured lines at `level` whose text contains every one of `words`.
fn lines(level: &str, words: &[&str]) -> Vec<serde_json::Value> {
    captured()
        .text()
        .lines()
        .filter(|l| words.iter().all(|w| l.contains(w)))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["level"] == level)
        .collect()
}

/// The sum of `name`'s samples whose labels contain `label`.
async fn counted(router: &Router, name: &str, label: &str) -> TestResult<f64> {
    let metrics = router.admin_get("/metrics").await?.text();
    Ok(metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum())
}

/// The median of `times`, in milliseconds.
fn median(times: &[Duration]) -> f64 {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted
        .get(sorted.len() / 2)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

async fn quiet(policy: &str) -> TestResult<Router> {
    Router::start_full(policy, |_| {}, |parts| parts.log = RequestLog::Off).await
}

/// Kills `redis` off the runtime's threads (it waits for the process).
async fn kill(mut redis: RedisServer) -> TestResult<RedisServer> {
    Ok(tokio::task::spawn_blocking(move || {
        redis.kill();
        redis
    })
    .await?)
}

async fn restart(mut redis: RedisServer) -> TestResult<RedisServer> {
    Ok(tokio::task::spawn_blocking(move || {
        redis.restart();
        redis
    })
    .await?)
}

/// Waits until the breaker of `store` has closed again, the prober having reached Redis.
async fn until_closed(router: &Router, store: &str) -> TestResult {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let metrics = router.admin_get("/metrics").await?.text();
        let closed = metrics
            .lines()
            .any(|l| l == format!("src_store_breaker_state{{{store}}} 0"));
        if closed {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("the breaker never closed: {metrics}").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_is_skipped_logged_once_kept_pinned_and_left_without_a_failed_request(
) -> TestResult {
    captured();
    let redis = RedisServer::start();
    let url = redis.url();
    let store = format!("store=\"{url}\"");
    let router = quiet(&policy(&url, "open")).await?;

    // A tool loop pinned on `strong` while Redis is up.
    let pinned = router
        .chat(&tool_loop("segfault"), &[(SID, "loop-1")])
        .await?;
    assert_eq!(
        (pinned.header("x-sr-session"), pinned.header("x-sr-model")),
        (Some("new"), Some("strong"))
    );

    let mut up = Vec::new();
    for i in 0..DURING {
        let id = format!("before-{i}");
        let started = Instant::now();
        let answer = router.chat(&user("hello"), &[(SID, id.as_str())]).await?;
        up.push(started.elapsed());
        assert_eq!(answer.header("x-sr-session"), Some("new"));
    }

    let redis = kill(redis).await?;
    let mut down = Vec::new();
    for i in 0..DURING {
        let id = format!("other-{i}");
        let started = Instant::now();
        let answer = router.chat(&user("hello"), &[(SID, id.as_str())]).await?;
        down.push(started.elapsed());
        assert_eq!(answer.status, 200, "{}", answer.text());
        assert_eq!(answer.header("x-sr-session"), Some("store-unavailable"));
    }
    let (median_up, median_down) = (median(&up), median(&down));
    println!(
        "store outage, one client, {DURING} sequential requests each: median {median_up:.2} ms \
         while Redis is up, {median_down:.2} ms while it is down (down/up {:.2}; the first \
         request of the outage {:.2} ms)",
        median_down / median_up.max(f64::MIN_POSITIVE),
        down.first().map_or(0.0, |d| d.as_secs_f64() * 1000.0),
    );
    // The loop's next call proposes `small`; this replica's copy of the pin and the hold keep
    // it on `strong` although the store cannot be asked.
    let kept = router.chat(&tool_loop("fine"), &[(SID, "loop-1")]).await?;
    assert_eq!(kept.status, 200, "{}", kept.text());
    assert_eq!(kept.header("x-sr-session"), Some("store-unavailable"));
    assert_eq!(kept.header("x-sr-model"), Some("strong"));
    assert_eq!(
        kept.header("x-sr-protection"),
        Some("tool call in flight"),
        "the hold kept the model"
    );

    // Only the first call of the outage went out; every later one was skipped at once.
    let calls = (DURING + 1) as f64;
    let skipped = counted(&router, "src_store_skipped_total", &store).await?;
    assert!(
        skipped >= calls - 1.0,
        "{skipped} of {calls} calls were skipped"
    );
    let failed = counted(&router, "src_session_store_errors_total", "store=\"redis\"").await?;
    assert_eq!(failed, calls, "every call without the store is counted");
    assert_eq!(
        counted(&router, "src_store_breaker_state", &store).await?,
        1.0
    );
    assert_eq!(
        counted(&router, "src_session_local_pins_total", "state=\"held\"").await?,
        1.0
    );
    // One warning for the outage, not one a request.
    let port = format!("127.0.0.1:{}", redis.port);
    let opened = lines("WARN", &[port.as_str(), "unreachable"]);
    assert_eq!(opened.len(), 1, "{opened:#?}");
    assert_eq!(opened[0]["fields"]["op"], "get");
    assert!(
        lines("WARN", &["a store failed"]).is_empty(),
        "a request was logged as well"
    );

    let _redis = restart(redis).await?;
    until_closed(&router, &store).await?;
    let back = lines("INFO", &[port.as_str(), "reachable again"]);
    assert_eq!(back.len(), 1, "{back:#?}");
    assert!(
        back[0]["fields"]["skipped"].as_u64() >= Some(DURING as u64),
        "{back:#?}"
    );
    // The pooled connections died with the old server; none of them fails a request.
    let failed_before =
        counted(&router, "src_session_store_errors_total", "store=\"redis\"").await?;
    for i in 0..DURING {
        let id = format!("after-{i}");
        let answer = router.chat(&user("hello"), &[(SID, id.as_str())]).await?;
        assert_eq!(
            (answer.status, answer.header("x-sr-session")),
            (200, Some("new")),
            "call {i} after the restart"
        );
    }
    let failed_after =
        counted(&router, "src_session_store_errors_total", "store=\"redis\"").await?;
    assert_eq!(
        failed_after, failed_before,
        "no store call failed after the restart"
    );
    let again = router.chat(&tool_loop("fine"), &[(SID, "after-0")]).await?;
    assert_eq!(again.header("x-sr-session"), Some("pinned"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_failure_store_closed_an_outage_refuses_without_waiting() -> TestResult {
    captured();
    let redis = RedisServer::start();
    let url = redis.url();
    let store = format!("store=\"{url}\"");
    let router = quiet(&policy(&url, "closed")).await?;
    let pinned = router
        .chat(&tool_loop("segfault"), &[(SID, "loop-c")])
        .await?;
    assert_eq!(pinned.header("x-sr-session"), Some("new"));

    let redis = kill(redis).await?;
    for _ in 0..DURING {
        let answer = router.chat(&tool_loop("fine"), &[(SID, "loop-c")]).await?;
        assert_eq!(answer.status, 503, "{}", answer.text());
        assert_eq!(answer.json()?["error"]["code"], "session");
    }
    let skipped = counted(&router, "src_store_skipped_total", &store).await?;
    assert!(
        skipped >= (DURING - 1) as f64,
        "{skipped} of {DURING} calls were skipped"
    );
    assert_eq!(
        counted(&router, "src_session_local_pins_total", "state=").await?,
        0.0,
        "a closed store never answers from the copy"
    );
    let port = format!("127.0.0.1:{}", redis.port);
    assert_eq!(lines("WARN", &[port.as_str(), "unreachable"]).len(), 1);

    let _redis = restart(redis).await?;
    until_closed(&router, &store).await?;
    let answer = router.chat(&tool_loop("fine"), &[(SID, "loop-c")]).await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    // The restarted Redis is empty: the loop starts a new pin.
    assert_eq!(answer.header("x-sr-session"), Some("new"));
    Ok(())
}

#[tokio::test]
async fn a_connection_that_died_with_its_server_is_replaced_without_failing_the_call() -> TestResult
{
    use src_runtime::session::pin::Pin;
    use src_runtime::session::{Identity, RedisStore, SessionStore};
    use src_runtime::store::health::LinkLabels;
    use src_runtime::store::Redis;

    let redis = RedisServer::start();
    let link = Redis::connect(&redis.url(), Duration::from_millis(500))?;
    let health = std::sync::Arc::clone(link.health());
    let store = RedisStore::on(link);
    let id = Identity {
        tenant: "t".into(),
        id: "s".into(),
    };
    store
        .put_if_absent(&id, &Pin::first("small", None, 0), 60_000)
        .await?;
    // Redis dies and comes back while nothing is sent: the pooled connection is dead, and
    // nothing has told the store so.
    let redis = restart(kill(redis).await?).await?;
    let answered = store.get(&id, 0).await;
    assert_eq!(answered, Ok(None), "the restarted Redis is empty");
    let labels = LinkLabels { store: redis.url() };
    assert_eq!(
        health.metrics().retried.get_or_create(&labels).get(),
        1,
        "the call was sent again on a fresh connection"
    );
    assert_eq!(health.gauge(), 0, "no outage was seen");
    Ok(())
}
