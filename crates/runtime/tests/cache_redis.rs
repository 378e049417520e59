//! The shared cache store end to end: two `src serve` replicas over one real `redis-server`,
//! each with its own simulated backend — an answer stored through replica A answers a
//! paraphrase on replica B, whose backend is never asked — and `failure.store` with Redis down:
//! `open` goes on without the cache, `closed` answers 503.

use std::time::{Duration, Instant};

use src_testkit::cache::{serve, PARAPHRASE, PASSWORD, PROVIDERS, UNRELATED};
use src_testkit::redis::RedisServer;
use src_testkit::{TestResult, PATIENCE};

fn policy(store: &str, failure: &str) -> String {
    format!(
        "{PROVIDERS}\nroute default {{ to small }}\n\
         cache {{ encoder = minilm  threshold = 0.9  ttl = 10m  store = redis(\"{store}\") }}\n\
         {failure}\n"
    )
}

/// A port nothing listens on, reserved while the socket lives.
fn closed_port() -> TestResult<(tokio::net::TcpSocket, u16)> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind("127.0.0.1:0".parse()?)?;
    let port = socket.local_addr()?.port();
    Ok((socket, port))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_stored_through_one_replica_answers_on_another() -> TestResult {
    let redis = RedisServer::start();
    let shared = policy(&redis.url(), "");
    let a = serve(&shared).await?;
    let b = serve(&shared).await?;

    let first = a.ask(PASSWORD, "key-a").await?;
    assert_eq!((first.status, first.cache()), (200, "miss"));
    a.stored(1.0).await?;
    let keys = redis.command("KEYS sr:v1:cache:*");
    assert!(keys.contains("}:body:"), "{keys}");

    let hit = b.ask(PARAPHRASE, "key-a").await?;
    assert_eq!(hit.status, 200, "{:?}", hit.body);
    assert_eq!(hit.cache(), "hit");
    assert_eq!(hit.header("x-sr-path"), Some("cache"));
    assert_eq!(hit.header("x-sr-model"), Some("small"));
    assert_eq!(hit.body, first.body);
    assert_eq!(b.backend_requests(), 0, "replica B's backend was asked");

    // Tenants stay apart in the shared store too.
    assert_eq!(b.ask(PARAPHRASE, "key-b").await?.cache(), "miss");
    assert_eq!(b.ask(UNRELATED, "key-a").await?.cache(), "miss");
    assert_eq!(b.backend_requests(), 2);

    // Bodies expire with the cache's ttl (10 minutes), not never.
    let body_key = keys
        .lines()
        .find(|l| l.starts_with("sr:v1:cache:{") && l.contains("}:body:"))
        .unwrap_or_default()
        .to_owned();
    let pttl: i64 = redis
        .command(&format!("PTTL {body_key}"))
        .trim_start_matches(':')
        .trim()
        .parse()?;
    assert!(pttl > 0 && pttl <= 600_000, "{pttl}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_fails_open_without_the_cache_or_closed_with_503() -> TestResult {
    let (_reserved, port) = closed_port()?;
    let url = format!("redis://127.0.0.1:{port}/");

    let open = serve(&policy(&url, "failure { store = open }")).await?;
    let started = Instant::now();
    let answer = open.ask(PASSWORD, "key-a").await?;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    assert_eq!(answer.cache(), "error");
    assert_eq!(answer.header("x-sr-path"), Some("upstream"));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(open.backend_requests(), 1);
    assert_eq!(
        open.metric("src_cache_lookups_total", "result=\"error\"")
            .await?,
        1.0
    );
    let metrics = open.metrics().await?;
    assert!(
        metrics.contains("src_cache_store_errors_total{store=\"redis\",op=\"lookup\",kind="),
        "{metrics}"
    );
    let log = open.log();
    assert_eq!(log[0]["cache"], "error");

    let closed = serve(&policy(&url, "failure { store = closed }")).await?;
    let refused = closed.ask(PASSWORD, "key-a").await?;
    assert_eq!(refused.status, 503, "{:?}", refused.body);
    assert_eq!(refused.json()["error"]["code"], "cache");
    assert_eq!(refused.cache(), "error");
    assert_eq!(closed.backend_requests(), 0);

    // Redis comes back: the same server caches again without a restart.
    let mut redis = RedisServer::start();
    let back = serve(&policy(&redis.url(), "failure { store = closed }")).await?;
    assert_eq!(back.ask(PASSWORD, "key-a").await?.cache(), "miss");
    back.stored(1.0).await?;
    redis.kill();
    let down = back.ask(PARAPHRASE, "key-a").await?;
    assert_eq!(down.status, 503);
    redis.restart();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let again = back.ask(PASSWORD, "key-a").await?;
        if again.status == 200 {
            // Restarted empty (persistence is off): a miss, stored anew.
            assert_eq!(again.cache(), "miss");
            break;
        }
        assert!(Instant::now() < deadline, "the store never recovered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}
