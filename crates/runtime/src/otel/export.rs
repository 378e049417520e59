//! Getting finished spans out of the process without the request path ever waiting for it.
//!
//! The SDK's batch span processor owns the queue and the export thread. It drops a span when its
//! queue is full but only logs the first drop, so [`Counted`] sits in front of it: it keeps the
//! number of spans handed on and not yet through an export, drops (and counts) a span itself
//! once that number reaches the queue's size, and so the SDK's queue can never be the one that
//! overflows. [`Exporter`] wraps the OTLP exporter to release that number after each batch and
//! to count and log (never propagate) failed exports. [`HyperClient`] carries the export over
//! the router's own pooled HTTP client on the server's tokio runtime, so no second HTTP or TLS
//! stack is built in.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use opentelemetry::Context;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use opentelemetry_sdk::Resource;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::upstream::Upstream;

/// Largest collector answer read (an OTLP answer is a few bytes; a partial-success one, a few
/// hundred).
const MAX_ANSWER_BYTES: usize = 64 << 10;

/// Spans handed to the batch processor and not yet through an export, shared by [`Counted`]
/// and [`Exporter`].
#[derive(Debug, Default)]
pub struct InFlight(AtomicUsize);

/// Labels of `src_trace_spans_dropped_total`: why spans were lost.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DropLabels {
    pub reason: &'static str,
}

/// Where lost spans are counted, by why they were lost.
#[derive(Clone)]
pub struct Drops(pub Family<DropLabels, Counter>);

impl fmt::Debug for Drops {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Drops")
    }
}

impl Drops {
    fn add(&self, reason: &'static str, n: usize) {
        self.0
            .get_or_create(&DropLabels { reason })
            .inc_by(n as u64);
    }
}

/// The batch processor behind a bounded count of spans in flight.
#[derive(Debug)]
pub struct Counted<P> {
    pub inner: P,
    pub in_flight: Arc<InFlight>,
    pub limit: usize,
    pub drops: Drops,
}

impl<P: SpanProcessor> SpanProcessor for Counted<P> {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        let taken = self
            .in_flight
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.limit).then_some(n + 1)
            });
        if taken.is_ok() {
            self.inner.on_end(span);
        } else {
            self.drops.add("queue_full", 1);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The OTLP exporter, releasing in-flight spans after each batch and counting failed ones.
#[derive(Debug)]
pub struct Exporter<E> {
    pub inner: E,
    pub in_flight: Arc<InFlight>,
    pub drops: Drops,
}

impl<E: SpanExporter> SpanExporter for Exporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        self.in_flight.0.fetch_sub(spans, Ordering::AcqRel);
        if let Err(err) = &result {
            self.drops.add("export_failed", spans);
            tracing::warn!(%err, spans, "trace export failed; the spans are lost");
        }
        // The SDK would log the error again; it has been counted and logged here.
        Ok(())
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The OTLP exporter's HTTP client: the router's pooled client, driven on the server's runtime.
///
/// The batch processor exports from its own thread (no tokio runtime there), so each request is
/// spawned onto `runtime` and awaited through its join handle, which any executor can poll.
#[derive(Clone)]
pub struct HyperClient {
    pub upstream: Upstream,
    pub runtime: tokio::runtime::Handle,
    /// Limit on the whole exchange: connect, answer head and body.
    pub timeout: Duration,
}

impl fmt::Debug for HyperClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HyperClient")
            .field("timeout", &self.timeout)
            .finish()
    }
}

#[async_trait::async_trait]
impl HttpClient for HyperClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let upstream = self.upstream.clone();
        let timeout = self.timeout;
        let exchange = async move {
            let (parts, body) = request.into_parts();
            let request = Request::from_parts(parts, Full::new(body));
            let answer = upstream.send(request, timeout).await?;
            let (parts, body) = answer.into_parts();
            let body = Limited::new(body, MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|e| -> HttpError { e })?
                .to_bytes();
            Ok::<_, HttpError>(Response::from_parts(parts, body))
        };
        let task = self
            .runtime
            .spawn(async move { tokio::time::timeout(timeout, exchange).await });
        match task.await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(format!("no answer from the collector within {timeout:?}").into()),
            Err(err) => Err(format!("the export task failed: {err}").into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanContext, SpanId, SpanKind, TraceFlags, TraceId, TraceState};
    use opentelemetry_sdk::error::OTelSdkError;
    use opentelemetry_sdk::trace::SpanEvents;
    use std::sync::Mutex;

    /// A processor that keeps what it is handed.
    #[derive(Debug, Default)]
    struct Kept(Mutex<Vec<SpanData>>);

    impl SpanProcessor for Kept {
        fn on_start(&self, _span: &mut Span, _cx: &Context) {}
        fn on_end(&self, span: SpanData) {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(span);
        }
        fn force_flush(&self) -> OTelSdkResult {
            Ok(())
        }
        fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
            Ok(())
        }
    }

    fn span() -> SpanData {
        SpanData {
            span_context: SpanContext::new(
                TraceId::from_bytes([1; 16]),
                SpanId::from_bytes([2; 8]),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: "test".into(),
            start_time: std::time::SystemTime::now(),
            end_time: std::time::SystemTime::now(),
            attributes: Vec::new(),
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: Default::default(),
            status: opentelemetry::trace::Status::Unset,
            instrumentation_scope: Default::default(),
        }
    }

    fn dropped(drops: &Drops, reason: &'static str) -> u64 {
        drops.0.get_or_create(&DropLabels { reason }).get()
    }

    #[test]
    fn spans_past_the_limit_are_dropped_and_counted_until_an_export_frees_room() {
        let in_flight = Arc::new(InFlight::default());
        let drops = Drops(Family::default());
        let counted = Counted {
            inner: Kept::default(),
            in_flight: Arc::clone(&in_flight),
            limit: 2,
            drops: drops.clone(),
        };
        for _ in 0..5 {
            counted.on_end(span());
        }
        assert_eq!(counted.inner.0.lock().map(|k| k.len()).unwrap_or(0), 2);
        assert_eq!(dropped(&drops, "queue_full"), 3);
        // An export of both releases their room.
        in_flight.0.fetch_sub(2, Ordering::AcqRel);
        counted.on_end(span());
        assert_eq!(counted.inner.0.lock().map(|k| k.len()).unwrap_or(0), 3);
        assert_eq!(dropped(&drops, "queue_full"), 3);
    }

    #[derive(Debug)]
    struct Failing;

    impl SpanExporter for Failing {
        async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
            Err(OTelSdkError::InternalFailure("collector down".into()))
        }
    }

    #[test]
    fn a_failed_export_is_counted_not_propagated() {
        let in_flight = Arc::new(InFlight(AtomicUsize::new(3)));
        let drops = Drops(Family::default());
        let exporter = Exporter {
            inner: Failing,
            in_flight: Arc::clone(&in_flight),
            drops: drops.clone(),
        };
        let result = futures_lite_block_on(exporter.export(vec![span(), span()]));
        assert!(result.is_ok());
        assert_eq!(dropped(&drops, "export_failed"), 2);
        assert_eq!(in_flight.0.load(Ordering::Acquire), 1);
    }

    fn futures_lite_block_on<F: std::future::Future>(future: F) -> F::Output {
        match tokio::runtime::Builder::new_current_thread().build() {
            Ok(runtime) => runtime.block_on(future),
            Err(err) => panic!("no test runtime: {err}"),
        }
    }
}
