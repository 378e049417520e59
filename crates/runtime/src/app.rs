//! The shared state of a running server: configuration, the policy store, the upstream client,
//! telemetry, the response cache, and the pluggable components. One `Arc<App>` is cloned into
//! every connection.

use std::sync::Arc;

use crate::backends::SimPool;
use crate::cache::CacheLayer;
use crate::config::ServeConfig;
use crate::cooldown::Cooldowns;
use crate::hooks::{ModelSignals, Sessions};
use crate::log::RequestLog;
use crate::pipeline::Pipeline;
use crate::policy_store::PolicyStore;
use crate::readiness::Readiness;
use crate::record::Recorder;
use crate::responses_state::ResponseStates;
use crate::session::SessionLayer;
use crate::store::Links;
use crate::telemetry::Telemetry;
use crate::upstream::Upstream;

impl App {
    /// The pieces of this server that the request pipeline uses, lent for one request.
    pub fn pipeline(&self) -> Pipeline<'_> {
        Pipeline {
            store: &self.store,
            upstream: &self.upstream,
            telemetry: &self.telemetry,
            models: self.components.models.as_ref(),
            sessions: self.components.sessions.as_ref(),
            cache: &self.cache,
            budgets: &self.budgets,
            cooldowns: &self.cooldowns,
            log: &self.components.log,
            recorder: self.recorder.as_ref(),
            max_body_bytes: self.cfg.max_body_bytes,
            body_read_timeout: self.cfg.limits.body_read_timeout,
        }
    }
}

/// The parts of a server that other components (or tests) provide.
#[derive(Clone)]
pub struct Components {
    pub models: Arc<dyn ModelSignals>,
    pub sessions: Arc<dyn Sessions>,
    pub log: RequestLog,
    /// The Redis links the server's stores share: the cache, stored responses and cooldowns
    /// the server builds, and (in [`Components::standard`]) the sessions and the model memo.
    pub links: Arc<Links>,
}

impl Components {
    /// ONNX models (loaded only for policies that declare them), sessions pinned as the policy
    /// says, request lines on stderr.
    pub fn standard() -> Components {
        Components {
            log: RequestLog::stderr(),
            ..Components::standard_without_log()
        }
    }

    /// As [`Components::standard`], with request lines kept where the caller says.
    pub fn with_log(log: RequestLog) -> Components {
        Components {
            log,
            ..Components::standard_without_log()
        }
    }

    fn standard_without_log() -> Components {
        let links = Arc::new(Links::new());
        let models: Arc<dyn ModelSignals> = Arc::new(crate::models::OnnxModels::with_links(
            crate::models::ModelOptions::from_env(),
            Arc::clone(&links),
        ));
        Components {
            sessions: Arc::new(
                SessionLayer::new(
                    Arc::new(crate::store::SystemClock),
                    crate::session::SessionOptions::from_env(),
                )
                .with_models(Arc::clone(&models))
                .with_links(Arc::clone(&links)),
            ),
            models,
            log: RequestLog::Off,
            links,
        }
    }
}

pub struct App {
    pub cfg: ServeConfig,
    pub store: PolicyStore,
    pub upstream: Upstream,
    pub telemetry: Arc<Telemetry>,
    pub readiness: Readiness,
    pub components: Components,
    pub sims: SimPool,
    /// The response cache (`cache { }`), embedding with `components.models`.
    pub cache: CacheLayer,
    /// `--record DIR`: where decided requests are appended.
    pub recorder: Option<Recorder>,
    /// The `/v1/responses` answers the router keeps (docs/responses.md).
    pub responses: ResponseStates,
    /// Models skipped after failing too often in a row (`failure.cooldown_after`).
    pub cooldowns: Arc<Cooldowns>,
    /// Where `budget`s are counted (the session's store, or memory).
    pub budgets: crate::budget::BudgetLayer,
}
