//! The model memo's shared tier: answers kept in the policy's Redis session store, so a text one
//! replica ran its model on costs the others no model call.
//!
//! One key per answer (`KeySpace::memo`: the hex sha256 of the memo key), holding the row as
//! little-endian `f32`s and expiring after the configured ttl. A lookup waits at most the
//! session store's timeout (less when the model's own deadline is nearer); a store is sent in
//! the background and never delays the request. Any failure — Redis down, slow, or answering
//! something that is not a row — only means the model runs here.

use std::sync::Arc;
use std::time::Duration;

use src_compiler::hir::RedisTarget;

use super::memo::MemoKey;
use crate::store::{KeySpace, Links, Redis};

/// Answers shared through Redis, on the server's shared Redis links.
pub(crate) struct SharedMemo {
    timeout: Duration,
    ttl: Duration,
    links: Arc<Links>,
}

impl SharedMemo {
    pub fn new(timeout: Duration, ttl: Duration, links: Arc<Links>) -> SharedMemo {
        SharedMemo {
            timeout,
            ttl,
            links,
        }
    }

    fn connection(&self, url: &RedisTarget) -> Option<Redis> {
        match self.links.redis(url, self.timeout) {
            Ok(redis) => Some(redis),
            Err(err) => {
                tracing::warn!(?err, "model answers cannot be shared: no Redis connection");
                None
            }
        }
    }

    /// The answer another replica stored for `key`, waiting at most the store timeout or
    /// `left`, whichever is shorter.
    pub async fn get(
        &self,
        url: &RedisTarget,
        key: &MemoKey,
        left: Duration,
    ) -> Option<Arc<[f32]>> {
        let redis = self.connection(url)?;
        let mut conn = redis.connection();
        let mut cmd = redis::cmd("GET");
        cmd.arg(redis_key(key));
        let read = cmd.query_async::<Option<Vec<u8>>>(&mut conn);
        match redis
            .bounded_within(self.timeout.min(left), "memo.get", read)
            .await
        {
            Ok(Some(bytes)) => decode(&bytes),
            Ok(None) => None,
            Err(err) => {
                tracing::debug!(?err, "a shared model answer could not be read");
                None
            }
        }
    }

    /// Stores `row` for the other replicas, in the background.
    pub fn put(&self, url: &RedisTarget, key: &MemoKey, row: &[f32]) {
        let Some(redis) = self.connection(url) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut cmd = redis::cmd("SET");
        cmd.arg(redis_key(key)).arg(encode(row)).arg("PX").arg(
            u64::try_from(self.ttl.as_millis())
                .unwrap_or(u64::MAX)
                .max(1),
        );
        let mut conn = redis.connection();
        runtime.spawn(async move {
            let write = cmd.query_async::<()>(&mut conn);
            if let Err(err) = redis.bounded("memo.set", write).await {
                tracing::debug!(?err, "a model answer could not be shared");
            }
        });
    }
}

/// The Redis key of a memo entry.
pub fn redis_key(key: &MemoKey) -> String {
    KeySpace::memo(&key.digest())
}

