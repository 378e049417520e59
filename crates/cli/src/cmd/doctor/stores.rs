//! Phase 4 of `src doctor`: each Redis store of the policy, surveyed on its servers, and a
//! Milvus cache store: reachable, its collection present (or creatable), and its vectors as
//! long as the cache's encoder makes them.

use super::report::{Check, Phase};
use serde_json::json;
use src_compiler::hir::{CheckedPolicy, MilvusTarget, RedisTarget, StoreDef};
use src_runtime::cache::store::milvus;
use src_runtime::models::{self, Model, Role};
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
    let milvus = checked.cache.as_ref().and_then(|c| match &c.store {
        StoreDef::Milvus(target) => Some(target),
        _ => None,
    });
    if stores.is_empty() && milvus.is_none() {
        return;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            let names = stores
                .iter()
                .map(|(section, target)| (*section, target.to_string()))
                .chain(milvus.map(|t| ("cache", shown(t))));
            for (section, store) in names {
                checks.push(
                    Check::new(Phase::Store, section)
                        .store(store, None)
                        .fail(format!("cannot start an async runtime: {e}")),
                );
            }
            return;
        }
    };
    let timeout = timeout.unwrap_or(STORE_TIMEOUT);
    if let Some(target) = milvus {
        checks.push(survey_milvus(checked, target, &runtime, timeout));
    }
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

/// How the report names a Milvus store: its endpoint (never its credentials) and collection.
fn shown(target: &MilvusTarget) -> String {
    format!(
        "milvus {} collection `{}`",
        target.endpoint, target.collection
    )
}

/// The length of the vectors the cache's encoder makes, found by embedding one text.
fn encoder_dimension(checked: &CheckedPolicy) -> Result<usize, String> {
    let cache = checked.cache.as_ref().ok_or("the policy has no cache")?;
    let encoder = &checked.encoders[cache.encoder.index()];
    models::ensure_library().map_err(|e| e.to_string())?;
    let dir = checked.root.join(&encoder.path);
    let mut model = Model::load(&dir, Role::Encoder, encoder.device, 1)
        .map_err(|e| format!("encoder `{}` does not load: {e}", encoder.name))?;
    model
        .infer(&["how long is the encoder's vector"])
        .map_err(|e| format!("encoder `{}` does not embed: {e}", encoder.name))?
        .first()
        .map(Vec::len)
        .ok_or_else(|| format!("encoder `{}` answered nothing", encoder.name))
}

/// The cache's Milvus store: reachable within `timeout`, its collection's vectors as long as
/// the encoder's, or the collection absent but creatable (the store creates it on first use;
/// one Milvus refuses to create fails).
fn survey_milvus(
    checked: &CheckedPolicy,
    target: &MilvusTarget,
    runtime: &tokio::runtime::Runtime,
    timeout: Duration,
) -> Check {
    let row = Check::new(Phase::Store, "cache");
    let encoder = encoder_dimension(checked);
    // Without the encoder, a scratch collection is made at MiniLM's length: it still shows
    // whether collections can be created.
    let wanted = encoder.as_ref().copied().unwrap_or(384);
    let found = runtime.block_on(milvus::survey(target, wanted, timeout));
    let topology = |survey: Option<&milvus::Survey>| {
        json!({
            "kind": "milvus",
            "collection": target.collection,
            "exists": survey.map(|s| s.dimension.is_some()),
            "refused": survey.and_then(|s| s.refused.as_deref()),
            "dimension": survey.and_then(|s| s.dimension),
            "encoder_dimension": encoder.as_ref().ok(),
        })
    };
    let survey = match found {
        Ok(survey) => survey,
        Err(err) => {
            return row
                .store(shown(target), Some(topology(None)))
                .fail(format!("milvus did not serve as the cache store: {err}"))
        }
    };
    let row = row.store(shown(target), Some(topology(Some(&survey))));
    let collection = &target.collection;
    match (survey.dimension, &encoder) {
        (Some(held), Ok(made)) if held != *made => row.fail(format!(
            "collection `{collection}` holds {held}-dimension vectors and the encoder makes \
             {made}; name another collection for this encoder"
        )),
        (Some(held), Ok(_)) => row.ok(format!(
            "collection `{collection}` present, {held} dimensions as the encoder's"
        )),
        (Some(held), Err(why)) => row.ok(format!(
            "collection `{collection}` present, {held} dimensions (the encoder's not checked: \
             {why})"
        )),
        (None, _) if survey.refused.is_some() => row.fail(format!(
            "collection `{collection}` absent and not creatable: Milvus refused to create one \
             ({}); the store creates it on first use, so the router's Milvus user must be \
             allowed to create collections and the server able to write its storage",
            survey.refused.as_deref().unwrap_or_default()
        )),
        (None, Ok(made)) => row.ok(format!(
            "collection `{collection}` absent; creatable, made on first use with {made} \
             dimensions"
        )),
        (None, Err(why)) => row.ok(format!(
            "collection `{collection}` absent; creatable, made on first use (the encoder's \
             dimension not checked: {why})"
        )),
    }
}
