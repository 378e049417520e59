//! What `src serve` is told at start: the policy, where to listen, which engine, the limits.
//!
//! One struct ([`ServeConfig`]) is the runtime's input; [`ServeArgs`] is its command-line face
//! (clap), kept next to it so that a new knob is added in one place and the CLI only flattens it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use src_compiler::EngineKind;

use crate::limits::ConnectionLimits;
use crate::log::Volume;
use crate::otel::OtlpOptions;
use crate::sim::SimConfig;

/// A listening address as the command line takes it (`--listen`, `--admin`, `--extproc`,
/// `src sim --listen`): `IP:PORT` (`127.0.0.1:8801`, `[::1]:8801`) or `HOST:PORT`
/// (`localhost:8801`), a host name standing for the first address it resolves to.
pub fn parse_socket_addr(text: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(format!(
            "`{text}` has no port: write HOST:PORT, such as 127.0.0.1:8801 or localhost:8801"
        ));
    };
    if port.parse::<u16>().is_err() {
        return Err(format!(
            "`{port}` in `{text}` is not a port number (0 to 65535)"
        ));
    }
    let mut found = text
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve `{host}`: {e}"))?;
    found
        .next()
        .ok_or_else(|| format!("`{host}` resolves to no address"))
}

/// Default listener of the OpenAI-compatible API.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8801";
/// Default listener of the admin API (policy state).
pub const DEFAULT_ADMIN: &str = "127.0.0.1:8802";
/// Default request body limit: 10 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 10 << 20;
/// Default time open connections and streams get to finish after shutdown is asked for.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// A policy directory or a single `.sr` file.
    pub policy: PathBuf,
    pub listen: SocketAddr,
    pub admin: SocketAddr,
    /// Where Envoy's external processing (`ext_proc` v3 gRPC) API listens, if anywhere.
    pub extproc: Option<SocketAddr>,
    pub engine: EngineKind,
    /// Bodies larger than this are refused with 413 while they are read.
    pub max_body_bytes: usize,
    /// Time allowed for an upstream's response head when its backend declares no `timeout`.
    pub upstream_timeout: Duration,
    /// Time allowed to open a connection to a backend: TCP, and for `https` the TLS handshake.
    pub connect_timeout: Duration,
    /// A PEM bundle of extra certificate authorities trusted for `https` backends (a private
    /// CA), on top of the platform's trust store.
    pub backend_ca: Option<PathBuf>,
    /// The key redacted Responses chains' vaults are sealed with (64 hexadecimal digits):
    /// `--vault-key-file`, else `SRC_VAULT_KEY_FILE`; without one a key is made at start, which
    /// only this process holds.
    pub vault_key_file: Option<PathBuf>,
    /// How often every backend's `GET {url}/models` is probed for `/readyz`.
    pub probe_interval: Duration,
    pub probe_timeout: Duration,
    /// Quiet time after the last change in the policy directory before it is recompiled.
    pub reload_debounce: Duration,
    /// Watch the policy files and reload on change (SIGHUP reloads either way).
    pub watch: bool,
    /// After Ctrl-C or SIGTERM, how long open API and admin connections and external
    /// processing streams get to finish before they are closed.
    pub drain: Duration,
    /// Time scale of the built-in simulator's latency model for `simulated = true` backends
    /// (1.0 = the modelled latencies; tests use a small value).
    pub sim_time_scale: f64,
    /// The bearer token every admin request must carry (`SRC_ADMIN_TOKEN`). Required when the
    /// admin listener is bound to anything but a loopback address; honoured on loopback too.
    pub admin_token: Option<AdminToken>,
    /// What simulated backends simulate: the seed, the faults, and for the served ids it lists
    /// their latency, prefix-cache and quality settings (other ids get the defaults). Its own
    /// `time_scale` is replaced by [`ServeConfig::sim_time_scale`].
    pub simulator: SimConfig,
    /// Simulate every backend, also those the policy does not mark `simulated` (`src eval`).
    pub simulate_all_backends: bool,
    /// Relay the simulator's own account of each answer (`x-sim-*`: queueing, prefill and
    /// decode milliseconds) to clients, which otherwise get no backend's internals (`src eval`
    /// reads its latency from them).
    pub relay_sim_account: bool,
    /// Append every decided request to recording files in this directory (`src whatif`).
    pub record: Option<PathBuf>,
    /// Bound on the recording directory, in bytes.
    pub record_max_bytes: u64,
    /// Where the request phases' spans are exported (OTLP/HTTP); `None`: no spans.
    pub otlp: Option<OtlpOptions>,
    /// Bounds on each client connection (slow or hostile clients).
    pub limits: ConnectionLimits,
    /// The bearer tokens that may report outcomes under `session { outcomes = keys }`
    /// (`SRC_OUTCOME_KEYS`, comma-separated).
    pub outcome_keys: Vec<AdminToken>,
    /// Whether the console's live lines carry prompt text (`SRC_CONSOLE_PROMPTS=on`); off, they
    /// carry its length only.
    pub console_prompts: bool,
    /// Lines a second the console's live stream carries at most (`SRC_CONSOLE_LIVE_RATE`;
    /// 0: one per request).
    pub console_live_rate: u32,
    /// Threads that serve the API's HTTP/1.1 connections and the external processor's, each on
    /// its own single-threaded runtime (`server::shards`); 0 serves them on the shared
    /// work-stealing runtime.
    pub shards: usize,
    /// Which request lines are written (`--request-log`): all, failed ones, a sample, none.
    pub request_log: Volume,
    /// Also serve `/metrics` on the API listener (it is always on the admin listener).
    pub metrics_on_api: bool,
    /// Host names the admin listener answers besides the loopback ones (`localhost`,
    /// `127.0.0.1`, `[::1]`): `--admin-host`, and `SRC_ADMIN_HOSTS` (comma-separated).
    pub admin_hosts: Vec<String>,
}

