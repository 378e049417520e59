//! Requests per route and per model over the last minute and the last hour, from samples of
//! the `src_requests` counters (their text exposition) taken off the request path every
//! [`EVERY`].

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::watch::scrape;

/// How often the counters are sampled.
pub const EVERY: Duration = Duration::from_secs(5);
/// The longest window kept.
const HOUR: Duration = Duration::from_secs(3600);

/// Cumulative requests by (route, model) at one instant.
type Totals = BTreeMap<(String, String), f64>;

/// The samples of the last hour, oldest first.
#[derive(Default)]
pub struct Counts {
    samples: Mutex<VecDeque<(Instant, Totals)>>,
}

impl Counts {
    /// Takes a sample now of `requests`, the counters' text exposition.
    pub fn sample(&self, requests: &str) {
        let totals = totals(requests);
        let now = Instant::now();
        let mut samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        samples.push_back((now, totals));
        while samples
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > HOUR + EVERY)
        {
            samples.pop_front();
        }
    }

    /// `{"minute": {...}, "hour": {...}}`, each with `by_route` and `by_model`; a window longer
    /// than the samples kept so far counts from the first sample.
    pub fn report(&self, requests: &str) -> Value {
        let latest = totals(requests);
        let now = Instant::now();
        let samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        let window = |span: Duration| {
            let base = samples
                .iter()
                .find(|(at, _)| now.duration_since(*at) <= span)
                .map(|(_, t)| t);
            let mut by_route: BTreeMap<&str, f64> = BTreeMap::new();
            let mut by_model: BTreeMap<&str, f64> = BTreeMap::new();
            for ((route, model), total) in &latest {
                let before = base.and_then(|b| b.get(&(route.clone(), model.clone())));
                let n = total - before.copied().unwrap_or(0.0);
                if n > 0.0 {
                    *by_route.entry(route).or_default() += n;
                    *by_model.entry(model).or_default() += n;
                }
            }
            json!({"by_route": by_route, "by_model": by_model})
        };
        json!({
            "minute": window(Duration::from_secs(60)),
            "hour": window(HOUR),
        })
    }
}

/// The counters of the exposition, summed over status and path.
fn totals(requests: &str) -> Totals {
    let mut totals = Totals::new();
    for s in scrape::samples(requests) {
        let key = (s.label("route").to_owned(), s.label("model").to_owned());
        *totals.entry(key).or_default() += s.value;
    }
    totals
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exposition(lines: &[(&str, &str, u64)]) -> String {
        lines
            .iter()
            .map(|(route, model, n)| {
                format!(
                    "src_requests_total{{route=\"{route}\",model=\"{model}\",status=\"200\",path=\"upstream\"}} {n}\n"
                )
            })
            .collect()
    }

    #[test]
    fn counts_since_the_oldest_sample_in_the_window() {
        let counts = Counts::default();
        counts.sample(&exposition(&[("math", "big", 1)]));
        let now = exposition(&[("math", "big", 3), ("chat", "big", 1)]);
        let got = counts.report(&now);
        assert_eq!(got["minute"]["by_route"]["math"], 2.0);
        assert_eq!(got["minute"]["by_route"]["chat"], 1.0);
        assert_eq!(got["hour"]["by_model"]["big"], 3.0);
    }
}
