//! `https` backends: a real TLS server (rustls, a certificate from a private CA made at test
//! time) behind a real `src serve`. The router trusts the CA through `--backend-ca`; without it
//! the handshake fails as a connect failure (502, or the `else` model), and `/readyz` says why.
//! HTTP/2 is used when the backend offers it through ALPN, HTTP/1.1 otherwise.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{json, Value};
use src_testkit::{user, Router, TestResult, PATIENCE};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// A private CA and a server certificate it signed.
struct Pki {
    ca_pem: String,
    chain: Vec<CertificateDer<'static>>,
    key: PrivatePkcs8KeyDer<'static>,
}

impl Pki {
    /// A certificate for `localhost` and `127.0.0.1`.
    fn new() -> TestResult<Pki> {
        Pki::for_names(&["localhost", "127.0.0.1"])
    }

    fn for_names(names: &[&str]) -> TestResult<Pki> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "src test CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
        let key = KeyPair::generate()?;
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let params = CertificateParams::new(names)?;
        let cert = params.signed_by(&key, &ca)?;
        Ok(Pki {
            ca_pem: ca.pem(),
            chain: vec![cert.der().clone(), ca.der().clone()],
            key: PrivatePkcs8KeyDer::from(key.serialize_der()),
        })
    }

    /// The CA written as a PEM bundle in `dir`.
    fn ca_file(&self, dir: &std::path::Path) -> TestResult<PathBuf> {
        let path = dir.join("backend-ca.pem");
        std::fs::write(&path, &self.ca_pem)?;
        Ok(path)
    }
}

/// What the TLS backend saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    version: Version,
    path: String,
    body: Value,
}

/// An OpenAI-ish backend over TLS: `GET /v1/models` and `POST /v1/chat/completions` (streaming
/// or not), offering `alpn` in the handshake.
struct TlsBackend {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsBackend {
    async fn start(pki: &Pki, alpn: &[&[u8]]) -> TestResult<TlsBackend> {
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(pki.chain.clone(), PrivateKeyDer::Pkcs8(pki.key.clone_key()))?;
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("https://127.0.0.1:{}/v1", listener.local_addr()?.port());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn(accept_loop(listener, acceptor, Arc::clone(&seen)));
        Ok(TlsBackend { url, seen, task })
    }

    /// The chat completion requests seen so far (probes left out).
    fn chats(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|s| s.path.ends_with("/chat/completions"))
            .cloned()
            .collect()
    }
}