/// The variable naming the vault key file when `--vault-key-file` does not.
pub const VAULT_KEY_FILE_ENV: &str = "SRC_VAULT_KEY_FILE";

/// The key file `SRC_VAULT_KEY_FILE` names, if any.
pub fn vault_key_file_from_env() -> Option<PathBuf> {
    std::env::var_os(VAULT_KEY_FILE_ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
}

/// The variable holding extra admin host names, comma-separated.
pub const ADMIN_HOSTS_ENV: &str = "SRC_ADMIN_HOSTS";

/// The host names of `SRC_ADMIN_HOSTS`.
pub fn admin_hosts_from_env() -> Vec<String> {
    std::env::var(ADMIN_HOSTS_ENV)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Lines a second the console's live stream carries when `SRC_CONSOLE_LIVE_RATE` is not set.
pub const DEFAULT_CONSOLE_LIVE_RATE: u32 = 100;

/// The variable that lets the console show prompt text.
pub const CONSOLE_PROMPTS_ENV: &str = "SRC_CONSOLE_PROMPTS";

/// Whether `SRC_CONSOLE_PROMPTS` asks for prompt text (`on`, `true`, `yes` or `1`).
pub fn console_prompts_from_env() -> bool {
    std::env::var(CONSOLE_PROMPTS_ENV).is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "on" | "true" | "yes" | "1"
        )
    })
}

/// The admin listener's bearer token. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminToken(String);

impl AdminToken {
    /// The environment variable the token is read from.
    pub const ENV: &'static str = "SRC_ADMIN_TOKEN";

    /// A token; `None` for an empty one, which would let anyone in.
    pub fn new(token: impl Into<String>) -> Option<AdminToken> {
        let token = token.into();
        (!token.is_empty()).then_some(AdminToken(token))
    }

    /// The variable of the tokens that may report outcomes (`session { outcomes = keys }`).
    pub const OUTCOME_KEYS_ENV: &'static str = "SRC_OUTCOME_KEYS";

