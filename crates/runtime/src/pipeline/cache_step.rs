//! The response cache's step of a request (docs/language.md, "What happens to a request", step
//! 4), once blocks, model resolution and routes have proposed a logical model. The request
//! procedure decides the first two points; this module does the rest:
//!
//! 1. **bypass** when the deciding route says `cache = off` or the request streams a
//!    `/v1/responses` answer; here, when the body has no final user message to compare;
//! 2. **skip** when `skip when` holds (its model-backed signals are computed like any other);
//! 3. embed the final user message (one encoder call; a failure is recorded and the request goes
//!    upstream as on a miss, never a 5xx);
//! 4. look the scope up: a live entry whose similarity reaches the threshold and whose question
//!    passes the look-alike check (`src_compiler::lookalike`: same numbers, units and direction,
//!    dates, polarity and names) is a **hit** and answers; otherwise a **miss** goes upstream and
//!    carries a [`Fill`] so the proposed model's complete answer is stored once relayed (a
//!    streamed chat answer is assembled first). A miss where every entry at the threshold was
//!    refused by the check is a **miss-verified**, counted and logged with the first reason.
//!
//! A store failure follows `failure.store`: `open` carries on without the cache (`error`,
//! recorded), `closed` answers 503.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::Value;
use src_compiler::hir::{BlockId, ModelId, RouteId};
use src_compiler::lookalike::{self, Mismatch};
use src_compiler::request::RequestView;

use crate::cache::directive::Directive;
use crate::cache::fill::Fill;
use crate::cache::layer::{CacheLayer, DEFAULT_TTL_MS};
use crate::cache::replay;
use crate::cache::scope::{self, ScopeParts};
use crate::cache::store::{Lookup, Nearest};
use crate::headers::cache as word;
use crate::openai::{Api, ApiError};
use crate::policy_store::Snapshot;
use crate::store::failure::{self, Failed, Site};
use crate::store::kind_of;

/// What the cache did with a request: the value of `x-sr-cache` and of the log's `cache`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheResult {
    Hit,
    Miss,
    /// Entries reached the threshold, and the look-alike check refused each of them.
    MissVerified,
    /// `skip when` held.
    Skip,
    /// The cache does not apply to this request (see the module comment).
    Bypass,
    /// The encoder or the store failed; the request went on without the cache.
    Error,
}

impl CacheResult {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheResult::Hit => word::HIT,
            CacheResult::Miss => word::MISS,
            CacheResult::MissVerified => word::MISS_VERIFIED,
            CacheResult::Skip => word::SKIP,
            CacheResult::Bypass => word::BYPASS,
            CacheResult::Error => word::ERROR,
        }
    }
}

/// What a request that goes upstream carries from the cache.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheReport {
    pub result: CacheResult,
    /// The nearest entry's similarity, when one was compared.
    pub score: Option<f32>,
    /// Where the answer is stored (a miss of a non-streaming request).
    pub fill: Option<Fill>,
}

/// A hit, ready to be answered.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedAnswer {
    pub route: Option<RouteId>,
    pub block: Option<BlockId>,
    /// The proposed model, whose answer this is.
    pub model: ModelId,
    /// The stored body, or its replay as an event stream when `sse`.
    pub body: Bytes,
    pub sse: bool,
    pub score: f32,
}

/// The step's outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum Consulted {
    Hit(CachedAnswer),
    /// Go on to the session step and the backend; `None` when the policy has no `cache`.
    Forward(Option<CacheReport>),
}

/// The request, as the cache reads it.
#[derive(Clone, Copy)]
pub struct CacheQuery<'a> {
    pub api: Api,
    pub parsed: &'a Value,
    pub view: &'a RequestView,
    /// The deciding route (`None` when the client named the model or a block redirected).
    pub route: Option<RouteId>,
    pub block: Option<BlockId>,
    pub proposal: ModelId,
}

