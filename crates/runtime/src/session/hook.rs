//! The session layer as the proxy's [`Sessions`] component: it answers the proxy's call after
//! the route decision, registers its counters with the server's metrics, serves the outcomes
//! endpoint, and records the upstream failures the forwarder reports as failed outcomes of the
//! model that failed.

use std::sync::Arc;

use prometheus_client::registry::Registry;
use serde_json::Value;
use src_compiler::hir::{CheckedPolicy, ModelId, StoreDef};
use src_compiler::request::RequestView;
use src_dsl::ast::{OwnerLost, ProtectMode};

use crate::hooks::{
    BoxFuture, OwnerRule, PinRead, SessionInput, SessionOutcome, SessionReport, Sessions,
    UpstreamOutcomes,
};
use crate::openai::ApiError;
use crate::session::identity::identify;
use crate::session::layer::{Continuity, ContinuityInput, SessionLayer, SessionState, Ticket};
use crate::session::outcomes;
use crate::session::protect::PolicyHolds;
use crate::session::store::{redis, retain_ms, Verdict};

impl Sessions for SessionLayer {
    fn list_pins<'a>(
        &'a self,
        policy: &'a CheckedPolicy,
        limit: usize,
    ) -> BoxFuture<'a, Result<Value, ApiError>> {
        Box::pin(crate::session::listing::list(self, policy, limit))
    }

    fn after_route<'a>(&'a self, input: SessionInput<'a>) -> BoxFuture<'a, SessionOutcome> {
        Box::pin(async move {
            let holds = PolicyHolds {
                compiled: input.compiled,
                view: input.request,
                models: self.models(),
            };
            let call = ContinuityInput {
                policy: input.policy,
                view: input.request,
                route: input.route,
                proposed: input.proposed,
                ahead: input.ahead.as_ref(),
            };
            match self.decide(call, &holds).await {
                Continuity::Unmanaged => SessionOutcome::Keep,
                Continuity::Reject { status, message } => {
                    SessionOutcome::Reject { status, message }
                }
                Continuity::Forward {
                    model,
                    state,
                    protection,
                    ticket,
                } => SessionOutcome::Session {
                    model,
                    protection,
                    report: SessionReport {
                        state: state.as_str(),
                        owner: owner_rule(input.policy, input.request, model, state),
                        identity: ticket.as_ref().map(|t| t.identity.id.clone()),
                        outcomes: ticket.map(|ticket| {
                            Arc::new(UpstreamSink { ticket }) as Arc<dyn UpstreamOutcomes>
                        }),
                    },
                },
            }
        })
    }

    /// A pin in a Redis (where the budgets are counted too) for a call with an identity. A store
    /// given by hand ([`SessionLayer::with_store`]) is trusted to be the Redis its declaration
    /// names, which the budgets' store is built on.
    fn pin_read(&self, policy: &CheckedPolicy, request: &RequestView) -> Option<PinRead> {
        let def = policy.session.as_ref()?;
        if !matches!(def.store, StoreDef::Redis(_)) {
            return None;
        }
        if self.store(&def.store).ok()?.kind() != "redis" {
            return None;
        }
        let identity = identify(policy, def, request)?;
        Some(PinRead {
            key: redis::pin_key(&identity),
            now_ms: self.now_ms(),
            ttl_ms: def.ttl_ms,
            retain_ms: retain_ms(def.ttl_ms),
        })
    }

    fn register_metrics(&self, registry: &mut Registry) {
        self.metrics().register(registry);
    }

    fn record_outcome<'a>(
        &'a self,
        policy: &'a CheckedPolicy,
        headers: &'a [(String, String)],
        body: &'a [u8],
    ) -> BoxFuture<'a, Result<Value, ApiError>> {
        Box::pin(outcomes::report(self, policy, headers, body))
    }
}

/// What an owner loss does for a call that follows a live pin (`pinned`, or `held` by a hold);
/// `None` for a call whose model has no history in the session yet. Without `protect` the
/// fallbacks answer; with it, `owner_lost` decides, by default `fail` inside a tool loop.
fn owner_rule(
    policy: &CheckedPolicy,
    view: &RequestView,
    model: ModelId,
    state: SessionState,
) -> Option<OwnerRule> {
    if !matches!(state, SessionState::Pinned | SessionState::Held) {
        return None;
    }
    let (on_loss, observe) = match &policy.protect {
        Some(protect) => (
            protect.owner_lost_for(view.tool_loop, view.provider_state),
            protect.mode == ProtectMode::Observe,
        ),
        None => (OwnerLost::Fallback, false),
    };
    Some(OwnerRule {
        model,
        on_loss,
        observe,
    })
}

/// The `owner_lost` action that moves the pin.
pub const MOVE: &str = "move";

/// Records upstream failures as `fail` outcomes of the session, off the request path.
struct UpstreamSink {
    ticket: Ticket,
}

impl UpstreamOutcomes for UpstreamSink {
    fn failed(&self, model: &str, reason: &'static str) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let ticket = self.ticket.clone();
        let model = model.to_owned();
        runtime.spawn(async move {
            if let Err(err) = ticket.record(&model, Verdict::Fail, None, "upstream").await {
                tracing::debug!(%err, reason, "cannot record an upstream failure");
            }
        });
    }

    fn owner_lost<'a>(
        &'a self,
        from: &'a str,
        to: Option<&'a str>,
        action: &'static str,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.ticket.count_owner_lost(from, action);
            if let (MOVE, Some(to)) = (action, to) {
                if let Err(err) = self.ticket.move_pin(from, to).await {
                    tracing::warn!(%err, from, to, "cannot move the pin of a lost owner");
                }
            }
        })
    }
}
