//! Hot reload of `src serve`: a valid edit swaps the route, an invalid one keeps the old policy
//! and shows its diagnostics on the admin listener, SIGHUP reloads, and requests under load
//! never fail while policies are swapped.

use std::time::Duration;

use serde_json::Value;
use src_testkit::{user, Http, Router, TestResult, PATIENCE};

fn policy(default_model: &str) -> String {
    format!(
        r#"
backend sim {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model small  {{ backend = sim  serves = "Qwen/Qwen3-0.6B" }}
model strong {{ backend = sim  serves = "Qwen/Qwen3-8B" }}
route coding priority 10 {{ when contains(prompt, ["segfault"])  to strong }}
route default {{ to {default_model} }}
"#
    )
}

async fn admin(router: &Router) -> TestResult<Value> {
    Http::new()
        .send(
            hyper::Method::GET,
            &router.admin_url("/v1/router/policy"),
            "",
            &[],
        )
        .await?
        .json()
}

/// Polls until `probe` is true (bounded by `PATIENCE`).
async fn eventually<F, Fut>(what: &str, mut probe: F) -> TestResult
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = TestResult<bool>>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !probe().await? {
        if tokio::time::Instant::now() > deadline {
            return Err(format!("never happened: {what}").into());
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Ok(())
}

async fn model_for_hello(router: &Router) -> TestResult<String> {
    let answer = router.chat(&user("hello"), &[]).await?;
    if answer.status != 200 {
        return Err(format!("status {}: {}", answer.status, answer.text()).into());
    }
    Ok(answer.header("x-sr-model").unwrap_or_default().to_owned())
}

#[tokio::test]
async fn file_edits_reload_and_broken_edits_keep_the_old_policy() -> TestResult {
    let router = Router::start_with(&policy("small"), |cfg| cfg.watch = true).await?;
    assert_eq!(model_for_hello(&router).await?, "small");
    let first = admin(&router).await?;

    // A valid edit swaps the default route's model.
    std::fs::write(router.policy_path(), policy("strong"))?;
    eventually("the edit is served", || async {
        Ok(model_for_hello(&router).await? == "strong")
    })
    .await?;
    let second = admin(&router).await?;
    assert_eq!(second["generation"], 2);
    assert_ne!(second["content_hash"], first["content_hash"]);

    // A broken edit: the old policy keeps serving; the admin endpoint shows why.
    std::fs::write(
        router.policy_path(),
        policy("strong").replace("to strong }\n", "to stronk }\n"),
    )?;
    eventually("the failure is reported", || async {
        Ok(!admin(&router).await?["last_reload_error"].is_null())
    })
    .await?;
    let report = admin(&router).await?;
    let error = &report["last_reload_error"];
    assert_eq!(report["generation"], 2, "{report}");
    let diagnostics = error["diagnostics"]["diagnostics"]
        .as_array()
        .ok_or("no diagnostics list")?;
    assert!(
        diagnostics
            .iter()
            .any(|d| d["code"] == "E011"
                && d["message"].as_str().is_some_and(|m| m.contains("stronk"))),
        "{error}"
    );
    assert!(
        error["rendered"]
            .as_str()
            .is_some_and(|r| r.contains("E011")),
        "{error}"
    );
    assert_eq!(model_for_hello(&router).await?, "strong");
    let metrics = router.admin_get("/metrics").await?.text();
    assert!(
        metrics.contains("src_reloads_total{result=\"error\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("src_reloads_total{result=\"ok\"} 1"),
        "{metrics}"
    );

    // Back to a good file: the error clears, and the same text gives the same hash.
    std::fs::write(router.policy_path(), policy("small"))?;
    eventually("the fix is served", || async {
        Ok(model_for_hello(&router).await? == "small")
    })
    .await?;
    let third = admin(&router).await?;
    assert!(third["last_reload_error"].is_null(), "{third}");
    assert_eq!(third["content_hash"], first["content_hash"]);
    assert_eq!(third["generation"], 3);
    Ok(())
}

#[tokio::test]
async fn sighup_reloads() -> TestResult {
    let router = Router::start(&policy("small")).await?;
    std::fs::write(router.policy_path(), policy("strong"))?;
    // Not watching: nothing changes until asked.
    assert_eq!(model_for_hello(&router).await?, "small");
    let status = std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()?;
    assert!(status.success());
    eventually("SIGHUP reloaded", || async {
        Ok(model_for_hello(&router).await? == "strong")
    })
    .await?;
    assert_eq!(router.server.generation(), 2);
    Ok(())
}

#[tokio::test]
async fn no_request_fails_while_policies_swap_under_load() -> TestResult {
    let router = Router::start(&policy("small")).await?;
    let url = router.url("/v1/chat/completions");
    let mut clients = Vec::new();
    for c in 0..4 {
        let url = url.clone();
        clients.push(tokio::spawn(async move {
            let http = Http::new();
            let mut seen = Vec::new();
            for i in 0..60 {
                let prompt = if (i + c) % 3 == 0 {
                    "a segfault"
                } else {
                    "hello"
                };
                let answer = http
                    .send(hyper::Method::POST, &url, user(prompt).to_string(), &[])
                    .await?;
                if answer.status != 200 {
                    return Err(format!("status {}: {}", answer.status, answer.text()).into());
                }
                seen.push(answer.header("x-sr-model").unwrap_or_default().to_owned());
            }
            TestResult::Ok(seen)
        }));
    }
    for round in 0..10 {
        let model = if round % 2 == 0 { "strong" } else { "small" };
        std::fs::write(router.policy_path(), policy(model))?;
        router.server.reload().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for client in clients {
        let seen = client.await??;
        assert_eq!(seen.len(), 60);
        assert!(
            seen.iter().all(|m| m == "small" || m == "strong"),
            "{seen:?}"
        );
    }
    eventually("every reload is done", || async {
        Ok(router.server.generation() >= 2)
    })
    .await?;
    Ok(())
}

/// A Kubernetes ConfigMap volume as the kubelet writes it: each version in a hidden directory,
/// `..data` a symlink to the current one, and every file a symlink through `..data`.
fn config_map_version(root: &std::path::Path, version: &str, text: &str) -> TestResult {
    std::fs::create_dir(root.join(version))?;
    std::fs::write(root.join(version).join("policy.sr"), text)?;
    Ok(())
}

#[cfg(unix)]
#[tokio::test]
async fn config_map_updates_reload() -> TestResult {
    use std::os::unix::fs::symlink;
    let volume = tempfile::tempdir()?;
    let root = volume.path().to_path_buf();
    config_map_version(&root, "..2026_12_01_10_00_00.1", &policy("small"))?;
    symlink("..2026_12_01_10_00_00.1", root.join("..data"))?;
    symlink("..data/policy.sr", root.join("policy.sr"))?;
    let policy_dir = root.clone();
    let router = Router::start_with(&policy("small"), move |cfg| {
        cfg.watch = true;
        cfg.policy = policy_dir;
    })
    .await?;
    assert_eq!(model_for_hello(&router).await?, "small");

    // An update: the new version beside the old, `..data` swapped by renaming a new link over
    // it, the old version removed. `policy.sr` itself is never touched.
    config_map_version(&root, "..2026_12_01_10_05_00.2", &policy("strong"))?;
    symlink("..2026_12_01_10_05_00.2", root.join("..data_tmp"))?;
    std::fs::rename(root.join("..data_tmp"), root.join("..data"))?;
    std::fs::remove_dir_all(root.join("..2026_12_01_10_00_00.1"))?;
    eventually("the ConfigMap update is served", || async {
        Ok(model_for_hello(&router).await? == "strong")
    })
    .await?;
    assert_eq!(admin(&router).await?["generation"], 2);
    Ok(())
}
