//! `src manifest`: the YAML is parsed back and its required fields checked; every Envoy
//! configuration is validated by the real Envoy binary (`envoy --mode validate`).

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a failed step fails the test with its message"
)]

mod envoy_support;
mod support;

use assert_cmd::assert::OutputAssertExt;
use envoy_support::{chat, envoy_binary, Envoy};
use serde_json::Value;
use src_testkit::free_port;
use std::path::{Path, PathBuf};
use support::{documents, manifest_text, repo, simulator, src, write};

fn manifest(policy: &Path, format: &str, extra: &[&str]) -> Vec<Value> {
    documents(&manifest_text(policy, format, extra))
}

fn validate(config: &Value) {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "envoy.yaml",
        &serde_norway::to_string(config).unwrap(),
    );
    let out = std::process::Command::new(envoy_binary())
        .args(["--mode", "validate", "--log-level", "error", "-c"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "envoy rejected the configuration:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write_policy(dir: &Path, text: &str) -> PathBuf {
    write(dir, "policy.sr", text)
}

fn ext_proc(config: &Value) -> &Value {
    let hcm = &config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
        ["typed_config"];
    let filters = hcm["http_filters"].as_array().unwrap();
    assert_eq!(filters.last().unwrap()["name"], "envoy.filters.http.router");
    &filters
        .iter()
        .find(|f| f["name"] == "envoy.filters.http.ext_proc")
        .expect("an ext_proc filter")["typed_config"]
}

fn routes(config: &Value) -> &Vec<Value> {
    config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
        ["route_config"]["virtual_hosts"][0]["routes"]
        .as_array()
        .unwrap()
}

fn cluster<'a>(config: &'a Value, name: &str) -> &'a Value {
    config["static_resources"]["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no cluster `{name}`"))
}

/// The route that a chat request with these headers takes (Envoy's first match).
fn route_for<'a>(config: &'a Value, headers: &[(&str, &str)]) -> &'a Value {
    let path = "/v1/chat/completions";
    routes(config)
        .iter()
        .filter(
            |r| match (r["match"]["path"].as_str(), r["match"]["prefix"].as_str()) {
                (Some(exact), _) => exact == path,
                (None, Some(prefix)) => path.starts_with(prefix),
                (None, None) => false,
            },
        )
        .find(|r| {
            r["match"]["headers"]
                .as_array()
                .map(|hs| {
                    hs.iter().all(|h| {
                        headers
                            .iter()
                            .any(|(n, v)| h["name"] == *n && h["string_match"]["exact"] == *v)
                    })
                })
                .unwrap_or(true)
        })
        .unwrap()
}

