//! `src manifest --format k8s`: `src serve` on Kubernetes. A ConfigMap holds every file the
//! policy is read from; the Deployment mounts it as the policy directory and probes `/healthz`
//! (liveness: the process answers) and `/readyz` (readiness: a policy is loaded and its
//! backends answer); a Service exposes the API port. A policy whose `cache` or `session` store
//! is Redis also gets a Redis Deployment and Service; pointing the policy's `redis://` URL at
//! that Service is the operator's edit, since the URL is part of the policy.
//!
//! API keys named by `api_key = env(..)` come from a Secret (`<app>-backend-keys`, one entry
//! per variable) that the manifest references and never contains.

use super::names::Names;
use super::{Options, PolicyFile};
use anyhow::{anyhow, Result};
use serde_json::{json, Value};
use src_compiler::hir::{CheckedPolicy, StoreDef};

/// Where the ConfigMap is mounted; `src serve` is given this directory.
pub const POLICY_DIR: &str = "/etc/src/policy";
pub const API_PORT: u16 = 8801;
pub const ADMIN_PORT: u16 = 8802;
const REDIS_IMAGE: &str = "redis:7";
const REDIS_PORT: u16 = 6379;

/// Whether the policy keeps its cache or its session pins in Redis.
pub fn uses_redis(checked: &CheckedPolicy) -> bool {
    let cache = checked.cache.as_ref().map(|c| &c.store);
    let session = checked.session.as_ref().map(|s| &s.store);
    [cache, session]
        .into_iter()
        .flatten()
        .any(|s| matches!(s, StoreDef::Redis(_)))
}

/// The ConfigMap key of a file: its path when that is a valid key (`[-._a-zA-Z0-9]+`, as
/// top-level policy files are), else a derived name.
pub fn config_key(path: &str) -> String {
    let valid = !path.is_empty()
        && path.len() <= 253
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
    if valid {
        path.to_string()
    } else {
        super::names::dns_label(path)
    }
}

/// The documents, in the order `kubectl apply` wants them (the ConfigMap before its user).
pub fn documents(
    checked: &CheckedPolicy,
    files: &[PolicyFile],
    opts: &Options,
    names: &mut Names,
) -> Result<Vec<Value>> {
    let app = &opts.app;
    let config_map = names
        .name(&format!("{app}-policy"))
        .map_err(|e| anyhow!("cannot name the ConfigMap: {e}"))?;
    let labels = opts.labels();
    let mut keys = std::collections::HashSet::new();
    let mut data = serde_json::Map::new();
    let mut items = Vec::new();
    for file in files {
        // ConfigMap keys cannot hold `/`: a file in a subdirectory (a catalog) gets a key of its
        // own and is mounted back at its path.
        let key = config_key(&file.path);
        if !keys.insert(key.clone()) {
            return Err(anyhow!(
                "two policy files would share the ConfigMap entry `{key}`"
            ));
        }
        data.insert(key.clone(), json!(file.text));
        items.push(json!({"key": key, "path": file.path}));
    }
    let mut env: Vec<Value> = checked
        .backends
        .iter()
        .filter_map(|b| b.api_key_env.as_ref())
        .map(|var| {
            json!({
                "name": var,
                "valueFrom": {"secretKeyRef": {"name": format!("{app}-backend-keys"), "key": var}},
            })
        })
        .collect();
    env.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    env.dedup();
    let probe = |path: &str| {
        json!({
            "httpGet": {"path": path, "port": "http"},
            "periodSeconds": 10,
            "timeoutSeconds": 3,
        })
    };
    let mut docs = vec![
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": config_map, "labels": labels},
            "data": data,
        }),
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": app, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app.kubernetes.io/name": app}},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [{
                            "name": "src",
                            "image": opts.image,
                            "args": [
                                "serve", POLICY_DIR,
                                "--listen", format!("0.0.0.0:{API_PORT}"),
                                "--admin", format!("0.0.0.0:{ADMIN_PORT}"),
                            ],
                            "ports": [
                                {"name": "http", "containerPort": API_PORT},
                                {"name": "admin", "containerPort": ADMIN_PORT},
                            ],
                            "env": env,
                            "livenessProbe": probe("/healthz"),
                            "readinessProbe": probe("/readyz"),
                            "volumeMounts": [{"name": "policy", "mountPath": POLICY_DIR, "readOnly": true}],
                        }],
                        "volumes": [{"name": "policy", "configMap": {"name": config_map, "items": items}}],
                    },
                },
            },
        }),
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": app, "labels": labels},
            "spec": {
                "selector": {"app.kubernetes.io/name": app},
                "ports": [{"name": "http", "port": API_PORT, "targetPort": "http"}],
            },
        }),
    ];
    if uses_redis(checked) {
        let redis = names
            .name(&format!("{app}-redis"))
            .map_err(|e| anyhow!("cannot name the Redis objects: {e}"))?;
        let redis_labels =
            json!({"app.kubernetes.io/name": redis, "app.kubernetes.io/part-of": app});
        docs.push(json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": redis, "labels": redis_labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app.kubernetes.io/name": redis}},
                "template": {
                    "metadata": {"labels": redis_labels},
                    "spec": {"containers": [{
                        "name": "redis",
                        "image": REDIS_IMAGE,
                        "args": ["--save", "", "--appendonly", "no"],
                        "ports": [{"name": "redis", "containerPort": REDIS_PORT}],
                        "readinessProbe": {"tcpSocket": {"port": "redis"}, "periodSeconds": 5},
                    }]},
                },
            },
        }));
        docs.push(json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": redis, "labels": redis_labels},
            "spec": {
                "selector": {"app.kubernetes.io/name": redis},
                "ports": [{"name": "redis", "port": REDIS_PORT, "targetPort": "redis"}],
            },
        }));
    }
    Ok(docs)
}
