//! The end of a request: its log line and its metrics, written exactly once.
//!
//! A [`Completion`] is created when a request arrives and travels with it: the handler fills in
//! what it decides, and whichever part answers (a local error, a refusal, or the relay streaming
//! an upstream answer) consumes it. Consuming it by value is what makes "exactly once" hold; one
//! dropped unconsumed (hyper drops the handler when the client leaves before the answer starts)
//! reports itself as status 499, the client-closed-request convention.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::header::HeaderMap;

use crate::headers::{self, path, NONE_VALUE};
use crate::log::{RequestLog, RequestRecord};
use crate::openai::Usage;
use crate::otel::{key, text, Phase, RequestTrace};
use crate::telemetry::{Done, Reported, Telemetry, UpstreamHandles, UpstreamTime};

/// A request on its way to being reported.
pub struct Completion {
    pub record: RequestRecord,
    /// The request's trace: its root span ends with the report.
    pub trace: RequestTrace,
    /// The span of the upstream attempt whose answer is being relayed.
    pub upstream: Option<Phase>,
    started: Instant,
    telemetry: Arc<Telemetry>,
    log: RequestLog,
    reported: bool,
    /// The `door` label of its metrics.
    door: &'static str,
    /// What a drop before the report means: the status and the error recorded.
    abandoned: (u16, &'static str),
    /// What the answer charges to the request's token and cost budgets when it ends.
    pub charge: Option<crate::budget::Charge>,
    /// The answering model's upstream-time metrics, once [`Completion::answered_by`] names it.
    upstream_times: Option<Arc<UpstreamHandles>>,
}

/// Status recorded for a client that closed its connection before the answer started.
pub const CLIENT_CLOSED: u16 = 499;

/// Why a request dropped unreported ended, unless its door says otherwise.
pub const CLIENT_LEFT: &str = "client disconnected before the answer started";

impl Completion {
    /// A request with id `request_id` and a trace of its own (no client context, no spans).
    pub fn new(
        telemetry: Arc<Telemetry>,
        log: RequestLog,
        request_id: String,
        endpoint: &str,
        started: Instant,
    ) -> Completion {
        let trace = RequestTrace::untraced(None);
        Completion::traced(telemetry, log, request_id, endpoint, started, trace)
    }

    /// A request arriving with `headers`: its id (the client's `x-request-id` when usable) and
    /// its trace (continuing the client's `traceparent`), with spans when they are exported.
    pub fn start(
        telemetry: Arc<Telemetry>,
        log: RequestLog,
        headers: &HeaderMap,
        endpoint: &str,
        started: Instant,
    ) -> Completion {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let request_id = crate::trace::request_id(header(headers::REQUEST_ID));
        let trace = telemetry
            .spans
            .request(header(headers::TRACEPARENT), &request_id, endpoint);
        Completion::traced(telemetry, log, request_id, endpoint, started, trace)
    }

    fn traced(
        telemetry: Arc<Telemetry>,
        log: RequestLog,
        request_id: String,
        endpoint: &str,
        started: Instant,
        trace: RequestTrace,
    ) -> Completion {
        Completion {
            record: RequestRecord {
                request_id,
                trace_id: Some(trace.trace_id().to_owned()),
                endpoint: endpoint.to_owned(),
                path: path::ERROR,
                ..RequestRecord::default()
            },
            trace,
            upstream: None,
            started,
            telemetry,
            log,
            reported: false,
            door: crate::metrics::door::NONE,
            abandoned: (CLIENT_CLOSED, CLIENT_LEFT),
            charge: None,
            upstream_times: None,
        }
    }

    /// What this request is reported as should it be dropped unreported from now on: the
    /// door knows who could have let it go (a proxy's client; Envoy, for the external
    /// processor, which may give up on a decision as well as lose its client).
    pub fn if_abandoned(&mut self, status: u16, why: &'static str) {
        self.abandoned = (status, why);
    }

    /// The request came through `door` (one of [`crate::metrics::door`]'s values): its
    /// metrics say so.
    pub fn through(mut self, door: &'static str) -> Completion {
        self.door = door;
        self
    }

    /// The request came through Envoy's external processor: its metrics say so.
    pub fn through_extproc(self) -> Completion {
        self.through(crate::metrics::door::EXTPROC)
    }

    /// The model in the record answers: its upstream times go to `handles` (the model's own,
    /// kept by the policy's snapshot) rather than being looked up in their families again.
    pub fn answered_by(&mut self, handles: &Arc<UpstreamHandles>) {
        self.upstream_times = Some(Arc::clone(handles));
    }

    /// Observes `seconds` in the upstream `time` of the model in the record, once it is known.
    fn observe_upstream(&self, time: UpstreamTime, seconds: f64) {
        let Some(model) = self.record.model.as_deref() else {
            return;
        };
        match &self.upstream_times {
            Some(handles) => handles.observe(&self.telemetry, (model, self.door), time, seconds),
            None => self
                .telemetry
                .observe_upstream((model, self.door), time, seconds),
        }
    }

    /// The upstream answer's head arrived `elapsed` after the request was sent.
    pub fn answer_head(&self, elapsed: Duration) {
        self.observe_upstream(UpstreamTime::Headers, elapsed.as_secs_f64());
    }

