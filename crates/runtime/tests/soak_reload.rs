//! Soak: 16 clients send requests without pause while the policy file is rewritten 100 times,
//! valid and invalid versions alternating, through the file watcher. Every request must succeed,
//! every valid version must be served (its served id is in the simulator's answer), no invalid
//! one ever, and each client's session pin must survive every reload (`pinned` after its first
//! call). Once the clients stop, the native code of every replaced policy has been freed: at
//! most two compiled policies (the one served and one a straggler may still hold) are mapped,
//! however many reloads there were. The run lasts `SRC_SOAK_SECS` (10 by default;
//! docs/operations.md reports a 60 s run), `SRC_SOAK_REWRITES` sets the rewrites (100 by
//! default), and it prints its figures (requests, reloads, the process's RSS at start, after
//! every 100 rewrites and at the end); nothing is asserted about time or size.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use src_runtime::log::RequestLog;
use src_testkit::{user, Router, TestResult, PATIENCE};

const CLIENTS: usize = 16;

fn rewrites() -> usize {
    std::env::var("SRC_SOAK_REWRITES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

fn soak_secs() -> u64 {
    std::env::var("SRC_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
}

/// Version `n` serves model `main` as `v{n}`.
fn valid(n: usize) -> String {
    format!(
        r#"
backend sim {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model main  {{ backend = sim  serves = "v{n}" }}
model other {{ backend = sim  serves = "other" }}
route coding priority 10 {{ when contains(prompt, ["segfault"])  to other }}
route default {{ to main }}
session {{ store = memory }}
"#
    )
}

/// Version `n` broken: its default route names no declared model (E011).
fn invalid(n: usize) -> String {
    valid(n).replace("route default { to main }", "route default { to missing }")
}

/// The resident set of this process (the router runs in it), in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// What the clients saw.
#[derive(Default)]
struct Seen {
    versions: Mutex<BTreeSet<usize>>,
    failures: Mutex<Vec<String>>,
    requests: AtomicU64,
}

impl Seen {
    fn fail(&self, what: String) {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(what);
    }

    fn saw(&self, version: usize) -> bool {
        self.versions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&version)
    }
}

/// One client: its own session, requests back to back until `stop`.
async fn client(router: Arc<Router>, index: usize, seen: Arc<Seen>, stop: Arc<AtomicBool>) {
    let session = format!("soak-client-{index}");
    let mut calls = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let answer = match router
            .chat(&user("hello there"), &[("x-session-id", &session)])
            .await
        {
            Ok(answer) => answer,
            Err(e) => {
                seen.fail(format!("client {index}: {e}"));
                continue;
            }
        };
        seen.requests.fetch_add(1, Ordering::SeqCst);
        calls += 1;
        if answer.status != 200 {
            seen.fail(format!(
                "client {index}: {} {}",
                answer.status,
                answer.text()
            ));
            continue;
        }
        let state = answer.header("x-sr-session").unwrap_or_default().to_owned();
        let expected = if calls == 1 { "new" } else { "pinned" };
        if state != expected {
            seen.fail(format!("client {index} call {calls}: session `{state}`"));
        }
        let version = answer
            .content()
            .ok()
            .and_then(|c| c.strip_prefix("[v").map(str::to_owned))
            .and_then(|c| c.split(']').next().and_then(|n| n.parse::<usize>().ok()));
        match version {
            Some(v) => {
                seen.versions
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(v);
            }
            None => seen.fail(format!("client {index}: no version in {}", answer.text())),
        }
    }
}

/// `src_reloads_total{result="error"}`.
async fn reload_errors(router: &Router) -> TestResult<u64> {
    let metrics = router.admin_get("/metrics").await?.text();
    Ok(metrics
        .lines()
        .find_map(|l| l.strip_prefix("src_reloads_total{result=\"error\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0))
}

/// Writes `text` as the policy the way a deployment does: a new file renamed over the old.
fn rewrite(router: &Router, text: &str) -> TestResult {
    let staged = router.dir.path().join(".policy.sr.next");
    std::fs::write(&staged, text)?;
    std::fs::rename(&staged, router.policy_path())?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clients_never_fail_while_the_policy_is_rewritten_100_times() -> TestResult {
    let rewrites = rewrites();
    // No request log: the harness keeps it in memory, where it would grow with the load and
    // hide what the router itself holds.
    let first = valid(0);
    let router = Router::start_full(
        &first,
        |cfg| cfg.watch = true,
        |parts| {
            parts.log = RequestLog::Off;
        },
    );
    let router = Arc::new(router.await?);
    let rss_start = rss_kib();
    let seen = Arc::new(Seen::default());
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            tokio::spawn(client(
                Arc::clone(&router),
                i,
                Arc::clone(&seen),
                Arc::clone(&stop),
            ))
        })
        .collect();
    let started = Instant::now();
    let pause = Duration::from_millis(soak_secs() * 1000 / rewrites as u64);
    let mut invalid_written = 0;
    let mut rss_every_100 = Vec::new();
    for n in 1..=rewrites {
        if n % 2 == 1 {
            rewrite(&router, &valid(n))?;
            // The version is served before the next rewrite, so none is skipped unseen.
            let deadline = Instant::now() + PATIENCE;
            while !seen.saw(n) {
                if Instant::now() > deadline {
                    return Err(format!("version {n} was never served").into());
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        } else {
            rewrite(&router, &invalid(n))?;
            invalid_written += 1;
            let deadline = Instant::now() + PATIENCE;
            while reload_errors(&router).await? < invalid_written {
                if Instant::now() > deadline {
                    return Err(format!("the broken version {n} was never refused").into());
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        tokio::time::sleep(pause).await;
        if n % 100 == 0 {
            rss_every_100.push(rss_kib() / 1024);
        }
    }
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.await?;
    }
    let elapsed = started.elapsed();
    let rss_end = rss_kib();
    let failures = seen
        .failures
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert!(
        failures.is_empty(),
        "{} failed: {failures:#?}",
        failures.len()
    );
    let versions = seen
        .versions
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let valid_versions: BTreeSet<usize> =
        (0..=rewrites).filter(|n| n % 2 == 1 || *n == 0).collect();
    assert_eq!(
        versions, valid_versions,
        "every valid version served, no invalid one"
    );
    assert_eq!(
        router.server.generation(),
        1 + (rewrites as u64).div_ceil(2),
        "one generation per valid version"
    );
    // The replaced policies' code is freed once no request holds them; the clients have
    // stopped, so only the served policy (and, briefly, one a finishing task held) is left.
    let deadline = Instant::now() + PATIENCE;
    while src_compiler::jit::mapped_policies() > 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mapped = src_compiler::jit::mapped_policies();
    assert!(
        (1..=2).contains(&mapped),
        "{mapped} compiled policies still mapped after {} reloads",
        router.server.generation() - 1
    );
    let requests = seen.requests.load(Ordering::SeqCst);
    println!(
        "soak reload: {requests} requests from {CLIENTS} clients, {rewrites} rewrites \
         ({} refused), {:.1} s, 0 failed; RSS {rss_start} KiB at start, {rss_end} KiB at end \
         (MiB after each 100 rewrites: {rss_every_100:?}); {mapped} compiled policy mapped",
        invalid_written,
        elapsed.as_secs_f64()
    );
    Ok(())
}
