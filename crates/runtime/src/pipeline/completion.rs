//! The end of a request: its log line and its metrics, written exactly once.
//!
//! A [`Completion`] is created when a request arrives and travels with it: the handler fills in
//! what it decides, and whichever part answers (a local error, a refusal, or the relay streaming
//! an upstream answer) consumes it. Consuming it by value is what makes "exactly once" hold; one
//! dropped unconsumed (hyper drops the handler when the client leaves before the answer starts)
//! reports itself as status 499, the client-closed-request convention.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::headers::{path, NONE_VALUE};
use crate::log::{RequestLog, RequestRecord};
use crate::openai::Usage;
use crate::telemetry::{ModelLabels, RequestLabels, Telemetry};

/// A request on its way to being reported.
pub struct Completion {
    pub record: RequestRecord,
    started: Instant,
    telemetry: Arc<Telemetry>,
    log: RequestLog,
    reported: bool,
}

/// Status recorded for a client that closed its connection before the answer started.
pub const CLIENT_CLOSED: u16 = 499;

impl Completion {
    pub fn new(
        telemetry: Arc<Telemetry>,
        log: RequestLog,
        request_id: String,
        endpoint: &str,
        started: Instant,
    ) -> Completion {
        Completion {
            record: RequestRecord {
                request_id,
                endpoint: endpoint.to_owned(),
                path: path::ERROR,
                ..RequestRecord::default()
            },
            started,
            telemetry,
            log,
            reported: false,
        }
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
        if let Some(model) = &self.record.model {
            let labels = ModelLabels {
                model: model.clone(),
            };
            if let Some(ttft) = ttft {
                self.telemetry
                    .upstream_ttft
                    .get_or_create(&labels)
                    .observe(ttft.as_secs_f64());
            }
            self.telemetry
                .upstream
                .get_or_create(&labels)
                .observe(upstream_elapsed.as_secs_f64());
        }
        self.record.ttft_ms = ttft.map(millis);
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
        let labels = RequestLabels {
            route: label(&self.record.route),
            model: label(&self.record.model),
            status: self.record.status,
            path: self.record.path,
        };
        self.telemetry.requests.get_or_create(&labels).inc();
        self.log.write(&self.record);
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if !self.reported {
            self.record.status = CLIENT_CLOSED;
            self.record.path = path::ERROR;
            self.record.error = Some("client disconnected before the answer started".to_owned());
            self.report();
        }
    }
}

fn label(value: &Option<String>) -> String {
    value.clone().unwrap_or_else(|| NONE_VALUE.to_owned())
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
