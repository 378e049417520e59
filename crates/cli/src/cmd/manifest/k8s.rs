//! `src manifest --format k8s`: `src serve` on Kubernetes. A ConfigMap holds every file the
//! policy is read from; the Deployment mounts it as the policy directory and probes `/healthz`
//! (liveness: the process answers) and `/readyz` (readiness: a policy is loaded and its
//! backends answer) on the API port, and is annotated for Prometheus to scrape `/metrics` on the
//! admin port (named by the pod's address with `--admin-host`); a Service exposes the API port. A policy whose `cache` or `session` store
//! is Redis also gets a Redis Deployment and Service; pointing the policy's `redis://` URL at
//! that Service is the operator's edit, since the URL is part of the policy.
//!
//! API keys named by `api_key = env(..)` come from a Secret (`<app>-backend-keys`, one entry
//! per variable) and the admin listener's bearer token (`SRC_ADMIN_TOKEN`, which `src serve`
//! requires on a non-loopback admin address) from the Secret `<app>-admin` (key `token`); the
//! manifest references both and contains neither. A policy that redacts and keeps its
//! responses in Redis seals what its redacted Responses chains keep under one key all replicas
//! share: the Secret `<app>-vault` (key `key`, 64 hexadecimal digits) is mounted and named by
//! `--vault-key-file`.
//!
//! The pod runs as a non-root user on a read-only root filesystem with an `emptyDir` at `/tmp`;
//! the external processor gets a headless Service so that Envoy, which keeps long-lived HTTP/2
//! connections, resolves every replica instead of one virtual IP. On termination the pod
//! leaves the endpoints (`preStop` sleep), then `src serve` drains for `--drain` seconds; the
//! grace period covers both. Model files come from a volume at [`MODELS_DIR`], beside the
//! policy, since nothing can be mounted inside the read-only ConfigMap volume.

use super::names::Names;
use super::{Options, PolicyFile};
use anyhow::{anyhow, Result};
use serde_json::{json, Value};
use src_compiler::hir::{CheckedPolicy, StoreDef};

/// Where the ConfigMap is mounted; `src serve` is given this directory.
pub const POLICY_DIR: &str = "/etc/src/policy";
/// Where the model volume is mounted: `../models/NAME` in the policy.
pub const MODELS_DIR: &str = "/etc/src/models";
pub const API_PORT: u16 = 8801;
pub const ADMIN_PORT: u16 = 8802;
/// The pod's own address, from the downward API.
const POD_IP_ENV: &str = "POD_IP";
/// Where the vault key Secret is mounted.
pub const VAULT_DIR: &str = "/etc/src/vault";
/// The environment variable `src serve` reads the admin token from.
const ADMIN_TOKEN_ENV: &str = src_runtime::AdminToken::ENV;
/// Seconds the pod stays up after it is told to stop and before `src serve` gets SIGTERM, so
/// that endpoints (and Envoy) stop sending it new requests first.
const PRE_STOP_SECONDS: u64 = 5;
/// Seconds of the grace period beyond the pre-stop wait and the drain.
const GRACE_MARGIN_SECONDS: u64 = 5;
/// The user the container runs as (the conventional `nonroot` of distroless images).
const RUN_AS_USER: u64 = 65532;
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

/// Whether the policy reads model directories or tokenizers, which come from the model volume.
fn reads_models(checked: &CheckedPolicy) -> bool {
    !checked.classifiers.is_empty()
        || !checked.guards.is_empty()
        || !checked.encoders.is_empty()
        || !checked.detectors.is_empty()
        || checked.router.tokenizer.is_some()
        || checked.models.iter().any(|m| m.tokenizer.is_some())
}