#[test]
fn envoy_configs_of_the_shipped_policies_validate() {
    // Every shipped policy and example, found rather than listed, so a new one is covered: a
    // policy is a directory holding `.sr` files, at any depth (eval arms nest).
    let mut policies = Vec::new();
    let mut dirs: Vec<PathBuf> = vec![repo("policies"), repo("examples")];
    while let Some(dir) = dirs.pop() {
        let entries: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        if entries
            .iter()
            .any(|p| p.extension().is_some_and(|e| e == "sr"))
        {
            policies.push(dir.clone());
        }
        dirs.extend(entries.into_iter().filter(|p| p.is_dir()));
    }
    policies.sort();
    assert!(policies.len() >= 3, "{policies:?}");
    for path in &policies {
        let policy = path.display();
        let docs = manifest(path, "envoy", &[]);
        assert_eq!(docs.len(), 1, "{policy}");
        let config = &docs[0];
        validate(config);
        let filter = ext_proc(config);
        assert_eq!(filter["failure_mode_allow"], false, "{policy}");
        assert_eq!(filter["route_cache_action"], "CLEAR");
        assert_eq!(filter["processing_mode"]["request_header_mode"], "SEND");
        assert_eq!(
            filter["processing_mode"]["request_body_mode"],
            "FULL_DUPLEX_STREAMED"
        );
        assert_eq!(filter["processing_mode"]["request_trailer_mode"], "SEND");
        assert_eq!(filter["processing_mode"]["response_header_mode"], "SEND");
        assert_eq!(filter["processing_mode"]["response_body_mode"], "NONE");
        assert_eq!(
            filter["grpc_service"]["envoy_grpc"]["cluster_name"],
            "src_extproc"
        );
        let extproc = cluster(config, "src_extproc");
        assert_eq!(
            extproc["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
                ["socket_address"]["port_value"],
            50051
        );
        assert!(extproc["typed_extension_protocol_options"]
            .to_string()
            .contains("http2_protocol_options"));
        let hcm = &config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
            ["typed_config"];
        // The router-owned headers go before the router is asked.
        assert_eq!(
            hcm["http_filters"][0]["name"],
            "envoy.filters.http.header_mutation"
        );
        assert!(hcm["stream_idle_timeout"].is_string(), "{policy}");
        for cluster in config["static_resources"]["clusters"].as_array().unwrap() {
            let limits = &cluster["circuit_breakers"]["thresholds"][0];
            assert_eq!(limits["max_requests"], 100_000, "{policy}: {cluster}");
        }
    }
}

/// `deploy/envoy/` holds what the generator writes for the quickstart, below a comment: a change
/// to the generator changes them too, and they get every test the generator gets.
#[test]
fn the_shipped_envoy_configs_are_the_generators_for_the_quickstart() {
    for (file, extra) in [
        ("fail-closed.yaml", None),
        ("fail-open.yaml", Some("--fail-open")),
    ] {
        let mut args = vec!["--extproc-address", "127.0.0.1:8803"];
        args.extend(extra);
        let out = src()
            .current_dir(repo("."))
            .env_remove("SRC_MODEL_TIMEOUT_MS")
            .args(["manifest", "--color", "never", "--format", "envoy"])
            .args(&args)
            .arg("examples/quickstart")
            .assert()
            .code(0);
        let generated = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        let shipped = std::fs::read_to_string(repo("deploy/envoy").join(file)).unwrap();
        let body: String = shipped
            .lines()
            .skip_while(|l| l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(
            body == generated,
            "deploy/envoy/{file} is not what `src manifest examples/quickstart --format envoy {}` \
             writes: regenerate it below its comment",
            args.join(" ")
        );
    }
}

#[test]
fn each_served_id_routes_to_its_backend() {
    let docs = manifest(Path::new("policies/production"), "envoy", &[]);
    let config = &docs[0];
    let coder = route_for(
        config,
        &[("x-selected-model", "Qwen/Qwen2.5-Coder-7B-Instruct")],
    );
    assert_eq!(coder["route"]["cluster"], "backend_vllm_code");
    // A backend's timeout is a silence limit; a stream may last longer.
    assert_eq!(coder["route"]["timeout"], "0.000s");
    assert_eq!(coder["route"]["idle_timeout"], "300.000s");
    assert_eq!(coder["route"]["host_rewrite_literal"], "127.0.0.1:8100");
    let small = route_for(config, &[("x-selected-model", "Qwen/Qwen3-0.6B")]);
    assert_eq!(small["route"]["cluster"], "backend_dynamo");
    // Without a selected model (the ExtProc did not decide), a fail-closed gateway refuses.
    let unrouted = route_for(config, &[]);
    assert_eq!(unrouted["direct_response"]["status"], 404);
    // The decision may take as long as the policy's two models allow.
    let timeout = ext_proc(config)["message_timeout"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(timeout, "4.200s");
}

const TWO_BACKENDS: &str = r#"
backend east { url = "https://east.example.com/openai/v1"  timeout = 20s }
backend west { url = "http://10.0.0.7:8000/v1" }
model a { backend = east  serves = "shared-id" }
model b { backend = west  serves = "shared-id" }
model c { backend = west  serves = "only-west" }
route pick priority 1 { when header("x-east") == "1"  to a else b }
route default { to c }
"#;

#[test]
fn a_served_id_on_two_backends_also_matches_the_backend_header() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write_policy(dir.path(), TWO_BACKENDS);
    let config = &manifest(&policy, "envoy", &[])[0];
    validate(config);
    let east = route_for(
        config,
        &[("x-selected-model", "shared-id"), ("x-sr-backend", "east")],
    );
    assert_eq!(east["route"]["cluster"], "backend_east");
    assert_eq!(east["route"]["prefix_rewrite"], "/openai/v1/");
    assert_eq!(east["route"]["timeout"], "0.000s");
    assert_eq!(east["route"]["idle_timeout"], "20.000s");
    let west = route_for(
        config,
        &[("x-selected-model", "shared-id"), ("x-sr-backend", "west")],
    );
    assert_eq!(west["route"]["cluster"], "backend_west");
    let only = route_for(config, &[("x-selected-model", "only-west")]);
    assert_eq!(only["route"]["cluster"], "backend_west");
    assert_eq!(only["match"]["headers"].as_array().unwrap().len(), 1);
    let east_cluster = cluster(config, "backend_east");
    assert_eq!(east_cluster["type"], "STRICT_DNS");
    assert_eq!(
        east_cluster["transport_socket"]["typed_config"]["sni"],
        "east.example.com"
    );
    assert_eq!(cluster(config, "backend_west")["type"], "STATIC");
    // No models: Envoy's own default timeout is enough.
    assert_eq!(ext_proc(config)["message_timeout"], "0.200s");

    let routes = &manifest(&policy, "httproute", &[])[0];
    let rules = routes["spec"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 3);
    let shared: Vec<&Value> = rules
        .iter()
        .filter(|r| r["matches"][0]["headers"][0]["value"] == "shared-id")
        .collect();
    assert_eq!(shared.len(), 2);
    for rule in shared {
        assert_eq!(rule["matches"][0]["headers"][1]["name"], "x-sr-backend");
    }
}

#[test]
fn fail_open_is_refused_for_policies_with_blocks_and_kept_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let open = write_policy(dir.path(), TWO_BACKENDS);
    let config = &manifest(
        &open,
        "envoy",
        &["--fail-open", "--extproc-address", "src.router.svc:9000"],
    )[0];
    validate(config);
    assert_eq!(ext_proc(config)["failure_mode_allow"], true);
    // Passing a request on without the router needs the body kept by Envoy.
    assert_eq!(
        ext_proc(config)["processing_mode"]["request_body_mode"],
        "BUFFERED"
    );
    assert_eq!(cluster(config, "src_extproc")["type"], "STRICT_DNS");
    // With the ExtProc down, requests go to the default route's backend as written.
    assert_eq!(route_for(config, &[])["route"]["cluster"], "backend_west");

    let out = src()
        .current_dir(repo("."))
        .args([
            "manifest",
            "policies/production",
            "--format",
            "envoy",
            "--fail-open",
        ])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("--fail-open refused: it has blocks"),
        "{stderr}"
    );
}