    /// The comma-separated tokens of the variable `name` (empty ones skipped).
    pub fn list_from_env(name: &str) -> Vec<AdminToken> {
        std::env::var(name)
            .map(|v| {
                v.split(',')
                    .filter_map(|t| AdminToken::new(t.trim()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The token of `SRC_ADMIN_TOKEN`, if set and not empty.
    pub fn from_env() -> Option<AdminToken> {
        std::env::var(Self::ENV).ok().and_then(AdminToken::new)
    }

    /// Whether an `Authorization` header value carries this token, compared in constant time so
    /// that the answer's timing says nothing about how much of a guess was right.
    pub fn admits(&self, authorization: Option<&[u8]>) -> bool {
        use subtle::ConstantTimeEq;
        // The scheme is case-insensitive (RFC 9110 §11.1); the token is not.
        let Some(given) = authorization
            .filter(|v| v.len() > 7 && v[..7].eq_ignore_ascii_case(b"bearer "))
            .map(|v| &v[7..])
        else {
            return false;
        };
        given.ct_eq(self.0.as_bytes()).into()
    }

    /// Whether a header value is this token itself (no scheme), compared in constant time.
    pub fn admits_bare(&self, given: Option<&[u8]>) -> bool {
        use subtle::ConstantTimeEq;
        given.is_some_and(|g| bool::from(g.ct_eq(self.0.as_bytes())))
    }
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(***)")
    }
}

impl ServeConfig {
    /// The defaults of `src serve POLICY`.
    pub fn new(policy: impl Into<PathBuf>) -> ServeConfig {
        ServeConfig {
            policy: policy.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 8801)),
            admin: SocketAddr::from(([127, 0, 0, 1], 8802)),
            extproc: None,
            engine: EngineKind::Jit,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            upstream_timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(5),
            backend_ca: None,
            vault_key_file: None,
            probe_interval: Duration::from_secs(10),
            probe_timeout: Duration::from_secs(2),
            reload_debounce: Duration::from_millis(200),
            watch: true,
            drain: DEFAULT_DRAIN,
            sim_time_scale: 1.0,
            admin_token: None,
            simulator: SimConfig::default(),
            simulate_all_backends: false,
            relay_sim_account: false,
            record: None,
            record_max_bytes: crate::record::DEFAULT_MAX_BYTES,
            otlp: None,
            limits: ConnectionLimits::from_env(),
            outcome_keys: AdminToken::list_from_env(AdminToken::OUTCOME_KEYS_ENV),
            console_prompts: console_prompts_from_env(),
            console_live_rate: env_number("SRC_CONSOLE_LIVE_RATE")
                .map_or(DEFAULT_CONSOLE_LIVE_RATE, |n| {
                    u32::try_from(n).unwrap_or(u32::MAX)
                }),
            shards: std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
            request_log: Volume::All,
            metrics_on_api: false,
            admin_hosts: admin_hosts_from_env(),
        }
    }

    /// Both listeners on `127.0.0.1:0` (for tests: the bound addresses come back from
    /// [`crate::spawn`]).
    pub fn ephemeral(policy: impl Into<PathBuf>) -> ServeConfig {
        ServeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..ServeConfig::new(policy)
        }
    }
}

/// The engine names of `--engine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineArg {
    /// The reference interpreter.
    Interp,
    /// Native code compiled with Cranelift.
    Jit,
}

impl From<EngineArg> for EngineKind {
    fn from(e: EngineArg) -> EngineKind {
        match e {
            EngineArg::Interp => EngineKind::Interp,
            EngineArg::Jit => EngineKind::Jit,
        }
    }
}

/// `src serve POLICY [--listen ADDR] [--admin ADDR] [--engine interp|jit] [--max-body-bytes N]
/// [--no-watch] [--backend-ca FILE] [--otlp URL] [--extproc ADDR] [--drain SECONDS]
/// [--request-log all|errors|sample:N|off]`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Policy directory (every `*.sr` file in it) or a single `.sr` file.
    pub policy: PathBuf,
    /// Address of the OpenAI-compatible API (`IP:PORT` or `HOST:PORT`).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN, value_parser = parse_socket_addr)]
    pub listen: SocketAddr,
    /// Address of the admin API (`GET /v1/router/policy`). Bound to anything but a loopback
    /// address it needs a bearer token in the environment (`SRC_ADMIN_TOKEN`).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_ADMIN, value_parser = parse_socket_addr)]
    pub admin: SocketAddr,
    /// Also serve Envoy's external processing API (`ext_proc` v3 over gRPC) on this address,
    /// from the same policy, sessions, models and metrics.
    #[arg(long, value_name = "ADDR", value_parser = parse_socket_addr)]
    pub extproc: Option<SocketAddr>,
    /// Decision engine.
    #[arg(long, value_enum, default_value_t = EngineArg::Jit)]
    pub engine: EngineArg,
    /// Largest accepted request body, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// Do not watch the policy files (SIGHUP still reloads).
    #[arg(long)]
    pub no_watch: bool,
    /// After Ctrl-C or SIGTERM, how long open connections and external processing streams get
    /// to finish before they are closed, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_DRAIN.as_secs())]
    pub drain: u64,
    /// Extra certificate authorities (a PEM bundle) trusted for `https` backends, on top of the
    /// platform's trust store.
    #[arg(long, value_name = "FILE")]
    pub backend_ca: Option<PathBuf>,
    /// The key (a file of 64 hexadecimal digits, `openssl rand -hex 32`) that seals the values a
    /// redacting route keeps along a Responses chain; every router sharing a Redis store needs
    /// the same one. Also `SRC_VAULT_KEY_FILE`.
    #[arg(long, value_name = "FILE")]
    pub vault_key_file: Option<PathBuf>,
    /// Append each request body with its decision, signal values and model-signal results to
    /// rotated files in this directory (API keys and `authorization` are never written).
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// Bound on the `--record` directory; the oldest files are deleted beyond it.
    #[arg(long, value_name = "N", default_value_t = crate::record::DEFAULT_MAX_BYTES)]
    pub record_max_bytes: u64,
    /// Export the request phases' spans to this OTLP/HTTP collector (protobuf), e.g.
    /// `http://127.0.0.1:4318` (`/v1/traces` is added to a URL without a path).
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
    /// Worker threads of the server's async runtime (default: one per core). On a machine
    /// whose cores the router shares with its clients or backends, fewer workers mean fewer
    /// wake-ups passed between threads per request.
    #[arg(long, value_name = "N")]
    pub workers: Option<std::num::NonZeroUsize>,
    /// Threads that serve the API's HTTP/1.1 connections and the external processor's
    /// connections (default: one per core). Each runs its own single-threaded runtime and keeps
    /// a request's work, its backend connection included, on itself. 0 serves them on the
    /// shared runtime of `--workers` threads, as the API's HTTP/2 connections (whose streams
    /// that runtime spreads over its workers) always are.
    #[arg(long, value_name = "N")]
    pub shards: Option<usize>,
    /// Which request lines are written to standard error (about 600 bytes each): `all`,
    /// `errors` (status 400 or more, or an answer that ended early), `sample:N` (one request in
    /// N, and every error) or `off`.
    #[arg(long, value_name = "VOLUME", default_value_t = Volume::All)]
    pub request_log: Volume,
    /// Also serve `/metrics` on the API listener; by default it is only on the admin listener.
    #[arg(long)]
    pub metrics_on_api: bool,
    /// A host name (with or without a port) the admin listener answers besides `localhost`,
    /// `127.0.0.1` and `[::1]`, e.g. the name or address Prometheus scrapes it by; repeatable,
    /// and added to `SRC_ADMIN_HOSTS` (comma-separated). Requests naming another `Host` are
    /// refused (421), which keeps DNS-rebinding pages out of the admin API.
    #[arg(long, value_name = "NAME")]
    pub admin_host: Vec<String>,
}

