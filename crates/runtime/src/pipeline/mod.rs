//! The steps of a proxied request (docs/language.md, "What happens to a request"), one module
//! per step; the front doors (the `door` module, above this one) drive them:
//!
//! - [`intake`]: read the body within its limit and extract the request's facts;
//! - [`decide`]: blocks, model resolution, routes, then the response cache ([`cache_step`]) and
//!   the session layer, under one policy snapshot; model-backed signals come from [`signals`];
//! - [`forward`]: send to the first candidate model that answers ([`rewrite`] and
//!   [`json_edit`] shape its body, [`shape`] its body and router-set headers, [`redact`] takes
//!   a route's personal data out of it), relayed through [`crate::relay::body`];
//! - [`answer`]: what the router answers itself (errors, refusals, cache hits);
//! - the request's one log line and its metrics: its [`crate::relay::completion`].
//!
//! Steps take the pieces of the server they use ([`Pipeline`] lends them for one request), never
//! the server itself, so each is tested with fakes and without a listener. Every request ends in
//! exactly one log line.

pub mod answer;
pub mod budget_step;
pub mod cache_step;
pub mod continuation;
pub mod decide;
pub mod forward;
pub mod intake;
pub mod json_edit;
pub mod redact;
pub mod rewrite;
pub mod shape;
pub mod signals;

use std::sync::Arc;
use std::time::Instant;

use hyper::header::{HeaderMap, HeaderValue, ALLOW};
use hyper::{Request, Response};
use serde_json::Value;
use src_compiler::failover::Attempts;
use src_compiler::hir::BlockId;
use src_compiler::request::RequestView;

use crate::cache::CacheLayer;
use crate::hooks::{ModelSignals, Sessions};
use crate::log::RequestLog;
use crate::openai::{Api, ApiError};
use crate::pipeline::answer::{answer_error, refuse};
use crate::pipeline::decide::{Asked, Decision, Effects, Facts, Plan};
use crate::pipeline::forward::{Answered, AnsweredBy};
use crate::pipeline::signals::Signals;
use crate::policy_store::{PolicyStore, Snapshot};
use crate::record::Recorder;
use crate::relay::body::ProxyBody;
use crate::relay::completion::Completion;
use crate::telemetry::{BlockLabels, Telemetry};
use crate::upstream::Upstream;

/// What the pipeline uses of a running server, borrowed for one request.
#[derive(Clone, Copy)]
pub struct Pipeline<'a> {
    pub store: &'a PolicyStore,
    pub upstream: &'a Upstream,
    pub telemetry: &'a Arc<Telemetry>,
    pub models: &'a dyn ModelSignals,
    pub sessions: &'a dyn Sessions,
    pub cache: &'a CacheLayer,
    pub budgets: &'a crate::budget::BudgetLayer,
    pub cooldowns: &'a Arc<crate::cooldown::Cooldowns>,
    pub log: &'a RequestLog,
    /// `--record`: where decided requests are appended.
    pub recorder: Option<&'a Recorder>,
    /// Bodies larger than this are refused with 413.
    pub max_body_bytes: usize,
    /// Bodies slower to arrive than this are refused with 408.
    pub body_read_timeout: std::time::Duration,
}

impl<'a> Pipeline<'a> {
    /// What the deciding steps call out to.
    pub fn effects(&self) -> Effects<'a> {
        Effects {
            signals: Signals {
                models: self.models,
                telemetry: self.telemetry,
            },
            sessions: self.sessions,
            cache: self.cache,
            budgets: self.budgets,
        }
    }
}

/// Where the deciding steps left a request.
pub enum Decided {
    /// The router answers it itself (an error, a block's refusal, a cache hit); the answer is
    /// reported already.
    Answer(Answered),
    /// The plan's candidates are to be tried; `done` reports the request once they have been.
    Forward {
        plan: Box<Plan>,
        done: Box<Completion>,
    },
}

/// A parsed request as a front door hands it to the deciding steps.
#[derive(Clone, Copy)]
pub struct Parsed<'a> {
    pub api: Api,
    pub parsed: &'a intake::JsonBody,
    pub view: &'a RequestView,
    /// The client's request headers (what `--record` keeps of them).
    pub headers: &'a HeaderMap,
}