/// The command line of the router's container, after the image's entrypoint (`src`).
fn serve_args(extproc_port: u16, drain: u64) -> Vec<String> {
    [
        "serve",
        POLICY_DIR,
        "--listen",
        &format!("0.0.0.0:{API_PORT}"),
        "--admin",
        &format!("0.0.0.0:{ADMIN_PORT}"),
        "--extproc",
        &format!("0.0.0.0:{extproc_port}"),
        "--drain",
        &drain.to_string(),
        // Prometheus scrapes the admin port by the pod's address, which the admin listener
        // answers only when named (Kubernetes expands `$(POD_IP)` from the env below).
        "--admin-host",
        &format!("$({POD_IP_ENV})"),
    ]
    .map(String::from)
    .to_vec()
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
    env.push(json!({
        "name": ADMIN_TOKEN_ENV,
        "valueFrom": {"secretKeyRef": {"name": format!("{app}-admin"), "key": "token"}},
    }));
    env.push(json!({
        "name": POD_IP_ENV,
        "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
    }));
    env.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    env.dedup();
    let (_, extproc_port) = opts.extproc()?;
    if extproc_port == API_PORT || extproc_port == ADMIN_PORT {
        return Err(anyhow!(
            "--extproc-address: port {extproc_port} is the API's or the admin listener's"
        ));
    }
    let drain = src_runtime::config::DEFAULT_DRAIN.as_secs();
    let extproc = names
        .name(&format!("{app}-extproc"))
        .map_err(|e| anyhow!("cannot name the external processor's Service: {e}"))?;
    let mut mounts = vec![
        json!({"name": "policy", "mountPath": POLICY_DIR, "readOnly": true}),
        json!({"name": "tmp", "mountPath": "/tmp"}),
    ];
    let mut volumes = vec![
        json!({"name": "policy", "configMap": {"name": config_map, "items": items}}),
        json!({"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}),
    ];
    let mut args = serve_args(extproc_port, drain);
    if src_runtime::responses_state::vault::shared(checked) {
        args.extend(["--vault-key-file".to_owned(), format!("{VAULT_DIR}/key")]);
        mounts.push(json!({"name": "vault", "mountPath": VAULT_DIR, "readOnly": true}));
        volumes.push(json!({
            "name": "vault",
            "secret": {"secretName": format!("{app}-vault"), "items": [{"key": "key", "path": "key"}]},
        }));
    }
    if reads_models(checked) {
        mounts.push(json!({"name": "models", "mountPath": MODELS_DIR, "readOnly": true}));
        volumes.push(json!({
            "name": "models",
            "persistentVolumeClaim": {"claimName": format!("{app}-models"), "readOnly": true},
        }));
    }
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
                    "metadata": {
                        "labels": labels,
                        // `/metrics` is the admin listener's, and needs no admin token.
                        "annotations": {
                            "prometheus.io/scrape": "true",
                            "prometheus.io/port": ADMIN_PORT.to_string(),
                            "prometheus.io/path": "/metrics",
                        },
                    },
                    "spec": {
                        "terminationGracePeriodSeconds": PRE_STOP_SECONDS + drain + GRACE_MARGIN_SECONDS,
                        "securityContext": {
                            "runAsNonRoot": true,
                            "runAsUser": RUN_AS_USER,
                            "runAsGroup": RUN_AS_USER,
                            "fsGroup": RUN_AS_USER,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [{
                            "name": "src",
                            "image": opts.image,
                            "args": args,
                            "ports": [
                                {"name": "http", "containerPort": API_PORT},
                                {"name": "admin", "containerPort": ADMIN_PORT},
                                {"name": "grpc", "containerPort": extproc_port},
                            ],
                            "env": env,
                            "resources": {
                                "requests": {"cpu": "500m", "memory": "256Mi"},
                                "limits": {"cpu": "2", "memory": "1Gi"},
                            },
                            "securityContext": {
                                "allowPrivilegeEscalation": false,
                                "readOnlyRootFilesystem": true,
                                "runAsNonRoot": true,
                                "runAsUser": RUN_AS_USER,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "lifecycle": {"preStop": {"sleep": {"seconds": PRE_STOP_SECONDS}}},
                            "livenessProbe": probe("/healthz"),
                            "readinessProbe": probe("/readyz"),
                            "volumeMounts": mounts,
                        }],
                        "volumes": volumes,
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
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": extproc, "labels": labels},
            "spec": {
                "clusterIP": "None",
                "selector": {"app.kubernetes.io/name": app},
                "ports": [{
                    "name": "grpc",
                    "port": extproc_port,
                    "targetPort": "grpc",
                    "appProtocol": "kubernetes.io/h2c",
                }],
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
