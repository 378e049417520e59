//! The failover machine (docs/language.md, "What happens to a request", step 6): which of a
//! decision's candidates a request is sent to, in which order, and what ends the attempts. It
//! does no IO, in the style of the [`procedure`](crate::procedure): the caller sends, and tells
//! the machine what came back.
//!
//! - [`Attempts::next`] skips a candidate whose backend cannot take the request's API
//!   ([`Reach::Unspoken`]), one cooling down after repeated failures (the caller says which
//!   are), and one whose `context` is smaller than the request, and names the next one to send.
//! - [`Attempts::answered`] judges an answer's status: any 5xx moves on, a 404 (not served) or
//!   a 429 (over its rate limit) moves on while another candidate remains, and everything else
//!   is the answer. [`Attempts::failed`] notes a send that got no answer at all.
//! - When the failed model is the one the session's live pin names, its `owner_lost` rule
//!   decides first: an enforced `fail` stops the attempts ([`End::OwnerKept`]); otherwise the
//!   fallbacks go on and [`Attempts::owner_lost`] says so.
//! - With every candidate failed, [`Attempts::exhausted`] says how the request is answered.
//!
//! The proxy iterates it with real sends, the external processor (which cannot retry) asks it
//! once, and `src explain` reads it offline, so none of them filters candidates by rules of
//! its own. Each candidate is tried at most once.

use std::time::Duration;

use src_dsl::ast::{BackendApi, OwnerLost};

use crate::hir::{CheckedPolicy, ModelDef, ModelId};
use crate::request::RequestView;

/// The API a client's request came in through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Chat,
    Responses,
    Messages,
}

impl Wire {
    /// The name a failure description uses.
    pub fn name(self) -> &'static str {
        match self {
            Wire::Chat => "chat",
            Wire::Responses => "responses",
            Wire::Messages => "messages",
        }
    }
}

/// How a request reaches one backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The backend speaks the client's API.
    Native,
    /// A Messages request sent to an OpenAI backend as a chat completion, its answer
    /// translated back.
    ChatForMessages,
    /// The backend cannot take this API: a chat or Responses request has no translation to
    /// Anthropic's Messages.
    Unspoken,
}

impl Reach {
    pub fn of(wire: Wire, backend: BackendApi) -> Reach {
        match (wire, backend) {
            (Wire::Messages, BackendApi::Anthropic) => Reach::Native,
            (Wire::Messages, BackendApi::OpenAi) => Reach::ChatForMessages,
            (Wire::Chat | Wire::Responses, BackendApi::OpenAi) => Reach::Native,
            (Wire::Chat | Wire::Responses, BackendApi::Anthropic) => Reach::Unspoken,
        }
    }
}

/// What the forwarder does when the model a call's live pin names fails it before its first
/// byte (`owner_lost` of docs/language.md, "`session` and `protect`").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerRule {
    /// The pinned model (the call's first candidate).
    pub model: ModelId,
    pub on_loss: OwnerLost,
    /// `protect` observes: report what `fail` would do, and fall back anyway.
    pub observe: bool,
}

impl OwnerRule {
    /// The `owner_lost` action a fallback answering in the owner's place was reached under.
    pub fn action(self) -> &'static str {
        match self.on_loss {
            OwnerLost::Fail => OBSERVED,
            OwnerLost::Fallback => "fallback",
            OwnerLost::Move => "move",
        }
    }
}

/// The action an observed `owner_lost = fail` reports.
pub const OBSERVED: &str = "observed";

/// How a send that got no answer failed, as the caller's transport classified it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unanswered {
    /// No answer head within the backend's `timeout`.
    Timeout,
    /// The backend could not be reached, or broke the connection.
    Unreachable,
}

/// Why a candidate produced no answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Why {
    /// The request is longer than the model's `context`.
    Context { tokens: i64, context: u64 },
    /// The backend does not speak the request's API.
    Unspoken { wire: Wire },
    /// Cooling down after repeated failures.
    Cooldown { left: Duration },
    /// Sent, and no answer came; `reason` is the transport's metric word.
    Upstream {
        kind: Unanswered,
        reason: &'static str,
        detail: String,
    },
    /// The backend answered a status that moves on.
    Status(u16),
    /// The request could not be built for this candidate.
    Body(String),
}

