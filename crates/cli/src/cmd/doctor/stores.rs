//! Phase 4 of `src doctor`: each Redis store of the policy, surveyed on its servers.

use super::report::{Check, Phase};
use serde_json::json;
use src_compiler::hir::{CheckedPolicy, RedisTarget, StoreDef};
use src_runtime::store::survey::{survey as ask, Survey};
use std::time::Duration;

/// The bound on each question to a store when `--timeout` does not say.
const STORE_TIMEOUT: Duration = Duration::from_secs(5);

/// One check per distinct Redis store (`session`'s, then `cache`'s).
pub fn survey(checked: &CheckedPolicy, timeout: Option<Duration>, checks: &mut Vec<Check>) {
    let mut stores: Vec<(&str, &RedisTarget)> = Vec::new();
    let session = checked.session.as_ref().map(|s| ("session", &s.store));
    let cache = checked.cache.as_ref().map(|c| ("cache", &c.store));
    for (section, store) in [session, cache].into_iter().flatten() {
        if let StoreDef::Redis(target) = store {
            if !stores.iter().any(|(_, t)| *t == target) {
                stores.push((section, target));
            }
        }
    }
    if stores.is_empty() {
        return;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            for (section, target) in stores {
                checks.push(
                    Check::new(Phase::Store, section)
                        .store(target.to_string(), None)
                        .fail(format!("cannot start an async runtime: {e}")),
                );
            }
            return;
        }
    };
    let timeout = timeout.unwrap_or(STORE_TIMEOUT);
    for (section, target) in stores {
        let row = Check::new(Phase::Store, section);
        let found = runtime.block_on(ask(target, timeout));
        checks.push(match found {
            Ok(survey) => {
                let row = row.store(target.to_string(), Some(topology(&survey)));
                if survey.serves_every_key() {
                    row.ok(survey.summary())
                } else {
                    row.fail(format!("cannot serve every key: {}", survey.summary()))
                }
            }
            Err(err) => row
                .store(target.to_string(), None)
                .fail(format!("no node answered: {err}")),
        });
    }
}

fn topology(survey: &Survey) -> serde_json::Value {
    json!({
        "kind": survey.kind,
        "asked": survey.asked,
        "masters": survey.masters,
        "replicas": survey.replicas,
        "failed": survey.failed,
        "slots_covered": survey.slots,
    })
}
