//! `src whatif DIR --policy NEW`: decide every request `src serve --record DIR` recorded again
//! under another policy, offline, and report what would change.
//!
//! - [`mod@redecide`]: one recorded request through the request procedure under the new policy.
//!
//! The report counts the decisions that change (block, route or model), groups them by "from →
//! to", counts new blocks, and lists the sessions whose recorded pin the new policy would
//! switch in the middle of a tool loop; any such session makes the exit status 1.

pub mod redecide;

use super::policy::{load_checked, Engine};
use crate::Outcome as Exit;
use anyhow::{anyhow, Context, Result};
use redecide::{recorded_identity, redecide, Outcome, Redecided};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, Default, clap::ValueEnum, PartialEq, Eq)]
pub enum WhatifFormat {
    #[default]
    Table,
    Json,
}

#[derive(clap::Args)]
pub struct Args {
    /// The directory `src serve --record` wrote.
    dir: PathBuf,
    /// The policy to decide the recorded requests under.
    #[arg(long, value_name = "POLICY")]
    policy: PathBuf,
    #[arg(long, value_enum, default_value_t)]
    format: WhatifFormat,
}

fn shown(o: &Outcome) -> String {
    if let Some(status) = o.refused {
        return match &o.block {
            Some(b) => format!("refused by `{b}` ({status})"),
            None => format!("error {status}"),
        };
    }
    let via = match (&o.block, &o.route) {
        (Some(b), _) => format!("block `{b}`"),
        (None, Some(r)) => format!("route `{r}`"),
        (None, None) => "named model".to_string(),
    };
    format!("{via} -> `{}`", o.model.as_deref().unwrap_or("-"))
}

pub fn run(args: Args) -> Result<Exit> {
    let records = src_runtime::record::read_recording(&args.dir)
        .map_err(|e| anyhow!("`{}` is not a recording: {e}", args.dir.display()))?;
    let Some(checked) = load_checked(&args.policy, false)? else {
        return Err(anyhow!("`{}` has errors", args.policy.display()));
    };
    let policy = src_compiler::compile(checked, Engine::default().into())
        .context("cannot compile the policy")?;
    let mut runner = None;
    let mut changes: BTreeMap<(Outcome, Outcome), usize> = BTreeMap::new();
    let mut changed = Vec::new();
    let mut undecided = Vec::new();
    let mut new_blocks = 0;
    let mut broken: BTreeSet<String> = BTreeSet::new();
    let mut mid_loop_switches = 0;
    // Per recorded session identity, the model its last recorded call was answered by.
    let mut pins: BTreeMap<String, String> = BTreeMap::new();
    for (index, record) in records.iter().enumerate() {
        let before = Outcome::recorded(record);
        let identity = recorded_identity(record).map(str::to_string);
        let pin = identity.as_ref().and_then(|id| pins.get(id)).cloned();
        if let (Some(id), Some(model)) = (&identity, &before.model) {
            pins.insert(id.clone(), model.clone());
        }
        match redecide(&policy, record, pin.as_deref(), &mut runner) {
            Redecided::Undecided(why) => undecided.push(json!({"record": index, "why": why})),
            Redecided::Decided {
                outcome,
                breaks_continuity,
            } => {
                if breaks_continuity {
                    mid_loop_switches += 1;
                    broken.insert(identity.unwrap_or_default());
                }
                if outcome != before {
                    if outcome.block.is_some()
                        && outcome.refused.is_some()
                        && before.refused.is_none()
                    {
                        new_blocks += 1;
                    }
                    changed.push(index);
                    *changes.entry((before, outcome)).or_insert(0) += 1;
                }
            }
        }
    }
    let report = json!({
        "records": records.len(),
        "decided": records.len() - undecided.len(),
        "undecided": undecided,
        "changed": changed.len(),
        "changed_records": changed,
        "changes": changes.iter().map(|((from, to), count)| json!({"from": from, "to": to, "count": count})).collect::<Vec<_>>(),
        "new_blocks": new_blocks,
        "continuity": {
            "sessions_broken": broken,
            "switches_mid_tool_loop": mid_loop_switches,
        },
    });
    match args.format {
        WhatifFormat::Json => outln!("{report:#}")?,
        WhatifFormat::Table => {
            outln!(
                "{} recorded request(s): {} decided, {} undecided, {} would change ({} newly blocked)",
                records.len(),
                records.len() - undecided.len(),
                undecided.len(),
                changed.len(),
                new_blocks
            )?;
            for ((from, to), count) in &changes {
                outln!("  {count:>5}  {}  =>  {}", shown(from), shown(to))?;
            }
            for u in report["undecided"].as_array().into_iter().flatten() {
                outln!(
                    "  undecided record {}: {}",
                    u["record"],
                    u["why"].as_str().unwrap_or("")
                )?;
            }
            if broken.is_empty() {
                outln!("continuity: no recorded session would switch models inside a tool loop")?;
            } else {
                outln!(
                    "continuity: {} session(s) would switch models inside a tool loop ({} call(s)): {}",
                    broken.len(),
                    mid_loop_switches,
                    broken.iter().cloned().collect::<Vec<_>>().join(", ")
                )?;
            }
        }
    }
    Ok(if broken.is_empty() {
        Exit::Success
    } else {
        Exit::Failure
    })
}
