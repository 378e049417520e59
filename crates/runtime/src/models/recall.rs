//! Answering one text with one model: from the memo when it holds the answer, else from the
//! shared store when the policy's sessions live in Redis and sharing is on, else by queueing the
//! text on the model's batcher — and remembering what the model said.
//!
//! `src_model_calls_total` counts only the texts that reached a model; the memo's hits and
//! misses are counted beside it.

use std::sync::Arc;

use src_compiler::hir::{CheckedPolicy, RedisTarget, StoreDef};
use tokio::time::Instant;

use super::batch::Batcher;
use super::memo::{MemoKey, MemoOptions, ModelMemo, Source};
use super::metrics::{ModelLabel, ModelMetrics};
use super::shared_memo::SharedMemo;
use super::window::Reading;
use crate::store::Links;

/// Why a text has no answer: the `reason` label of `src_model_failures_total`.
pub(crate) type Reason = &'static str;

/// The memo, its shared tier and the metrics they count into.
pub(crate) struct Recall {
    memo: ModelMemo,
    shared: Option<SharedMemo>,
    metrics: ModelMetrics,
}

impl Recall {
    pub fn new(options: MemoOptions, metrics: ModelMetrics, links: Arc<Links>) -> Recall {
        let memo = ModelMemo::new(options.bytes);
        let shared = (options.shared && memo.enabled())
            .then(|| SharedMemo::new(options.redis_timeout, options.shared_ttl, links));
        Recall {
            memo,
            shared,
            metrics,
        }
    }

    /// The Redis URL answers are shared through for `policy`, when sharing is on and the
    /// policy's session store is Redis.
    pub fn store_of<'p>(&self, policy: &'p CheckedPolicy) -> Option<&'p RedisTarget> {
        self.shared.as_ref()?;
        match &policy.session.as_ref()?.store {
            StoreDef::Redis(target) => Some(target),
            StoreDef::Memory | StoreDef::Milvus(_) => None,
        }
    }

    /// `batcher`'s model's output for `text` read in windows as `reading` says (packed, see
    /// [`super::window::Windows`]), by `deadline`, remembered for `scope` (a tenant) only.
    pub async fn row(
        &self,
        batcher: &Batcher,
        (text, scope, reading): (&str, &str, Reading),
        deadline: Instant,
        store: Option<&RedisTarget>,
    ) -> Result<Arc<[f32]>, Reason> {
        if !self.memo.enabled() {
            return self.run(batcher, (text, reading), deadline).await;
        }
        let key = MemoKey::new(batcher, text, scope, reading);
        let fill = async {
            if let (Some(shared), Some(url)) = (&self.shared, store) {
                let left = deadline.saturating_duration_since(Instant::now());
                if let Some(row) = shared.get(url, &key, left).await {
                    return Ok::<_, Reason>((row, Source::Shared));
                }
            }
            let row = self.run(batcher, (text, reading), deadline).await?;
            if let (Some(shared), Some(url)) = (&self.shared, store) {
                shared.put(url, &key, &row);
            }
            Ok((row, Source::Model))
        };
        let found = tokio::time::timeout_at(deadline, self.memo.get_or_run(&key, fill)).await;
        let label = || ModelLabel {
            model: batcher.name.clone(),
        };
        let (row, source) = match found {
            Ok(answer) => answer?,
            Err(_) => return Err("timeout"),
        };
        match source {
            Source::Memo => self.metrics.memo_hits.get_or_create(&label()).inc(),
            Source::Shared => {
                self.metrics.memo_hits.get_or_create(&label()).inc();
                self.metrics.memo_shared_hits.get_or_create(&label()).inc()
            }
            Source::Model => self.metrics.memo_misses.get_or_create(&label()).inc(),
        };
        if source != Source::Memo {
            self.gauge();
        }
        Ok(row)
    }

    /// Runs the model on `text`, in windows as `reading` says.
    async fn run(
        &self,
        batcher: &Batcher,
        (text, reading): (&str, Reading),
        deadline: Instant,
    ) -> Result<Arc<[f32]>, Reason> {
        self.metrics
            .calls
            .get_or_create(&ModelLabel {
                model: batcher.name.clone(),
            })
            .inc();
        match tokio::time::timeout_at(deadline, batcher.submit(text.to_owned(), reading)).await {
            // `timeout_at` polls the answer before the clock, so an answer that was already
            // there past the deadline would count as in time.
            Ok(Ok(Ok(_))) if Instant::now() >= deadline => Err("timeout"),
            Ok(Ok(Ok(row))) => Ok(row),
            Ok(Ok(Err(err))) => {
                tracing::warn!(error = %err, "model call failed");
                Err("error")
            }
            Ok(Err(_)) => Err("error"),
            Err(_) => Err("timeout"),
        }
    }

    /// Drops the answers of a model whose files changed.
    pub fn forget(&self, fingerprint: &str) {
        self.memo.forget(fingerprint);
        self.gauge();
    }

    /// Answers held in the memo.
    pub fn remembered(&self) -> usize {
        self.memo.len()
    }

    fn gauge(&self) {
        let clamp = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        self.metrics.memo_entries.set(clamp(self.memo.len() as u64));
        self.metrics.memo_bytes.set(clamp(self.memo.bytes()));
    }
}
