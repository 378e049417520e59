//! Hot reload: the policy files are watched (debounced) and SIGHUP reloads on demand; the new
//! policy is compiled on a blocking thread, off the request path, and swapped in whole.
//!
//! A failed reload keeps the old policy serving: its diagnostics are logged rendered, counted in
//! metrics, and shown by the admin endpoint until a later reload succeeds. Requests already in
//! flight finish on the snapshot they started with.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::app::App;
use crate::hooks::Sessions;
use crate::policy_store::{compile_policy, LoadFailure, Snapshot};
use crate::telemetry::ResultLabels;

/// Values of the reload metric's `result` label.
pub mod result {
    pub const OK: &str = crate::policy_store::RELOAD_OK;
    pub const ERROR: &str = crate::policy_store::RELOAD_ERROR;
    pub const UNCHANGED: &str = crate::policy_store::RELOAD_UNCHANGED;
}

/// Logs that `session`/`protect` are declared but not enforced by this server's components.
pub fn warn_unenforced(snapshot: &Snapshot, sessions: &dyn Sessions) {
    let policy = snapshot.policy();
    if (policy.session.is_some() || policy.protect.is_some()) && !sessions.enforces() {
        tracing::warn!(
            generation = snapshot.generation,
            "the policy declares `session`/`protect`, which this server does not enforce yet: \
             every request is routed on its own"
        );
    }
}

/// The policy's files cannot be watched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot watch the policy at `{path}`: {detail}")]
pub struct WatchError {
    pub path: String,
    pub detail: String,
}

/// Starts the reload task: file events (if watching), SIGHUP, and explicit requests on
/// `requests`. Each successful reload sends the new generation on `reloaded`.
pub fn start(
    app: Arc<App>,
    requests: mpsc::Receiver<()>,
    reloaded: watch::Sender<u64>,
    stop: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, WatchError> {
    let (fs_tx, fs_rx) = mpsc::channel::<()>(64);
    let watcher = if app.cfg.watch {
        Some(watch_policy(&app.cfg.policy, fs_tx)?)
    } else {
        None
    };
    // Registered before the server is reported started, so a SIGHUP sent right after start
    // reloads instead of taking the default action (terminating the process).
    let hangup = hangup_signal();
    Ok(tokio::spawn(run(
        app, watcher, hangup, fs_rx, requests, reloaded, stop,
    )))
}

/// The symlink the kubelet swaps to update a ConfigMap volume.
const CONFIG_MAP_SWAP: &str = "..data";

/// Watches the policy directory (a single file's parent, filtered to that file): editors save
/// by renaming, which would end a watch on the file itself.
fn watch_policy(
    policy: &Path,
    events: mpsc::Sender<()>,
) -> Result<notify::RecommendedWatcher, WatchError> {
    let watch_error = |err: notify::Error| WatchError {
        path: policy.display().to_string(),
        detail: err.to_string(),
    };
    let (dir, only): (PathBuf, Option<PathBuf>) = if policy.is_dir() {
        (policy.to_path_buf(), None)
    } else {
        let dir = match policy.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        (dir, policy.file_name().map(PathBuf::from))
    };
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if matches!(event.kind, EventKind::Access(_)) {
            return;
        }
        let relevant = event.paths.iter().any(|p| {
            // A Kubernetes ConfigMap volume updates by renaming a new `..data` symlink over the
            // old one; the policy's own paths (symlinks through `..data`) see no event at all.
            p.file_name() == Some(CONFIG_MAP_SWAP.as_ref())
                || match &only {
                    Some(name) => p.file_name() == Some(name.as_os_str()),
                    None => matches!(
                        p.extension().and_then(|e| e.to_str()),
                        Some("sr") | Some("json")
                    ),
                }
        });
        if relevant {
            // A full queue already holds a pending reload; dropping this event loses nothing.
            let _ = events.try_send(());
        }
    })
    .map_err(watch_error)?;
    watcher
        .watch(&dir, RecursiveMode::NonRecursive)
        .map_err(watch_error)?;
    Ok(watcher)
}

