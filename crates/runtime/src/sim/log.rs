//! The record of every request the simulator received, so tests can check what a proxy really
//! sent upstream (rewritten model, injected headers, forwarded ids) rather than trusting it.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;

/// One received request, as it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedRequest {
    pub method: String,
    /// Path and query, e.g. `/v1/chat/completions`.
    pub path: String,
    /// In arrival order; names are lowercase, values lossily decoded as UTF-8.
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
}

impl ReceivedRequest {
    /// The first value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON, when it is JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The `model` field of a JSON body.
    pub fn model(&self) -> Option<String> {
        self.json()?.get("model")?.as_str().map(str::to_owned)
    }
}

/// The JSON shape of `GET /sim/requests`: the body as JSON when it parses, else as text.
#[derive(Serialize)]
struct ReceivedView<'a> {
    method: &'a str,
    path: &'a str,
    headers: &'a [(String, String)],
    body: Value,
}

#[derive(Debug)]
pub(crate) struct RequestLog {
    limit: usize,
    entries: Mutex<VecDeque<ReceivedRequest>>,
}

impl RequestLog {
    pub(crate) fn new(limit: usize) -> RequestLog {
        RequestLog {
            limit,
            entries: Mutex::new(VecDeque::new()),
        }
    }

    pub(crate) fn record(&self, request: ReceivedRequest) {
        if self.limit == 0 {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        while entries.len() >= self.limit {
            entries.pop_front();
        }
        entries.push_back(request);
    }

    pub(crate) fn snapshot(&self) -> Vec<ReceivedRequest> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.iter().cloned().collect()
    }

    pub(crate) fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    pub(crate) fn to_json(&self) -> Value {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let views: Vec<Value> = entries
            .iter()
            .map(|r| {
                let body = r.json().unwrap_or_else(|| {
                    Value::String(String::from_utf8_lossy(&r.body).into_owned())
                });
                serde_json::to_value(ReceivedView {
                    method: &r.method,
                    path: &r.path,
                    headers: &r.headers,
                    body,
                })
                .unwrap_or(Value::Null)
            })
            .collect();
        Value::Array(views)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(n: u8) -> ReceivedRequest {
        ReceivedRequest {
            method: "POST".into(),
            path: "/v1/chat/completions".into(),
            headers: vec![("X-Request-Id".into(), n.to_string())],
            body: Bytes::from(format!("{{\"model\":\"m{n}\"}}")),
        }
    }

    #[test]
    fn bounded_keeps_the_newest() {
        let log = RequestLog::new(2);
        for n in 0..3 {
            log.record(request(n));
        }
        let models: Vec<Option<String>> = log.snapshot().iter().map(|r| r.model()).collect();
        assert_eq!(models, [Some("m1".to_owned()), Some("m2".to_owned())]);
        assert_eq!(log.snapshot()[0].header("x-request-id"), Some("1"));
        log.clear();
        assert!(log.snapshot().is_empty());
    }

    #[test]
    fn json_view_embeds_json_bodies_and_keeps_text_ones() {
        let log = RequestLog::new(10);
        log.record(request(1));
        log.record(ReceivedRequest {
            body: Bytes::from_static(b"not json"),
            ..request(2)
        });
        let view = log.to_json();
        assert_eq!(view[0]["body"]["model"], "m1");
        assert_eq!(view[1]["body"], "not json");
        assert_eq!(view[0]["headers"][0][1], "1");
    }
}
