//! `GET /v1/console/budgets?tenant=T` (and `&per=TEXT` for budgets whose `per` is an
//! expression): each budget of the loaded policy with what that tenant (or text) has used of it
//! in the current window. The tenant is written as stores and the console name it (the hash of
//! a key, then `/` and the session's `tenant` value when the policy declares one).

use serde_json::{json, Value};
use src_compiler::hir::BudgetPerDef;

use crate::app::App;
use crate::budget::Counter;
use crate::openai::ApiError;

/// The listing, or why there is none.
pub async fn listing(app: &App, query: Option<&str>) -> Result<Value, ApiError> {
    let param = |name: &str| {
        query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
            .map(|v| {
                percent_encoding::percent_decode_str(v)
                    .decode_utf8_lossy()
                    .into_owned()
            })
    };
    let tenant = param("tenant");
    let per = param("per");
    if tenant.is_none() && per.is_none() {
        return Err(ApiError::bad_request(
            "name whose budgets to list: `?tenant=TENANT` or `?per=TEXT`",
        ));
    }
    let snapshot = app.store.current();
    let policy = snapshot.policy();
    let store = app
        .budgets
        .store(policy)
        .map_err(|e| ApiError::service_unavailable(e.to_string()))?;
    let now = app.budgets.now_ms();
    let mut budgets = Vec::with_capacity(policy.budgets.len());
    for def in &policy.budgets {
        let counted = match &def.per {
            BudgetPerDef::Tenant => tenant.as_ref().map(|t| format!("t/{t}")),
            BudgetPerDef::Text(_) => per.as_ref().map(|p| format!("v/{p}")),
        };
        let Some(counted) = counted else {
            continue;
        };
        let counter = Counter {
            budget: def.name.clone(),
            per: counted,
            window_ms: def.window_ms.max(1),
        };
        let used = store
            .used(&counter, now)
            .await
            .map_err(|e| ApiError::service_unavailable(e.to_string()))?;
        budgets.push(json!({
            "budget": def.name,
            "per": matches!(def.per, BudgetPerDef::Tenant).then_some("tenant").unwrap_or("text"),
            "unit": def.unit.as_str(),
            "limit": def.limit,
            "window_ms": def.window_ms,
            "used": used,
            "remaining": (def.limit - used).max(0.0),
            "share": (used / def.limit).clamp(0.0, 1.0),
            "window_ends_in_s": counter.retry_after_s(now),
        }));
    }
    Ok(json!({ "tenant": tenant, "per": per, "budgets": budgets }))
}