async fn accept_loop(listener: TcpListener, acceptor: TlsAcceptor, seen: Arc<Mutex<Vec<Seen>>>) {
    while let Ok((tcp, _)) = listener.accept().await {
        let acceptor = acceptor.clone();
        let seen = Arc::clone(&seen);
        tokio::spawn(async move {
            // A client that refuses the certificate ends the handshake: nothing to serve.
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let service = service_fn(move |request| answer(request, Arc::clone(&seen)));
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}

async fn answer(
    request: Request<Incoming>,
    seen: Arc<Mutex<Vec<Seen>>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let version = request.version();
    let path = request.uri().path().to_owned();
    let body = match request.into_body().collect().await {
        Ok(b) => serde_json::from_slice(&b.to_bytes()).unwrap_or(Value::Null),
        Err(_) => Value::Null,
    };
    seen.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Seen {
            version,
            path: path.clone(),
            body: body.clone(),
        });
    let model = body["model"].as_str().unwrap_or("?").to_owned();
    let content = format!("[tls:{model}] over {version:?}");
    let (content_type, text) = if path.ends_with("/models") {
        (
            "application/json",
            json!({"object": "list", "data": [{"id": "remote-model", "object": "model"}]})
                .to_string(),
        )
    } else if body["stream"] == true {
        let chunk = |delta: Value, finish: Value| {
            json!({"id": "c1", "object": "chat.completion.chunk", "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        let events = [
            chunk(
                json!({"role": "assistant", "content": "[tls:"}),
                Value::Null,
            ),
            chunk(json!({"content": "stream]"}), json!("stop")),
        ];
        let mut text = String::new();
        for event in events {
            text.push_str(&format!("data: {event}\n\n"));
        }
        text.push_str("data: [DONE]\n\n");
        ("text/event-stream", text)
    } else {
        (
            "application/json",
            json!({
                "id": "c1", "object": "chat.completion", "model": model,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
            })
            .to_string(),
        )
    };
    let mut response = Response::new(Full::new(Bytes::from(text)));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    Ok(response)
}

/// `first` on the TLS backend at `url`, `else` `spare` on the simulator.
fn policy(url: &str) -> String {
    format!(
        r#"
backend remote {{ url = "{url}"  timeout = 5s }}
backend sim    {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model first  {{ backend = remote  serves = "remote-model" }}
model spare  {{ backend = sim     serves = "spare-model" }}
route main priority 10 {{ when contains(prompt, ["fallback"])  to first else spare }}
route default {{ to first }}
"#
    )
}

const H2_AND_H1: &[&[u8]] = &[b"h2", b"http/1.1"];

async fn router_trusting(pki: &Pki, url: &str) -> TestResult<(Router, tempfile::TempDir)> {
    let ca_dir = tempfile::tempdir()?;
    let ca = pki.ca_file(ca_dir.path())?;
    let router = Router::start_with(&policy(url), |cfg| cfg.backend_ca = Some(ca)).await?;
    Ok((router, ca_dir))
}

#[tokio::test]
async fn an_https_backend_answers_when_its_ca_is_trusted() -> TestResult {
    let pki = Pki::new()?;
    let backend = TlsBackend::start(&pki, H2_AND_H1).await?;
    let (router, _ca) = router_trusting(&pki, &backend.url).await?;
    let answer = router
        .chat(&user("hello"), &[("x-request-id", "tls-1")])
        .await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.header("x-sr-model"), Some("first"));
    assert_eq!(answer.content()?, "[tls:remote-model] over HTTP/2.0");
    let line = router.log_line("tls-1").await?;
    assert_eq!(line["backend"], "remote");
    assert_eq!(line["status"], 200);
    // Several requests share the one HTTP/2 connection; each reaches the backend once.
    for _ in 0..3 {
        let again = router.chat(&user("again"), &[]).await?;
        assert_eq!(again.status, 200, "{}", again.text());
    }
    let chats = backend.chats();
    assert_eq!(chats.len(), 4);
    assert!(
        chats.iter().all(|s| s.version == Version::HTTP_2),
        "{chats:?}"
    );
    assert_eq!(chats[0].body["model"], "remote-model");
    Ok(())
}

#[tokio::test]
async fn http2_is_used_only_when_the_backend_offers_it() -> TestResult {
    let pki = Pki::new()?;
    let offers: [(&[&[u8]], Version); 3] = [
        (H2_AND_H1, Version::HTTP_2),
        (&[b"http/1.1"], Version::HTTP_11),
        (&[], Version::HTTP_11),
    ];
    for (alpn, expected) in offers {
        let backend = TlsBackend::start(&pki, alpn).await?;
        let (router, _ca) = router_trusting(&pki, &backend.url).await?;
        let answer = router.chat(&user("hello"), &[]).await?;
        assert_eq!(answer.status, 200, "{}", answer.text());
        let chats = backend.chats();
        assert_eq!(chats.len(), 1);
        assert_eq!(chats[0].version, expected, "ALPN offered: {alpn:?}");
    }
    Ok(())
}

#[tokio::test]
async fn a_stream_is_relayed_from_an_https_backend() -> TestResult {
    let pki = Pki::new()?;
    let backend = TlsBackend::start(&pki, H2_AND_H1).await?;
    let (router, _ca) = router_trusting(&pki, &backend.url).await?;
    let mut body = user("stream it");
    body["stream"] = json!(true);
    let answer = router.chat(&body, &[]).await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.header("content-type"), Some("text/event-stream"));
    let text = answer.text();
    assert!(text.contains("stream]"), "{text}");
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    Ok(())
}

#[tokio::test]
async fn an_untrusted_certificate_is_a_bad_gateway_that_names_the_problem() -> TestResult {
    let pki = Pki::new()?;
    let backend = TlsBackend::start(&pki, H2_AND_H1).await?;
    let router = Router::start(&policy(&backend.url)).await?;
    let answer = router.chat(&user("hello"), &[]).await?;
    assert_eq!(answer.status, 502, "{}", answer.text());
    let (message, code, _) = answer.error()?;
    assert_eq!(code.as_deref(), Some("bad_gateway"));
    assert!(
        message.contains("invalid peer certificate") && message.contains("UnknownIssuer"),
        "{message}"
    );
    assert!(backend.chats().is_empty());
    Ok(())
}

#[tokio::test]
async fn a_certificate_for_another_name_is_refused() -> TestResult {
    let pki = Pki::for_names(&["backend.internal"])?;
    let backend = TlsBackend::start(&pki, H2_AND_H1).await?;
    let (router, _ca) = router_trusting(&pki, &backend.url).await?;
    let answer = router.chat(&user("hello"), &[]).await?;
    assert_eq!(answer.status, 502, "{}", answer.text());
    let (message, _, _) = answer.error()?;
    assert!(message.contains("not valid for name"), "{message}");
    assert!(backend.chats().is_empty());
    Ok(())
}

#[tokio::test]
async fn a_tls_failure_falls_back_to_the_else_model() -> TestResult {
    let pki = Pki::new()?;
    let backend = TlsBackend::start(&pki, H2_AND_H1).await?;
    let router = Router::start(&policy(&backend.url)).await?;
    let answer = router
        .chat(&user("please fallback"), &[("x-request-id", "tls-fb")])
        .await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.header("x-sr-model"), Some("spare"));
    assert_eq!(answer.header("x-sr-fallbacks"), Some("first:connect"));
    assert!(answer.content()?.starts_with("[spare-model]"));
    let line = router.log_line("tls-fb").await?;
    assert_eq!(line["fallbacks"], json!(["first:connect"]));
    Ok(())
}

#[tokio::test]
async fn a_stalled_handshake_is_a_connect_failure() -> TestResult {
    // Accepts TCP, never speaks TLS.
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("https://127.0.0.1:{}/v1", listener.local_addr()?.port());
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
        }
    });
    let router = Router::start_with(&policy(&url), |cfg| {
        cfg.connect_timeout = Duration::from_millis(300);
    })
    .await?;
    let started = tokio::time::Instant::now();
    let answer = router.chat(&user("please fallback"), &[]).await?;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.header("x-sr-fallbacks"), Some("first:connect"));
    // Well before the backend's 5 s answer timeout.
    assert!(started.elapsed() < Duration::from_secs(4));
    let answer = router.chat(&user("hello"), &[]).await?;
    assert_eq!(answer.status, 502, "{}", answer.text());
    let (message, _, _) = answer.error()?;
    assert!(message.contains("no connection within 300 ms"), "{message}");
    hold.abort();
    Ok(())
}