impl Why {
    /// The word metrics and the request log use for it.
    pub fn reason(&self) -> &'static str {
        match self {
            Why::Context { .. } => "context",
            Why::Unspoken { .. } => "api",
            Why::Cooldown { .. } => "cooldown",
            Why::Upstream { reason, .. } => reason,
            Why::Status(_) => "status",
            Why::Body(_) => "body",
        }
    }

    /// A sentence for the client's error and the log.
    pub fn describe(&self) -> String {
        match self {
            Why::Context { tokens, context } => {
                format!("the request has ~{tokens} tokens, over its context of {context}")
            }
            Why::Unspoken { wire } => format!(
                "its backend speaks Anthropic's Messages API, not the {} API",
                wire.name()
            ),
            Why::Cooldown { left } => format!(
                "cooling down after repeated failures ({} left)",
                human_duration(*left)
            ),
            Why::Upstream { detail, .. } => detail.clone(),
            Why::Status(s) => format!("the backend answered {s}"),
            Why::Body(e) => e.clone(),
        }
    }

    /// Whether the model itself failed the call (a skip, or a request the router could not
    /// build, is no fault of the model's).
    pub fn is_model_failure(&self) -> bool {
        matches!(self, Why::Upstream { .. } | Why::Status(_))
    }
}

/// A duration as an error message gives it: `850 ms`, `12.0 s`.
pub fn human_duration(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{} ms", d.as_millis())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// One candidate that did not answer, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Failed {
    pub model: ModelId,
    pub why: Why,
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Send the request to `model`'s backend, reached as `reach`.
    Send { model: ModelId, reach: Reach },
    /// No candidate is left to send to.
    Done(End),
}

/// Why the attempts ended without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Every candidate failed or was skipped: see [`Attempts::exhausted`].
    Exhausted,
    /// The session's pinned model failed the call, and an enforced `owner_lost = fail` keeps
    /// the call on it.
    OwnerKept,
}

/// What an answer's status means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    /// Relay it: it is the request's answer.
    Answer(Health),
    /// Drop it and try the next candidate; the model failed.
    MovesOn,
}

/// What an answer that is relayed says of its model's health (for its cooldown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Below 400: judged when its body ends (a stream that breaks off is a failure).
    Pending,
    /// A 404, a 429 or a 5xx that could not move on: a failure of the model.
    Failed,
    /// Any other 4xx: about the request, not the model.
    Neutral,
}

impl Health {
    /// The health a relayed answer's `status` says of its model.
    pub fn of(status: u16) -> Health {
        if status < 400 {
            Health::Pending
        } else if matches!(status, 404 | 429) || status >= 500 {
            Health::Failed
        } else {
            Health::Neutral
        }
    }
}

/// How a request whose every candidate failed is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exhausted {
    /// 400 `context_length_exceeded`: the request fits no model's context.
    TooLong,
    /// 400: no eligible model's backend speaks the request's API.
    Unspoken,
    /// 504: the last failure was a timeout.
    Timeout,
    /// 502: the last failure was an unreachable or broken backend, or an unbuildable body.
    BadGateway,
    /// 503: backends answered errors (or every candidate was cooling down).
    Unavailable,
}

impl Exhausted {
    pub fn status(self) -> u16 {
        match self {
            Exhausted::TooLong | Exhausted::Unspoken => 400,
            Exhausted::Timeout => 504,
            Exhausted::BadGateway => 502,
            Exhausted::Unavailable => 503,
        }
    }
}

/// The attempts of one request over its decision's candidates.
#[derive(Debug, Clone)]
pub struct Attempts<'c> {
    candidates: &'c [ModelId],
    /// The index of the next candidate to consider.
    at: usize,
    wire: Wire,
    owner: Option<OwnerRule>,
    owner_lost: bool,
    kept: bool,
    /// The request's token estimate, counted once and only when a model has a `context`.
    tokens: Option<i64>,
    failures: Vec<Failed>,
}

