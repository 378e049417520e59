//! `src manifest --format httproute`: Gateway API `HTTPRoute`s for a Gateway API Inference
//! Extension gateway. The ExtProc sets `x-gateway-model-name` to the served id it chose; each
//! rule matches one served id and sends it to the `InferencePool`
//! (`inference.networking.k8s.io`) of the model servers serving it. Pools are named from the
//! backend and the served id ([`super::names`]); the pools themselves (their pod selectors and
//! endpoint pickers) are the operator's, created under those names.

use super::names::Names;
use super::Options;
use anyhow::{anyhow, Result};
use serde_json::{json, Value};
use src_compiler::hir::CheckedPolicy;

/// The Gateway API allows at most 16 rules in one `HTTPRoute`.
pub const MAX_RULES: usize = 16;

/// One `InferencePool` reference per (backend, served id), in declaration order.
pub fn pools(checked: &CheckedPolicy, names: &mut Names) -> Result<Vec<Pool>> {
    let mut out: Vec<Pool> = Vec::new();
    for model in &checked.models {
        let backend = &checked.backends[model.backend.index()].name;
        if out
            .iter()
            .any(|p| &p.backend == backend && p.served == model.serves)
        {
            continue;
        }
        let name = names
            .name(&format!("{backend}-{}", model.serves))
            .map_err(|e| anyhow!("cannot name the pool of `{}`: {e}", model.serves))?;
        out.push(Pool {
            backend: backend.clone(),
            served: model.serves.clone(),
            name,
        });
    }
    Ok(out)
}

/// The pool of one served id on one backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    pub backend: String,
    pub served: String,
    pub name: String,
}

/// The `HTTPRoute` documents: as many as the 16-rule limit needs.
pub fn documents(checked: &CheckedPolicy, opts: &Options, names: &mut Names) -> Result<Vec<Value>> {
    let pools = pools(checked, names)?;
    let shared = |p: &Pool| pools.iter().filter(|q| q.served == p.served).count() > 1;
    let rules: Vec<Value> = pools
        .iter()
        .map(|p| {
            let mut headers = vec![json!({
                "type": "Exact",
                "name": "x-gateway-model-name",
                "value": p.served,
            })];
            if shared(p) {
                headers.push(json!({"type": "Exact", "name": "x-sr-backend", "value": p.backend}));
            }
            json!({
                "matches": [{"path": {"type": "PathPrefix", "value": "/"}, "headers": headers}],
                "backendRefs": [{
                    "group": "inference.networking.k8s.io",
                    "kind": "InferencePool",
                    "name": p.name,
                }],
            })
        })
        .collect();
    let chunks: Vec<&[Value]> = rules.chunks(MAX_RULES).collect();
    let count = chunks.len();
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, chunk)| {
            let name = if count == 1 {
                opts.app.clone()
            } else {
                names
                    .name(&format!("{}-{}", opts.app, i + 1))
                    .map_err(|e| anyhow!("cannot name an HTTPRoute: {e}"))?
            };
            Ok(json!({
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "HTTPRoute",
                "metadata": {"name": name, "labels": opts.labels()},
                "spec": {
                    "parentRefs": [{
                        "group": "gateway.networking.k8s.io",
                        "kind": "Gateway",
                        "name": opts.gateway,
                    }],
                    "rules": chunk,
                },
            }))
        })
        .collect()
}