fn dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

#[test]
fn httproutes_send_each_served_id_to_its_pool() {
    let routes = manifest(Path::new("policies/production"), "httproute", &[]);
    assert_eq!(routes.len(), 1);
    let route = &routes[0];
    assert_eq!(route["apiVersion"], "gateway.networking.k8s.io/v1");
    assert_eq!(route["kind"], "HTTPRoute");
    assert_eq!(route["metadata"]["name"], "src-production");
    assert_eq!(route["spec"]["parentRefs"][0]["name"], "inference-gateway");
    let rules = route["spec"]["rules"].as_array().unwrap();
    let served: Vec<&str> = rules
        .iter()
        .map(|r| r["matches"][0]["headers"][0]["value"].as_str().unwrap())
        .collect();
    assert_eq!(
        served,
        [
            "Qwen/Qwen3-0.6B",
            "Qwen/Qwen3-8B",
            "Qwen/Qwen2.5-Coder-7B-Instruct",
            "Qwen/Qwen3-0.6B-safety"
        ]
    );
    let mut pools = Vec::new();
    for rule in rules {
        assert_eq!(
            rule["matches"][0]["headers"][0]["name"],
            "x-gateway-model-name"
        );
        let backend = &rule["backendRefs"][0];
        assert_eq!(backend["group"], "inference.networking.k8s.io");
        assert_eq!(backend["kind"], "InferencePool");
        let name = backend["name"].as_str().unwrap().to_string();
        assert!(dns_label(&name), "{name}");
        pools.push(name);
    }
    pools.sort();
    pools.dedup();
    assert_eq!(pools.len(), 4);
    // Names are derived, not numbered: the same policy gives the same names.
    assert_eq!(
        manifest(Path::new("policies/production"), "httproute", &[]),
        routes
    );
}