impl<'c> Attempts<'c> {
    pub fn new(candidates: &'c [ModelId], wire: Wire, owner: Option<OwnerRule>) -> Attempts<'c> {
        Attempts {
            candidates,
            at: 0,
            wire,
            owner,
            owner_lost: false,
            kept: false,
            tokens: None,
            failures: Vec::new(),
        }
    }

    /// The next candidate to send to, skipping (and noting) those that cannot take the request;
    /// `cooling` says how long a model is still cooling down.
    pub fn next(
        &mut self,
        policy: &CheckedPolicy,
        view: &RequestView,
        cooling: impl Fn(&ModelDef) -> Option<Duration>,
    ) -> Next {
        if self.kept {
            return Next::Done(End::OwnerKept);
        }
        while let Some(&id) = self.candidates.get(self.at) {
            self.at += 1;
            let Some(model) = policy.models.get(id.index()) else {
                continue;
            };
            let Some(backend) = policy.backends.get(model.backend.index()) else {
                continue;
            };
            let reach = Reach::of(self.wire, backend.api);
            let why = if let Some(left) = cooling(model) {
                Why::Cooldown { left }
            } else if let Some((tokens, context)) = self.over_context(model, view) {
                Why::Context { tokens, context }
            } else if reach == Reach::Unspoken {
                Why::Unspoken { wire: self.wire }
            } else {
                return Next::Send { model: id, reach };
            };
            self.failures.push(Failed { model: id, why });
        }
        Next::Done(End::Exhausted)
    }

    fn over_context(&mut self, model: &ModelDef, view: &RequestView) -> Option<(i64, u64)> {
        let context = model.context?;
        let count = *self
            .tokens
            .get_or_insert_with(|| crate::text::tokens_estimate(&view.history));
        (u64::try_from(count).unwrap_or(0) > context).then_some((count, context))
    }

    /// The candidate a request is sent to first with every backend up and nothing cooling down:
    /// the model `src explain`, `--record` and `src whatif` report for a decision.
    pub fn first_up(
        policy: &CheckedPolicy,
        candidates: &[ModelId],
        wire: Wire,
        view: &RequestView,
    ) -> Option<ModelId> {
        match Attempts::new(candidates, wire, None).next(policy, view, |_| None) {
            Next::Send { model, .. } => Some(model),
            Next::Done(_) => None,
        }
    }

    /// Whether another candidate remains after the one last sent to.
    pub fn more(&self) -> bool {
        self.at < self.candidates.len()
    }

    /// Judges the status `model` answered: the answer, or a failure to move on from.
    pub fn answered(&mut self, model: ModelId, status: u16) -> Judged {
        let more = self.more();
        let retried = matches!(status, 404 | 429);
        if status >= 500 || (retried && more) {
            self.fail(model, Why::Status(status));
            return Judged::MovesOn;
        }
        Judged::Answer(Health::of(status))
    }

    /// Notes a send to `model` that produced no answer (`why`); the next [`Attempts::next`]
    /// moves on, or ends the attempts when `model` is an owner that may not be lost.
    pub fn failed(&mut self, model: ModelId, why: Why) {
        self.fail(model, why);
    }

    fn fail(&mut self, model: ModelId, why: Why) {
        let lost = why.is_model_failure();
        self.failures.push(Failed { model, why });
        let Some(rule) = self
            .owner
            .filter(|o| lost && o.model == model && self.more())
        else {
            return;
        };
        if rule.on_loss == OwnerLost::Fail && !rule.observe {
            self.kept = true;
        } else {
            self.owner_lost = true;
        }
    }

    /// The candidates that did not answer, in the order they were considered.
    pub fn failures(&self) -> &[Failed] {
        &self.failures
    }

    /// The session's pinned model failed the call, and the fallbacks were let on: the rule
    /// under which a fallback answering is a switch.
    pub fn owner_lost(&self) -> Option<OwnerRule> {
        self.owner.filter(|_| self.owner_lost)
    }

    /// The session's owner rule, if the call has a live pin.
    pub fn owner(&self) -> Option<OwnerRule> {
        self.owner
    }

    /// How the request is answered now that every candidate failed: 400 when the request fits
    /// no model's context or no model's backend speaks its API, else by the kind of the last
    /// failure that was not a context skip.
    pub fn exhausted(&self) -> Exhausted {
        let failures = &self.failures;
        if !failures.is_empty()
            && failures
                .iter()
                .all(|f| matches!(f.why, Why::Context { .. }))
        {
            return Exhausted::TooLong;
        }
        if failures
            .iter()
            .any(|f| matches!(f.why, Why::Unspoken { .. }))
            && failures
                .iter()
                .all(|f| matches!(f.why, Why::Context { .. } | Why::Unspoken { .. }))
        {
            return Exhausted::Unspoken;
        }
        match failures
            .iter()
            .rev()
            .map(|f| &f.why)
            .find(|w| !matches!(w, Why::Context { .. }))
        {
            Some(Why::Upstream {
                kind: Unanswered::Timeout,
                ..
            }) => Exhausted::Timeout,
            Some(Why::Upstream { .. } | Why::Body(_)) => Exhausted::BadGateway,
            _ => Exhausted::Unavailable,
        }
    }

    /// The failures as `model:reason` words (the request log's `fallbacks`).
    pub fn fallback_list(&self, policy: &CheckedPolicy) -> Vec<String> {
        self.failures
            .iter()
            .filter_map(|f| {
                policy
                    .models
                    .get(f.model.index())
                    .map(|m| format!("{}:{}", m.name, f.why.reason()))
            })
            .collect()
    }

    /// Each failure as "`model`: why", joined for an error message.
    pub fn detail(&self, policy: &CheckedPolicy) -> String {
        self.failures
            .iter()
            .map(|f| {
                let name = policy
                    .models
                    .get(f.model.index())
                    .map_or("?", |m| m.name.as_str());
                format!("`{name}`: {}", f.why.describe())
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

#[cfg(test)]
mod tests;
