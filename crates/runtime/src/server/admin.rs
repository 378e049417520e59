//! The admin listener: what policy is being served, and why the last reload failed.
//!
//! It listens on its own address so that operators can keep it off the network clients reach.

use serde_json::{json, Value};

use crate::app::App;
use crate::log::rfc3339;

/// `GET /v1/router/policy`.
pub fn policy_report(app: &App) -> Value {
    let snapshot = app.store.current();
    let last_error = app.store.last_error().map(|e| {
        json!({
            "at": rfc3339(e.at),
            "message": e.failure.message,
            "rendered": e.failure.human(),
            "diagnostics": e.failure.json(),
        })
    });
    let policy = snapshot.policy();
    json!({
        "path": app.cfg.policy.display().to_string(),
        "engine": app.cfg.engine.as_str(),
        "generation": snapshot.generation,
        "content_hash": snapshot.content_hash,
        "loaded_at": rfc3339(snapshot.loaded_at),
        "warnings": snapshot.warnings,
        "files": policy.sources.files().map(|(_, f)| f.path.display().to_string()).collect::<Vec<_>>(),
        "routes": policy.routes.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        "blocks": policy.blocks.iter().map(|b| b.name.as_str()).collect::<Vec<_>>(),
        "models": policy.models.iter().map(|m| json!({
            "name": m.name,
            "serves": m.serves,
            "backend": policy.backends[m.backend.index()].name,
        })).collect::<Vec<_>>(),
        "router_names": policy.router.names,
        "last_reload_error": last_error,
    })
}