    /// An upstream answer whose head is all this door sees (the external processor): its
    /// status is in the record, the head came `elapsed` after the request went out, and where
    /// the answer ends is the gateway's business, so no end-to-end time is recorded.
    pub fn finish_at_head(mut self, elapsed: Duration) {
        self.answer_head(elapsed);
        if let Some(span) = self.upstream.take() {
            span.end();
        }
        self.report();
    }

    /// A local answer (error, refusal, listing): no upstream evidence.
    pub fn finish(mut self, status: u16, answer_path: &'static str, error: Option<String>) {
        self.record.status = status;
        self.record.path = answer_path;
        if error.is_some() {
            self.record.error = error;
        }
        self.report();
    }

    /// An upstream answer that has ended (or broken off, or been abandoned by the client).
    pub fn finish_upstream(
        mut self,
        upstream_elapsed: Duration,
        ttft: Option<Duration>,
        usage: Option<Usage>,
        error: Option<String>,
    ) {
        if let Some(ttft) = ttft {
            self.observe_upstream(UpstreamTime::Ttft, ttft.as_secs_f64());
        }
        self.observe_upstream(UpstreamTime::Total, upstream_elapsed.as_secs_f64());
        self.record.ttft_ms = ttft.map(millis);
        if let Some(mut span) = self.upstream.take() {
            if let Some(ttft) = ttft {
                span.set(key::TTFT_MS, || millis(ttft).into());
            }
            if let Some(usage) = &usage {
                for (name, value) in [
                    (key::PROMPT_TOKENS, usage.prompt_tokens),
                    (key::COMPLETION_TOKENS, usage.completion_tokens),
                    (key::CACHED_TOKENS, usage.cached_tokens),
                ] {
                    if let Some(n) = value {
                        span.set(name, || i64::try_from(n).unwrap_or(i64::MAX).into());
                    }
                }
            }
            if let Some(error) = &error {
                span.fail(|| error.clone());
            }
            span.end();
        }
        if let Some(charge) = self.charge.take() {
            let reported = usage.as_ref().and_then(|u| {
                (u.prompt_tokens.is_some() || u.completion_tokens.is_some())
                    .then(|| u.prompt_tokens.unwrap_or(0) + u.completion_tokens.unwrap_or(0))
            });
            // No usage in the answer: the router's estimate of the prompt, and the log says so.
            let tokens = reported.unwrap_or_else(|| {
                self.record.usage_estimated = true;
                charge.estimate
            });
            charge.tokens(tokens);
        }
        if let Some(usage) = usage {
            self.record.prompt_tokens = usage.prompt_tokens;
            self.record.completion_tokens = usage.completion_tokens;
            self.record.cached_tokens = usage.cached_tokens;
        }
        if error.is_some() {
            self.record.error = error;
        }
        self.report();
    }

    fn report(&mut self) {
        if std::mem::replace(&mut self.reported, true) {
            return;
        }
        self.record.latency_ms = millis(self.started.elapsed());
        let record = &self.record;
        let at = Reported {
            route: record.route.as_deref().unwrap_or(NONE_VALUE),
            model: record.model.as_deref().unwrap_or(NONE_VALUE),
            status: record.status,
            path: record.path,
            door: self.door,
        };
        let done = Done {
            seconds: record.latency_ms / 1000.0,
            prompt_tokens: record.prompt_tokens,
            completion_tokens: record.completion_tokens,
        };
        self.telemetry.kept.count(&self.telemetry, at, done);
        self.close_trace();
        self.log.write(&self.record);
        self.telemetry.live.publish(&self.record);
    }
}

impl Completion {
    /// The root span's summary of the request, then its end.
    fn close_trace(&mut self) {
        let record = &self.record;
        let trace = &mut self.trace;
        trace.set(key::PATH, || record.path.into());
        trace.set(key::STREAM, || record.stream.into());
        trace.set(key::POLICY_GENERATION, || {
            i64::try_from(record.policy_generation)
                .unwrap_or(i64::MAX)
                .into()
        });
        for (name, value) in [
            (key::ROUTE, &record.route),
            (key::BLOCK, &record.block),
            (key::MODEL, &record.model),
            (key::SERVED, &record.served),
            (key::BACKEND, &record.backend),
            (key::ERROR, &record.error),
            (key::REDACTED, &record.redacted),
        ] {
            if let Some(value) = value {
                trace.set(name, || text(value));
            }
        }
        if let Some(cache) = record.cache {
            trace.set(key::CACHE_RESULT, || cache.into());
        }
        if let Some(session) = record.session {
            trace.set(key::SESSION_STATE, || session.into());
        }
        if let Some(n) = record.cached_tokens {
            trace.set(key::CACHED_TOKENS, || {
                i64::try_from(n).unwrap_or(i64::MAX).into()
            });
        }
        // An upstream span still open (the answer was abandoned) ends with the request.
        if let Some(span) = self.upstream.take() {
            span.end();
        }
        trace.end(record.status);
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if !self.reported {
            let (status, why) = self.abandoned;
            self.record.status = status;
            self.record.path = path::ERROR;
            self.record.error = Some(why.to_owned());
            self.report();
        }
    }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