#[test]
fn many_served_models_split_into_routes_of_at_most_16_rules() {
    let mut text = String::from("backend b { url = \"http://127.0.0.1:1/v1\" }\n");
    for i in 0..20 {
        text.push_str(&format!(
            "model m{i} {{ backend = b  serves = \"org/M-{i}\" }}\n"
        ));
    }
    text.push_str("route default { to m0 }\n");
    let dir = tempfile::tempdir().unwrap();
    let policy = write_policy(dir.path(), &text);
    let routes = manifest(&policy, "httproute", &[]);
    let sizes: Vec<usize> = routes
        .iter()
        .map(|r| r["spec"]["rules"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [16, 4]);
    assert_ne!(routes[0]["metadata"]["name"], routes[1]["metadata"]["name"]);
}

fn kind<'a>(docs: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
}

#[test]
fn k8s_deploys_src_serve_with_the_policy_in_a_config_map() {
    let docs = manifest(
        Path::new("policies/production"),
        "k8s",
        &["--image", "registry.local/src:1.0"],
    );
    for doc in &docs {
        assert!(
            doc["apiVersion"].is_string() && doc["kind"].is_string(),
            "{doc}"
        );
        assert!(
            dns_label(doc["metadata"]["name"].as_str().unwrap()),
            "{doc}"
        );
    }
    let config_map = kind(&docs, "ConfigMap", "src-production-policy").expect("a ConfigMap");
    let data = config_map["data"].as_object().unwrap();
    let dir = repo("policies/production");
    let mut expected: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sr"))
        .collect();
    expected.extend([
        dir.join("catalog/dynamo.json"),
        dir.join("catalog/vllm-code.json"),
    ]);
    let deployment = kind(&docs, "Deployment", "src-production").expect("a Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let items = pod["volumes"][0]["configMap"]["items"].as_array().unwrap();
    assert_eq!(
        pod["volumes"][0]["configMap"]["name"],
        "src-production-policy"
    );
    assert_eq!(items.len(), expected.len());
    for file in &expected {
        let relative = file
            .strip_prefix(&dir)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let item = items
            .iter()
            .find(|i| i["path"] == relative.as_str())
            .unwrap_or_else(|| panic!("`{relative}` is not mounted"));
        let key = item["key"].as_str().unwrap();
        assert_eq!(
            data[key].as_str().unwrap(),
            std::fs::read_to_string(file).unwrap(),
            "{relative}"
        );
    }
    let container = &pod["containers"][0];
    assert_eq!(container["image"], "registry.local/src:1.0");
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[..2], ["serve", "/etc/src/policy"]);
    assert!(args.windows(2).any(|w| w == ["--listen", "0.0.0.0:8801"]));
    assert_eq!(container["volumeMounts"][0]["mountPath"], "/etc/src/policy");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["livenessProbe"]["httpGet"]["port"], "http");
    assert_eq!(container["readinessProbe"]["httpGet"]["port"], "http");
    assert_eq!(container["ports"][0]["containerPort"], 8801);
    // `/metrics` is the admin listener's: Prometheus is pointed there, by the pod's address,
    // which the admin listener is told to answer.
    let annotations = &deployment["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/path"], "/metrics");
    assert_eq!(annotations["prometheus.io/port"], "8802");
    assert!(args.windows(2).any(|w| w == ["--admin", "0.0.0.0:8802"]));
    assert!(args.windows(2).any(|w| w == ["--admin-host", "$(POD_IP)"]));
    let pod_ip = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "POD_IP")
        .unwrap()["valueFrom"]["fieldRef"]["fieldPath"]
        .clone();
    assert_eq!(pod_ip, "status.podIP");
    // The keys come from Secrets the manifest names but does not hold.
    let env = |name: &str| {
        container["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no `{name}`"))["valueFrom"]["secretKeyRef"]
            .clone()
    };
    assert_eq!(
        env("VLLM_CODE_API_KEY")["name"],
        "src-production-backend-keys"
    );
    // A non-loopback admin listener needs the token.
    assert!(args.windows(2).any(|w| w == ["--admin", "0.0.0.0:8802"]));
    assert_eq!(env("SRC_ADMIN_TOKEN")["name"], "src-production-admin");
    assert_eq!(env("SRC_ADMIN_TOKEN")["key"], "token");
    // The external processor Envoy is pointed at (`--extproc-address`, port 50051 by default).
    assert!(args.windows(2).any(|w| w == ["--extproc", "0.0.0.0:50051"]));
    assert_eq!(container["ports"][2]["containerPort"], 50051);
    assert!(container["resources"]["requests"]["memory"].is_string());
    assert!(container["resources"]["limits"]["memory"].is_string());
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["runAsNonRoot"], true);
    assert!(security["runAsUser"].as_u64().unwrap() > 0);
    assert_eq!(security["capabilities"]["drop"][0], "ALL");
    let mount = |path: &str| {
        container["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["mountPath"] == path)
            .unwrap_or_else(|| panic!("nothing mounted at {path}"))["name"]
            .clone()
    };
    let volume = |name: &Value| {
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| &v["name"] == name)
            .unwrap()
            .clone()
    };
    assert!(volume(&mount("/tmp"))["emptyDir"].is_object());
    // The policy reads model directories: they come from a claim beside the policy.
    assert_eq!(
        volume(&mount("/etc/src/models"))["persistentVolumeClaim"]["claimName"],
        "src-production-models"
    );
    // The grace period covers the pre-stop wait and the drain.
    let drain: u64 = args
        .windows(2)
        .find(|w| w[0] == "--drain")
        .map(|w| w[1].parse().unwrap())
        .expect("--drain");
    let pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_u64()
        .unwrap();
    assert!(pod["terminationGracePeriodSeconds"].as_u64().unwrap() > pre_stop + drain);
    // Envoy resolves every replica of the external processor.
    let extproc = kind(&docs, "Service", "src-production-extproc").expect("an ExtProc Service");
    assert_eq!(extproc["spec"]["clusterIP"], "None");
    assert_eq!(extproc["spec"]["ports"][0]["port"], 50051);
    assert_eq!(
        deployment["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"],
        "src-production"
    );
    let service = kind(&docs, "Service", "src-production").expect("a Service");
    assert_eq!(service["spec"]["ports"][0]["port"], 8801);
    assert_eq!(
        service["spec"]["selector"]["app.kubernetes.io/name"],
        "src-production"
    );
    assert!(kind(&docs, "Deployment", "src-production-redis").is_none());
}

