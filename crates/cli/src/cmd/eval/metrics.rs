//! What one arm adds up to: continuity (switches, tool-loop violations, holds), where turns
//! went (share per model, strong share), what the backend's prefix cache saved, simulated
//! latency per session, cost, and the simulated final-turn pass of each session.
//!
//! - `strong_share`: turns answered by the arm policy's highest-`cost` model, of all turns.
//! - `prefix_cache_hit_ratio`: per session, cached ÷ prompt tokens as the simulator's prefix
//!   cache reported them; then the mean over sessions that reported any.
//! - latency: per session, the sum of its turns' simulated prefill and decode time (queueing
//!   excluded); mean and p95 over sessions.
//! - cost: Σ (prompt + completion tokens) × the answering model's `cost`.
//! - `final_pass`: the share of sessions whose final turn passes under the simulator's quality
//!   model ([`SimQuality`]); a failed turn counts as a wrong one.

use super::arm::Observed;
use super::stats::{mean, percentile, round};
use crate::cmd::replay::fixture::{Difficulty, Fixture};
use crate::cmd::replay::report::summarize;
use serde::Serialize;
use src_compiler::hir::CheckedPolicy;
use src_runtime::headers::session;
use src_runtime::sim::{self, SimConfig, SimQuality, TaskState};
use std::collections::BTreeMap;

/// Latency over sessions.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub mean: Option<f64>,
    pub p95: Option<f64>,
}

/// The paired comparison of an arm's final pass with the first arm's.
#[derive(Debug, Clone, Serialize)]
pub struct PairedDifference {
    pub against: String,
    /// This arm's final pass minus the first arm's, over the same sessions.
    pub difference: f64,
    /// Percentile-bootstrap 95 % interval of the difference, resampling sessions.
    pub ci95: [f64; 2],
}

/// One arm's row of the report.
#[derive(Debug, Clone, Serialize)]
pub struct ArmReport {
    pub name: String,
    pub policy: String,
    pub sessions: usize,
    pub turns: usize,
    pub ok: usize,
    pub failed: usize,
    pub switches: usize,
    /// Switches inside a tool loop.
    pub violations: usize,
    /// `expect` keys of the fixture that did not hold.
    pub expect_violations: usize,
    /// Switches a `protect` hold prevented, by rule.
    pub holds: BTreeMap<String, usize>,
    /// Switches a hold would have prevented in `observe` mode, by rule.
    pub observed: BTreeMap<String, usize>,
    /// Share of all turns per answering logical model.
    pub model_share: BTreeMap<String, f64>,
    pub strong_model: Option<String>,
    pub strong_share: f64,
    pub prefix_cache_hit_ratio: Option<f64>,
    pub latency_ms_per_session: Latency,
    pub cost: f64,
    pub final_pass: f64,
    pub final_pass_difference: Option<PairedDifference>,
    /// Per session (fixture order): whether its final turn passed. Kept for pairing.
    #[serde(skip)]
    pub passes: Vec<bool>,
}

/// The quality knobs of a served id under `simulator` (unlisted ids get the defaults).
pub fn quality_of(simulator: &SimConfig, served: &str) -> SimQuality {
    simulator
        .models
        .iter()
        .find(|m| m.id == served)
        .map(|m| m.quality)
        .unwrap_or_default()
}

pub fn arm_report(
    name: &str,
    policy_path: &str,
    policy: &CheckedPolicy,
    fixture: &Fixture,
    observed: &[Observed],
    simulator: &SimConfig,
    seed: u64,
) -> ArmReport {
    let records: Vec<_> = observed.iter().map(|o| o.record.clone()).collect();
    let summary = summarize(&records, fixture.sessions.len());
    let turns = records.len().max(1) as f64;
    let mut holds = BTreeMap::new();
    let mut observed_holds = BTreeMap::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for r in &records {
        if let (Some(state), Some(rule)) = (r.session_state.as_deref(), &r.protection) {
            let table = match state {
                session::HELD => &mut holds,
                session::OBSERVED => &mut observed_holds,
                _ => continue,
            };
            *table.entry(rule.clone()).or_insert(0) += 1;
        }
        if let Some(model) = r.answered_by() {
            *counts.entry(model.to_string()).or_insert(0) += 1;
        }
    }
    let top_cost = policy
        .models
        .iter()
        .map(|m| m.cost)
        .fold(f64::NEG_INFINITY, f64::max);
    let strong: Vec<&str> = policy
        .models
        .iter()
        .filter(|m| m.cost == top_cost)
        .map(|m| m.name.as_str())
        .collect();
    let strong_turns: usize = strong.iter().filter_map(|m| counts.get(*m)).sum();
    let cost_of = |logical: Option<&str>| {
        logical
            .and_then(|m| policy.model_by_name(m))
            .map_or(0.0, |id| policy.models[id.index()].cost)
    };
    let mut cost = 0.0;
    let mut ratios = Vec::new();
    let mut latencies = Vec::new();
    let mut passes = Vec::with_capacity(fixture.sessions.len());
    let mut at = 0;
    for session in &fixture.sessions {
        let turns = &observed[at..at + session.turns.len()];
        at += session.turns.len();
        let (mut cached, mut prompt) = (0u64, 0u64);
        let mut latency = 0.0;
        let mut state = TaskState::default();
        for (index, (o, turn)) in turns.iter().zip(&session.turns).enumerate() {
            let r = &o.record;
            if let (Some(c), Some(p)) = (r.cached_tokens, r.prompt_tokens) {
                cached += c;
                prompt += p;
            }
            latency += o.simulated_ms.unwrap_or(0.0);
            let tokens = r.prompt_tokens.unwrap_or(0) + r.completion_tokens.unwrap_or(0);
            cost += tokens as f64 * cost_of(r.answered_by());
            let quality =
                r.ok.then_some(r.model.as_deref())
                    .flatten()
                    .map(|served| quality_of(simulator, served));
            let difficulty = match turn.difficulty {
                Difficulty::Easy => sim::Difficulty::Easy,
                Difficulty::Hard => sim::Difficulty::Hard,
            };
            state = SimQuality::step(
                quality.as_ref(),
                state,
                difficulty,
                seed,
                &session.id,
                index,
            );
        }
        if prompt > 0 {
            ratios.push(cached as f64 / prompt as f64);
        }
        latencies.push(latency);
        passes.push(state.passes());
    }
    let share = |n: usize| round(n as f64 / turns, 4);
    ArmReport {
        name: name.to_string(),
        policy: policy_path.to_string(),
        sessions: fixture.sessions.len(),
        turns: records.len(),
        ok: summary.ok,
        failed: summary.failed,
        switches: summary.switches,
        violations: summary.tool_loop_switches,
        expect_violations: summary.violations - summary.tool_loop_switches,
        holds,
        observed: observed_holds,
        model_share: counts.iter().map(|(m, n)| (m.clone(), share(*n))).collect(),
        strong_model: (strong.len() == 1).then(|| strong[0].to_string()),
        strong_share: share(strong_turns),
        prefix_cache_hit_ratio: mean(&ratios).map(|r| round(r, 4)),
        latency_ms_per_session: Latency {
            mean: mean(&latencies).map(|v| round(v, 3)),
            p95: percentile(&latencies, 95.0).map(|v| round(v, 3)),
        },
        cost: round(cost, 3),
        final_pass: round(
            passes.iter().filter(|p| **p).count() as f64 / passes.len().max(1) as f64,
            4,
        ),
        final_pass_difference: None,
        passes,
    }
}