async fn run(
    app: Arc<App>,
    watcher: Option<notify::RecommendedWatcher>,
    mut hangup: Hangup,
    mut fs_events: mpsc::Receiver<()>,
    mut requests: mpsc::Receiver<()>,
    reloaded: watch::Sender<u64>,
    mut stop: watch::Receiver<bool>,
) {
    // Kept alive for as long as the task runs.
    let _watcher = watcher;
    loop {
        tokio::select! {
            Some(()) = fs_events.recv() => {
                // Debounce: editors write several events per save; wait for a quiet period.
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep(app.cfg.reload_debounce) => break,
                        more = fs_events.recv() => if more.is_none() { break },
                    }
                }
                reload_once(&app, &reloaded, "file change").await;
            }
            Some(()) = requests.recv() => reload_once(&app, &reloaded, "request").await,
            Some(()) = recv_hangup(&mut hangup) => reload_once(&app, &reloaded, "SIGHUP").await,
            _ = stop.changed() => break,
        }
    }
}

#[cfg(unix)]
type Hangup = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangup = Option<()>;

#[cfg(unix)]
fn hangup_signal() -> Hangup {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(err) => {
            tracing::warn!(%err, "cannot listen for SIGHUP; reload on file change only");
            None
        }
    }
}

#[cfg(not(unix))]
fn hangup_signal() -> Hangup {
    None
}

#[cfg(unix)]
async fn recv_hangup(hangup: &mut Hangup) -> Option<()> {
    match hangup {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

#[cfg(not(unix))]
async fn recv_hangup(_hangup: &mut Hangup) -> Option<()> {
    std::future::pending().await
}

/// Recompiles the policy and swaps it in when it compiled and changed.
pub async fn reload_once(app: &Arc<App>, reloaded: &watch::Sender<u64>, cause: &str) {
    let compiled = {
        let path = app.cfg.policy.clone();
        let engine = app.cfg.engine;
        let models = Arc::clone(&app.components.models);
        tokio::task::spawn_blocking(move || compile_policy(&path, engine, models.as_ref())).await
    };
    let compiled = match compiled {
        Ok(Ok(compiled)) => compiled,
        Ok(Err(failure)) => return fail(app, failure, cause),
        Err(join) => {
            return fail(
                app,
                LoadFailure::from_message(format!("the compile task failed: {join}")),
                cause,
            )
        }
    };
    let current = app.store.current();
    if compiled.content_hash == current.content_hash {
        app.store.clear_error();
        count(app, result::UNCHANGED);
        tracing::info!(cause, generation = current.generation, "policy unchanged");
        return;
    }
    let generation = app.store.next_generation();
    let snapshot = match Snapshot::build(
        compiled,
        generation,
        &app.sims,
        app.cfg.upstream_timeout,
        app.cfg.sim_time_scale,
    )
    .await
    {
        Ok(s) => s,
        Err(failure) => return fail(app, failure, cause),
    };
    warn_unenforced(&snapshot, app.components.sessions.as_ref());
    let hash = snapshot.content_hash.clone();
    app.store.swap(snapshot);
    app.telemetry.generation.set(generation);
    count(app, result::OK);
    tracing::info!(cause, generation, content_hash = %hash, "policy reloaded");
    let _ = reloaded.send(generation);
}

fn fail(app: &App, failure: LoadFailure, cause: &str) {
    count(app, result::ERROR);
    // Not `message`: that is the event's own text, and a JSON line must not hold a key twice.
    tracing::error!(
        cause,
        error = %failure.message,
        diagnostics = %failure.human(),
        "policy reload failed; the previous policy keeps serving"
    );
    app.store.record_error(failure);
}

fn count(app: &App, result: &'static str) {
    app.telemetry
        .reloads
        .get_or_create(&ResultLabels { result })
        .inc();
}
