//! `src doctor` against the built-in simulator as a real HTTP backend on a loopback port: the
//! exit codes, the table, the JSON report, what the backend received, and that an API key is
//! sent but never printed.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a failed step fails the test with its message"
)]

mod support;

use assert_cmd::assert::OutputAssertExt;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::{repo, simulator, src, write};

const KEY: &str = "sk-doctor-test-0123456789";

fn policy(dir: &Path, url: &str, strong_serves: &str) -> PathBuf {
    write(
        dir,
        "policy.sr",
        &format!(
            r#"backend fleet {{ url = "{url}/v1"  api_key = env("SRC_DOCTOR_TEST_KEY") }}
model small  {{ backend = fleet  serves = "tiny-a"  aliases = ["fast"] }}
model strong {{ backend = fleet  serves = "{strong_serves}" }}
signal code_talk = contains(prompt, ["stack trace", "segfault"])
route coding priority 20 {{ when code_talk  to strong else small }}
route default {{ to small }}
test crash_goes_strong {{
  prompt = "here is the stack trace"
  expect coding model strong
}}
test plain_goes_small {{
  prompt = "hello there"
  expect default model small
}}
"#
        ),
    )
}

fn doctor(policy: &Path) -> Command {
    let mut cmd = src();
    cmd.env("SRC_DOCTOR_TEST_KEY", KEY)
        .args(["doctor", "--color", "never", "--timeout", "10s"])
        .arg(policy);
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_healthy_fleet_passes_with_a_table() {
    let (_rt, sim) = simulator(&["tiny-a", "tiny-b"]);
    let dir = tempfile::tempdir().unwrap();
    let file = policy(dir.path(), &sim.base_url(), "tiny-b");
    let out = doctor(&file).assert().code(0);
    let stdout = text(&out.get_output().stdout);
    let stderr = text(&out.get_output().stderr);
    for row in [
        "model `small` = `tiny-a`",
        "model `strong` = `tiny-b`",
        "route `coding` (test `crash_goes_strong`)",
        "reached `tiny-b` (model `strong`)",
        "route `default` (test `plain_goes_small`)",
        "reached `tiny-a` (model `small`)",
        "7 passed, 0 failed, 0 skipped",
    ] {
        assert!(stdout.contains(row), "missing `{row}` in\n{stdout}");
    }
    assert!(
        !stdout.contains(KEY) && !stderr.contains(KEY),
        "{stdout}{stderr}"
    );

    // What the backend saw: the catalog, two direct requests, then the two routed requests,
    // each carrying the key; the routed ones carry the test's prompt to the decided model.
    let received = sim.received();
    let paths: Vec<&str> = received.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/v1/models",
            "/v1/chat/completions",
            "/v1/chat/completions",
            "/v1/chat/completions",
            "/v1/chat/completions"
        ]
    );
    for r in &received {
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
    }
    let routed = received[3].json().unwrap();
    assert_eq!(routed["model"], "tiny-b");
    assert_eq!(routed["max_tokens"], 1);
    assert_eq!(routed["messages"][0]["content"], "here is the stack trace");
    assert_eq!(received[4].model().as_deref(), Some("tiny-a"));
}

#[test]
fn a_served_id_the_backend_lacks_is_named_with_what_it_serves() {
    let (_rt, sim) = simulator(&["tiny-a", "tiny-b"]);
    let dir = tempfile::tempdir().unwrap();
    let file = policy(dir.path(), &sim.base_url(), "tiny-c");
    let out = doctor(&file).assert().code(1);
    let stdout = text(&out.get_output().stdout);
    assert!(
        stdout.contains("`tiny-c` is not served by backend `fleet`"),
        "{stdout}"
    );
    assert!(stdout.contains("it serves: `tiny-a`, `tiny-b`"), "{stdout}");
    // The missing model is not sent anything, and the route that needs it is not tried.
    assert!(
        sim.received()
            .iter()
            .all(|r| r.model().as_deref() != Some("tiny-c")),
        "a request went to the missing id"
    );
    assert!(
        stdout.contains("did not pass the direct request"),
        "{stdout}"
    );
}

#[test]
fn a_backend_that_is_down_fails_with_a_clear_line() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap();
    let file = policy(dir.path(), &format!("http://127.0.0.1:{port}"), "tiny-b");
    let out = doctor(&file).assert().code(1);
    let stdout = text(&out.get_output().stdout);
    assert!(
        stdout.contains("backend `fleet` is unusable: cannot connect to"),
        "{stdout}"
    );
}

#[test]
fn unusable_input_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(
        dir.path(),
        "bad.sr",
        "model m { backend = nowhere  serves = \"x\" }\n",
    );
    let out = doctor(&bad).assert().code(2);
    assert!(text(&out.get_output().stderr).contains("does not check"));
    doctor(&dir.path().join("missing.sr")).assert().code(2);
    let (_rt, sim) = simulator(&["tiny-a"]);
    let file = policy(dir.path(), &sim.base_url(), "tiny-a");
    src()
        .args(["doctor", "--timeout", "10"])
        .arg(&file)
        .assert()
        .code(2);
}

