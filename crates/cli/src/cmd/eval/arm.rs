//! Running one arm: its policy served in this process by `src serve`'s own server, every
//! backend on the built-in simulator, and the fixture's sessions replayed through it.
//!
//! Each arm gets a fresh server, so fresh pins and fresh prefix caches: arms share nothing but
//! the sessions and the seed. Simulated time is not slept (time scale 0) and latency is read
//! from the simulator's own account of each answer (`x-sim-prefill-ms` + `x-sim-decode-ms`,
//! which the arm's server relays for it: `ServeConfig::relay_sim_account`), so
//! the report does not depend on how busy this machine is. Sessions run one after another:
//! sessions share a model's prefix cache, and if they ran at once, which of them paid for a
//! shared prefix would depend on thread timing, and the same seed would not give the same report.

use crate::cmd::replay::fixture::Fixture;
use crate::cmd::replay::report::TurnRecord;
use crate::cmd::replay::send::Sender;
use crate::cmd::replay::{replay_answers, Identity, DEFAULT_SESSION_HEADER};
use anyhow::{anyhow, Context, Result};
use src_compiler::hir::CheckedPolicy;
use src_runtime::headers::{SIM_DECODE_MS, SIM_PREFILL_MS};
use src_runtime::log::RequestLog;
use src_runtime::sim::SimConfig;
use src_runtime::{Components, ServeConfig};
use std::path::PathBuf;

/// One arm as given on the command line.
#[derive(Debug, Clone)]
pub struct ArmSpec {
    pub name: String,
    pub policy: PathBuf,
}

/// A turn as an arm answered it.
#[derive(Debug, Clone)]
pub struct Observed {
    pub record: TurnRecord,
    /// Simulated prefill and decode milliseconds; `None` when the simulator did not answer.
    pub simulated_ms: Option<f64>,
}

/// Serves `policy` on the simulator and replays `fixture` through it.
pub async fn run_arm(
    spec: &ArmSpec,
    fixture: &Fixture,
    simulator: &SimConfig,
    simulate_all: bool,
) -> Result<Vec<Observed>> {
    let cfg = ServeConfig {
        watch: false,
        sim_time_scale: 0.0,
        simulator: simulator.clone(),
        simulate_all_backends: simulate_all,
        relay_sim_account: true,
        ..ServeConfig::ephemeral(&spec.policy)
    };
    let server = src_runtime::spawn(cfg, Components::with_log(RequestLog::Off))
        .await
        .map_err(|e| {
            anyhow!(
                "arm `{}`: cannot serve `{}`: {e}",
                spec.name,
                spec.policy.display()
            )
        })?;
    let sender = Sender::new(&format!("http://{}/v1", server.addr))
        .map_err(|e| anyhow!("arm `{}`: {e}", spec.name))?;
    let identity = Identity {
        header: DEFAULT_SESSION_HEADER.to_string(),
        prefix: format!("eval-{}-", spec.name),
        extra: Vec::new(),
    };
    let answers = replay_answers(&sender, fixture, &identity).await;
    server
        .shutdown()
        .await
        .with_context(|| format!("arm `{}`: the server did not stop cleanly", spec.name))?;
    Ok(answers
        .into_iter()
        .map(|(record, answer)| {
            let ms = |name: &str| -> Option<f64> { answer.as_ref()?.header(name)?.parse().ok() };
            let simulated_ms = match (ms(SIM_PREFILL_MS), ms(SIM_DECODE_MS)) {
                (Some(prefill), Some(decode)) => Some(prefill + decode),
                _ => None,
            };
            Observed {
                record,
                simulated_ms,
            }
        })
        .collect())
}

/// The backends of `policy` that are not simulated: an arm may only run on the simulator.
pub fn real_backends(policy: &CheckedPolicy) -> Vec<String> {
    policy
        .backends
        .iter()
        .filter(|b| !b.simulated)
        .map(|b| b.name.clone())
        .collect()
}
