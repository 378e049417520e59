//! The human table of `src eval`: one row per arm, and the note that says which numbers are
//! simulation.

use super::metrics::ArmReport;
use super::SIMULATION_NOTE;

fn opt(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "n/a".to_string(), |v| format!("{v:.digits$}"))
}

fn pct(value: f64) -> String {
    format!("{:.1}%", value * 100.0)
}

pub fn render(arms: &[ArmReport], sessions: usize, seed: u64) -> String {
    let header = [
        "arm",
        "turns",
        "failed",
        "strong",
        "switches",
        "violations",
        "holds",
        "observed",
        "prefix hit",
        "latency mean",
        "latency p95",
        "cost",
        "final pass",
        "vs first [95% CI]",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    for a in arms {
        rows.push(vec![
            a.name.clone(),
            a.turns.to_string(),
            a.failed.to_string(),
            pct(a.strong_share),
            a.switches.to_string(),
            a.violations.to_string(),
            a.holds.values().sum::<usize>().to_string(),
            a.observed.values().sum::<usize>().to_string(),
            a.prefix_cache_hit_ratio
                .map_or_else(|| "unknown".to_string(), pct),
            opt(a.latency_ms_per_session.mean, 0),
            opt(a.latency_ms_per_session.p95, 0),
            format!("{:.0}", a.cost),
            pct(a.final_pass),
            match &a.final_pass_difference {
                None => "(baseline)".to_string(),
                Some(d) => format!(
                    "{:+.1} [{:+.1}, {:+.1}]",
                    d.difference * 100.0,
                    d.ci95[0] * 100.0,
                    d.ci95[1] * 100.0
                ),
            },
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out =
        format!("{sessions} session(s), seed {seed}; latency in simulated ms per session\n");
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, w))| {
                if i == 0 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out.push_str(&format!("note: {SIMULATION_NOTE}\n"));
    out
}