fn encode(row: &[f32]) -> Vec<u8> {
    row.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn decode(bytes: &[u8]) -> Option<Arc<[f32]>> {
    if bytes.is_empty() || !bytes.len().is_multiple_of(4) {
        return None;
    }
    let row: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    row.iter().all(|x| x.is_finite()).then(|| row.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::Role;
    use sha2::{Digest, Sha256};

    #[test]
    fn a_row_survives_the_wire() {
        let row = [0.25f32, -1.5, 3.0];
        assert_eq!(decode(&encode(&row)).as_deref(), Some(&row[..]));
        assert_eq!(decode(&[1, 2, 3]), None);
        assert_eq!(decode(&[]), None);
        assert_eq!(decode(&f32::NAN.to_le_bytes()), None);
    }

    #[test]
    fn keys_differ_by_model_role_device_and_text() {
        let base = MemoKey {
            model: "abc".into(),
            role: Role::Classifier,
            device: "cpu",
            text: [1; 32],
        };
        let other_model = MemoKey {
            model: "abd".into(),
            ..base.clone()
        };
        let other_role = MemoKey {
            role: Role::Encoder,
            ..base.clone()
        };
        let other_device = MemoKey {
            device: "cuda",
            ..base.clone()
        };
        let other_text = MemoKey {
            text: [2; 32],
            ..base.clone()
        };
        let keys: std::collections::HashSet<String> =
            [&base, &other_model, &other_role, &other_device, &other_text]
                .into_iter()
                .map(redis_key)
                .collect();
        assert_eq!(keys.len(), 5);
        assert!(redis_key(&base).starts_with("sr:v1:memo:"));
        assert_eq!(redis_key(&base).len(), "sr:v1:memo:".len() + 64);
    }

    fn key(text: &str) -> MemoKey {
        MemoKey {
            model: "fingerprint".into(),
            role: Role::Classifier,
            device: "cpu",
            text: Sha256::digest(text.as_bytes()).into(),
        }
    }

    /// Polls `read` until it answers `want`: a background write lands a moment after `put`.
    async fn eventually(
        memo: &SharedMemo,
        url: &RedisTarget,
        key: &MemoKey,
        want: Option<&[f32]>,
    ) -> Option<Arc<[f32]>> {
        let deadline = std::time::Instant::now() + src_testkit::PATIENCE;
        loop {
            let got = memo.get(url, key, Duration::from_secs(2)).await;
            if got.as_deref() == want || std::time::Instant::now() > deadline {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The shared tier's contract on any Redis deployment: what one replica stores another
    /// reads through its own link, nothing else is found, a value that is not a row is no
    /// answer, and an entry expires after the ttl.
    async fn contract(url: &RedisTarget) {
        let timeout = Duration::from_secs(2);
        let ttl = Duration::from_millis(300);
        let a = SharedMemo::new(timeout, ttl, Arc::new(Links::new()));
        let b = SharedMemo::new(timeout, ttl, Arc::new(Links::new()));
        let row = [0.5f32, 0.25, -2.0];
        let stored = key("a text one replica classified");
        assert_eq!(
            b.get(url, &stored, timeout).await,
            None,
            "nothing stored yet"
        );
        a.put(url, &stored, &row);
        let got = eventually(&b, url, &stored, Some(&row)).await;
        assert_eq!(
            got.as_deref(),
            Some(&row[..]),
            "the other replica reads the row"
        );
        assert_eq!(
            b.get(url, &key("another text"), timeout).await,
            None,
            "another text has no answer"
        );

        let garbage = key("a text whose entry was overwritten");
        let links = Links::new();
        let redis = links.redis(url, timeout).expect("a link");
        let mut conn = redis.connection();
        redis::cmd("SET")
            .arg(redis_key(&garbage))
            .arg("not a row")
            .query_async::<()>(&mut conn)
            .await
            .expect("SET");
        assert_eq!(b.get(url, &garbage, timeout).await, None, "not a row");

        let gone = eventually(&b, url, &stored, None).await;
        assert_eq!(gone, None, "the entry expires after its ttl");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shared_answers_keep_the_contract_on_redis_and_a_cluster_node() {
        let server = src_testkit::redis::RedisServer::start();
        contract(&single(&server.url())).await;
        let cluster = src_testkit::redis::RedisServer::start_cluster();
        contract(&single(&cluster.url())).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shared_answers_keep_the_contract_on_a_cluster_and_a_sentinel_set() {
        let cluster = src_testkit::redis_topology::RedisCluster::start();
        let urls = cluster.urls();
        let seeds: Vec<&str> = urls.iter().map(String::as_str).collect();
        contract(&RedisTarget::cluster(&seeds).expect("a cluster")).await;
        let set = src_testkit::redis_topology::RedisSentinels::start();
        let urls = set.urls();
        let sentinels: Vec<&str> = urls.iter().map(String::as_str).collect();
        let master = src_testkit::redis_topology::MASTER;
        contract(&RedisTarget::sentinel(&sentinels, master).expect("a set")).await;
    }

    /// Answers one replica shared before a cluster master is killed (and had replicated) are
    /// read after the failover, by a replica whose links were made before it and by one that
    /// starts after it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shared_answers_written_before_a_master_is_killed_are_read_after_the_failover() {
        let mut cluster = src_testkit::redis_topology::RedisCluster::start();
        let urls = cluster.urls();
        let seeds: Vec<&str> = urls.iter().take(3).map(String::as_str).collect();
        let url = RedisTarget::cluster(&seeds).expect("a cluster");
        let (timeout, ttl) = (Duration::from_millis(250), Duration::from_secs(600));
        let a = SharedMemo::new(timeout, ttl, Arc::new(Links::new()));
        let before = SharedMemo::new(timeout, ttl, Arc::new(Links::new()));
        let rows: Vec<(MemoKey, [f32; 2])> = (0..24)
            .map(|i| (key(&format!("text {i}")), [i as f32, 0.5]))
            .collect();
        for (k, row) in &rows {
            a.put(&url, k, row);
        }
        for (k, row) in &rows {
            let got = eventually(&before, &url, k, Some(row)).await;
            assert_eq!(got.as_deref(), Some(&row[..]), "shared before the kill");
        }
        let victim = cluster.master_of(&redis_key(&rows[0].0));
        cluster.wait_replicated(victim);
        cluster.kill(victim);
        cluster.wait_served();
        let after = SharedMemo::new(timeout, ttl, Arc::new(Links::new()));
        for reader in [&before, &after] {
            for (k, row) in &rows {
                let got = eventually(reader, &url, k, Some(row)).await;
                assert_eq!(
                    got.as_deref(),
                    Some(&row[..]),
                    "an answer lost in the failover"
                );
            }
        }
    }

    fn single(url: &str) -> RedisTarget {
        RedisTarget::Single(src_compiler::hir::RedisUrl::parse(url).expect("a Redis URL"))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unreachable_store_only_means_no_answer() {
        let memo = SharedMemo::new(
            Duration::from_millis(200),
            Duration::from_secs(60),
            Arc::new(Links::new()),
        );
        let url = &single("redis://127.0.0.1:9/");
        memo.put(url, &key("x"), &[1.0]);
        assert_eq!(memo.get(url, &key("x"), Duration::from_secs(1)).await, None);
    }
}