#[test]
fn an_unset_key_variable_is_a_violation() {
    let (_rt, sim) = simulator(&["tiny-a", "tiny-b"]);
    let dir = tempfile::tempdir().unwrap();
    let file = policy(dir.path(), &sim.base_url(), "tiny-b");
    let out = doctor(&file)
        .env_remove("SRC_DOCTOR_TEST_KEY")
        .assert()
        .code(1);
    assert!(text(&out.get_output().stdout)
        .contains("`SRC_DOCTOR_TEST_KEY` (the backend's `api_key`) is not set"));
    assert!(sim.received().is_empty());
}

#[test]
fn the_json_report_has_every_check() {
    let (_rt, sim) = simulator(&["tiny-a"]);
    let dir = tempfile::tempdir().unwrap();
    let file = policy(dir.path(), &sim.base_url(), "tiny-b");
    let out = doctor(&file).args(["--format", "json"]).assert().code(1);
    let stdout = text(&out.get_output().stdout);
    assert!(!stdout.contains(KEY));
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["ok"], false);
    assert_eq!(doc["violations"], 1);
    let checks = doc["checks"].as_array().unwrap();
    let find = |phase: &str, model: &str| {
        checks
            .iter()
            .find(|c| c["phase"] == phase && c["model"] == model)
            .unwrap_or_else(|| panic!("no {phase} check of {model} in {stdout}"))
    };
    assert_eq!(find("catalog", "strong")["status"], "fail");
    assert_eq!(find("catalog", "small")["status"], "ok");
    let direct = find("direct", "small");
    assert_eq!(direct["status"], "ok");
    assert_eq!(direct["http_status"], 200);
    assert!(direct["latency_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(find("direct", "strong")["status"], "skip");
    let default_route = checks
        .iter()
        .find(|c| c["phase"] == "routed" && c["route"] == "default")
        .unwrap();
    assert_eq!(default_route["status"], "ok");
    assert_eq!(default_route["served"], "tiny-a");
    assert_eq!(default_route["test"], "plain_goes_small");
}

/// A TLS front for `backend` (plain TCP) with a certificate for `127.0.0.1` from a new CA;
/// returns its `https` base URL and the CA as PEM.
fn tls_front(runtime: &tokio::runtime::Runtime, backend: std::net::SocketAddr) -> (String, String) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone(), ca.der().clone()],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    runtime.spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A client that refuses the certificate ends the handshake: nothing to relay.
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                if let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await {
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                }
            });
        }
    });
    (url, ca.pem())
}

#[test]
fn https_backends_are_trusted_with_backend_ca() {
    let (rt, sim) = simulator(&["tiny-a", "tiny-b"]);
    let (url, ca) = tls_front(&rt, sim.addr);
    let dir = tempfile::tempdir().unwrap();
    let file = policy(dir.path(), &url, "tiny-b");
    let out = doctor(&file).assert().code(1);
    let stdout = text(&out.get_output().stdout);
    assert!(stdout.contains("invalid peer certificate"), "{stdout}");
    let ca_file = write(dir.path(), "ca.pem", &ca);
    let out = doctor(&file)
        .arg("--backend-ca")
        .arg(&ca_file)
        .assert()
        .code(0);
    let stdout = text(&out.get_output().stdout);
    assert!(
        stdout.contains("reached `tiny-b` (model `strong`)"),
        "{stdout}"
    );
    // A CA file that cannot be read is unusable input.
    doctor(&file)
        .arg("--backend-ca")
        .arg(dir.path().join("missing.pem"))
        .assert()
        .code(2);
}

/// A backend that lists `tiny-a` and `tiny-b` but answers every completion as `other-model`.
fn misnaming_backend() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut request = Vec::new();
            let mut byte = [0u8; 1];
            while !request.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                request.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&request).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            let mut body = vec![0u8; length];
            let _ = stream.read_exact(&mut body);
            let answer = if head.starts_with("get /v1/models") {
                r#"{"object":"list","data":[{"id":"tiny-a"},{"id":"tiny-b"}]}"#
            } else {
                r#"{"object":"chat.completion","model":"other-model","choices":[]}"#
            };
            let _ = stream.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                    answer.len()
                )
                .as_bytes(),
            );
        }
    });
    format!("http://{addr}")
}

#[test]
fn an_answer_from_another_model_fails_the_routed_check() {
    let url = misnaming_backend();
    let dir = tempfile::tempdir().unwrap();
    let file = policy(dir.path(), &url, "tiny-b");
    let out = doctor(&file).args(["--format", "json"]).assert().code(1);
    let doc: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let checks = doc["checks"].as_array().unwrap();
    assert!(checks
        .iter()
        .filter(|c| c["phase"] == "direct")
        .all(|c| c["status"] == "ok"));
    let coding = checks
        .iter()
        .find(|c| c["phase"] == "routed" && c["route"] == "coding")
        .unwrap();
    assert_eq!(coding["status"], "fail");
    assert_eq!(
        coding["detail"],
        "expected an answer from `tiny-b` (model `strong`), got one from `other-model`"
    );
}

#[test]
fn simulated_backends_are_skipped_not_failed() {
    let out = doctor(&repo("examples/quickstart")).assert().code(0);
    let stdout = text(&out.get_output().stdout);
    assert!(
        stdout.contains("simulated: served by the built-in simulator"),
        "{stdout}"
    );
    assert!(
        stdout.contains("\n0 passed, 0 failed, 8 skipped"),
        "{stdout}"
    );
    assert!(!stdout.contains("could not be read"), "{stdout}");
}