/// Looks the cache up for `query`, once the request procedure has found that the cache applies
/// (the route and the API do not bypass it, `skip when` does not hold).
pub async fn lookup(
    layer: &CacheLayer,
    snapshot: &Snapshot,
    query: CacheQuery<'_>,
) -> Result<Consulted, ApiError> {
    let policy = snapshot.policy();
    let Some(def) = &policy.cache else {
        return Ok(Consulted::Forward(None));
    };
    let view = query.view;
    let route = query.route.and_then(|r| policy.routes.get(r.index()));
    // The intake refused unknown values already; what is left is the client's directive.
    let directive = Directive::read(view.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())))
        .unwrap_or_default();
    // A keyless request under `anonymous = isolate` could read any keyless client's answer.
    if directive.bypasses() || crate::session::identity::isolated(policy, view) {
        return Ok(report(layer, CacheResult::Bypass));
    }
    let Some(body) = scope::body_digest(query.api, query.parsed, &view.prompt) else {
        return Ok(report(layer, CacheResult::Bypass));
    };
    let model = policy
        .models
        .get(query.proposal.index())
        .ok_or_else(|| ApiError::internal("the decision named an unknown model"))?;
    let tenant = scope::tenant(policy, view);
    let embedding = match layer
        .models
        .embed(policy, def.encoder, &view.prompt, &tenant)
        .await
    {
        Ok(embedding) => embedding,
        Err(err) => {
            tracing::warn!(%err, "cannot embed the prompt for the cache; going on without it");
            return Ok(report(layer, CacheResult::Error));
        }
    };
    let plugins = route.map(scope::plugins).unwrap_or_default();
    let scope = scope::scope(
        &ScopeParts {
            tenant: &tenant,
            api: query.api,
            model: &model.name,
            serves: &model.serves,
            plugins: &plugins,
            encoder: &embedding.model,
        },
        body,
    );
    let mode = policy.failure.store;
    let connect = site(kind_of(&def.store), "connect");
    let store = match failure::guard(mode, connect, layer.store(&def.store)) {
        Ok(store) => store,
        Err(failed) => return store_failed(layer, connect, failed),
    };
    store.bound(layer.bounds(def));
    let ttl_ms = def.ttl_ms.unwrap_or(DEFAULT_TTL_MS);
    let vector: Arc<[f32]> = embedding.vector.into();
    let now = layer.clock.now_ms();
    // The first reason the look-alike check gave, for the log.
    let refused: OnceLock<Mismatch> = OnceLock::new();
    let prompt = view.prompt.as_str();
    let accept = |stored: &str| match lookalike::agree(prompt, stored) {
        Ok(()) => true,
        Err(why) => {
            let _ = refused.set(why);
            false
        }
    };
    let nearest = if directive.no_cache {
        Nearest::default()
    } else {
        let lookup = site(store.kind(), "lookup");
        let found = store
            .nearest(Lookup {
                scope: &scope,
                vector: &vector,
                threshold: def.threshold,
                now_ms: now,
                ttl_ms,
                accept: &accept,
            })
            .await;
        match failure::guard(mode, lookup, found) {
            Ok(nearest) => nearest,
            Err(failed) => return store_failed(layer, lookup, failed),
        }
    };
    layer.metrics.observe(store.as_ref());
    if let (Some(body), Some(score)) = (nearest.body, nearest.score) {
        let answer = if view.stream {
            replay::chat_stream(&body).map(|b| (b, true))
        } else {
            Some((body, false))
        };
        if let Some((body, sse)) = answer {
            layer.metrics.lookup(word::HIT);
            return Ok(Consulted::Hit(CachedAnswer {
                route: query.route,
                block: query.block,
                model: query.proposal,
                body,
                sse,
                score,
            }));
        }
    }
    let result = if nearest.rejected > 0 {
        tracing::info!(
            rejected = nearest.rejected,
            reason = refused.get().map_or("", |m| m.as_str()),
            "cache candidates refused: their questions differ from the request's"
        );
        CacheResult::MissVerified
    } else {
        CacheResult::Miss
    };
    layer.metrics.lookup(result.as_str());
    // Streaming `/v1/responses` requests bypassed above; a streamed chat answer is assembled.
    let fill = (!directive.no_store).then(|| Fill {
        model: query.proposal,
        api: query.api,
        store,
        scope,
        vector,
        question: prompt.into(),
        ttl_ms,
        max_bytes: layer.options.max_entry_bytes,
        clock: Arc::clone(&layer.clock),
        metrics: layer.metrics.clone(),
    });
    Ok(Consulted::Forward(Some(CacheReport {
        result,
        score: nearest.score,
        fill,
    })))
}

fn report(layer: &CacheLayer, result: CacheResult) -> Consulted {
    Consulted::Forward(Some(passed(layer, result)))
}

/// The report of a request the cache answered no lookup for: bypassed or skipped by the request
/// procedure, or with nothing to compare.
pub fn passed(layer: &CacheLayer, result: CacheResult) -> CacheReport {
    layer.metrics.lookup(result.as_str());
    CacheReport {
        result,
        score: None,
        fill: None,
    }
}

/// Where the cache store failed.
fn site(kind: &'static str, op: &'static str) -> Site {
    Site {
        store: "cache",
        kind,
        op,
    }
}