/// The model-file warning names paths as the policy does, whichever way the policy directory
/// was given, with where they land in the pod: never a path of the machine it ran on.
#[test]
fn the_model_file_warning_speaks_of_the_policy_and_the_pod() {
    let absolute = repo("examples/guarded").canonicalize().unwrap();
    for policy in [Path::new("examples/guarded"), absolute.as_path()] {
        let out = src()
            .current_dir(repo("."))
            .args(["manifest", "--color", "never", "--format", "k8s"])
            .arg(policy)
            .assert()
            .code(0);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(
            stderr.contains(
                "`../../models/domain` (from the policy directory; `/etc/models/domain` in the \
                 pod, not in the claim)"
            ),
            "{stderr}"
        );
        assert!(!stderr.contains("examples/guarded"), "{stderr}");
    }
}

#[test]
fn k8s_adds_redis_when_the_policy_stores_there_and_out_writes_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write_policy(
        dir.path(),
        r#"backend b { url = "http://127.0.0.1:1/v1" }
model m { backend = b  serves = "x" }
route default { to m }
session { store = redis("redis://127.0.0.1:6379") }
"#,
    );
    let out = dir.path().join("out");
    src()
        .args(["manifest", "--format", "k8s", "--out"])
        .arg(&out)
        .arg(&policy)
        .assert()
        .code(0);
    let docs = documents(&std::fs::read_to_string(out.join("k8s.yaml")).unwrap());
    let app = docs[1]["metadata"]["name"].as_str().unwrap().to_string();
    let redis = format!("{app}-redis");
    let deployment = kind(&docs, "Deployment", &redis).expect("a Redis Deployment");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
        6379
    );
    assert!(kind(&docs, "Service", &redis).is_some());
}

