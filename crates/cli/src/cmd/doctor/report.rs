//! What `src doctor` found, as data: one row per check, rendered as a table for people or as
//! JSON for scripts. Every text that reaches the output passes [`Report::redact`] first, so an
//! API key echoed back in a backend's error never appears.

use serde::Serialize;
use std::time::Duration;

/// The order checks run in: what is served, then each model directly, then each route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// `GET {url}/models` and each selectable model's served id in it.
    Catalog,
    /// One `max_tokens: 1` chat completion per model, to its served id.
    Direct,
    /// One request per route, decided locally from the route's `test` case.
    Routed,
    /// Each Redis store: the topology its servers report (masters, replicas, slots covered).
    Store,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Catalog => "catalog",
            Phase::Direct => "direct",
            Phase::Routed => "routed",
            Phase::Store => "store",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// A violation of the contract: the exit code is 1.
    Fail,
    /// Not checked, with the reason in `detail` (a simulated backend, an earlier failure, a
    /// route without a `test`).
    Skip,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Fail => "FAIL",
            Status::Skip => "skip",
        }
    }
}

/// One check and its result.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub phase: Phase,
    pub backend: String,
    /// The logical model, when the check is about one.
    pub model: Option<String>,
    /// Its served id.
    pub served: Option<String>,
    /// The route, for routed checks.
    pub route: Option<String>,
    /// The `test` case a routed check sent.
    pub test: Option<String>,
    /// The Redis store (as the policy names it, passwords hidden), for store checks.
    pub store: Option<String>,
    /// What its servers reported: masters, replicas, failed nodes, slots covered.
    pub topology: Option<serde_json::Value>,
    pub status: Status,
    /// The backend's HTTP status, when it answered.
    pub http_status: Option<u16>,
    pub latency_ms: Option<f64>,
    pub detail: String,
}

impl Check {
    pub fn new(phase: Phase, backend: &str) -> Check {
        Check {
            phase,
            backend: backend.to_string(),
            model: None,
            served: None,
            route: None,
            test: None,
            store: None,
            topology: None,
            status: Status::Skip,
            http_status: None,
            latency_ms: None,
            detail: String::new(),
        }
    }

    pub fn model(mut self, name: &str, served: &str) -> Check {
        self.model = Some(name.to_string());
        self.served = Some(served.to_string());
        self
    }

    pub fn route(mut self, route: &str, test: Option<&str>) -> Check {
        self.route = Some(route.to_string());
        self.test = test.map(str::to_string);
        self
    }

    pub fn store(mut self, store: String, topology: Option<serde_json::Value>) -> Check {
        self.store = Some(store);
        self.topology = topology;
        self
    }

    pub fn ok(self, detail: impl Into<String>) -> Check {
        self.with(Status::Ok, detail)
    }

    pub fn fail(self, detail: impl Into<String>) -> Check {
        self.with(Status::Fail, detail)
    }

    pub fn skip(self, detail: impl Into<String>) -> Check {
        self.with(Status::Skip, detail)
    }

    pub fn timed(mut self, http_status: u16, latency: Duration) -> Check {
        self.http_status = Some(http_status);
        self.latency_ms = Some((latency.as_secs_f64() * 1e4).round() / 10.0);
        self
    }

    fn with(mut self, status: Status, detail: impl Into<String>) -> Check {
        self.status = status;
        self.detail = detail.into();
        self
    }

    fn subject(&self) -> String {
        if let Some(store) = &self.store {
            return store.clone();
        }
        match (&self.route, &self.model, &self.served) {
            (Some(route), _, _) => match &self.test {
                Some(test) => format!("route `{route}` (test `{test}`)"),
                None => format!("route `{route}`"),
            },
            (None, Some(model), Some(served)) => format!("model `{model}` = `{served}`"),
            _ => "GET /models".to_string(),
        }
    }
}

/// Every check of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub policy: String,
    pub ok: bool,
    pub violations: usize,
    pub checks: Vec<Check>,
}

impl Report {
    /// The report of `checks`, with every occurrence of a `secret` in their texts replaced.
    pub fn new(policy: String, checks: Vec<Check>, secrets: &[String]) -> Report {
        let checks: Vec<Check> = checks
            .into_iter()
            .map(|mut c| {
                c.detail = Report::redact(&c.detail, secrets);
                c
            })
            .collect();
        let violations = checks.iter().filter(|c| c.status == Status::Fail).count();
        Report {
            policy,
            ok: violations == 0,
            violations,
            checks,
        }
    }

    /// `text` with each non-empty secret replaced, as the router scrubs a backend's error.
    pub fn redact(text: &str, secrets: &[String]) -> String {
        src_runtime::secrets::redact(text, secrets)
    }

    /// The human table, one row per check, and a closing summary line.
    pub fn table(&self) -> String {
        let header = ["PHASE", "BACKEND", "CHECK", "RESULT", "LATENCY", "DETAIL"].map(String::from);
        let rows: Vec<[String; 6]> = self
            .checks
            .iter()
            .map(|c| {
                [
                    c.phase.as_str().to_string(),
                    c.backend.clone(),
                    c.subject(),
                    match c.http_status {
                        Some(code) => format!("{} {code}", c.status.as_str()),
                        None => c.status.as_str().to_string(),
                    },
                    c.latency_ms
                        .map(|ms| format!("{ms:.1} ms"))
                        .unwrap_or_default(),
                    c.detail.clone(),
                ]
            })
            .collect();
        let mut widths = header.clone().map(|h| h.chars().count());
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&header).chain(&rows) {
            let cells: Vec<String> = row
                .iter()
                .zip(widths)
                .enumerate()
                .map(|(i, (cell, w))| {
                    if i + 1 == row.len() {
                        cell.clone()
                    } else {
                        format!("{cell:<w$}")
                    }
                })
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
        let skipped = self
            .checks
            .iter()
            .filter(|c| c.status == Status::Skip)
            .count();
        let passed = self.checks.len() - skipped - self.violations;
        out.push_str(&format!(
            "{passed} passed, {} failed, {skipped} skipped\n",
            self.violations
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_and_failures_counted() {
        let checks = vec![
            Check::new(Phase::Catalog, "b").ok("serves 2 models"),
            Check::new(Phase::Direct, "b")
                .model("small", "tiny-a")
                .timed(401, Duration::from_millis(3))
                .fail("answered 401: bad key sk-123"),
            Check::new(Phase::Routed, "b")
                .route("default", None)
                .skip("no `test` expects this route"),
        ];
        let report = Report::new("p".into(), checks, &["sk-123".to_string(), String::new()]);
        assert!(!report.ok);
        assert_eq!(report.violations, 1);
        let table = report.table();
        assert!(!table.contains("sk-123"), "{table}");
        assert!(table.contains("bad key <redacted>"), "{table}");
        assert!(table.contains("FAIL 401"), "{table}");
        assert!(
            table.ends_with("1 passed, 1 failed, 1 skipped\n"),
            "{table}"
        );
        let json = serde_json::to_value(&report).unwrap_or_default();
        assert_eq!(json["checks"][1]["status"], "fail");
        assert_eq!(json["checks"][1]["latency_ms"], 3.0);
    }
}
