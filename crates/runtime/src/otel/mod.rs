//! OpenTelemetry spans of a request's phases, exported over OTLP/HTTP when `--otlp` is given.
//!
//! [`Spans`] is the process's handle: off by default, in which case every call below is a branch
//! on `None` and nothing is allocated for spans. [`RequestTrace`] is one request's trace: its
//! W3C context (continued from the client's `traceparent`), its root span, and the phases
//! ([`Phase`]) the pipeline steps open under it. The `traceparent` sent upstream names the
//! upstream phase's own span, so the backend's spans hang under the router's.
//!
//! Export is the SDK's batch processor behind a bounded in-flight count ([`export`]): ending a
//! span never waits, and a full queue or a failed export is counted in
//! `src_trace_spans_dropped_total`, never seen by a request.

pub mod export;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState,
    Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue, StringValue, Value};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracer, SdkTracerProvider,
};
use opentelemetry_sdk::Resource;

use crate::trace::TraceContext;
use crate::upstream::Upstream;
use export::{Counted, Drops, Exporter, HyperClient, InFlight};

/// Span names, one per phase.
pub mod name {
    pub const REQUEST: &str = "src.request";
    pub const PARSE: &str = "src.parse";
    pub const DECIDE: &str = "src.decide";
    pub const SIGNALS: &str = "src.signals";
    pub const MODEL: &str = "src.model";
    pub const CACHE: &str = "src.cache";
    pub const SESSION: &str = "src.session";
    pub const UPSTREAM: &str = "src.upstream";
}

/// Attribute keys.
pub mod key {
    /// On every span.
    pub const REQUEST_ID: &str = "src.request_id";
    pub const ENDPOINT: &str = "src.endpoint";
    pub const STATUS: &str = "http.response.status_code";
    pub const PATH: &str = "src.path";
    pub const ROUTE: &str = "src.route";
    pub const BLOCK: &str = "src.block";
    pub const MODEL: &str = "src.model";
    pub const SERVED: &str = "src.served";
    pub const BACKEND: &str = "src.backend";
    pub const STREAM: &str = "src.stream";
    pub const ERROR: &str = "src.error";
    pub const POLICY_GENERATION: &str = "src.policy.generation";
    /// The response cache's verdict (`hit`, `miss`, `skip`, `bypass`, `error`).
    pub const CACHE_RESULT: &str = "src.cache.result";
    pub const CACHE_SCORE: &str = "src.cache.score";
    pub const SESSION_STATE: &str = "src.session.state";
    pub const SIGNAL_MODELS: &str = "src.signals.models";
    pub const SIGNAL_CALLS: &str = "src.signals.calls";
    /// Signals the decision did not need, never computed.
    pub const SIGNALS_SKIPPED: &str = "src.signals.skipped";
    pub const FALLBACK_REASON: &str = "src.fallback.reason";
    pub const TTFT_MS: &str = "src.upstream.ttft_ms";
    pub const PROMPT_TOKENS: &str = "gen_ai.usage.input_tokens";
    pub const COMPLETION_TOKENS: &str = "gen_ai.usage.output_tokens";
    /// Prompt tokens the backend served from its prefix cache (its usage evidence).
    pub const CACHED_TOKENS: &str = "src.upstream.cached_tokens";
    /// The personal data types `redact` replaced, with their counts (`email=2,phone=1`).
    pub const REDACTED: &str = "src.redacted";
}

/// Where and how spans are exported.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpOptions {
    /// The collector's OTLP/HTTP traces URL; a URL without a path gets `/v1/traces`.
    pub endpoint: String,
    /// Spans waiting for export beyond which new ones are dropped.
    pub queue: usize,
    /// Longest time a span waits before its batch is sent.
    pub batch_delay: Duration,
    /// Limit on one export request.
    pub timeout: Duration,
}

