//! The two text formats `GET /metrics` speaks, and which one a scraper gets.
//!
//! `prometheus-client` writes only OpenMetrics 1.0, where a counter family is named without its
//! `_total` suffix and the body ends with `# EOF`. Read as the Prometheus 0.0.4 text format, that
//! body's `HELP`/`TYPE` lines name a family no sample belongs to, so every counter loses its
//! metadata. The router therefore negotiates on `Accept` (OpenMetrics for scrapers that ask for
//! it, 0.0.4 otherwise, as Prometheus itself falls back) and derives the 0.0.4 body from the
//! OpenMetrics one with [`to_prometheus_text`]: the crate has no 0.0.4 encoder, and rewriting
//! its output keeps one source of truth for names, labels and values.

use std::collections::HashMap;

/// `content-type` of an OpenMetrics 1.0 body.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// `content-type` of a Prometheus 0.0.4 text body.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A metrics text format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    PrometheusText,
}

impl Format {
    /// The `content-type` that names this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => OPENMETRICS,
            Format::PrometheusText => PROMETHEUS_TEXT,
        }
    }

    /// The format an `Accept` header asks for: OpenMetrics when its media type has a positive
    /// quality at least as high as any text form (`text/plain`, `text/*`, `*/*`), else the 0.0.4
    /// text format, which is also the answer to no header at all.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::PrometheusText;
        };
        let mut openmetrics = 0.0_f32;
        let mut text = 0.0_f32;
        for range in accept.split(',') {
            let mut params = range.split(';');
            let media = params.next().unwrap_or("").trim().to_ascii_lowercase();
            let mut quality = 1.0_f32;
            for param in params {
                if let Some((key, value)) = param.split_once('=') {
                    if key.trim().eq_ignore_ascii_case("q") {
                        quality = value.trim().parse().unwrap_or(0.0);
                    }
                }
            }
            match media.as_str() {
                "application/openmetrics-text" => openmetrics = openmetrics.max(quality),
                "text/plain" | "text/*" | "*/*" => text = text.max(quality),
                _ => {}
            }
        }
        if openmetrics > 0.0 && openmetrics >= text {
            Format::OpenMetrics
        } else {
            Format::PrometheusText
        }
    }
}

/// `openmetrics` (a whole OpenMetrics body) in `format`.
pub fn render(openmetrics: String, format: Format) -> String {
    match format {
        Format::OpenMetrics => openmetrics,
        Format::PrometheusText => to_prometheus_text(&openmetrics),
    }
}

/// Rewrites an OpenMetrics body as the Prometheus 0.0.4 text format: counter families are named
/// with `_total` (the name of their samples), OpenMetrics-only lines (`# UNIT`, `# EOF`) and
/// counters' `_created` samples are left out, `HELP` text loses the `\"` escape 0.0.4 does not
/// have, and types 0.0.4 lacks become `untyped` (or `gauge` for `info`).
pub fn to_prometheus_text(openmetrics: &str) -> String {
    // `HELP` comes before `TYPE`, so the families' kinds are read first.
    let kinds: HashMap<&str, &str> = openmetrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE ")?.split_once(' '))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (family, kind) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            let kind = match kind {
                "counter" | "gauge" | "histogram" | "summary" => kind,
                "info" => "gauge",
                _ => "untyped",
            };
            push_line(
                &mut out,
                &["# TYPE ", &sample_family(family, &kinds), " ", kind],
            );
        } else if let Some(rest) = line.strip_prefix("# HELP ") {
            let (family, help) = rest.split_once(' ').unwrap_or((rest, ""));
            let help = help.replace("\\\"", "\"");
            push_line(
                &mut out,
                &["# HELP ", &sample_family(family, &kinds), " ", &help],
            );
        } else if line.starts_with("# UNIT ") || line.starts_with("# EOF") {
            continue;
        } else if !is_created_sample(line, &kinds) {
            push_line(&mut out, &[line]);
        }
    }
    out
}

fn push_line(out: &mut String, parts: &[&str]) {
    for part in parts {
        out.push_str(part);
    }
    out.push('\n');
}

