//! `src eval FIXTURE --arm NAME=POLICY...`: the same sessions through each arm's policy on the
//! built-in simulator, paired, and one report of what each policy did to the task
//! (docs/eval.md).
//!
//! - [`arm`]: serving one arm's policy in this process and replaying the sessions through it.
//! - [`metrics`]: what an arm's turns add up to, the simulated quality model included.
//! - [`stats`]: mean, percentile and the paired bootstrap interval.
//! - [`table`]: the table `--format table` prints.
//!
//! Everything that could vary between runs is pinned: the seed drives the simulator's answers
//! and the quality model's draws, the simulator does not sleep, latency is its own account, and
//! the bootstrap is seeded. Same seed, same report, byte for byte.

pub mod arm;
pub mod metrics;
pub mod stats;
pub mod table;

use super::policy::load_checked;
use crate::cmd::replay::fixture;
use crate::Outcome;
use anyhow::{anyhow, bail, Context, Result};
use arm::{real_backends, run_arm, ArmSpec};
use metrics::{arm_report, quality_of, ArmReport, PairedDifference};
use serde_json::json;
use src_runtime::sim::SimConfig;
use stats::{bootstrap_ci, round};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What the report says about where `final_pass` comes from, wherever it is shown.
pub const SIMULATION_NOTE: &str = "final_pass comes from the simulator's declared quality model \
     (a probability of a correct turn per served model and difficulty, with damaged state \
     inherited by later turns), not from real answers; latency is simulated prefill + decode \
     time, queueing excluded";

#[derive(Clone, Copy, Debug, Default, clap::ValueEnum, PartialEq, Eq)]
pub enum EvalFormat {
    #[default]
    Table,
    Json,
}

#[derive(clap::Args)]
pub struct Args {
    /// The session fixture (see docs/replay.md).
    fixture: PathBuf,
    /// An arm, `NAME=POLICY` (a policy directory or file; repeatable, in report order; the
    /// first is the baseline of the paired differences).
    #[arg(long = "arm", value_name = "NAME=POLICY", required = true)]
    arms: Vec<String>,
    /// Seeds the simulator's answers, the quality model and the bootstrap.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The simulator configuration (JSON, as `src sim --config`): per served id its latency,
    /// prefix cache and quality knobs. Without it every model gets the defaults.
    #[arg(long, value_name = "FILE.json")]
    sim: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t)]
    format: EvalFormat,
    /// Also write the JSON report here.
    #[arg(long, value_name = "REPORT.json")]
    out: Option<PathBuf>,
    /// Simulate backends the policies do not mark `simulated` (refused otherwise).
    #[arg(long)]
    simulate: bool,
}

fn parse_arm(text: &str) -> Result<ArmSpec> {
    let (name, policy) = text
        .split_once('=')
        .filter(|(n, p)| !n.is_empty() && !p.is_empty())
        .ok_or_else(|| anyhow!("--arm expects NAME=POLICY, got `{text}`"))?;
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        bail!("--arm `{name}`: a name is letters, digits, `-` and `_`");
    }
    Ok(ArmSpec {
        name: name.to_string(),
        policy: PathBuf::from(policy),
    })
}