impl OtlpOptions {
    pub fn new(endpoint: impl Into<String>) -> OtlpOptions {
        OtlpOptions {
            endpoint: endpoint.into(),
            queue: 2048,
            batch_delay: Duration::from_secs(1),
            timeout: Duration::from_secs(5),
        }
    }

    /// The traces URL: the one given, or its root with `/v1/traces` (as `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// is read).
    pub fn traces_url(&self) -> Result<String, OtlpError> {
        let uri: hyper::Uri = self
            .endpoint
            .parse()
            .map_err(|e| OtlpError(format!("`{}` is not a URL: {e}", self.endpoint)))?;
        let web = matches!(uri.scheme_str(), Some("http" | "https"));
        if !web || uri.authority().is_none() {
            return Err(OtlpError(format!(
                "`{}` is not an http(s) URL",
                self.endpoint
            )));
        }
        Ok(match uri.path() {
            "" | "/" => format!("{}/v1/traces", self.endpoint.trim_end_matches('/')),
            _ => self.endpoint.clone(),
        })
    }
}

/// Why trace export could not be set up.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("cannot export traces: {0}")]
pub struct OtlpError(pub String);

/// The process's span handle: off, or exporting.
#[derive(Clone, Default)]
pub struct Spans {
    exporting: Option<Arc<Exporting>>,
}

struct Exporting {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

impl Spans {
    /// No spans (the default).
    pub fn off() -> Spans {
        Spans::default()
    }

    /// Spans exported to `options.endpoint` over `upstream`'s client on `runtime`, lost ones
    /// counted in `drops`.
    pub fn export(
        options: &OtlpOptions,
        upstream: Upstream,
        runtime: tokio::runtime::Handle,
        drops: Drops,
    ) -> Result<Spans, OtlpError> {
        let client = HyperClient {
            upstream,
            runtime,
            timeout: options.timeout,
        };
        let otlp = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(options.traces_url()?)
            .with_timeout(options.timeout)
            .build()
            .map_err(|e| OtlpError(e.to_string()))?;
        let in_flight = Arc::new(InFlight::default());
        let exporter = Exporter {
            inner: otlp,
            in_flight: Arc::clone(&in_flight),
            drops: drops.clone(),
        };
        let queue = options.queue.max(1);
        let config = BatchConfigBuilder::default()
            .with_max_queue_size(queue)
            .with_max_export_batch_size(queue.min(512))
            .with_scheduled_delay(options.batch_delay)
            .build();
        let processor = Counted {
            inner: BatchSpanProcessor::new(exporter, config),
            in_flight,
            limit: queue,
            drops,
        };
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)))
            .with_resource(Resource::builder().with_service_name("src").build())
            .build();
        let tracer = provider.tracer("src");
        Ok(Spans {
            exporting: Some(Arc::new(Exporting { provider, tracer })),
        })
    }

    pub fn is_on(&self) -> bool {
        self.exporting.is_some()
    }

    /// Starts one request's trace under the client's `traceparent` (when valid).
    pub fn request(
        &self,
        client_traceparent: Option<&str>,
        request_id: &str,
        endpoint: &str,
    ) -> RequestTrace {
        let context = TraceContext::continue_from(client_traceparent);
        let Some(exporting) = &self.exporting else {
            return RequestTrace {
                context,
                root: None,
            };
        };
        let parent = match remote_parent(&context) {
            Some(remote) => Context::new().with_remote_span_context(remote),
            None => Context::new(),
        };
        let request_id: Arc<str> = Arc::from(request_id);
        let mut builder = exporting.tracer.span_builder(name::REQUEST);
        builder.span_kind = Some(SpanKind::Server);
        builder.attributes = Some(vec![
            KeyValue::new(
                key::REQUEST_ID,
                Value::String(StringValue::from(Arc::clone(&request_id))),
            ),
            KeyValue::new(key::ENDPOINT, endpoint.to_owned()),
        ]);
        let span = exporting.tracer.build_with_context(builder, &parent);
        let root = Context::new().with_span(span);
        // Without a client parent the SDK drew the trace id: the log line and the upstream use it.
        let sc = root.span().span_context().clone();
        let context = TraceContext {
            trace_id: sc.trace_id().to_string(),
            parent_id: context.parent_id,
            flags: format!("{:02x}", sc.trace_flags().to_u8()),
        };
        RequestTrace {
            context,
            root: Some(Root {
                tracer: exporting.tracer.clone(),
                context: root,
                request_id,
            }),
        }
    }

    /// Exports what is queued and stops the export thread (at most `limit`). Runs on a blocking
    /// thread: the SDK's shutdown waits for an export that runs on this runtime.
    pub async fn shutdown(&self, limit: Duration) {
        let Some(exporting) = self.exporting.clone() else {
            return;
        };
        let done =
            tokio::task::spawn_blocking(move || exporting.provider.shutdown_with_timeout(limit));
        match done.await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => tracing::warn!(%err, "trace export did not shut down cleanly"),
            Err(err) => tracing::warn!(%err, "trace export shutdown failed"),
        }
    }

    /// Sends every span ended so far (tests wait on it instead of the batch delay).
    pub async fn flush(&self) {
        let Some(exporting) = self.exporting.clone() else {
            return;
        };
        let _ = tokio::task::spawn_blocking(move || exporting.provider.force_flush()).await;
    }
}