/// The name 0.0.4 gives a family: what its samples are called (`_total` for a counter, `_info`
/// for an info metric), so that `HELP` and `TYPE` attach to them.
fn sample_family(family: &str, kinds: &HashMap<&str, &str>) -> String {
    let suffix = match kinds.get(family) {
        Some(&"counter") => "_total",
        Some(&"info") => "_info",
        _ => return family.to_owned(),
    };
    if family.ends_with(suffix) {
        family.to_owned()
    } else {
        format!("{family}{suffix}")
    }
}

/// Whether `line` is the `_created` sample of a counter, histogram or summary: OpenMetrics
/// metadata that 0.0.4 would read as a separate, untyped metric.
fn is_created_sample(line: &str, kinds: &HashMap<&str, &str>) -> bool {
    let metric = line.split(['{', ' ']).next().unwrap_or("");
    metric.strip_suffix("_created").is_some_and(|family| {
        matches!(
            kinds.get(family),
            Some(&("counter" | "histogram" | "summary"))
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Prometheus 2.x sends by default.
    const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,\
        application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

    #[test]
    fn openmetrics_only_for_scrapers_that_prefer_it() {
        assert_eq!(
            Format::negotiate(Some(PROMETHEUS_ACCEPT)),
            Format::OpenMetrics
        );
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text; version=1.0.0")),
            Format::OpenMetrics
        );
        assert_eq!(
            Format::negotiate(Some(
                "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;q=0.5"
            )),
            Format::PrometheusText
        );
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text;q=0")),
            Format::PrometheusText
        );
        for plain in [
            None,
            Some(""),
            Some("*/*"),
            Some("text/plain"),
            Some("application/json"),
        ] {
            assert_eq!(
                Format::negotiate(plain),
                Format::PrometheusText,
                "{plain:?}"
            );
        }
    }

    #[test]
    fn content_types_name_their_format() {
        assert!(Format::OpenMetrics
            .content_type()
            .starts_with("application/openmetrics-text; version=1.0.0"));
        assert!(Format::PrometheusText
            .content_type()
            .starts_with("text/plain; version=0.0.4"));
    }

    const OPENMETRICS_BODY: &str = "\
# HELP src_requests Requests \\\"answered\\\".
# TYPE src_requests counter
src_requests_total{route=\"a\"} 1
src_requests_created{route=\"a\"} 1700000000.0
# HELP src_latency_seconds Latency.
# TYPE src_latency_seconds histogram
# UNIT src_latency_seconds seconds
src_latency_seconds_sum 0.5
src_latency_seconds_count 1
src_latency_seconds_bucket{le=\"+Inf\"} 1
# HELP src_generation Generation.
# TYPE src_generation gauge
src_generation 3
# HELP src_build Build.
# TYPE src_build info
src_build_info{version=\"1\"} 1
# EOF
";

    #[test]
    fn the_text_format_names_counters_with_total_and_has_no_eof() {
        let text = to_prometheus_text(OPENMETRICS_BODY);
        let expected = "\
# HELP src_requests_total Requests \"answered\".
# TYPE src_requests_total counter
src_requests_total{route=\"a\"} 1
# HELP src_latency_seconds Latency.
# TYPE src_latency_seconds histogram
src_latency_seconds_sum 0.5
src_latency_seconds_count 1
src_latency_seconds_bucket{le=\"+Inf\"} 1
# HELP src_generation Generation.
# TYPE src_generation gauge
src_generation 3
# HELP src_build_info Build.
# TYPE src_build_info gauge
src_build_info{version=\"1\"} 1
";
        assert_eq!(text, expected);
    }

    #[test]
    fn a_registry_s_counters_keep_their_metadata_in_the_text_format() {
        use prometheus_client::metrics::counter::Counter;
        let mut registry = prometheus_client::registry::Registry::default();
        let counter = Counter::<u64>::default();
        registry.register("src_things", "Things seen", counter.clone());
        counter.inc();
        let mut body = String::new();
        prometheus_client::encoding::text::encode(&mut body, &registry).ok();
        assert!(body.contains("# TYPE src_things counter"), "{body}");
        let text = to_prometheus_text(&body);
        assert!(
            text.contains("# HELP src_things_total Things seen.\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE src_things_total counter\n"), "{text}");
        assert!(text.contains("src_things_total 1\n"), "{text}");
        assert!(!text.contains("EOF"), "{text}");
    }
}
