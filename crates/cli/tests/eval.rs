//! `src eval` on the bundled study: five arms over mixed agent sessions on the simulator.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a failed step fails the test with its message"
)]

mod support;

use serde_json::Value;
use support::{repo, src, write};

const ARMS: [&str; 5] = [
    "strong",
    "small",
    "protect-gate-off",
    "gate-observe",
    "gate-enforce",
];

/// Runs the bundled study; answers the report's bytes.
fn eval(seed: u64, arms: &[&str]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.json");
    let mut command = src();
    command
        .arg("eval")
        .arg(repo("examples/eval/sessions.json"))
        .arg("--sim")
        .arg(repo("examples/eval/sim.json"))
        .args(["--seed", &seed.to_string(), "--format", "json", "--out"])
        .arg(&out);
    for arm in arms {
        command.arg("--arm").arg(format!(
            "{arm}={}",
            repo(&format!("examples/eval/arms/{arm}")).display()
        ));
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "src eval failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::read(&out).unwrap()
}

fn arms(report: &[u8]) -> Vec<Value> {
    let doc: Value = serde_json::from_slice(report).unwrap();
    doc["arms"].as_array().unwrap().clone()
}

fn arm<'a>(arms: &'a [Value], name: &str) -> &'a Value {
    arms.iter().find(|a| a["name"] == name).unwrap()
}

#[test]
fn the_same_seed_gives_the_same_report_byte_for_byte() {
    let first = eval(7, &ARMS);
    assert_eq!(first, eval(7, &ARMS));
    // The seed is used: another seed draws other answers and other quality outcomes.
    assert_ne!(first, eval(8, &ARMS));
    let doc: Value = serde_json::from_slice(&first).unwrap();
    assert!(doc["simulation"]["note"]
        .as_str()
        .unwrap()
        .contains("not from real answers"));
    assert_eq!(doc["simulation"]["seed"], 7);
    // Paired against the first arm, with an interval around the difference.
    let arms = doc["arms"].as_array().unwrap();
    assert!(arms[0]["final_pass_difference"].is_null());
    for a in &arms[1..] {
        let d = &a["final_pass_difference"];
        assert_eq!(d["against"], "strong");
        let (lo, hi) = (
            d["ci95"][0].as_f64().unwrap(),
            d["ci95"][1].as_f64().unwrap(),
        );
        let diff = d["difference"].as_f64().unwrap();
        assert!(lo <= diff && diff <= hi, "{d}");
        let expected = a["final_pass"].as_f64().unwrap() - arms[0]["final_pass"].as_f64().unwrap();
        assert!((diff - expected).abs() < 1e-3, "{d}");
    }
}

#[test]
fn the_protected_arm_keeps_tool_loops_where_the_per_call_arm_switches() {
    let report = eval(0, &ARMS);
    let arms = arms(&report);
    let observe = arm(&arms, "gate-observe");
    let enforce = arm(&arms, "gate-enforce");
    assert!(observe["violations"].as_u64().unwrap() > 0, "{observe}");
    assert!(observe["observed"]["tool call in flight"].as_u64().unwrap() > 0);
    assert_eq!(enforce["violations"], 0, "{enforce}");
    assert!(enforce["holds"]["tool call in flight"].as_u64().unwrap() > 0);
    for a in &arms {
        assert_eq!(a["failed"], 0, "{a}");
        assert_eq!(a["turns"], 80);
    }
}

#[test]
fn strong_throughout_has_strong_share_one_and_small_throughout_zero() {
    let report = eval(0, &ARMS);
    let arms = arms(&report);
    assert_eq!(arm(&arms, "strong")["strong_share"], 1.0);
    assert_eq!(arm(&arms, "strong")["model_share"]["strong"], 1.0);
    assert_eq!(arm(&arms, "small")["strong_share"], 0.0);
    let mixed = arm(&arms, "protect-gate-off")["strong_share"]
        .as_f64()
        .unwrap();
    assert!(mixed > 0.0 && mixed < 1.0);
}

#[test]
fn a_pinned_arm_hits_the_prefix_cache_at_least_as_often_as_a_switching_one() {
    let report = eval(0, &ARMS);
    let arms = arms(&report);
    let pinned = arm(&arms, "protect-gate-off");
    let switching = arm(&arms, "gate-observe");
    assert_eq!(pinned["switches"], 0);
    assert!(switching["switches"].as_u64().unwrap() > 0);
    let ratio = |a: &Value| a["prefix_cache_hit_ratio"].as_f64().unwrap();
    assert!(ratio(pinned) > 0.0);
    assert!(ratio(pinned) >= ratio(switching), "{pinned} vs {switching}");
}

#[test]
fn real_backends_are_refused_unless_simulated() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(
        dir.path(),
        "policy.sr",
        "backend real { url = \"http://127.0.0.1:9/v1\" }\n\
         model small { backend = real  serves = \"Qwen/Qwen3-0.6B\" }\n\
         route default { to small }\n",
    );
    let run = |extra: &[&str]| {
        src()
            .arg("eval")
            .arg(repo("examples/eval/sessions.json"))
            .arg("--arm")
            .arg(format!("real={}", policy.display()))
            .args(["--format", "json"])
            .args(extra)
            .output()
            .unwrap()
    };
    let refused = run(&[]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--simulate"));
    let simulated = run(&["--simulate"]);
    assert!(
        simulated.status.success(),
        "{}",
        String::from_utf8_lossy(&simulated.stderr)
    );
    let doc: Value = serde_json::from_slice(&simulated.stdout).unwrap();
    assert_eq!(doc["arms"][0]["ok"], 80);
}

#[test]
fn the_simulator_configuration_decides_quality_and_latency() {
    let dir = tempfile::tempdir().unwrap();
    // A strong model that is never wrong and costs no time; a small one that is always wrong.
    let sim = write(
        dir.path(),
        "sim.json",
        r#"{"models": [
            {"id": "Qwen/Qwen3-8B", "overhead_ms": 0, "prefill_ms_per_token": 0, "decode_ms_per_token": 0,
             "quality": {"easy": 1, "hard": 1, "damaged_factor": 1, "repair": 1}},
            {"id": "Qwen/Qwen3-0.6B", "quality": {"easy": 0, "hard": 0}}]}"#,
    );
    let output = src()
        .arg("eval")
        .arg(repo("examples/eval/sessions.json"))
        .arg("--sim")
        .arg(&sim)
        .arg("--arm")
        .arg(format!(
            "strong={}",
            repo("examples/eval/arms/strong").display()
        ))
        .arg("--arm")
        .arg(format!(
            "small={}",
            repo("examples/eval/arms/small").display()
        ))
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let doc: Value = serde_json::from_slice(&output.stdout).unwrap();
    let arms = doc["arms"].as_array().unwrap();
    assert_eq!(arm(arms, "strong")["final_pass"], 1.0);
    assert_eq!(arm(arms, "strong")["latency_ms_per_session"]["mean"], 0.0);
    assert_eq!(arm(arms, "small")["final_pass"], 0.0);
    assert!(
        arm(arms, "small")["latency_ms_per_session"]["mean"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert_eq!(doc["simulation"]["quality"]["Qwen/Qwen3-0.6B"]["easy"], 0.0);
    // The table says where final pass comes from.
    let table = src()
        .arg("eval")
        .arg(repo("examples/eval/sessions.json"))
        .arg("--arm")
        .arg(format!(
            "strong={}",
            repo("examples/eval/arms/strong").display()
        ))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("simulator's declared quality model"),
        "{text}"
    );
}