/// The deciding steps of one parsed request under `snapshot`, shared by every front door: the
/// decision, its timing and block metrics, its `--record` line, and the router's own answer
/// when it makes one.
pub async fn decide_step(
    pipeline: Pipeline<'_>,
    snapshot: &Snapshot,
    request: Parsed<'_>,
    mut done: Box<Completion>,
) -> Decided {
    done.record.stream = request.view.stream;
    done.record.policy_generation = snapshot.generation;
    let routing_started = Instant::now();
    let mut facts = Facts {
        keep: pipeline.recorder.is_some(),
        ..Facts::default()
    };
    let asked = Asked {
        api: request.api,
        parsed: request.parsed,
        view: request.view,
        trace: &done.trace,
    };
    let decision = decide::decide(pipeline.effects(), snapshot, asked, &mut facts).await;
    if let Some(recorder) = pipeline.recorder {
        // Boxed: only a recording server runs it, and inline its state would ride in every
        // request's decision.
        let vault = Box::pin(record_vault(pipeline, snapshot, request, &facts, &decision)).await;
        recorder.record(record_line(request, snapshot, &mut facts, &decision, vault));
    }
    let routing = routing_started.elapsed();
    pipeline.telemetry.routing.observe(routing.as_secs_f64());
    done.record.routing_us = routing.as_secs_f64() * 1e6;
    done.record.skipped_signals = facts.skipped_signals;
    done.record.cache = facts.cache;
    done.record.budget = facts.budget.take();
    done.charge = facts.charge.take();
    if pipeline.telemetry.live.watchers() > 0 {
        // Who sent it, for the console's line, whatever the answer: a refusal or a stored
        // answer is filtered by tenant like a forwarded request (which has its session too).
        let session = match &decision {
            Ok(Decision::Forward(plan)) => {
                plan.session.as_ref().and_then(|s| s.identity.as_deref())
            }
            _ => None,
        };
        done.record.watched = Some(crate::watch::who::who(
            snapshot.policy(),
            request.view,
            session,
            pipeline.telemetry.live.shows_prompts(),
        ));
    }
    match decision {
        Err(error) => Decided::Answer(Answered::router(answer_error(*done, error))),
        Ok(Decision::Refuse {
            block,
            status,
            message,
        }) => {
            let name = snapshot
                .policy()
                .blocks
                .get(block.index())
                .map(|b| b.name.clone())
                .unwrap_or_default();
            pipeline
                .telemetry
                .blocks
                .get_or_create(&BlockLabels {
                    block: name.clone(),
                    action: "refuse",
                })
                .inc();
            Decided::Answer(Answered::router(refuse(*done, &name, status, message)))
        }
        Ok(Decision::OverBudget {
            message,
            retry_after_s,
            ..
        }) => Decided::Answer(Answered::router(answer::over_budget(
            *done,
            message,
            retry_after_s,
        ))),
        Ok(Decision::Cached(hit)) => {
            count_redirect(pipeline.telemetry, snapshot, hit.block);
            Decided::Answer(Answered {
                response: answer::cached(*done, snapshot, hit),
                by: AnsweredBy::Cache,
                vault: None,
            })
        }
        Ok(Decision::Forward(plan)) => {
            count_redirect(pipeline.telemetry, snapshot, plan.block);
            Decided::Forward { plan, done }
        }
    }
}

/// The vault a redacting decision's `--record` line is written with: what the detectors its
/// `redact` names find in the body and the model inputs kept. `None` when they cannot read
/// them: the line then keeps neither.
async fn record_vault(
    pipeline: Pipeline<'_>,
    snapshot: &Snapshot,
    request: Parsed<'_>,
    facts: &Facts,
    decision: &Result<Decision, ApiError>,
) -> Option<src_compiler::pii::Vault> {
    let Ok(Decision::Forward(plan)) = decision else {
        return Some(src_compiler::pii::Vault::new());
    };
    let Some(redact) = plan.redact.as_ref().filter(|r| !r.detectors().is_empty()) else {
        return Some(src_compiler::pii::Vault::new());
    };
    let policy = snapshot.policy();
    let mut texts = Vec::new();
    if let Some(fields) = request.parsed.tree().as_object() {
        for key in redact::CONVERSATION {
            if let Some(value) = fields.get(key) {
                redact::texts_of_value(value, &mut texts);
            }
        }
    }
    for model in &facts.models {
        redact::texts_of_value(model, &mut texts);
    }
    let tenant = crate::session::identity::tenant(policy, request.view);
    let models = (pipeline.models, policy);
    redact::detected_vault(texts, redact, models, &tenant)
        .await
        .ok()
}

