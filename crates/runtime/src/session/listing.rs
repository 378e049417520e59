//! The pins the operator console shows: those of the serving policy's `session` store, grouped
//! by tenant, each with its model, turns, age, time left and recent outcomes. A long session id
//! is shown hashed; the tenant is already a hash of the API key unless the policy names one.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use src_compiler::hir::CheckedPolicy;

use crate::openai::ApiError;
use crate::session::layer::SessionLayer;
use crate::session::store::OutcomeKey;

/// Ids longer than this are shown as a hash.
const SHOWN_ID_CHARS: usize = 24;

/// `GET /v1/console/sessions` under `policy`: at most `limit` pins.
pub async fn list(
    layer: &SessionLayer,
    policy: &CheckedPolicy,
    limit: usize,
) -> Result<Value, ApiError> {
    let Some(def) = &policy.session else {
        return Ok(json!({"store": null, "tenants": {}, "listed": 0}));
    };
    let store = layer
        .store(&def.store)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let now = layer.now_ms();
    let pins = store
        .list(limit, now)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let listed = pins.len();
    let mut tenants: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (identity, pin) in pins {
        let key = OutcomeKey {
            session: identity.clone(),
            model: pin.model.clone(),
        };
        let outcomes = store.outcomes(&key, now).await.ok();
        let expires = pin.seen_ms.saturating_add(def.ttl_ms);
        tenants.entry(identity.tenant.clone()).or_default().push(json!({
            "id": shown_id(&identity.id),
            "model": pin.model,
            "route": pin.route,
            "turns": pin.turns,
            "age_s": now.saturating_sub(pin.created_ms) as f64 / 1000.0,
            "idle_s": now.saturating_sub(pin.seen_ms) as f64 / 1000.0,
            "ttl_left_s": expires.saturating_sub(now) as f64 / 1000.0,
            "stale": pin.is_stale(now, def.ttl_ms),
            "outcomes": outcomes.map(|o| json!({"count": o.count, "fails": o.fails, "fail_rate": o.fail_rate()})),
            "switches": pin.history.iter().rev().map(|s| json!({
                "from": s.from, "to": s.to, "at_ms": s.at_ms, "observed": s.observed,
            })).collect::<Vec<_>>(),
        }));
    }
    Ok(json!({
        "store": crate::store::kind_of(&def.store),
        "ttl_s": def.ttl_ms as f64 / 1000.0,
        "listed": listed,
        "limit": limit,
        "tenants": tenants,
    }))
}

/// The id as written when short, else `sha256:` and its first 16 hex digits.
pub fn shown_id(id: &str) -> String {
    if id.chars().count() <= SHOWN_ID_CHARS {
        return id.to_owned();
    }
    let digest = Sha256::digest(id.as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_ids_are_hashed_and_short_ones_shown() {
        assert_eq!(shown_id("conv-1"), "conv-1");
        let long = "x".repeat(40);
        let shown = shown_id(&long);
        assert!(
            shown.starts_with("sha256:") && shown.len() == 7 + 16,
            "{shown}"
        );
        assert!(!shown.contains("xxxx"));
    }
}