#[test]
fn k8s_mounts_the_vault_key_when_a_redacting_policy_stores_in_redis() {
    let dir = tempfile::tempdir().unwrap();
    let policy = |redact: &str| {
        format!(
            r#"backend b {{ url = "http://127.0.0.1:1/v1" }}
model m {{ backend = b  serves = "x" }}
route default {{ to m {redact} }}
session {{ store = redis("redis://127.0.0.1:6379") }}
"#
        )
    };
    let pod_of = |text: &str| {
        let path = write_policy(dir.path(), text);
        let docs = manifest(&path, "k8s", &[]);
        let app = docs[1]["metadata"]["name"].as_str().unwrap().to_string();
        kind(&docs, "Deployment", &app).unwrap()["spec"]["template"]["spec"].clone()
    };
    let pod = pod_of(&policy(r#"redact = ["email"]"#));
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(args
        .windows(2)
        .any(|w| w == ["--vault-key-file", "/etc/src/vault/key"]));
    let mounted = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == "/etc/src/vault")
        .expect("the vault key is mounted");
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mounted["name"])
        .expect("the mount's volume");
    assert!(volume["secret"]["secretName"]
        .as_str()
        .unwrap()
        .ends_with("-vault"));
    // Without redaction there is nothing to seal.
    let plain = pod_of(&policy(""));
    let args = plain["containers"][0]["args"].to_string();
    assert!(!args.contains("--vault-key-file"), "{args}");
}

/// Envoy running `config`, its admin interface on a free port.
fn envoy(mut config: Value) -> Envoy {
    config["admin"]["address"]["socket_address"]["port_value"] = 0.into();
    Envoy::start(&serde_norway::to_string(&config).unwrap())
}

/// The generated configuration runs in the real Envoy: with the external processor down, the
/// fail-open gateway sends a served id the client names to the backend serving it and anything
/// else to the default route's model (a client's `x-selected-model` steers nothing), and the
/// fail-closed one lets nothing through.
#[test]
fn the_envoy_config_routes_requests_in_a_real_envoy() {
    let ((_a_runtime, a), (_b_runtime, b)) = (simulator(&["tiny-a"]), simulator(&["tiny-b"]));
    let dir = tempfile::tempdir().unwrap();
    let policy = write_policy(
        dir.path(),
        &format!(
            r#"backend one {{ url = "{}/v1" }}
backend two {{ url = "{}/v1" }}
model small {{ backend = one  serves = "tiny-a" }}
model strong {{ backend = two  serves = "tiny-b" }}
route coding priority 1 {{ when contains(prompt, ["segfault"])  to strong }}
route default {{ to small }}
"#,
            a.base_url(),
            b.base_url()
        ),
    );
    // Nothing listens there: the external processor is down.
    let extproc = format!("127.0.0.1:{}", free_port());
    let body = |model: &str| serde_json::json!({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1});
    let steer = [("x-selected-model", "tiny-b")];

    let open = manifest(
        &policy,
        "envoy",
        &[
            "--fail-open",
            "--extproc-address",
            &extproc,
            "--listen",
            "127.0.0.1:0",
        ],
    )
    .remove(0);
    {
        let gateway = envoy(open);
        let answer = chat(gateway.addr, &body("tiny-b"), &steer);
        assert_eq!(answer.status, 200, "{}", answer.body_text());
        assert_eq!(b.received().len(), 1);
        assert_eq!(b.received()[0].path, "/v1/chat/completions");
        assert!(a.received().is_empty());
        let answer = chat(gateway.addr, &body("auto"), &steer);
        assert_eq!(answer.status, 200, "{}", answer.body_text());
        assert_eq!(a.received().len(), 1);
        assert_eq!(b.received().len(), 1);
        let sent: Value = serde_json::from_slice(&a.received()[0].body).unwrap();
        assert_eq!(sent["model"], "tiny-a");
    }

    let closed = manifest(
        &policy,
        "envoy",
        &["--extproc-address", &extproc, "--listen", "127.0.0.1:0"],
    )
    .remove(0);
    let gateway = envoy(closed);
    let status = chat(gateway.addr, &body("tiny-b"), &steer).status;
    assert!(status >= 500, "fail-closed let a request through: {status}");
    assert_eq!(b.received().len(), 1, "fail-closed reached the backend");
}