fn remote_parent(context: &TraceContext) -> Option<SpanContext> {
    let parent = context.parent_id.as_deref()?;
    let flags = u8::from_str_radix(&context.flags, 16).unwrap_or(0);
    Some(SpanContext::new(
        TraceId::from_hex(&context.trace_id).ok()?,
        SpanId::from_hex(parent).ok()?,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    ))
}

/// One request's trace: its W3C context and, when spans are exported, its root span.
pub struct RequestTrace {
    context: TraceContext,
    root: Option<Root>,
}

struct Root {
    tracer: SdkTracer,
    context: Context,
    request_id: Arc<str>,
}

impl RequestTrace {
    /// A trace with no spans, continued from `client_traceparent`.
    pub fn untraced(client_traceparent: Option<&str>) -> RequestTrace {
        RequestTrace {
            context: TraceContext::continue_from(client_traceparent),
            root: None,
        }
    }

    /// The trace id every hop of this request shares.
    pub fn trace_id(&self) -> &str {
        &self.context.trace_id
    }

    /// Opens a phase under the request's root span.
    pub fn phase(&self, name: &'static str) -> Phase {
        self.phase_at(name, SpanKind::Internal, None)
    }

    /// Opens a phase of `kind` that started at `start` (now when `None`).
    pub fn phase_at(&self, name: &'static str, kind: SpanKind, start: Option<SystemTime>) -> Phase {
        let Some(root) = &self.root else {
            return Phase { span: None };
        };
        let span = open(root, &root.context, name, kind, start);
        Phase {
            span: Some(Context::new().with_span(span)),
        }
    }

    /// Opens a phase under `parent` (the root when `parent` is off).
    pub fn child(&self, parent: &Phase, name: &'static str, start: Option<SystemTime>) -> Phase {
        let Some(root) = &self.root else {
            return Phase { span: None };
        };
        let parent = parent.span.as_ref().unwrap_or(&root.context);
        let span = open(root, parent, name, SpanKind::Internal, start);
        Phase {
            span: Some(Context::new().with_span(span)),
        }
    }

    /// The `traceparent` for a request the router sends as `phase` (its span when exported, a
    /// fresh span id of this trace otherwise).
    pub fn traceparent(&self, phase: &Phase) -> String {
        match &phase.span {
            Some(cx) => {
                let span = cx.span();
                let sc = span.span_context();
                let mut flags = [0u8; 2];
                crate::hex::lower_into(&[sc.trace_flags().to_u8()], &mut flags);
                crate::trace::traceparent_of(
                    &crate::hex::lower(&sc.trace_id().to_bytes()),
                    &crate::hex::lower(&sc.span_id().to_bytes()),
                    std::str::from_utf8(&flags).unwrap_or("01"),
                )
            }
            None => self.context.child(),
        }
    }

