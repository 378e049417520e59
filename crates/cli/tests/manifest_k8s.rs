//! `src manifest --format k8s` against its consumers: the objects pass `kubernetes-validate
//! --strict` (the Kubernetes OpenAPI schemas, offline), a YAML 1.1 reader (PyYAML, as older
//! Kubernetes tooling reads) gets back exactly what was meant, and the Deployment's command
//! line and environment start the real `src serve`, which then drains on SIGTERM. The Python
//! tools are in `.cache/venv-k8s`, installed by scripts/setup.sh.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a failed step fails the test with its message"
)]

mod support;

use serde_json::Value;
use src_testkit::free_port;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{documents, manifest_text, repo, src, write};

fn venv_bin(name: &str) -> PathBuf {
    let path = repo(".cache/venv-k8s/bin").join(name);
    assert!(
        path.is_file(),
        "{} is missing: run scripts/setup.sh",
        path.display()
    );
    path
}

/// The manifest's YAML for `policy`.
fn manifest_yaml(policy: &Path) -> String {
    manifest_text(policy, "k8s", &[])
}

const REDIS_POLICY: &str = r#"backend b { url = "http://127.0.0.1:1/v1" }
model m { backend = b  serves = "x" }
route default { to m }
session { store = redis("redis://127.0.0.1:6379") }
"#;

/// The manifests under test: the shipped production policy (models, a catalog, a key) and a
/// policy with Redis.
fn manifests(dir: &Path) -> Vec<(String, String)> {
    let redis = dir.join("redis");
    std::fs::create_dir_all(&redis).unwrap();
    write(&redis, "main.sr", REDIS_POLICY);
    vec![
        (
            "production".to_string(),
            manifest_yaml(Path::new("policies/production")),
        ),
        ("redis".to_string(), manifest_yaml(&redis)),
    ]
}

#[test]
fn k8s_objects_pass_the_strict_kubernetes_schemas() {
    let dir = tempfile::tempdir().unwrap();
    for (name, yaml) in manifests(dir.path()) {
        let path = write(dir.path(), &format!("{name}.yaml"), &yaml);
        let out = Command::new(venv_bin("kubernetes-validate"))
            .args(["--strict", "--no-warn"])
            .arg(&path)
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{name}: {said}\n{yaml}");
        // One verdict a document, so none was skipped.
        let passed = said.matches(" passed for resource ").count();
        assert_eq!(passed, documents(&yaml).len(), "{name}: {said}");
    }
}

#[test]
fn a_yaml_1_1_reader_reads_back_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let script = "import json, sys, yaml
print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))
";
    for (name, yaml) in manifests(dir.path()) {
        let path = write(dir.path(), &format!("{name}.yaml"), &yaml);
        let out = Command::new(venv_bin("python"))
            .arg("-c")
            .arg(script)
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let read: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            read,
            documents(&yaml),
            "{name}: YAML 1.1 reads another value"
        );
        for doc in read.iter().filter(|d| d["kind"] == "Deployment") {
            for container in doc["spec"]["template"]["spec"]["containers"]
                .as_array()
                .unwrap()
            {
                for arg in container["args"].as_array().unwrap() {
                    assert!(arg.is_string(), "{name}: {arg} is not a string");
                }
            }
        }
    }
}

/// The status of `GET path`, or `None` while nothing answers.
fn get(port: u16, path: &str) -> Option<u16> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = String::new();
    stream.read_to_string(&mut head).ok()?;
    head.split(' ').nth(1)?.parse().ok()
}

/// The router's container as `src serve` runs it: its args with the policy directory and the
/// ports replaced (hosts kept), its environment with a value for every variable.
struct Container {
    args: Vec<String>,
    env: Vec<String>,
    api_port: u16,
    grace: u64,
}

fn container(docs: &[Value], policy: &Path) -> Container {
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == "src-policy")
        .expect("the router's Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let mount = c["volumeMounts"][0]["mountPath"].as_str().unwrap();
    let mut api_port = 0;
    let args = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .map(|a| {
            if a == mount {
                return policy.display().to_string();
            }
            match a.strip_prefix("0.0.0.0:") {
                Some(port) => {
                    let free = free_port();
                    if port == "8801" {
                        api_port = free;
                    }
                    format!("0.0.0.0:{free}")
                }
                None => a.to_string(),
            }
        })
        .collect();
    let env = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    Container {
        args,
        env,
        api_port,
        grace: pod["terminationGracePeriodSeconds"].as_u64().unwrap(),
    }
}

#[test]
fn the_deployment_command_line_starts_src_serve_and_it_drains_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy");
    std::fs::create_dir_all(&policy).unwrap();
    write(
        &policy,
        "main.sr",
        "backend b { url = \"http://127.0.0.1:1/v1\"  api_key = env(\"B_KEY\") }\n\
         model m { backend = b  serves = \"x\" }\nroute default { to m }\n",
    );
    let docs = documents(&manifest_yaml(&policy));
    let c = container(&docs, &policy);
    assert!(c.args.iter().any(|a| a == "--extproc"), "{:?}", c.args);
    assert!(c.env.iter().any(|e| e == "SRC_ADMIN_TOKEN"), "{:?}", c.env);
    assert!(c.env.iter().any(|e| e == "B_KEY"), "{:?}", c.env);
    let drain: u64 = c
        .args
        .windows(2)
        .find(|w| w[0] == "--drain")
        .map(|w| w[1].parse().unwrap())
        .expect("--drain");
    assert!(c.grace > drain, "grace {} within drain {drain}", c.grace);

    // Without the Secret's token the same command line is refused: the env is what makes it run.
    let refused = src()
        .args(&c.args)
        .env_remove("SRC_ADMIN_TOKEN")
        .env("B_KEY", "k")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");

    let mut cmd = src();
    cmd.args(&c.args)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for var in &c.env {
        cmd.env(var, "a-test-value");
    }
    let mut child = cmd.spawn().unwrap();
    let started = Instant::now();
    while get(c.api_port, "/healthz") != Some(200) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("src serve exited with {status} on {:?}", c.args);
        }
        assert!(started.elapsed() < Duration::from_secs(30), "never healthy");
        std::thread::sleep(Duration::from_millis(100));
    }
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let stopping = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        if stopping.elapsed() > Duration::from_secs(drain) {
            let _ = child.kill();
            panic!("still running after the {drain} s drain");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
