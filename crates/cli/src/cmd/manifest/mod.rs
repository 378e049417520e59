//! `src manifest POLICY --format envoy|httproute|k8s`: deployment manifests derived from the
//! checked policy, so backend addresses, served ids and object names come from one source and
//! cannot drift from what `src serve` routes to.
//!
//! - [`envoy`]: an Envoy static configuration with `src` as its external processor;
//! - [`httproute`]: Gateway API `HTTPRoute`s to one `InferencePool` per served model;
//! - [`k8s`]: the Deployment, Service and ConfigMap of `src serve`, and Redis when the policy
//!   stores in Redis;
//! - [`names`]: the DNS-1123 names all of them use.
//!
//! - [`yaml`]: the YAML they are written in.
//!
//! Output is YAML (one document per object, `---` between them) on standard output, or a file
//! in `--out DIR`.

mod envoy;
mod httproute;
mod k8s;
pub mod names;
mod yaml;

use super::policy::load_checked;
use crate::output::Color;
use crate::Outcome;
use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use src_compiler::hir::{BackendDef, CheckedPolicy};
use src_dsl::ast::{ItemKind, TestInput};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

#[derive(Clone, Copy, Debug, clap::ValueEnum, PartialEq, Eq)]
pub enum Kind {
    /// An Envoy v3 static configuration with the ext_proc filter.
    Envoy,
    /// Gateway API HTTPRoutes to InferencePools.
    Httproute,
    /// Deployment, Service and ConfigMap of `src serve` (and Redis when the policy uses it).
    K8s,
}

impl Kind {
    fn file_name(self) -> &'static str {
        match self {
            Kind::Envoy => "envoy.yaml",
            Kind::Httproute => "httproute.yaml",
            Kind::K8s => "k8s.yaml",
        }
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// The policy directory or file.
    policy: PathBuf,
    #[arg(long, value_enum)]
    format: Kind,
    /// Write the manifest into this directory (as envoy.yaml, httproute.yaml or k8s.yaml)
    /// instead of standard output.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Where Envoy reaches `src`'s external processor.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:50051")]
    extproc_address: String,
    /// Where Envoy reaches `src`'s HTTP listener, for what the external processor does not
    /// decide (`/v1/models`, `/v1/messages`).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8801")]
    router_address: String,
    /// Where Envoy listens for clients.
    #[arg(long, value_name = "HOST:PORT", default_value = "0.0.0.0:10000")]
    listen: String,
    /// The most requests (and connections, and retries) Envoy lets each cluster hold at once:
    /// its circuit breakers, 1,024 by default, which would cap the gateway's concurrency.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    max_requests: u32,
    /// Let requests through when the external processor cannot be reached (refused for
    /// policies with blocks or guards).
    #[arg(long)]
    fail_open: bool,
    /// The container image of `src` (k8s).
    #[arg(long, default_value = "src:latest")]
    image: String,
    /// The Gateway the HTTPRoutes attach to.
    #[arg(long, default_value = "inference-gateway")]
    gateway: String,
    #[arg(long, value_enum, default_value_t)]
    color: Color,
}

/// What the generators are told besides the policy.
pub struct Options {
    /// The name of `src`'s objects: `src-` and the policy's directory (or file stem).
    pub app: String,
    pub image: String,
    pub gateway: String,
    pub extproc_address: String,
    pub router_address: String,
    pub listen: String,
    pub fail_open: bool,
    /// Each Envoy cluster's circuit breakers.
    pub max_requests: u32,
    pub envoy_admin_port: u16,
    /// The time each model-backed signal may take (`SRC_MODEL_TIMEOUT_MS`, as `src serve`).
    pub model_timeout: Duration,
}

impl Options {
    pub fn labels(&self) -> Value {
        json!({"app.kubernetes.io/name": self.app, "app.kubernetes.io/component": "router"})
    }

    pub fn extproc(&self) -> Result<(String, u16)> {
        host_port("--extproc-address", &self.extproc_address)
    }

    pub fn listen(&self) -> Result<(String, u16)> {
        host_port("--listen", &self.listen)
    }

    pub fn router(&self) -> Result<(String, u16)> {
        host_port("--router-address", &self.router_address)
    }
}

