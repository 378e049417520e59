//! The vector-database cache store end to end: two `src serve` replicas over one real Milvus
//! (milvus-lite, Milvus's gRPC API) with the real MiniLM encoder, each with its own simulated
//! backend. An answer stored through replica A answers a paraphrase on replica B, whose backend
//! is never asked; another tenant's request misses; the collection is made on first use with
//! the encoder's dimension; expired rows are deleted; and Milvus killed in the middle of a load
//! makes `failure { store = open }` go on without the cache and `closed` answer 503 — every
//! request answered, none left hanging — until it is back.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "helpers outside `#[test]` functions fail the test on an unexpected error"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use src_compiler::hir::MilvusTarget;
use src_runtime::cache::store::{accept_all, Lookup};
use src_runtime::cache::{CacheStore, MilvusCache, Scope};
use src_testkit::cache::{serve, Answer, Served, PARAPHRASE, PASSWORD, PROVIDERS, UNRELATED};
use src_testkit::milvus::MilvusServer;
use src_testkit::{TestResult, PATIENCE};

fn policy(url: &str, collection: &str, failure: &str) -> String {
    format!(
        "{PROVIDERS}\nroute default {{ to small }}\n\
         cache {{ encoder = minilm  threshold = 0.9  ttl = 10m  \
         store = milvus(\"{url}\", collection = \"{collection}\") }}\n\
         {failure}\n"
    )
}