impl From<ServeArgs> for ServeConfig {
    fn from(args: ServeArgs) -> ServeConfig {
        let defaults = ServeConfig::new(args.policy);
        ServeConfig {
            listen: args.listen,
            admin: args.admin,
            extproc: args.extproc,
            engine: args.engine.into(),
            max_body_bytes: args.max_body_bytes,
            watch: !args.no_watch,
            drain: Duration::from_secs(args.drain),
            backend_ca: args.backend_ca,
            vault_key_file: args.vault_key_file.or_else(vault_key_file_from_env),
            admin_token: AdminToken::from_env(),
            record: args.record,
            record_max_bytes: args.record_max_bytes,
            otlp: args.otlp.map(OtlpOptions::new),
            shards: args.shards.unwrap_or(defaults.shards),
            request_log: args.request_log,
            metrics_on_api: args.metrics_on_api,
            admin_hosts: defaults
                .admin_hosts
                .iter()
                .cloned()
                .chain(args.admin_host)
                .collect(),
            ..defaults
        }
    }
}

/// A numeric tunable from the environment (`SRC_MODEL_*`, `SRC_CACHE_*`, `SRC_SESSION_*`):
/// `None` when unset; a value that is not a number is logged and ignored rather than failing
/// the server.
pub fn env_number(name: &str) -> Option<u64> {
    let raw = std::env::var(name).ok()?;
    match raw.trim().parse() {
        Ok(n) => Some(n),
        Err(_) => {
            tracing::warn!(variable = name, value = %raw, "not a number; ignored");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn the_admin_token_admits_only_its_own_bearer_and_never_shows() {
        let token = AdminToken::new("abc123").unwrap();
        assert!(token.admits(Some(b"Bearer abc123")));
        assert!(token.admits(Some(b"bearer abc123")));
        for refused in [
            None,
            Some(&b"abc123"[..]),
            Some(b"Bearer abc12"),
            Some(b"Bearer abc1234"),
            Some(b"Bearer ABC123"),
            Some(b"Basic abc123"),
            Some(b"Bearer "),
        ] {
            assert!(!token.admits(refused), "{refused:?}");
        }
        assert_eq!(format!("{token:?}"), "AdminToken(***)");
        assert_eq!(AdminToken::new(""), None);
    }

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    #[test]
    fn defaults_match_the_documented_ones() -> Result<(), clap::Error> {
        let cfg = ServeConfig::from(Cli::try_parse_from(["src", "policy/"])?.serve);
        assert_eq!(cfg.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(cfg.admin.to_string(), DEFAULT_ADMIN);
        assert_eq!(cfg.max_body_bytes, 10 * 1024 * 1024);
        assert_eq!(cfg.engine, EngineKind::Jit);
        assert!(cfg.watch);
        assert_eq!(cfg.backend_ca, None);
        assert_eq!(cfg.otlp, None);
        assert_eq!(cfg.extproc, None);
        assert_eq!(cfg.drain, Duration::from_secs(10));
        assert_eq!(cfg.request_log, Volume::All);
        Ok(())
    }

    #[test]
    fn flags_override_defaults() -> Result<(), clap::Error> {
        let cli = Cli::try_parse_from([
            "src",
            "p.sr",
            "--listen",
            "0.0.0.0:9000",
            "--admin",
            "127.0.0.1:9001",
            "--engine",
            "interp",
            "--max-body-bytes",
            "1024",
            "--no-watch",
            "--backend-ca",
            "ca.pem",
            "--vault-key-file",
            "vault.key",
            "--otlp",
            "http://127.0.0.1:4318",
            "--extproc",
            "127.0.0.1:9002",
            "--drain",
            "25",
            "--request-log",
            "sample:100",
        ])?;
        let cfg = ServeConfig::from(cli.serve);
        assert_eq!(cfg.listen.port(), 9000);
        assert_eq!(cfg.admin.port(), 9001);
        assert_eq!(cfg.engine, EngineKind::Interp);
        assert_eq!(cfg.max_body_bytes, 1024);
        assert!(!cfg.watch);
        assert_eq!(cfg.backend_ca, Some(PathBuf::from("ca.pem")));
        assert_eq!(cfg.vault_key_file, Some(PathBuf::from("vault.key")));
        assert_eq!(
            cfg.otlp.map(|o| o.endpoint),
            Some("http://127.0.0.1:4318".to_owned())
        );
        assert_eq!(cfg.extproc.map(|a| a.port()), Some(9002));
        assert_eq!(cfg.drain, Duration::from_secs(25));
        assert_eq!(cfg.request_log.to_string(), "sample:100");
        Ok(())
    }

    #[test]
    fn every_address_flag_takes_a_host_name() -> Result<(), clap::Error> {
        let cli = Cli::try_parse_from([
            "src",
            "p.sr",
            "--listen",
            "localhost:9000",
            "--admin",
            "localhost:9001",
            "--extproc",
            "localhost:9002",
        ])?;
        let cfg = ServeConfig::from(cli.serve);
        let extproc = cfg.extproc.unwrap();
        for (addr, port) in [(cfg.listen, 9000), (cfg.admin, 9001), (extproc, 9002)] {
            assert!(addr.ip().is_loopback(), "{addr}");
            assert_eq!(addr.port(), port);
        }
        Ok(())
    }

    #[test]
    fn addresses_are_ip_or_host_with_a_port() {
        assert_eq!(
            parse_socket_addr("[::1]:80").map(|a| a.to_string()),
            Ok("[::1]:80".to_string())
        );
        assert!(parse_socket_addr("localhost:0").is_ok_and(|a| a.ip().is_loopback()));
        let no_port = parse_socket_addr("localhost").unwrap_err();
        assert!(no_port.contains("no port"), "{no_port}");
        let bad_port = parse_socket_addr("localhost:http").unwrap_err();
        assert!(bad_port.contains("not a port number"), "{bad_port}");
        let unknown = parse_socket_addr("no-such-host.invalid:80").unwrap_err();
        assert!(
            unknown.contains("cannot resolve `no-such-host.invalid`"),
            "{unknown}"
        );
    }

    #[test]
    fn env_numbers_are_read_and_garbage_is_ignored() {
        // Names no other test or component reads, so setting them races with nothing.
        std::env::set_var("SRC_TEST_ENV_NUMBER_SET", " 42 ");
        std::env::set_var("SRC_TEST_ENV_NUMBER_BAD", "forty-two");
        assert_eq!(env_number("SRC_TEST_ENV_NUMBER_SET"), Some(42));
        assert_eq!(env_number("SRC_TEST_ENV_NUMBER_BAD"), None);
        assert_eq!(env_number("SRC_TEST_ENV_NUMBER_UNSET"), None);
    }

    #[test]
    fn bad_engine_is_a_usage_error() {
        assert!(Cli::try_parse_from(["src", "p", "--engine", "gpu"]).is_err());
    }

    #[test]
    fn a_request_log_volume_that_is_none_is_a_usage_error() {
        for bad in ["sometimes", "sample:0", "sample"] {
            let err = Cli::try_parse_from(["src", "p", "--request-log", bad]).err();
            let Some(err) = err else {
                panic!("`{bad}` was accepted");
            };
            assert!(err.to_string().contains("sample:N"), "{err}");
        }
    }
}