fn host_port(flag: &str, text: &str) -> Result<(String, u16)> {
    let (host, port) = text
        .rsplit_once(':')
        .ok_or_else(|| anyhow!("{flag} expects HOST:PORT, got `{text}`"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| anyhow!("{flag}: `{port}` is not a port"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        bail!("{flag} expects HOST:PORT, got `{text}`");
    }
    Ok((host.to_string(), port))
}

/// Where a backend is, from its `url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// The base path without a trailing `/` (`/v1`).
    pub path: String,
}

impl Endpoint {
    pub fn of(backend: &BackendDef) -> Result<Endpoint> {
        let url = url::Url::parse(backend.url.trim_end_matches('/')).map_err(|e| {
            anyhow!(
                "backend `{}` has no usable url (`{}`): {e}",
                backend.name,
                backend.url
            )
        })?;
        let host = url
            .host_str()
            .ok_or_else(|| anyhow!("backend `{}`'s url has no host", backend.name))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = url
            .port_or_known_default()
            .ok_or_else(|| anyhow!("backend `{}`'s url has no port", backend.name))?;
        Ok(Endpoint {
            tls: url.scheme() == "https",
            host,
            port,
            path: url.path().trim_end_matches('/').to_string(),
        })
    }

    /// `host` or `host:port` when the port is not the scheme's default.
    pub fn authority(&self) -> String {
        let default = if self.tls { 443 } else { 80 };
        if self.port == default {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// A file `src serve` reads the policy from, by its path relative to the policy directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyFile {
    pub path: String,
    pub text: String,
}

pub fn run(args: Args) -> Result<Outcome> {
    let Some(checked) = load_checked(&args.policy, args.color.enabled_for_stderr())? else {
        return Ok(Outcome::Failure);
    };
    let stem = if args.policy.is_dir() {
        args.policy
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
    } else {
        args.policy
            .file_stem()
            .map(|n| n.to_string_lossy().into_owned())
    }
    .unwrap_or_else(|| "policy".to_string());
    let mut names = names::Names::default();
    let app = names
        .name(&format!("src-{stem}"))
        .map_err(|e| anyhow!("cannot name the deployment: {e}"))?;
    let opts = Options {
        app,
        image: args.image.clone(),
        gateway: args.gateway.clone(),
        extproc_address: args.extproc_address.clone(),
        router_address: args.router_address.clone(),
        listen: args.listen.clone(),
        fail_open: args.fail_open,
        max_requests: args.max_requests,
        envoy_admin_port: 9901,
        model_timeout: src_runtime::models::ModelOptions::from_env().timeout,
    };
    let docs = match args.format {
        Kind::Envoy => vec![envoy::config(&checked, &opts)?],
        Kind::Httproute => httproute::documents(&checked, &opts, &mut names)?,
        Kind::K8s => {
            let files = policy_files(&args.policy, &checked)?;
            k8s::documents(&checked, &files, &opts, &mut names)?
        }
    };
    let yaml = to_yaml(&docs);
    match &args.out {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create `{}`", dir.display()))?;
            let path = dir.join(args.format.file_name());
            std::fs::write(&path, yaml)
                .with_context(|| format!("cannot write `{}`", path.display()))?;
            errln!("wrote {}", path.display())?;
        }
        None => out!("{yaml}")?,
    }
    Ok(Outcome::Success)
}

/// The documents as one YAML stream, readable alike by YAML 1.1 and 1.2 readers ([`yaml`]).
pub fn to_yaml(docs: &[Value]) -> String {
    let parts: Vec<String> = docs.iter().map(yaml::document).collect();
    parts.join("---\n")
}

/// Every file `src serve` reads to check the policy: its `.sr` files, the backends' catalogs and
/// the tests' `messages` files, by path relative to the policy directory. Model directories and
/// tokenizers are too large for a ConfigMap (1 MiB); they are named in a warning instead.
fn policy_files(path: &Path, checked: &CheckedPolicy) -> Result<Vec<PolicyFile>> {
    let root = &checked.root;
    let mut paths: Vec<PathBuf> = checked
        .sources
        .files()
        .map(|(_, f)| f.path.clone())
        .collect();
    paths.extend(checked.backends.iter().filter_map(|b| b.catalog.clone()));
    let source =
        src_compiler::load(path).with_context(|| format!("cannot load `{}`", path.display()))?;
    for (id, file) in &source.files {
        let dir = source
            .sources
            .get(*id)
            .and_then(|f| f.path.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| root.clone());
        for item in &file.items {
            if let ItemKind::Test(test) = &item.kind {
                if let Some(TestInput::Messages(m)) = &test.input {
                    paths.push(dir.join(&m.value));
                }
            }
        }
    }
    let mut files = Vec::new();
    for p in paths {
        // Loaded paths already start with the policy root, as given on the command line.
        let full = p.clone();
        let relative = relative_to(root, &full).ok_or_else(|| {
            anyhow!(
                "`{}` is outside the policy directory `{}`: a ConfigMap of the policy cannot hold it",
                p.display(),
                root.display()
            )
        })?;
        let text = std::fs::read_to_string(&full)
            .with_context(|| format!("cannot read `{}`", full.display()))?;
        let file = PolicyFile {
            path: relative,
            text,
        };
        if !files.contains(&file) {
            files.push(file);
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let heavy: Vec<String> = checked
        .classifiers
        .iter()
        .map(|c| &c.path)
        .chain(checked.guards.iter().map(|g| &g.path))
        .chain(checked.encoders.iter().map(|e| &e.path))
        .chain(checked.detectors.iter().map(|d| &d.path))
        .chain(checked.router.tokenizer.iter())
        .chain(checked.models.iter().filter_map(|m| m.tokenizer.as_ref()))
        .map(|p| model_file(root, p))
        .collect();
    if !heavy.is_empty() {
        errln!(
            "warning: the policy reads model files, which the ConfigMap does not hold: {}; the \
             Deployment mounts the claim `…-models` at {} (nothing can be mounted inside the \
             ConfigMap), which the policy names as `../models/NAME`",
            heavy.join(", "),
            k8s::MODELS_DIR
        )?;
    }
    Ok(files)
}

/// A model file as the warning names it: as the policy names it, relative to the policy
/// directory (loaded paths are the policy root joined with what the policy wrote), with where
/// that is in the pod; or the absolute path the policy wrote, which the pod must hold as well.
fn model_file(root: &Path, path: &Path) -> String {
    let Ok(written) = path.strip_prefix(root) else {
        return format!("`{}` (the same path in the pod)", path.display());
    };
    let shown: Vec<String> = written
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let in_pod = normalize(&Path::new(k8s::POLICY_DIR).join(written));
    let place = if in_pod.starts_with(k8s::MODELS_DIR) {
        "in the claim"
    } else {
        "not in the claim"
    };
    format!(
        "`{}` (from the policy directory; `{}` in the pod, {place})",
        shown.join("/"),
        in_pod.display()
    )
}

/// `path` relative to `root` with `/` separators, or `None` when it is outside.
fn relative_to(root: &Path, path: &Path) -> Option<String> {
    let root = normalize(root);
    let path = normalize(path);
    let rest = path.strip_prefix(&root).ok()?;
    let parts: Vec<String> = rest
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// `.` and `..` resolved lexically (the files exist, but symlinks are kept as written).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_inside_the_policy_are_relative() {
        assert_eq!(
            relative_to(Path::new("/p"), Path::new("/p/./catalog/d.json")).as_deref(),
            Some("catalog/d.json")
        );
        assert_eq!(
            relative_to(Path::new("/p"), Path::new("/p/../q.json")),
            None
        );
        assert_eq!(
            relative_to(Path::new("p"), Path::new("p/a.sr")).as_deref(),
            Some("a.sr")
        );
    }

    #[test]
    fn model_files_are_named_as_the_policy_names_them_and_in_the_pod() {
        let root = Path::new("/home/me/policy");
        assert_eq!(
            model_file(root, Path::new("/home/me/policy/../models/shield")),
            "`../models/shield` (from the policy directory; `/etc/src/models/shield` in the \
             pod, in the claim)"
        );
        assert_eq!(
            model_file(root, Path::new("/home/me/policy/models/shield")),
            "`models/shield` (from the policy directory; `/etc/src/policy/models/shield` in \
             the pod, not in the claim)"
        );
        assert_eq!(
            model_file(root, Path::new("/opt/models/shield")),
            "`/opt/models/shield` (the same path in the pod)"
        );
        assert_eq!(
            model_file(
                Path::new("examples/p"),
                Path::new("examples/p/../../models/m")
            ),
            "`../../models/m` (from the policy directory; `/etc/models/m` in the pod, not in \
             the claim)"
        );
    }

    #[test]
    fn addresses_are_host_and_port() {
        assert_eq!(
            host_port("--x", "127.0.0.1:50051").ok(),
            Some(("127.0.0.1".to_string(), 50051))
        );
        assert_eq!(
            host_port("--x", "[::1]:9").ok(),
            Some(("::1".to_string(), 9))
        );
        assert!(host_port("--x", "nohost").is_err());
        assert!(host_port("--x", ":1").is_err());
    }
}
