//! `src doctor`'s store phase against real Redis topologies started here: a six-node cluster
//! (three masters, three replicas, every slot covered), a Sentinel set (its primary and
//! replica), a cluster that lost a master without a replica to promote (slots uncovered: a
//! violation), and a store no node of which answers.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a failed step fails the test with its message"
)]

mod support;

use serde_json::Value;
use src_testkit::redis_topology::{RedisCluster, RedisSentinels};
use std::path::{Path, PathBuf};
use support::{doctor_report, store_check, write};

fn policy(dir: &Path, store: &str) -> PathBuf {
    write(
        dir,
        "policy.sr",
        &format!(
            r#"backend sim {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model small {{ backend = sim  serves = "tiny-a" }}
route default {{ to small }}
session {{ store = {store} }}
"#
        ),
    )
}

/// The doctor's JSON report for a policy whose session store is `store`, and its exit code.
fn doctor(store: &str) -> (Option<i32>, Value) {
    let dir = tempfile::tempdir().unwrap();
    let file = policy(dir.path(), store);
    doctor_report(&file, "2s")
}

#[test]
fn the_topology_of_a_cluster_and_a_sentinel_set_is_reported() {
    let cluster = RedisCluster::start();
    let (code, report) = doctor(&cluster.store(1));
    let check = store_check(&report);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(check["status"], "ok", "{check}");
    let topology = &check["topology"];
    assert_eq!(topology["kind"], "redis_cluster");
    assert_eq!(topology["masters"].as_array().map(Vec::len), Some(3));
    assert_eq!(topology["replicas"].as_array().map(Vec::len), Some(3));
    assert_eq!(topology["slots_covered"], 16384);
    let detail = check["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("16384/16384 slots covered"), "{detail}");

    let set = RedisSentinels::start();
    let (code, report) = doctor(&set.store());
    let check = store_check(&report);
    assert_eq!(code, Some(0), "{report}");
    let topology = &check["topology"];
    assert_eq!(topology["kind"], "redis_sentinel");
    assert_eq!(
        topology["masters"][0],
        format!("127.0.0.1:{}", set.primary()),
        "{check}"
    );
    assert_eq!(topology["replicas"].as_array().map(Vec::len), Some(1));
}

#[test]
fn uncovered_slots_and_a_silent_store_are_violations() {
    let mut cluster = RedisCluster::start();
    // A master and its replica both gone: their slots have no one to serve them.
    let (victim, _) = cluster.masters()[0].clone();
    let replica = cluster.replica_of(victim);
    cluster.kill(replica);
    cluster.kill(victim);
    let deadline = std::time::Instant::now() + src_testkit::PATIENCE;
    let (code, report) = loop {
        let (code, report) = doctor(&cluster.store(6));
        assert!(
            std::time::Instant::now() < deadline,
            "the pair was never marked failed: {report}"
        );
        // The survivors mark the pair failed after the node timeout.
        let topology = &store_check(&report)["topology"];
        if topology["failed"].as_array().map(Vec::len) == Some(2) {
            break (code, report);
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let check = store_check(&report);
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(check["status"], "fail", "{check}");
    assert!(check["topology"]["slots_covered"].as_u64() < Some(16384));

    let (code, report) = doctor(r#"redis_cluster(["redis://127.0.0.1:9"])"#);
    assert_eq!(code, Some(1));
    let check = store_check(&report);
    assert!(
        check["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("no node answered")),
        "{check}"
    );
}