pub fn run(args: Args) -> Result<Outcome> {
    let fixture = fixture::read(&args.fixture)
        .map_err(|e| anyhow!("`{}` is not a session fixture: {e}", args.fixture.display()))?;
    let specs = args
        .arms
        .iter()
        .map(|a| parse_arm(a))
        .collect::<Result<Vec<_>>>()?;
    let mut names = std::collections::HashSet::new();
    if let Some(dup) = specs.iter().find(|s| !names.insert(s.name.clone())) {
        bail!("--arm `{}` is given twice", dup.name);
    }
    let mut simulator = match &args.sim {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read `{}`", path.display()))?;
            serde_json::from_str::<SimConfig>(&text)
                .with_context(|| format!("`{}` is not a simulator configuration", path.display()))?
        }
        None => SimConfig::default(),
    };
    simulator.seed = args.seed;
    let mut policies = Vec::with_capacity(specs.len());
    for spec in &specs {
        let Some(policy) = load_checked(&spec.policy, false)? else {
            bail!("arm `{}`: the policy has errors", spec.name);
        };
        let real = real_backends(&policy);
        if !real.is_empty() && !args.simulate {
            bail!(
                "arm `{}`: backend(s) {} are not simulated; `src eval` runs on the built-in \
                 simulator only (give --simulate to simulate them)",
                spec.name,
                real.iter()
                    .map(|b| format!("`{b}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        policies.push(policy);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // Arms share nothing but the sessions (each has its own server, pins and simulators), so
    // they run at once; each arm's sessions run in order (see `arm`).
    let observed = runtime.block_on(async {
        let fixture = std::sync::Arc::new(fixture.clone());
        let mut tasks = tokio::task::JoinSet::new();
        for (index, spec) in specs.iter().enumerate() {
            let (spec, fixture, simulator) = (spec.clone(), fixture.clone(), simulator.clone());
            let simulate = args.simulate;
            tasks.spawn(
                async move { (index, run_arm(&spec, &fixture, &simulator, simulate).await) },
            );
        }
        let mut done: Vec<Option<Vec<arm::Observed>>> = vec![None; specs.len()];
        while let Some(joined) = tasks.join_next().await {
            let (index, result) = joined.context("an arm's task failed")?;
            done[index] = Some(result?);
        }
        Ok::<_, anyhow::Error>(done)
    })?;
    let mut reports: Vec<ArmReport> = Vec::with_capacity(specs.len());
    for ((spec, policy), observed) in specs.iter().zip(&policies).zip(observed) {
        let observed = observed.ok_or_else(|| anyhow!("arm `{}` did not finish", spec.name))?;
        reports.push(arm_report(
            &spec.name,
            &spec.policy.display().to_string(),
            policy,
            &fixture,
            &observed,
            &simulator,
            args.seed,
        ));
    }
    pair(&mut reports, args.seed);
    let report = report_json(&reports, &policies, &fixture, &simulator, args.seed);
    if let Some(path) = &args.out {
        let text = serde_json::to_string_pretty(&report).context("cannot render the report")?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write `{}`", path.display()))?;
    }
    match args.format {
        EvalFormat::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&report).context("cannot render the report")?
        )?,
        EvalFormat::Table => out!(
            "{}",
            table::render(&reports, fixture.sessions.len(), args.seed)
        )?,
    }
    Ok(Outcome::Success)
}

/// Adds each later arm's paired difference in final pass against the first arm.
fn pair(reports: &mut [ArmReport], seed: u64) {
    let Some((first, rest)) = reports.split_first_mut() else {
        return;
    };
    for arm in rest {
        let diffs: Vec<f64> = arm
            .passes
            .iter()
            .zip(&first.passes)
            .map(|(a, b)| f64::from(u8::from(*a)) - f64::from(u8::from(*b)))
            .collect();
        let difference = diffs.iter().sum::<f64>() / diffs.len().max(1) as f64;
        let (lo, hi) = bootstrap_ci(&diffs, seed).unwrap_or((0.0, 0.0));
        arm.final_pass_difference = Some(PairedDifference {
            against: first.name.clone(),
            difference: round(difference, 4),
            ci95: [round(lo, 4), round(hi, 4)],
        });
    }
}

fn report_json(
    reports: &[ArmReport],
    policies: &[src_compiler::hir::CheckedPolicy],
    fixture: &fixture::Fixture,
    simulator: &SimConfig,
    seed: u64,
) -> serde_json::Value {
    // The knobs of every served id any arm used, as the quality model judged them.
    let mut quality = BTreeMap::new();
    for policy in policies {
        for model in &policy.models {
            quality.insert(model.serves.clone(), quality_of(simulator, &model.serves));
        }
    }
    json!({
        "simulation": {
            "note": SIMULATION_NOTE,
            "seed": seed,
            "quality": quality,
        },
        "sessions": fixture.sessions.len(),
        "turns": fixture.sessions.iter().map(|s| s.turns.len()).sum::<usize>(),
        "arms": reports,
    })
}
