//! The model memo: what a model answered for a text, remembered for every request, so a text
//! seen again (an agent's tool loop repeats its last user message on every turn) costs no model
//! call.
//!
//! An entry is keyed by the model's content fingerprint (sha256 over its three files), its role
//! and device (the output a graph is read from, and the arithmetic that produced it) and the
//! sha256 of the tenant, the window bound and the exact text; it holds the model's raw output
//! rows, one per window read (logits or embeddings, packed by [`super::window::pack`]), from
//! which every declaration over that model derives its own value. A reload whose files are
//! unchanged keeps the entries; a changed file has another fingerprint, so old answers are
//! never reused, and [`ModelMemo::forget`] drops them at once.
//!
//! The memo is bounded in bytes (`quick_cache`, weighted by each row's size plus its key), and
//! concurrent requests for the same missing entry run the model once: the first holds the
//! entry's placeholder while the others wait for it (or take over if it gives up).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use quick_cache::sync::Cache;
use quick_cache::Weighter;
use sha2::{Digest, Sha256};

use super::batch::Batcher;
use super::model::Role;
use super::window::Reading;

/// Bytes of memo unless configured.
pub const DEFAULT_MEMO_BYTES: u64 = 32 * 1024 * 1024;
/// How long a shared (Redis) entry lives unless configured.
pub const DEFAULT_SHARED_TTL: Duration = Duration::from_secs(3600);
/// What an entry costs beyond its row: the key, the `Arc` and the cache's own bookkeeping.
const ENTRY_OVERHEAD: u64 = 96;
/// The size of an entry for the capacity estimate: a classifier's few logits.
const TYPICAL_ENTRY: u64 = 128;

/// How the memo is bounded and shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoOptions {
    /// Most bytes of remembered answers; 0 turns the memo off (every text runs its model).
    pub bytes: u64,
    /// Also keep answers in the policy's Redis session store, for the other replicas.
    pub shared: bool,
    /// How long a shared answer lives in Redis.
    pub shared_ttl: Duration,
    /// Longest wait for one Redis call (the session store's timeout).
    pub redis_timeout: Duration,
}

impl Default for MemoOptions {
    fn default() -> Self {
        MemoOptions {
            bytes: DEFAULT_MEMO_BYTES,
            shared: false,
            shared_ttl: DEFAULT_SHARED_TTL,
            redis_timeout: crate::store::Timeouts::default().session,
        }
    }
}

/// One model's answer to one text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct MemoKey {
    /// The model's content fingerprint.
    pub model: Arc<str>,
    pub role: Role,
    pub device: &'static str,
    /// sha256 of the scope (the tenant whose answer it is), the reading (window and
    /// bound) and the text.
    pub text: [u8; 32],
}

impl MemoKey {
    /// The key of `text` read as `reading` says for `scope`: one tenant's answers are never
    /// another's, so neither a hit nor its speed tells a tenant what another one sent.
    pub fn new(batcher: &Batcher, text: &str, scope: &str, reading: Reading) -> MemoKey {
        let mut hasher = Sha256::new();
        hasher.update(scope.as_bytes());
        hasher.update([0]);
        hasher.update((reading.window.unwrap_or(0) as u64).to_le_bytes());
        hasher.update((reading.limit as u64).to_le_bytes());
        hasher.update(text.as_bytes());
        MemoKey {
            model: Arc::from(batcher.fingerprint.as_str()),
            role: batcher.role,
            device: batcher.device,
            text: hasher.finalize().into(),
        }
    }

    /// One digest of the whole key, for stores outside the process.
    pub fn digest(&self) -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(self.model.as_bytes());
        hasher.update([0]);
        hasher.update(self.role.word().as_bytes());
        hasher.update([0]);
        hasher.update(self.device.as_bytes());
        hasher.update([0]);
        hasher.update(self.text);
        hasher.finalize().into()
    }
}

/// Where an answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// This process's memo (possibly filled by a concurrent request while this one waited).
    Memo,
    /// The shared store: another replica ran the model.
    Shared,
    /// The model ran.
    Model,
}

#[derive(Debug, Clone, Copy)]
struct RowBytes;

impl Weighter<MemoKey, Arc<[f32]>> for RowBytes {
    fn weight(&self, _key: &MemoKey, row: &Arc<[f32]>) -> u64 {
        ENTRY_OVERHEAD + (row.len() * std::mem::size_of::<f32>()) as u64
    }
}

/// The bounded memo shared by every request of a server.
pub(crate) struct ModelMemo {
    cache: Option<Cache<MemoKey, Arc<[f32]>, RowBytes>>,
}

impl ModelMemo {
    pub fn new(bytes: u64) -> ModelMemo {
        let cache = (bytes > 0).then(|| {
            let items = usize::try_from(bytes / TYPICAL_ENTRY)
                .unwrap_or(usize::MAX)
                .max(1);
            Cache::with_weighter(items, bytes, RowBytes)
        });
        ModelMemo { cache }
    }

    pub fn enabled(&self) -> bool {
        self.cache.is_some()
    }