/// The `--record` line of a decided request (see [`crate::record`]), redacted with `vault` when
/// the decision redacts (`None`: the detectors could not read the request, so its body and
/// model inputs are left out).
fn record_line(
    request: Parsed<'_>,
    snapshot: &Snapshot,
    facts: &mut Facts,
    decision: &Result<Decision, ApiError>,
    vault: Option<src_compiler::pii::Vault>,
) -> Value {
    let policy = snapshot.policy();
    let name = |names: Vec<String>, index: usize| names.get(index).cloned();
    let block_name = |b: BlockId| {
        name(
            policy.blocks.iter().map(|d| d.name.clone()).collect(),
            b.index(),
        )
    };
    let Parsed {
        api,
        parsed,
        headers,
        view,
    } = request;
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let (mut decided, session) = match decision {
        Err(error) => (
            serde_json::json!({"error": error.status.as_u16()}),
            Value::Null,
        ),
        Ok(Decision::Refuse { block, status, .. }) => (
            serde_json::json!({"block": block_name(*block), "refused": status}),
            Value::Null,
        ),
        Ok(Decision::OverBudget { budget, .. }) => (
            serde_json::json!({"budget": budget, "refused": 429}),
            Value::Null,
        ),
        Ok(Decision::Cached(hit)) => (
            serde_json::json!({
                "cache": "hit",
                "block": hit.block.and_then(block_name),
                "route": hit.route.and_then(|r| policy.routes.get(r.index())).map(|r| r.name.clone()),
                "model": policy.models.get(hit.model.index()).map(|d| d.name.clone()),
            }),
            Value::Null,
        ),
        Ok(Decision::Forward(plan)) => {
            let model = |m: &src_compiler::hir::ModelId| {
                policy.models.get(m.index()).map(|d| d.name.clone())
            };
            (
                serde_json::json!({
                    "block": plan.block.and_then(block_name),
                    "route": plan.route.and_then(|r| policy.routes.get(r.index())).map(|r| r.name.clone()),
                    "model": Attempts::first_up(policy, &plan.candidates, api.wire(), view)
                        .as_ref()
                        .and_then(model),
                    "candidates": plan.candidates.iter().filter_map(model).collect::<Vec<_>>(),
                }),
                serde_json::json!({
                    "state": plan.session.as_ref().map(|s| s.state),
                    "identity": plan.session.as_ref().and_then(|s| s.identity.clone()),
                    "protection": plan.protection,
                }),
            )
        }
    };
    // A redacting decision's values are not kept: the body and the model inputs are recorded
    // as the backend was sent them, with placeholders.
    let mut body = parsed.tree().clone();
    if let Ok(Decision::Forward(plan)) = decision {
        if let Some(redact) = &plan.redact {
            let summary = match vault {
                Some(mut vault) => {
                    redact::redact_value(&mut body, redact, &mut vault);
                    for model in &mut facts.models {
                        redact::redact_value(model, redact, &mut vault);
                    }
                    redact::summary(&vault)
                }
                None => {
                    body = Value::Null;
                    facts.models.clear();
                    None
                }
            };
            if let Some(fields) = decided.as_object_mut() {
                fields.insert("redacted".into(), summary.into());
            }
        }
    }
    serde_json::json!({
        "v": crate::record::VERSION,
        "api": api.endpoint(),
        "headers": crate::record::recorded_headers(&headers),
        "body": body,
        "decision": decided,
        "session": session,
        "signals": std::mem::take(&mut facts.signals),
        "models": std::mem::take(&mut facts.models),
    })
}

/// Counts a `block ... to MODEL` redirect.
fn count_redirect(telemetry: &Telemetry, snapshot: &Snapshot, block: Option<BlockId>) {
    if let Some(block) = block.and_then(|b| snapshot.policy().blocks.get(b.index())) {
        telemetry
            .blocks
            .get_or_create(&BlockLabels {
                block: block.name.clone(),
                action: "redirect",
            })
            .inc();
    }
}

/// The report of a request that arrived at `started`, under the client's `x-request-id` when it
/// sent a usable one.
pub fn new_completion(
    pipeline: Pipeline<'_>,
    client: &HeaderMap,
    endpoint: &str,
    started: Instant,
) -> Completion {
    Completion::start(
        Arc::clone(pipeline.telemetry),
        pipeline.log.clone(),
        client,
        endpoint,
        started,
    )
}

/// 405 on a proxied path, reported like any other request.
pub fn refuse_method<B>(
    pipeline: Pipeline<'_>,
    request: &Request<B>,
    started: Instant,
    allow: &'static str,
) -> Response<ProxyBody> {
    let done = new_completion(pipeline, request.headers(), request.uri().path(), started);
    let mut response = answer_error(
        done,
        ApiError::method_not_allowed(request.method().as_str(), request.uri().path()),
    );
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    response
}

#[cfg(test)]
mod fakes;
