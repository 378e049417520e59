//! `src serve`: starts the API and admin listeners (and, when asked, Envoy's external processing
//! API) over one compiled policy, keeps the policy fresh (file watch, SIGHUP), probes backends,
//! and shuts down gracefully.
//!
//! [`serve`] runs until its shutdown future completes; [`spawn`] starts the same server in the
//! background and returns the bound addresses (tests bind `127.0.0.1:0`).

mod accept;
pub mod admin;
mod admin_guard;
pub mod health;
pub mod outcome_access;
mod processor;
pub mod routes;
mod shards;
pub mod surface;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit};
use tokio::task::JoinHandle;

use src_compiler::load::io_reason;

use crate::app::{App, Components};
use crate::backends::SimPool;
use crate::cache::{CacheLayer, CacheOptions};
use crate::config::ServeConfig;
use crate::otel::Spans;
use crate::policy_store::{compile_policy, LoadFailure, PolicyStore, Snapshot};
use crate::readiness::Readiness;
use crate::reload;
use crate::telemetry::Telemetry;
use crate::upstream::Upstream;
use shards::Shards;

/// Queued spans get this long to reach the collector at shutdown.
const SPAN_DRAIN: Duration = Duration::from_secs(3);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The cause is worded in the message, so it is not also a `source`: a chain printed whole
    /// (`{:#}`) would say it twice.
    #[error("cannot listen on {addr}: {}", io_reason(.cause))]
    Bind {
        addr: SocketAddr,
        cause: std::io::Error,
    },
    #[error("{0}")]
    Policy(LoadFailure),
    #[error("cannot watch the policy at `{path}`: {detail}")]
    Watch { path: String, detail: String },
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    #[error("cannot record requests in `{dir}`: {}", io_reason(.cause))]
    Record { dir: String, cause: std::io::Error },
    #[error(transparent)]
    Otlp(#[from] crate::otel::OtlpError),
    #[error("server task failed: {0}")]
    Task(String),
    #[error(
        "the admin listener {0} is not on a loopback address, and no admin token is set: \
         set SRC_ADMIN_TOKEN, or bind it to 127.0.0.1"
    )]
    AdminUnprotected(SocketAddr),
    #[error(transparent)]
    VaultKey(#[from] crate::responses_state::seal::VaultKeyError),
    #[error(
        "the policy redacts and keeps Responses state in a shared store ({0}), so every router \
         must seal the values it keeps with the same key: give `--vault-key-file` (or \
         SRC_VAULT_KEY_FILE) a file of 64 hexadecimal digits (`openssl rand -hex 32`)"
    )]
    VaultKeyMissing(String),
}

/// Serves until `shutdown` completes, with the standard components (no model runtime, no
/// sessions, request lines on stderr).
pub async fn serve(cfg: ServeConfig, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
    let handle = spawn(cfg, Components::standard()).await?;
    match handle.extproc_addr {
        Some(extproc) => tracing::info!(
            listen = %handle.addr,
            admin = %handle.admin_addr,
            extproc = %extproc,
            "serving"
        ),
        None => tracing::info!(
            listen = %handle.addr,
            admin = %handle.admin_addr,
            "serving"
        ),
    }
    shutdown.await;
    handle.shutdown().await
}

/// A running server.
pub struct ServerHandle {
    /// Where the OpenAI-compatible API listens.
    pub addr: SocketAddr,
    /// Where the admin API listens.
    pub admin_addr: SocketAddr,
    /// Where Envoy's external processing API listens, when asked for.
    pub extproc_addr: Option<SocketAddr>,
    app: Arc<App>,
    stop: watch::Sender<bool>,
    reload_now: tokio::sync::mpsc::Sender<()>,
    tasks: Vec<JoinHandle<()>>,
    /// The serving threads of the API's HTTP/1.1 connections and the processor's connections;
    /// stopped once both listeners have drained.
    shards: Option<Arc<Shards>>,
}

impl ServerHandle {
    /// The generation of the policy being served.
    pub fn generation(&self) -> u64 {
        self.app.store.current().generation
    }