    /// The answer for `key`: from the memo when there, else from `run`, which is awaited by one
    /// caller per key at a time (the others wait and take its answer). An error is not
    /// remembered: the next caller runs again.
    pub async fn get_or_run<E>(
        &self,
        key: &MemoKey,
        run: impl Future<Output = Result<(Arc<[f32]>, Source), E>>,
    ) -> Result<(Arc<[f32]>, Source), E> {
        let Some(cache) = &self.cache else {
            return run.await;
        };
        match cache.get_value_or_guard_async(key).await {
            Ok(row) => Ok((row, Source::Memo)),
            Err(guard) => {
                let (row, source) = run.await?;
                // Refused only when the row alone outweighs the memo: it is answered all the same.
                let _ = guard.insert(Arc::clone(&row));
                Ok((row, source))
            }
        }
    }

    /// Drops every answer of the model with `fingerprint` (its files changed).
    pub fn forget(&self, fingerprint: &str) {
        if let Some(cache) = &self.cache {
            cache.retain(|key, _| &*key.model != fingerprint);
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.cache.as_ref().map_or(0, Cache::len)
    }

    /// Bytes held, as the bound counts them.
    pub fn bytes(&self) -> u64 {
        self.cache.as_ref().map_or(0, Cache::weight)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(model: &str, text: &str) -> MemoKey {
        MemoKey {
            model: model.into(),
            role: Role::Classifier,
            device: "cpu",
            text: Sha256::digest(text.as_bytes()).into(),
        }
    }

    fn row(v: f32) -> Arc<[f32]> {
        vec![v; 4].into()
    }

    async fn answer(memo: &ModelMemo, key: &MemoKey, v: f32) -> (Arc<[f32]>, Source) {
        let ran: Result<_, ()> = memo
            .get_or_run(key, async { Ok((row(v), Source::Model)) })
            .await;
        ran.unwrap_or_else(|()| (row(-1.0), Source::Model))
    }

    #[tokio::test]
    async fn a_text_seen_again_is_answered_from_the_memo() {
        let memo = ModelMemo::new(DEFAULT_MEMO_BYTES);
        let k = key("m1", "hello");
        assert_eq!(answer(&memo, &k, 1.0).await, (row(1.0), Source::Model));
        assert_eq!(answer(&memo, &k, 2.0).await, (row(1.0), Source::Memo));
        // Another text, another model or another role is another entry.
        assert_eq!(
            answer(&memo, &key("m1", "hello!"), 3.0).await.1,
            Source::Model
        );
        assert_eq!(
            answer(&memo, &key("m2", "hello"), 4.0).await.1,
            Source::Model
        );
        let mut guard = key("m1", "hello");
        guard.role = Role::Guard;
        assert_eq!(answer(&memo, &guard, 5.0).await.1, Source::Model);
        assert_eq!(memo.len(), 4);
    }

    #[tokio::test]
    async fn an_error_is_not_remembered() {
        let memo = ModelMemo::new(DEFAULT_MEMO_BYTES);
        let k = key("m1", "hello");
        let failed: Result<(Arc<[f32]>, Source), &str> =
            memo.get_or_run(&k, async { Err("timeout") }).await;
        assert_eq!(failed, Err("timeout"));
        assert_eq!(answer(&memo, &k, 1.0).await.1, Source::Model);
    }

    #[tokio::test]
    async fn forgetting_a_model_drops_only_its_answers() {
        let memo = ModelMemo::new(DEFAULT_MEMO_BYTES);
        answer(&memo, &key("old", "a"), 1.0).await;
        answer(&memo, &key("old", "b"), 1.0).await;
        answer(&memo, &key("kept", "a"), 1.0).await;
        memo.forget("old");
        assert_eq!(memo.len(), 1);
        assert_eq!(answer(&memo, &key("old", "a"), 2.0).await.1, Source::Model);
        assert_eq!(answer(&memo, &key("kept", "a"), 2.0).await.1, Source::Memo);
    }

    #[tokio::test]
    async fn the_byte_bound_holds() {
        let entry = ENTRY_OVERHEAD + 16;
        let memo = ModelMemo::new(entry * 8);
        for i in 0..100 {
            answer(&memo, &key("m", &i.to_string()), 1.0).await;
        }
        assert!(memo.bytes() <= entry * 8, "{} bytes", memo.bytes());
        assert!(memo.len() <= 8 && memo.len() > 0, "{} entries", memo.len());
    }

    #[tokio::test]
    async fn off_remembers_nothing() {
        let memo = ModelMemo::new(0);
        let k = key("m", "a");
        answer(&memo, &k, 1.0).await;
        assert_eq!(answer(&memo, &k, 2.0).await, (row(2.0), Source::Model));
        assert!(!memo.enabled());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_callers_run_once() {
        let memo = Arc::new(ModelMemo::new(DEFAULT_MEMO_BYTES));
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (release, wait) = tokio::sync::watch::channel(false);
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (memo, runs, mut wait) = (Arc::clone(&memo), Arc::clone(&runs), wait.clone());
            tasks.push(tokio::spawn(async move {
                let run = async {
                    runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let _ = wait.wait_for(|open| *open).await;
                    Ok::<_, ()>((row(7.0), Source::Model))
                };
                memo.get_or_run(&key("m", "same"), run).await
            }));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = release.send(true);
        let mut sources = Vec::new();
        for task in tasks {
            if let Ok(Ok((r, source))) = task.await {
                assert_eq!(r, row(7.0));
                sources.push(source);
            }
        }
        assert_eq!(sources.len(), 8);
        assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(sources.iter().filter(|s| **s == Source::Model).count(), 1);
    }
}