/// Polls `/readyz` until `remote`'s entry satisfies `done`, returning the report.
async fn readiness(router: &Router, done: impl Fn(&Value) -> bool) -> TestResult<Value> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let report = router.admin_get("/readyz").await?.json()?;
        if done(&report["backends"]["remote"]) {
            return Ok(report);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("readiness never settled: {report}").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn readiness_is_probed_over_tls() -> TestResult {
    let pki = Pki::new()?;
    let backend = TlsBackend::start(&pki, H2_AND_H1).await?;
    let (router, _ca) = router_trusting(&pki, &backend.url).await?;
    let report = readiness(&router, |b| b["ready"] == true).await?;
    assert_eq!(report["ready"], true, "{report}");
    assert_eq!(report["backends"]["remote"]["detail"], "answered 200");
    let probes = backend
        .seen
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter(|s| s.path == "/v1/models")
        .map(|s| s.version)
        .collect::<Vec<_>>();
    assert!(!probes.is_empty());
    assert!(probes.iter().all(|v| *v == Version::HTTP_2), "{probes:?}");

    // Without the CA the probe fails, and says why.
    let untrusting = Router::start(&policy(&backend.url)).await?;
    let report = readiness(&untrusting, |b| b["detail"] != "not probed yet").await?;
    let remote = &report["backends"]["remote"];
    assert_eq!(remote["ready"], false, "{report}");
    assert!(
        remote["detail"]
            .as_str()
            .is_some_and(|d| d.contains("invalid peer certificate")),
        "{report}"
    );
    let status = untrusting.admin_get("/readyz").await?.status;
    assert_eq!(status, 503);
    Ok(())
}

#[tokio::test]
async fn a_bad_ca_file_refuses_to_start() -> TestResult {
    let dir = tempfile::tempdir()?;
    let policy_dir = tempfile::tempdir()?;
    std::fs::write(
        policy_dir.path().join("policy.sr"),
        policy("https://127.0.0.1:9/v1"),
    )?;
    let missing = dir.path().join("missing.pem");
    let not_pem = dir.path().join("notes.txt");
    std::fs::write(&not_pem, "no certificates here\n")?;
    for (path, expected) in [
        (missing, "cannot read the backend CA bundle"),
        (not_pem, "holds no certificate"),
    ] {
        let mut cfg = src_testkit::config(policy_dir.path());
        cfg.backend_ca = Some(path.clone());
        let err = match src_runtime::spawn(
            cfg,
            src_runtime::Components::with_log(src_runtime::log::RequestLog::Off),
        )
        .await
        {
            Ok(_) => return Err(format!("started with `{}`", path.display()).into()),
            Err(err) => err.to_string(),
        };
        assert!(err.contains(expected), "{err}");
        assert!(err.contains(&path.display().to_string()), "{err}");
    }
    Ok(())
}