    /// Sets an attribute on the root span (nothing when spans are off).
    pub fn set(&self, key: &'static str, value: impl FnOnce() -> Value) {
        if let Some(root) = &self.root {
            root.context
                .span()
                .set_attribute(KeyValue::new(key, value()));
        }
    }

    /// Ends the root span, marked as an error for a 5xx.
    pub fn end(&mut self, status: u16) {
        if let Some(root) = self.root.take() {
            let span = root.context.span();
            span.set_attribute(KeyValue::new(key::STATUS, i64::from(status)));
            if status >= 500 {
                span.set_status(Status::error(format!("status {status}")));
            }
            span.end();
        }
    }
}

fn open(
    root: &Root,
    parent: &Context,
    name: &'static str,
    kind: SpanKind,
    start: Option<SystemTime>,
) -> opentelemetry_sdk::trace::Span {
    let mut builder = root.tracer.span_builder(Cow::Borrowed(name));
    builder.span_kind = Some(kind);
    builder.start_time = start;
    builder.attributes = Some(vec![KeyValue::new(
        key::REQUEST_ID,
        Value::String(StringValue::from(Arc::clone(&root.request_id))),
    )]);
    root.tracer.build_with_context(builder, parent)
}

/// One phase's span (held in a context, so phases can open under it), or nothing when spans
/// are off. A phase not ended explicitly ends when its span's last handle is dropped.
pub struct Phase {
    span: Option<Context>,
}

impl Phase {
    /// A phase that records nothing.
    pub fn off() -> Phase {
        Phase { span: None }
    }

    pub fn is_on(&self) -> bool {
        self.span.is_some()
    }

    /// Sets an attribute; `value` is only built when the span is recorded.
    pub fn set(&mut self, key: &'static str, value: impl FnOnce() -> Value) {
        if let Some(cx) = &self.span {
            cx.span().set_attribute(KeyValue::new(key, value()));
        }
    }

    /// Marks the phase failed with `message`.
    pub fn fail(&mut self, message: impl FnOnce() -> String) {
        if let Some(cx) = &self.span {
            let message = message();
            cx.span()
                .set_attribute(KeyValue::new(key::ERROR, message.clone()));
            cx.span().set_status(Status::error(message));
        }
    }

    /// Ends the phase now.
    pub fn end(self) {
        if let Some(cx) = &self.span {
            cx.span().end();
        }
    }

    /// Ends the phase at `at`.
    pub fn end_at(self, at: SystemTime) {
        if let Some(cx) = &self.span {
            cx.span().end_with_timestamp(at);
        }
    }
}

/// A string attribute value.
pub fn text(value: &str) -> Value {
    Value::from(value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collector_root_gets_the_traces_path() -> Result<(), OtlpError> {
        let url = |e: &str| OtlpOptions::new(e).traces_url();
        assert_eq!(
            url("http://127.0.0.1:4318")?,
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            url("http://127.0.0.1:4318/")?,
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            url("http://c:4318/custom/traces")?,
            "http://c:4318/custom/traces"
        );
        assert!(url("not a url").is_err());
        assert!(url("/v1/traces").is_err());
        assert!(url("ftp://c:4318").is_err());
        Ok(())
    }

    #[test]
    fn without_export_a_request_still_has_one_trace_id() {
        let spans = Spans::off();
        let client = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let trace = spans.request(Some(client), "r1", "chat");
        assert_eq!(trace.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        let phase = trace.phase(name::UPSTREAM);
        assert!(!phase.is_on());
        let sent = trace.traceparent(&phase);
        assert!(
            sent.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
            "{sent}"
        );
        assert!(!sent.contains("00f067aa0ba902b7"), "{sent}");
    }
}