    /// The simulators serving the current policy's `simulated = true` backends.
    pub fn simulators(&self) -> Vec<Arc<crate::sim::SimHandle>> {
        self.app
            .store
            .current()
            .endpoints
            .iter()
            .filter_map(|e| e.simulator().cloned())
            .collect()
    }

    /// Exports every span ended so far (tests call it rather than wait for the batch delay).
    pub async fn flush_spans(&self) {
        self.app.telemetry.spans.flush().await;
    }

    /// Asks for a reload, as SIGHUP does.
    pub async fn reload(&self) {
        let _ = self.reload_now.send(()).await;
    }

    /// Stops accepting, lets in-flight requests finish (up to a bound) and waits for the tasks.
    pub async fn shutdown(self) -> Result<(), ServeError> {
        let _ = self.stop.send(true);
        for task in self.tasks {
            task.await.map_err(|e| ServeError::Task(e.to_string()))?;
        }
        if let Some(shards) = self.shards {
            // Joining threads blocks; the shards' queues close and what they still run (a
            // connection past the drain period, idle backend connections) is dropped.
            tokio::task::spawn_blocking(move || shards.stop())
                .await
                .map_err(|e| ServeError::Task(e.to_string()))?;
        }
        // The last requests' lines go out before the process does.
        let log = self.app.components.log.clone();
        tokio::task::spawn_blocking(move || log.flush())
            .await
            .map_err(|e| ServeError::Task(e.to_string()))?;
        // So do the last spans, within a bound (a collector that is down must not hang exit).
        self.app.telemetry.spans.shutdown(SPAN_DRAIN).await;
        Ok(())
    }
}