/// One request, failing the test if it is not answered within [`PATIENCE`] (a hang, not a
/// slow answer: the store's own timeout is far shorter).
async fn ask(served: &Served, prompt: &str, key: &str) -> TestResult<Answer> {
    match tokio::time::timeout(PATIENCE, served.ask(prompt, key)).await {
        Ok(answer) => answer,
        Err(_) => Err(format!("`{prompt}` was not answered: the request hung").into()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_stored_through_one_replica_answers_on_another() -> TestResult {
    let milvus = MilvusServer::start();
    let shared = policy(&milvus.url(), "shared", "");
    let a = serve(&shared).await?;
    let b = serve(&shared).await?;

    let first = ask(&a, PASSWORD, "key-a").await?;
    assert_eq!((first.status, first.cache()), (200, "miss"));
    a.stored(1.0).await?;

    let hit = ask(&b, PARAPHRASE, "key-a").await?;
    assert_eq!(hit.status, 200, "{:?}", hit.body);
    assert_eq!(hit.cache(), "hit");
    assert_eq!(hit.header("x-sr-path"), Some("cache"));
    assert_eq!(hit.body, first.body);
    assert_eq!(b.backend_requests(), 0, "replica B's backend was asked");

    // Another tenant's request, and an unrelated question, miss in the shared collection.
    assert_eq!(ask(&b, PARAPHRASE, "key-b").await?.cache(), "miss");
    assert_eq!(ask(&b, UNRELATED, "key-a").await?.cache(), "miss");
    assert_eq!(b.backend_requests(), 2);
    let metrics = b.metrics().await?;
    assert!(
        !metrics.contains("src_cache_store_errors_total{store=\"milvus\""),
        "{metrics}"
    );

    // The collection was made on first use with MiniLM's 384 dimensions: a store opened on it
    // with a vector of another length is told so instead of writing a row.
    let target = MilvusTarget::parse(&milvus.url(), Some("shared"))?;
    let other = MilvusCache::new(target, Duration::from_secs(5), 1 << 16);
    let refused = other
        .nearest(Lookup {
            scope: &Scope([1; 32]),
            vector: &[1.0, 0.0],
            threshold: 0.5,
            now_ms: 0,
            ttl_ms: 1,
            accept: &accept_all,
        })
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("384-dimension"), "{refused}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_rows_are_deleted() -> TestResult {
    let milvus = MilvusServer::start();
    let target = MilvusTarget::parse(&milvus.url(), Some("sweep"))?;
    let store = MilvusCache::new(target, Duration::from_secs(5), 1 << 16)
        .with_sweep_every(Duration::from_secs(3600));
    let scope = Scope([2; 32]);
    let vector = [0.6, 0.8];
    for (n, ttl) in [(1, 100), (2, 100), (3, 1_000_000)] {
        let body = Bytes::from(format!("answer {n}"));
        store
            .insert(&scope, &vector, "q", body, 1_000 + n, ttl)
            .await?;
    }
    // Read past every ttl the lookup could apply: only rows still in the collection answer.
    let ever = || {
        store.nearest(Lookup {
            scope: &scope,
            vector: &vector,
            threshold: 0.9,
            now_ms: 5_000,
            ttl_ms: u64::MAX / 2,
            accept: &accept_all,
        })
    };
    assert!(ever().await?.body.is_some());
    assert_eq!(store.sweep(5_000).await?, 2);
    assert_eq!(
        ever().await?.body.as_deref(),
        Some(&b"answer 3"[..]),
        "the row still live was deleted, or an expired one kept"
    );
    assert_eq!(store.sweep(5_000).await?, 0);
    Ok(())
}

/// The load: `rounds` requests on each of two tasks, alternating a stored question and its
/// paraphrase, each answer with the time its request was sent.
async fn load(served: Arc<Served>, rounds: usize) -> TestResult<Vec<(Instant, Answer)>> {
    let mut tasks = Vec::new();
    for task in 0..2 {
        let served = served.clone();
        tasks.push(tokio::spawn(async move {
            let mut answers = Vec::new();
            for round in 0..rounds {
                let prompt = if (task + round) % 2 == 0 {
                    PASSWORD
                } else {
                    PARAPHRASE
                };
                let sent = Instant::now();
                let answer = ask(&served, prompt, "key-a").await?;
                answers.push((sent, answer));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            TestResult::<Vec<(Instant, Answer)>>::Ok(answers)
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await??);
    }
    Ok(all)
}

/// Kills `milvus` once `served` has answered from the cache, while `load` runs; answers the
/// load's answers and when the kill was over.
async fn kill_mid_load(
    milvus: &mut MilvusServer,
    served: Arc<Served>,
) -> TestResult<(Vec<(Instant, Answer)>, Instant)> {
    let first = ask(&served, PASSWORD, "key-a").await?;
    assert_eq!(first.status, 200, "{:?}", first.body);
    served.stored(1.0).await?;
    let running = tokio::spawn(load(served.clone(), 30));
    let deadline = Instant::now() + PATIENCE;
    while served
        .metric("src_cache_lookups_total", "result=\"hit\"")
        .await?
        < 2.0
    {
        assert!(Instant::now() < deadline, "the load never hit the cache");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    milvus.kill();
    let killed = Instant::now();
    Ok((running.await??, killed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn milvus_stopped_mid_load_fails_open_or_closed_and_nothing_hangs() -> TestResult {
    // Open: every request is answered; after the kill, by the backend without the cache.
    let mut milvus = MilvusServer::start();
    let open = Arc::new(serve(&policy(&milvus.url(), "open", "failure { store = open }")).await?);
    let (answers, killed) = kill_mid_load(&mut milvus, open.clone()).await?;
    assert_eq!(answers.len(), 60);
    assert!(answers.iter().all(|(_, a)| a.status == 200));
    assert!(answers.iter().any(|(_, a)| a.cache() == "hit"));
    let after: Vec<&Answer> = answers
        .iter()
        .filter(|(sent, _)| *sent > killed)
        .map(|(_, a)| a)
        .collect();
    assert!(!after.is_empty(), "no request was sent after the kill");
    for answer in &after {
        assert_eq!(answer.cache(), "error");
        assert_eq!(answer.header("x-sr-path"), Some("upstream"));
    }
    let metrics = open.metrics().await?;
    assert!(
        metrics.contains("src_cache_store_errors_total{store=\"milvus\",op=\"lookup\",kind="),
        "{metrics}"
    );

    // Closed: after the kill, every request is refused with 503 and never reaches the backend.
    milvus.restart();
    let closed = Arc::new(
        serve(&policy(
            &milvus.url(),
            "closed",
            "failure { store = closed }",
        ))
        .await?,
    );
    let (answers, killed) = kill_mid_load(&mut milvus, closed.clone()).await?;
    assert_eq!(answers.len(), 60);
    assert!(answers.iter().any(|(_, a)| a.cache() == "hit"));
    let before_backend = closed.backend_requests();
    let after: Vec<&Answer> = answers
        .iter()
        .filter(|(sent, _)| *sent > killed)
        .map(|(_, a)| a)
        .collect();
    assert!(!after.is_empty(), "no request was sent after the kill");
    for answer in &after {
        assert_eq!(answer.status, 503, "{:?}", answer.body);
        assert_eq!(answer.json()["error"]["code"], "cache");
        assert_eq!(answer.cache(), "error");
    }
    assert_eq!(ask(&closed, UNRELATED, "key-a").await?.status, 503);
    assert_eq!(closed.backend_requests(), before_backend);

    // Milvus comes back: the same server caches again without a restart.
    milvus.restart();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let again = ask(&closed, PARAPHRASE, "key-a").await?;
        if again.status == 200 {
            assert!(matches!(again.cache(), "hit" | "miss"), "{}", again.cache());
            break;
        }
        assert!(Instant::now() < deadline, "the store never recovered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// A "Milvus" that accepts connections and never answers: every call ends at the store's
/// timeout, as a timeout, and a request under `failure.store = open` goes upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_milvus_that_never_answers_times_out_and_nothing_hangs() -> TestResult {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let url = format!("http://127.0.0.1:{port}");

    let target = MilvusTarget::parse(&url, None)?;
    let store = MilvusCache::new(target, Duration::from_millis(200), 1 << 16);
    for _ in 0..2 {
        let lookup = store.nearest(Lookup {
            scope: &Scope([3; 32]),
            vector: &[1.0, 0.0],
            threshold: 0.5,
            now_ms: 0,
            ttl_ms: 1,
            accept: &accept_all,
        });
        let failed = tokio::time::timeout(PATIENCE, lookup)
            .await
            .map_err(|_| "a lookup hung")?
            .unwrap_err();
        assert_eq!(failed.kind(), "timeout", "{failed}");
    }

    let open = serve(&policy(&url, "silent", "failure { store = open }")).await?;
    let answer = ask(&open, PASSWORD, "key-a").await?;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    assert_eq!(answer.cache(), "error");
    assert_eq!(answer.header("x-sr-path"), Some("upstream"));
    assert!(
        open.metrics().await?.contains(
            "src_cache_store_errors_total{store=\"milvus\",op=\"lookup\",kind=\"timeout\"}"
        ),
        "the timeout was not counted: {}",
        open.metrics().await?
    );
    silent.abort();
    Ok(())
}
