//! A built-in OpenAI-compatible backend that needs no GPU: `backend x { simulated = true }`
//! serves its models from here, `src sim --listen ADDR` runs it alone, and end-to-end tests use
//! it as an upstream they control.
//!
//! Per served model it simulates what a routing layer can observe of a real inference server: a
//! queue in front of a concurrency limit, prefill time that only uncached prompt tokens cost (a
//! block-level prefix cache reported as `cached_tokens`), paced decoding, and injected faults.
//! Answers are deterministic under the seed and start with `[served-id]` so tests can see which
//! model answered; every request is recorded for tests to inspect. A request's `n`, `stop` and
//! a `tool_choice` that forces a call (`required`, or a named function) shape the answer as
//! they would a real server's; streams follow OpenAI's published event sequences (the `stream`
//! module); ids are never reused, across restarts too.
//!
//! [`quality`] declares, per served model, how likely a simulated agent turn is to be correct;
//! `src eval` reads it to report task success, always as simulation.
//!
//! Endpoints: `POST /v1/chat/completions`, `POST /v1/responses` (both with `stream`),
//! `GET /v1/models`, `GET /health`, `GET /metrics`, and `GET`/`DELETE /sim/requests`.

mod answer;
mod cache;
mod clock;
mod config;
mod engine;
mod fault;
mod log;
pub mod quality;
mod request;
mod server;
mod stats;
mod stream;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use config::{SimConfig, SimConfigError, SimFaults, SimModel};
pub use engine::ModelLoad;
pub use log::ReceivedRequest;
pub use quality::{Difficulty, SimQuality, TaskState};

use server::SimState;

/// Serves `cfg` on `listener` until `shutdown` completes. An invalid configuration is an
/// `InvalidInput` error before anything is served.
pub async fn serve(
    listener: TcpListener,
    cfg: SimConfig,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let state = Arc::new(checked_state(cfg)?);
    server::run(listener, state, shutdown).await
}

fn checked_state(cfg: SimConfig) -> io::Result<SimState> {
    cfg.validate()
        .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error))?;
    Ok(SimState::new(cfg))
}

/// A simulator running in the background on `127.0.0.1:0`, for tests and for the proxy's
/// simulated backends. Dropping the handle stops it.
#[derive(Debug)]
pub struct SimHandle {
    /// The bound address.
    pub addr: SocketAddr,
    state: Arc<SimState>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<io::Result<()>>>,
}

impl SimHandle {
    /// Validates `cfg`, binds a free loopback port and starts serving.
    pub async fn spawn(cfg: SimConfig) -> io::Result<SimHandle> {
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        SimHandle::spawn_on(listener, cfg)
    }

    /// Starts serving on a listener the caller bound.
    pub fn spawn_on(listener: TcpListener, cfg: SimConfig) -> io::Result<SimHandle> {
        let addr = listener.local_addr()?;
        let state = Arc::new(checked_state(cfg)?);
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server::run(listener, Arc::clone(&state), async move {
            // Either an explicit stop or a dropped handle ends the server.
            let _ = stopped.await;
        }));
        Ok(SimHandle {
            addr,
            state,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far (oldest first, up to the configured log limit).
    pub fn received(&self) -> Vec<ReceivedRequest> {
        self.state.log.snapshot()
    }

    pub fn clear_received(&self) {
        self.state.log.clear();
    }

    /// Slots in use and queue length of a served model; `None` for an unknown id.
    pub fn load(&self, model: &str) -> Option<ModelLoad> {
        self.state.models.get(model).map(|m| m.load())
    }

    /// Blocks held in a served model's prefix cache; `None` for an unknown id.
    pub fn cached_blocks(&self, model: &str) -> Option<usize> {
        self.state.models.get(model).map(|m| m.cached_blocks())
    }

    /// Stops accepting, drops open connections and waits for the server task.
    pub async fn shutdown(mut self) -> io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => task
                .await
                .map_err(|error| io::Error::other(format!("simulator task failed: {error}")))?,
            None => Ok(()),
        }
    }
}