/// Loads the policy, binds both listeners and starts serving in the background.
pub async fn spawn(cfg: ServeConfig, components: Components) -> Result<ServerHandle, ServeError> {
    let mut components = components;
    components.log = components.log.with_volume(cfg.request_log);
    if !cfg.admin.ip().is_loopback() && cfg.admin_token.is_none() {
        return Err(ServeError::AdminUnprotected(cfg.admin));
    }
    let tls = crate::tls::client_config(cfg.backend_ca.as_deref())?;
    let sims = SimPool::configured(cfg.simulator.clone(), cfg.simulate_all_backends)
        .relaying_account(cfg.relay_sim_account);
    let first = {
        let path = cfg.policy.clone();
        let engine = cfg.engine;
        let models = Arc::clone(&components.models);
        tokio::task::spawn_blocking(move || compile_policy(&path, engine, models.as_ref()))
            .await
            .map_err(|e| ServeError::Task(e.to_string()))?
            .map_err(ServeError::Policy)?
    };
    let snapshot = Snapshot::build(first, 1, &sims, cfg.upstream_timeout, cfg.sim_time_scale)
        .await
        .map_err(ServeError::Policy)?;
    reload::warn_unenforced(&snapshot, components.sessions.as_ref());
    let recorder = match &cfg.record {
        None => None,
        Some(dir) => Some(
            crate::record::Recorder::start(dir, cfg.record_max_bytes).map_err(|cause| {
                ServeError::Record {
                    dir: dir.display().to_string(),
                    cause,
                }
            })?,
        ),
    };
    let api_listener = bind(cfg.listen).await?;
    let admin_listener = bind(cfg.admin).await?;
    let addr = local_addr(&api_listener, cfg.listen)?;
    let admin_addr = local_addr(&admin_listener, cfg.admin)?;
    let extproc_listener = match cfg.extproc {
        Some(asked) => {
            let listener = bind(asked).await?;
            let addr = local_addr(&listener, asked)?;
            Some((listener, addr))
        }
        None => None,
    };
    let extproc_addr = extproc_listener.as_ref().map(|(_, addr)| *addr);
    let cache = CacheLayer::new(Arc::clone(&components.models), CacheOptions::from_env())
        .with_links(Arc::clone(&components.links));
    let cooldowns = Arc::new(crate::cooldown::Cooldowns::with_links(Arc::clone(
        &components.links,
    )));
    let responses = crate::responses_state::ResponseStates::new(
        Arc::new(crate::store::SystemClock),
        crate::responses_state::ResponseOptions::from_env(),
    )
    .with_links(Arc::clone(&components.links));
    let vault_key = cfg.vault_key_file.as_deref();
    let responses = match vault_key.map(crate::responses_state::VaultKey::from_file) {
        Some(key) => responses.with_vault_key(key?),
        // The store's kind only: a Redis address may carry a password.
        None if crate::responses_state::vault::shared(snapshot.policy()) => {
            return Err(ServeError::VaultKeyMissing("redis".to_owned()))
        }
        None => responses,
    };
    let budgets = crate::budget::BudgetLayer::new(
        Arc::clone(&components.links),
        crate::store::Timeouts::from_lookup(crate::config::env_number),
    );
    let readiness = Readiness::with_cooldowns(Arc::clone(&cooldowns));
    let mut telemetry = Telemetry::with_extra(|registry| {
        cooldowns.register_metrics(registry);
        responses.register_metrics(registry);
        readiness.register_metrics(registry);
        components.sessions.register_metrics(registry);
        components.models.register_metrics(registry);
        cache.register_metrics(registry);
        budgets.metrics().register(registry);
        components.links.register_metrics(registry);
    });
    if let Some(otlp) = &cfg.otlp {
        // The collector is reached like a backend: same pooled client, same trust store.
        let client = Upstream::new(cfg.connect_timeout, tls.clone(), 0);
        let drops = crate::otel::export::Drops(telemetry.spans_dropped.clone());
        telemetry.spans = Spans::export(otlp, client, tokio::runtime::Handle::current(), drops)?;
        tracing::info!(collector = %otlp.endpoint, "exporting request spans over OTLP/HTTP");
    }
    telemetry.live = crate::watch::live::LiveFeed::new(cfg.console_prompts, cfg.console_live_rate);
    let telemetry = Arc::new(telemetry);
    telemetry.generation.set(snapshot.generation);
    let app = Arc::new(App {
        upstream: Upstream::new(cfg.connect_timeout, tls, cfg.shards),
        store: PolicyStore::new(snapshot),
        telemetry,
        readiness,
        components,
        sims,
        cache,
        recorder,
        responses,
        cooldowns,
        budgets,
        cfg,
    });
    let (stop, stopped) = watch::channel(false);
    let (reloaded_tx, reloaded_rx) = watch::channel(1u64);
    let (reload_now, reload_rx) = tokio::sync::mpsc::channel(4);
    let watcher = reload::start(Arc::clone(&app), reload_rx, reloaded_tx, stopped.clone())
        .map_err(|reload::WatchError { path, detail }| ServeError::Watch { path, detail })?;
    let shards = start_shards(app.cfg.shards);
    let mut tasks = vec![
        tokio::spawn(accept_loop(
            api_listener,
            Arc::clone(&app),
            Listener::Api,
            shards.clone(),
            stopped.clone(),
        )),
        tokio::spawn(accept_loop(
            admin_listener,
            Arc::clone(&app),
            Listener::Admin,
            None,
            stopped.clone(),
        )),
        tokio::spawn(health::probe_loop(
            Arc::clone(&app),
            reloaded_rx,
            stopped.clone(),
        )),
        watcher,
        tokio::spawn(crate::console::sample_loop(
            Arc::clone(&app),
            stopped.clone(),
        )),
    ];
    if let Some((listener, _)) = extproc_listener {
        let service = hyper_util::service::TowerToHyperService::new(crate::extproc::service(
            Arc::clone(&app),
        ));
        tasks.push(tokio::spawn(processor::serve(
            listener,
            service,
            shards.clone(),
            app.cfg.drain,
            stopped,
        )));
    }
    Ok(ServerHandle {
        addr,
        admin_addr,
        extproc_addr,
        app,
        stop,
        reload_now,
        tasks,
        shards,
    })
}

