//! `src doctor`'s store phase on a Milvus cache store, against a real milvus-lite started here
//! and the repository's MiniLM (384 dimensions): a collection not made yet is reported creatable
//! and is still absent afterwards (the doctor changes nothing); one made by the store for this
//! encoder passes; one holding vectors of another length fails with the fix; one Milvus refuses
//! to create fails with its reason; a Milvus that does not answer fails within the doctor's
//! timeout.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a failed step fails the test with its message"
)]

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use src_compiler::hir::MilvusTarget;
use src_runtime::cache::{CacheStore, MilvusCache, Scope};
use src_testkit::milvus::MilvusServer;
use support::{doctor_report, repo, store_check, write};

fn policy(dir: &Path, url: &str, collection: &str) -> PathBuf {
    let minilm = repo("models/minilm")
        .canonicalize()
        .expect("the repository's models/minilm: run scripts/models.sh");
    write(
        dir,
        "policy.sr",
        &format!(
            r#"backend sim {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
model small {{ backend = sim  serves = "tiny-a" }}
encoder minilm {{ path = "{}" }}
route default {{ to small }}
cache {{ encoder = minilm  threshold = 0.9  store = milvus("{url}", collection = "{collection}") }}
"#,
            minilm.display()
        ),
    )
}

/// The doctor's exit code and its check of the cache store.
fn doctor(url: &str, collection: &str) -> (Option<i32>, Value) {
    let dir = tempfile::tempdir().unwrap();
    let file = policy(dir.path(), url, collection);
    let (code, report) = doctor_report(&file, "10s");
    (code, store_check(&report).clone())
}

/// Stores one answer through the runtime's Milvus store, which makes `collection` with the
/// vector's length.
fn fill(url: &str, collection: &str, dims: usize) {
    let target = MilvusTarget::parse(url, Some(collection)).unwrap();
    let store = MilvusCache::new(target, Duration::from_secs(30), 1 << 20);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut vector = vec![0.0f32; dims];
    vector[0] = 1.0;
    runtime
        .block_on(store.insert(
            &Scope([1; 32]),
            &vector,
            "a question",
            Bytes::from_static(b"{}"),
            1,
            60_000,
        ))
        .unwrap();
}

fn detail(check: &Value) -> &str {
    check["detail"].as_str().unwrap_or_default()
}

#[test]
fn an_absent_collection_is_creatable_and_left_absent() {
    let milvus = MilvusServer::start();
    for _ in 0..2 {
        let (code, check) = doctor(&milvus.url(), "answers");
        assert_eq!(code, Some(0), "{check}");
        assert_eq!(check["status"], "ok", "{check}");
        assert_eq!(check["topology"]["kind"], "milvus");
        assert_eq!(check["topology"]["exists"], false, "{check}");
        assert_eq!(check["topology"]["encoder_dimension"], 384, "{check}");
        assert!(
            detail(&check).contains("absent; creatable, made on first use with 384 dimensions"),
            "{check}"
        );
    }
}

/// The longest name Milvus takes is creatable too: the doctor's scratch collection beside it
/// must not take a name Milvus refuses.
#[test]
fn the_longest_collection_name_is_creatable() {
    let milvus = MilvusServer::start();
    let longest = "a".repeat(255);
    let (code, check) = doctor(&milvus.url(), &longest);
    assert_eq!(code, Some(0), "{check}");
    assert_eq!(check["status"], "ok", "{check}");
    assert!(detail(&check).contains("absent; creatable"), "{check}");
}

/// A Milvus that will not create the collection (here milvus-lite whose storage cannot be
/// written: it has no access control) fails the check with the reason Milvus gave, where the
/// store would fail on first use; a collection made before still passes.
#[test]
fn a_collection_milvus_will_not_create_is_a_violation() {
    let mut milvus = MilvusServer::start();
    fill(&milvus.url(), "made_before", 384);
    milvus.forbid_new_collections();
    let (code, check) = doctor(&milvus.url(), "answers");
    assert_eq!(code, Some(1), "{check}");
    assert_eq!(check["status"], "fail", "{check}");
    assert_eq!(check["topology"]["exists"], false, "{check}");
    assert!(
        detail(&check).contains("collection `answers` absent and not creatable: Milvus refused"),
        "{check}"
    );
    let (code, check) = doctor(&milvus.url(), "made_before");
    assert_eq!(code, Some(0), "{check}");
    assert!(
        detail(&check).contains("present, 384 dimensions as the encoder's"),
        "{check}"
    );
}

#[test]
fn the_collection_must_hold_the_encoders_length() {
    let milvus = MilvusServer::start();
    fill(&milvus.url(), "minilm_answers", 384);
    let (code, check) = doctor(&milvus.url(), "minilm_answers");
    assert_eq!(code, Some(0), "{check}");
    assert_eq!(check["status"], "ok", "{check}");
    assert_eq!(check["topology"]["exists"], true, "{check}");
    assert_eq!(check["topology"]["dimension"], 384, "{check}");
    assert!(
        detail(&check).contains("present, 384 dimensions as the encoder's"),
        "{check}"
    );

    fill(&milvus.url(), "other_answers", 768);
    let (code, check) = doctor(&milvus.url(), "other_answers");
    assert_eq!(code, Some(1), "{check}");
    assert_eq!(check["status"], "fail", "{check}");
    assert_eq!(check["topology"]["dimension"], 768, "{check}");
    assert!(
        detail(&check).contains(
            "holds 768-dimension vectors and the encoder makes 384; name another collection"
        ),
        "{check}"
    );
}

#[test]
fn a_milvus_that_does_not_answer_is_a_violation() {
    let mut milvus = MilvusServer::start();
    let url = milvus.url();
    milvus.kill();
    let (code, check) = doctor(&url, "answers");
    assert_eq!(code, Some(1), "{check}");
    assert_eq!(check["status"], "fail", "{check}");
    assert!(
        detail(&check).contains("milvus did not serve as the cache store"),
        "{check}"
    );
}
