//! The shared cooldown's contract on any Redis deployment: a model one replica cools down is
//! skipped by another after the other's next sync, through the other's own link, for the time
//! the first one set, and no other model is.

use std::sync::Arc;
use std::time::{Duration, Instant};

use src_compiler::hir::CheckedPolicy;
use src_compiler::{check, load, CheckOptions};
use src_runtime::cooldown::Cooldowns;
use src_runtime::store::Links;

/// A policy whose session `store` is `store` (`redis("…")`, `redis_cluster([...])`, ...), and
/// whose first failure of `strong` cools it down for an hour.
pub fn policy(store: &str) -> CheckedPolicy {
    let text = format!(
        r#"
backend local {{ url = "http://127.0.0.1:9/v1" }}
model small  {{ backend = local  serves = "org/small" }}
model strong {{ backend = local  serves = "org/strong" }}
session {{
  id = header("x-task")
  store = {store}
}}
failure {{ cooldown_after = 1  cooldown = 1h }}
route default {{ to strong else small }}
"#
    );
    let source = load::from_texts(".".into(), vec![("policy.sr".into(), text)]);
    let outcome = check(source, &CheckOptions::default());
    assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
    outcome.policy.expect("a checked policy")
}

/// Replica `a` trips `strong`'s cooldown; replica `b` must see it, both through `store`.
pub async fn contract(store: &str) {
    let policy = policy(store);
    let a = Arc::new(Cooldowns::with_links(Arc::new(Links::new())));
    let b = Arc::new(Cooldowns::with_links(Arc::new(Links::new())));
    b.sync(&policy).await;
    assert_eq!(b.cooling("strong"), None, "nothing is cooling yet");
    a.failed(&policy, "strong");
    assert!(a.cooling("strong").is_some(), "the replica that saw it");
    // The cooldown is published in the background.
    let deadline = Instant::now() + Duration::from_secs(10);
    let left = loop {
        b.sync(&policy).await;
        if let Some(left) = b.cooling("strong") {
            break left;
        }
        assert!(
            Instant::now() < deadline,
            "the cooldown never reached the other replica"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        left > Duration::from_secs(59 * 60),
        "{left:?} of the hour set"
    );
    assert_eq!(b.cooling("small"), None, "only the model that failed");
}
