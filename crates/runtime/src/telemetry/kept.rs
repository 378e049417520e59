//! The series a finished request counts into (`src_requests_total`, the whole-request duration
//! and the token counters), each resolved from its family once and kept.
//!
//! `Family::get_or_create` clones its labels (two `String`s), hashes them with SipHash and takes
//! the family's lock on every call: four times a forwarded request, about 2,500 instructions.
//! Kept series are found instead by the labels as the request holds them (borrowed, hashed with
//! `foldhash`) under a read lock, and a request adds to handles of the very series a lookup by
//! label gives, so the exposition is the same. The labels are bounded by the policy (route,
//! block and model names) and a few fixed words, as the families' are, so the map stays small.

use std::sync::{OnceLock, PoisonError, RwLock};

use hashbrown::{Equivalent, HashMap};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;

use super::{DurationLabels, RequestLabels, Telemetry, TokenLabels};

/// What one request reports under: the labels of `src_requests_total`. The duration's are these
/// less `path`, the tokens' these less `status` and `path`.
#[derive(Debug, Clone, Copy, Hash)]
pub struct Reported<'a> {
    pub route: &'a str,
    pub model: &'a str,
    pub status: u16,
    pub path: &'static str,
    pub door: &'static str,
}

/// [`Reported`] owned, as the map keeps it. Its fields hash as [`Reported`]'s do (a `Box<str>`
/// hashes as the `str` it holds), which is what lets a borrowed one find it.
#[derive(Debug, Hash, PartialEq, Eq)]
struct Key {
    route: Box<str>,
    model: Box<str>,
    status: u16,
    path: &'static str,
    door: &'static str,
}

impl Equivalent<Key> for Reported<'_> {
    fn equivalent(&self, key: &Key) -> bool {
        self.status == key.status
            && self.path == key.path
            && self.door == key.door
            && self.route == &*key.route
            && self.model == &*key.model
    }
}

/// One combination's handles. The token counters are resolved on the first request that
/// reports tokens: a series appears in the exposition only once it has counted something.
struct Series {
    requests: Counter,
    duration: Histogram,
    prompt_tokens: OnceLock<Counter>,
    completion_tokens: OnceLock<Counter>,
}

impl Series {
    fn resolve(telemetry: &Telemetry, at: Reported<'_>) -> Series {
        let requests = telemetry
            .requests
            .get_or_create(&RequestLabels {
                route: at.route.to_owned(),
                model: at.model.to_owned(),
                status: at.status,
                path: at.path,
                door: at.door,
            })
            .clone();
        let duration = telemetry
            .request_duration
            .get_or_create(&DurationLabels {
                route: at.route.to_owned(),
                model: at.model.to_owned(),
                status: at.status,
                door: at.door,
            })
            .clone();
        Series {
            requests,
            duration,
            prompt_tokens: OnceLock::new(),
            completion_tokens: OnceLock::new(),
        }
    }

    fn count(&self, telemetry: &Telemetry, at: Reported<'_>, done: Done) {
        self.requests.inc();
        self.duration.observe(done.seconds);
        for (slot, family, count) in [
            (
                &self.prompt_tokens,
                &telemetry.prompt_tokens,
                done.prompt_tokens,
            ),
            (
                &self.completion_tokens,
                &telemetry.completion_tokens,
                done.completion_tokens,
            ),
        ] {
            if let Some(n) = count.filter(|n| *n > 0) {
                slot.get_or_init(|| {
                    family
                        .get_or_create(&TokenLabels {
                            model: at.model.to_owned(),
                            route: at.route.to_owned(),
                            door: at.door,
                        })
                        .clone()
                })
                .inc_by(n);
            }
        }
    }
}

/// What a finished request adds to its series.
#[derive(Debug, Clone, Copy)]
pub struct Done {
    /// Its whole duration.
    pub seconds: f64,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
}

/// Every series a request has reported into so far.
#[derive(Default)]
pub struct KeptSeries(RwLock<HashMap<Key, Series>>);

impl KeptSeries {
    /// Counts a request that ended as `done` into the series of `at`, resolving them on the
    /// first request under these labels.
    pub fn count(&self, telemetry: &Telemetry, at: Reported<'_>, done: Done) {
        {
            // A panic cannot leave the map half-written (an insert is its only write), so a
            // poisoned lock still holds a sound map.
            let kept = self.0.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(series) = kept.get(&at) {
                series.count(telemetry, at, done);
                return;
            }
        }
        let mut kept = self.0.write().unwrap_or_else(PoisonError::into_inner);
        let series = kept
            .entry(Key {
                route: at.route.into(),
                model: at.model.into(),
                status: at.status,
                path: at.path,
                door: at.door,
            })
            .or_insert_with(|| Series::resolve(telemetry, at));
        series.count(telemetry, at, done);
    }

    /// How many label combinations are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.read().unwrap_or_else(PoisonError::into_inner).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposition::Format;
    use crate::metrics::door;

    fn at(route: &'static str, status: u16) -> Reported<'static> {
        Reported {
            route,
            model: "strong",
            status,
            path: "upstream",
            door: door::CHAT,
        }
    }

    fn done(prompt: Option<u64>) -> Done {
        Done {
            seconds: 0.02,
            prompt_tokens: prompt,
            completion_tokens: Some(0),
        }
    }

    #[test]
    fn kept_series_count_into_the_families_series() {
        let t = Telemetry::new();
        t.kept.count(&t, at("coding", 200), done(None));
        t.kept.count(&t, at("coding", 200), done(Some(7)));
        // The same series a lookup by label finds.
        t.requests
            .get_or_create(&RequestLabels {
                route: "coding".into(),
                model: "strong".into(),
                status: 200,
                path: "upstream",
                door: door::CHAT,
            })
            .inc();
        t.kept.count(&t, at("coding", 502), done(None));
        t.kept.count(&t, at("chat", 200), done(Some(3)));
        assert_eq!(t.kept.len(), 3);
        let text = t.encode(Format::PrometheusText);
        let requests = |route: &str, status: u16| {
            format!(
                "src_requests_total{{route=\"{route}\",model=\"strong\",status=\"{status}\",path=\"upstream\",door=\"chat\"}}"
            )
        };
        assert!(
            text.contains(&format!("{} 3", requests("coding", 200))),
            "{text}"
        );
        assert!(
            text.contains(&format!("{} 1", requests("coding", 502))),
            "{text}"
        );
        assert!(
            text.contains(&format!("{} 1", requests("chat", 200))),
            "{text}"
        );
        assert!(text.contains(
            "src_request_duration_seconds_count{route=\"coding\",model=\"strong\",status=\"200\",door=\"chat\"} 2"
        ), "{text}");
        assert!(
            text.contains(
                "src_prompt_tokens_total{model=\"strong\",route=\"coding\",door=\"chat\"} 7"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "src_prompt_tokens_total{model=\"strong\",route=\"chat\",door=\"chat\"} 3"
            ),
            "{text}"
        );
        // No token was counted as a completion: no such series, as before any was kept.
        assert!(!text.contains("src_completion_tokens_total{"), "{text}");
    }
}