/// The serving shards `--shards` asks for; none when it asks for 0 or they cannot start.
fn start_shards(count: usize) -> Option<Arc<Shards>> {
    if count == 0 {
        return None;
    }
    match Shards::start(count) {
        Ok(shards) => Some(Arc::new(shards)),
        Err(err) => {
            // Still a working server: every connection on the shared runtime.
            tracing::warn!(%err, "cannot start the serving shards; serving without them");
            None
        }
    }
}

/// Binds a listener, with the error `src serve` and `src sim` report when that fails.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|cause| ServeError::Bind { addr, cause })
}

/// Where `listener` listens (the port the system chose for port 0).
pub fn local_addr(listener: &TcpListener, asked: SocketAddr) -> Result<SocketAddr, ServeError> {
    listener
        .local_addr()
        .map_err(|cause| ServeError::Bind { addr: asked, cause })
}

#[derive(Clone, Copy)]
enum Listener {
    Api,
    Admin,
}

async fn accept_loop(
    listener: TcpListener,
    app: Arc<App>,
    kind: Listener,
    shards: Option<Arc<Shards>>,
    mut stop: watch::Receiver<bool>,
) {
    let limits = app.cfg.limits;
    let builder = accept::builder(&limits);
    let open = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    loop {
        // At the connection bound, stop accepting: new clients wait in the kernel's backlog
        // instead of each costing a task and buffers.
        let permit = tokio::select! {
            permit = Arc::clone(&open).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            _ = stop.changed() => break,
        };
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let connection = Connection {
                        app: Arc::clone(&app),
                        kind,
                        builder: builder.clone(),
                        watcher: graceful.watcher(),
                        permit,
                    };
                    tokio::spawn(connection.serve(stream, shards.clone()));
                }
                Err(err) => {
                    // Out of file descriptors and similar: back off instead of spinning.
                    tracing::warn!(%err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = stop.changed() => break,
        }
    }
    drop(listener);
    if tokio::time::timeout(app.cfg.drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the drain period; closing them");
    }
}

/// An accepted connection and what serving it needs.
struct Connection {
    app: Arc<App>,
    kind: Listener,
    builder: auto::Builder<TokioExecutor>,
    watcher: Watcher,
    permit: OwnedSemaphorePermit,
}

impl Connection {
    /// Serves the connection: an HTTP/1.1 one on a shard when there are shards (one request at
    /// a time gains nothing from another thread), an HTTP/2 one here on the shared runtime, whose
    /// workers can take its concurrent streams.
    async fn serve(self, stream: TcpStream, shards: Option<Arc<Shards>>) {
        let limits = self.app.cfg.limits;
        // A client that connects and sends nothing (or stalls inside the HTTP/2 preface) is
        // dropped before hyper's own head timeout applies.
        let Some(protocol) = accept::first_bytes(&stream, limits.header_read_timeout).await else {
            return;
        };
        let shards = match (protocol, shards) {
            (accept::Protocol::Http1, Some(shards)) => shards,
            _ => return self.run(stream).await,
        };
        // The socket leaves this runtime's reactor and joins the shard's.
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(err) => {
                tracing::warn!(%err, "cannot hand a connection to a shard");
                return;
            }
        };
        shards.dispatch(move || async move {
            match TcpStream::from_std(stream) {
                Ok(stream) => self.run(stream).await,
                Err(err) => tracing::warn!(%err, "a shard cannot take a connection"),
            }
        });
    }

    async fn run(self, stream: TcpStream) {
        let Connection {
            app,
            kind,
            builder,
            watcher,
            permit,
        } = self;
        let _permit = permit;
        let service = service_fn(move |request| {
            let app = Arc::clone(&app);
            async move {
                Ok::<_, Infallible>(match kind {
                    Listener::Api => routes::api(app, request).await,
                    Listener::Admin => routes::admin(app, request).await,
                })
            }
        });
        let connection = builder
            .serve_connection(TokioIo::new(stream), service)
            .into_owned();
        // Connection errors (a client that vanished) are the client's business.
        let _ = watcher.watch(connection).await;
    }
}