/// `failure.store`: open goes on without the cache, closed answers 503.
fn store_failed(layer: &CacheLayer, site: Site, failed: Failed) -> Result<Consulted, ApiError> {
    layer
        .metrics
        .store_error(site.kind, site.op, failed.error().kind());
    match failed {
        Failed::Refuse(refusal) => {
            layer.metrics.lookup(word::ERROR);
            Err(ApiError::new(
                hyper::StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                Some("cache"),
                refusal.message(),
            ))
        }
        Failed::Skip(_) => Ok(report(layer, CacheResult::Error)),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use serde_json::{json, Value};
    use src_compiler::hir::{ModelId, RouteId, StoreDef};

    use super::*;
    use crate::cache::store::MemoryCache;
    use crate::cache::CacheOptions;
    use crate::pipeline::fakes::{self, Scripted};
    use crate::session::ManualClock;

    const POLICY: &str = fakes::CACHED_POLICY;

    const STORED: &str = r#"{"id":"c1","object":"chat.completion","model":"small-id","choices":[{"index":0,"message":{"role":"assistant","content":"Paris"},"finish_reason":"stop"}]}"#;

    /// One server's cache, over a memory store and a clock that stands still.
    struct Cache {
        models: Arc<Scripted>,
        layer: CacheLayer,
        snapshot: Snapshot,
    }

    impl Cache {
        async fn new(policy: &str, models: Scripted) -> Cache {
            let models = Arc::new(models);
            let snapshot = fakes::snapshot(policy, models.as_ref()).await;
            let layer = CacheLayer::new(models.clone(), CacheOptions::default())
                .with_clock(Arc::new(ManualClock::new(1_000)))
                .with_store(
                    StoreDef::Memory,
                    Arc::new(MemoryCache::new(100, 1 << 20, 1 << 16)),
                );
            Cache {
                models,
                layer,
                snapshot,
            }
        }

        /// The lookup of `body` on `api`, once its routes have proposed `proposal`.
        async fn consult(
            &self,
            api: Api,
            body: &Value,
            route: Option<RouteId>,
            proposal: ModelId,
        ) -> Result<Consulted, ApiError> {
            // A keyed tenant: a request without a credential has no cache at all.
            let key = [("authorization".to_owned(), "Bearer key-a".to_owned())];
            let view = match api {
                Api::Chat => RequestView::from_chat(body, &key).expect("a valid request"),
                Api::Responses => RequestView::from_responses(body, &key).expect("a valid request"),
                Api::Messages => RequestView::from_messages(body, &key).expect("a valid request"),
            };
            let query = CacheQuery {
                api,
                parsed: body,
                view: &view,
                route,
                block: None,
                proposal,
            };
            lookup(&self.layer, &self.snapshot, query).await
        }
    }

    fn forwarded(consulted: Result<Consulted, ApiError>) -> CacheReport {
        match consulted {
            Ok(Consulted::Forward(Some(report))) => report,
            other => panic!("expected a cache report, got {other:?}"),
        }
    }

    const DEFAULT: Option<RouteId> = Some(RouteId(1));
    const SMALL: ModelId = ModelId(0);

    #[tokio::test]
    async fn a_policy_without_a_cache_goes_on_without_a_report() {
        let policy = POLICY.replace(
            "cache {\n  encoder = minilm\n  threshold = 0.9\n  store = memory\n  skip when contains(prompt, [\"today\"])\n}",
            "",
        );
        let cache = Cache::new(&policy, Scripted::default()).await;
        let body = fakes::user("auto", "capital of France?");
        let consulted = cache.consult(Api::Chat, &body, DEFAULT, SMALL).await;
        assert_eq!(consulted, Ok(Consulted::Forward(None)));
    }

    #[tokio::test]
    async fn a_miss_carries_a_fill_and_the_stored_answer_then_hits() {
        let cache = Cache::new(POLICY, Scripted::default()).await;
        let body = fakes::user("auto", "capital of France?");
        let report = forwarded(cache.consult(Api::Chat, &body, DEFAULT, SMALL).await);
        assert_eq!(report.result, CacheResult::Miss);
        assert_eq!(cache.models.asked(), ["embed:minilm"]);
        let fill = report.fill.expect("a miss stores its answer");
        assert_eq!(fill.model, SMALL);
        let stored = fill
            .store
            .insert(
                &fill.scope,
                &fill.vector,
                &fill.question,
                Bytes::from_static(STORED.as_bytes()),
                1_000,
                fill.ttl_ms,
            )
            .await;
        assert!(stored.is_ok(), "{stored:?}");

        let hit = match cache.consult(Api::Chat, &body, DEFAULT, SMALL).await {
            Ok(Consulted::Hit(hit)) => hit,
            other => panic!("expected a hit, got {other:?}"),
        };
        assert_eq!((hit.route, hit.model, hit.sse), (DEFAULT, SMALL, false));
        assert_eq!(hit.body, Bytes::from_static(STORED.as_bytes()));
        assert!(hit.score >= 0.9, "{}", hit.score);

        // A streaming request gets the same answer as an event stream.
        let mut streaming = body.clone();
        streaming["stream"] = json!(true);
        let hit = match cache.consult(Api::Chat, &streaming, DEFAULT, SMALL).await {
            Ok(Consulted::Hit(hit)) => hit,
            other => panic!("expected a hit, got {other:?}"),
        };
        assert!(hit.sse);
        assert!(hit.body.ends_with(b"data: [DONE]\n\n"));

        // Another model's scope holds nothing.
        let report = forwarded(cache.consult(Api::Chat, &body, None, ModelId(1)).await);
        assert_eq!(report.result, CacheResult::Miss);
    }

    /// Misses `question`, then stores its answer as the relay would.
    async fn store_answer(cache: &Cache, question: &str) {
        let body = fakes::user("auto", question);
        let report = forwarded(cache.consult(Api::Chat, &body, DEFAULT, SMALL).await);
        let fill = report.fill.expect("a miss stores its answer");
        assert_eq!(&*fill.question, question);
        let stored = fill
            .store
            .insert(
                &fill.scope,
                &fill.vector,
                &fill.question,
                Bytes::from_static(STORED.as_bytes()),
                1_000,
                fill.ttl_ms,
            )
            .await;
        assert_eq!(stored, Ok(crate::cache::Inserted::Stored));
    }

    #[tokio::test]
    async fn a_look_alike_question_is_a_verified_miss_and_a_paraphrase_hits() {
        // The fake encoder gives every text the same vector: only the check tells them apart.
        let cache = Cache::new(POLICY, Scripted::default()).await;
        store_answer(&cache, "convert 5 km to miles").await;

        let swapped = fakes::user("auto", "convert 5 miles to km");
        let report = forwarded(cache.consult(Api::Chat, &swapped, DEFAULT, SMALL).await);
        assert_eq!(report.result, CacheResult::MissVerified);
        assert_eq!(report.result.as_str(), "miss-verified");
        assert!(report.fill.is_some(), "its own answer is stored");
        assert!(cache
            .layer
            .metrics()
            .encode()
            .contains(r#"result="miss-verified"} 1"#));

        let paraphrase = fakes::user("auto", "how many miles is 5 km?");
        match cache.consult(Api::Chat, &paraphrase, DEFAULT, SMALL).await {
            Ok(Consulted::Hit(hit)) => assert_eq!(hit.body, Bytes::from_static(STORED.as_bytes())),
            other => panic!("expected a hit, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn the_check_passes_over_a_look_alike_to_the_true_paraphrase() {
        let cache = Cache::new(POLICY, Scripted::default()).await;
        store_answer(&cache, "is it safe to mix bleach and ammonia?").await;
        store_answer(&cache, "is it unsafe to mix bleach and ammonia?").await;
        let body = fakes::user("auto", "Is it unsafe to mix bleach and ammonia");
        assert!(matches!(
            cache.consult(Api::Chat, &body, DEFAULT, SMALL).await,
            Ok(Consulted::Hit(_))
        ));
    }

    #[tokio::test]
    async fn a_messages_request_is_keyed_apart_from_the_same_chat_request() {
        let cache = Cache::new(POLICY, Scripted::default()).await;
        let body = json!({"model": "auto", "max_tokens": 16,
            "messages": [{"role": "user", "content": "capital of France?"}]});
        let chat = forwarded(cache.consult(Api::Chat, &body, DEFAULT, SMALL).await);
        let messages = forwarded(cache.consult(Api::Messages, &body, DEFAULT, SMALL).await);
        let (chat, messages) = (chat.fill.expect("a fill"), messages.fill.expect("a fill"));
        assert_ne!(chat.scope, messages.scope);
        assert_eq!(messages.api, Api::Messages);
    }

    #[tokio::test]
    async fn a_failed_encoder_goes_on_without_the_cache() {
        let models = Scripted {
            embedding: None,
            ..Scripted::default()
        };
        let cache = Cache::new(POLICY, models).await;
        let body = fakes::user("auto", "capital of France?");
        let report = forwarded(cache.consult(Api::Chat, &body, DEFAULT, SMALL).await);
        assert_eq!(report.result, CacheResult::Error);
        assert_eq!(report.fill, None);
    }
}
