//! `src serve` and `src sim`: the long-running servers, on a multi-threaded tokio runtime, until
//! Ctrl-C or SIGTERM.

use crate::Outcome;
use anyhow::{Context, Result};
use src_runtime::sim::{self, SimConfig};
use src_runtime::{ServeArgs, ServeConfig};
use std::net::SocketAddr;
use std::path::PathBuf;

fn runtime() -> Result<tokio::runtime::Runtime> {
    runtime_with(None)
}

/// A multi-threaded runtime with `workers` threads (tokio's default, one per core, when `None`).
fn runtime_with(workers: Option<std::num::NonZeroUsize>) -> Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = workers {
        builder.worker_threads(n.get());
    }
    builder
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Completes on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}

pub fn serve(args: ServeArgs) -> Result<Outcome> {
    src_runtime::log::init_json_logging();
    let workers = args.workers;
    let cfg = ServeConfig::from(args);
    runtime_with(workers)?.block_on(async move {
        src_runtime::serve(cfg, shutdown_signal())
            .await
            .context("src serve stopped")
    })?;
    Ok(Outcome::Success)
}

#[derive(clap::Args)]
pub struct SimArgs {
    /// Address to listen on (`IP:PORT` or `HOST:PORT`).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8000", value_parser = src_runtime::config::parse_socket_addr)]
    listen: SocketAddr,
    /// A JSON simulator configuration (models, latency model, faults).
    #[arg(long, value_name = "FILE.json", conflicts_with = "model")]
    config: Option<PathBuf>,
    /// A served model id (repeatable) with the default latency model.
    #[arg(long)]
    model: Vec<String>,
}

pub fn sim(args: SimArgs) -> Result<Outcome> {
    let cfg = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read `{}`", path.display()))?;
            serde_json::from_str::<SimConfig>(&text)
                .with_context(|| format!("`{}` is not a simulator configuration", path.display()))?
        }
        None if args.model.is_empty() => SimConfig::serving(["sim-model".to_string()]),
        None => SimConfig::serving(args.model.clone()),
    };
    runtime()?.block_on(async move {
        let listener = src_runtime::server::bind(args.listen).await?;
        let addr = src_runtime::server::local_addr(&listener, args.listen)?;
        errln!("simulated OpenAI backend on http://{addr}/v1")?;
        sim::serve(listener, cfg, shutdown_signal())
            .await
            .context("src sim stopped")
    })?;
    Ok(Outcome::Success)
}
