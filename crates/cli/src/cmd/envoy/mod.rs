//! `src check --envoy FILE`: a policy against the Envoy config that deploys it. The external
//! processing filters and the route tables in the file are found, and three mismatches are
//! warned about:
//!
//! - W020: the policy enforces rules (a `block`, a guard, a rule on who is calling: a header or
//!   the API key) and a filter fails open (`failure_mode_allow: true`), so requests skip them
//!   whenever the router is unreachable or slow;
//! - W021: a route's worst-case model-signal time (the compiler's model rounds times the
//!   runtime's model timeout) is longer than the filter's `message_timeout` (Envoy's default
//!   200 ms), so Envoy gives up on the router first;
//! - W022: a model's requests, once the router has set `x-selected-model` and `x-sr-backend`,
//!   take a route to a cluster that is not the model's backend, or to no backend at all
//!   ([`routing`]).
//!
//! [`message_timeout`] is the timeout a policy needs; `src manifest --format envoy` writes the
//! same value, so a generated config never draws W021.

mod routing;

use anyhow::{bail, Context, Result};
use serde_json::Value;
use src_compiler::hir::{CheckedPolicy, RouteDef, StoreDef};
use src_compiler::ir::{Atom, CondOwner, Inst, NodeId, Program, SlotSource, TextExpr};
use src_dsl::{codes, Diagnostic, Span};
use std::path::Path;
use std::time::Duration;

/// The `@type` of the HTTP external processing filter's config.
const EXT_PROC_TYPE: &str = "envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor";
/// Envoy's `message_timeout` when the filter does not set one: what a decision without models
/// or stores needs at most.
const DEFAULT_MESSAGE_TIMEOUT: Duration = Duration::from_millis(200);
/// What each Redis store call may take (`SRC_SESSION_REDIS_TIMEOUT_MS`,
/// `SRC_CACHE_REDIS_TIMEOUT_MS` defaults).
const REDIS_CALL_TIMEOUT: Duration = Duration::from_millis(250);

/// Each condition's model rounds so far in the scan ([`Program::model_rounds`]) and the longest
/// they may wait, `model_timeout` each.
fn model_waits(program: &Program, model_timeout: Duration) -> Vec<(CondOwner, usize, Duration)> {
    program
        .model_rounds()
        .into_iter()
        .map(|(owner, rounds)| {
            let times = u32::try_from(rounds).unwrap_or(u32::MAX);
            (owner, rounds, model_timeout.saturating_mul(times))
        })
        .collect()
}

/// The `message_timeout` a gateway for `policy` (lowered to `program`) needs: Envoy's default
/// for the decision itself, plus the worst case of its model rounds (the rounds only grow
/// along the scan), plus one call per Redis store.
pub fn message_timeout(
    policy: &CheckedPolicy,
    program: &Program,
    model_timeout: Duration,
) -> Duration {
    let models = model_waits(program, model_timeout)
        .into_iter()
        .map(|(_, _, wait)| wait)
        .max()
        .unwrap_or_default();
    let redis = [
        policy.cache.as_ref().map(|c| &c.store),
        policy.session.as_ref().map(|s| &s.store),
    ]
    .into_iter()
    .flatten()
    .filter(|s| matches!(s, StoreDef::Redis(_)))
    .count();
    let redis = REDIS_CALL_TIMEOUT.saturating_mul(u32::try_from(redis).unwrap_or(u32::MAX));
    DEFAULT_MESSAGE_TIMEOUT + models + redis
}

/// One external processing filter of an Envoy config.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtProcFilter {
    pub name: String,
    pub failure_mode_allow: bool,
    pub message_timeout: Duration,
}

/// What `src check --envoy` reads of an Envoy config.
#[derive(Debug, Clone)]
pub struct Gateway {
    pub filters: Vec<ExtProcFilter>,
    pub routing: routing::Routing,
}

/// The external processing filters and the routing of the Envoy config at `path` (YAML or
/// JSON).
pub fn read(path: &Path) -> Result<Gateway> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read `{}`", path.display()))?;
    let doc: Value = serde_norway::from_str(&text)
        .with_context(|| format!("`{}` is not an Envoy config (YAML)", path.display()))?;
    let mut filters = Vec::new();
    collect(&doc, &mut filters)?;
    if filters.is_empty() {
        bail!(
            "`{}` has no `envoy.filters.http.ext_proc` filter: nothing deploys the router there",
            path.display()
        );
    }
    Ok(Gateway {
        filters,
        routing: routing::Routing::of(&doc),
    })
}

fn collect(value: &Value, out: &mut Vec<ExtProcFilter>) -> Result<()> {
    match value {
        Value::Object(map) => {
            let typed = map.get("typed_config");
            let is_ext_proc = typed
                .and_then(|t| t.get("@type"))
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with(EXT_PROC_TYPE));
            if let (true, Some(config)) = (is_ext_proc, typed) {
                let name = map
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("ext_proc")
                    .to_owned();
                let message_timeout = match config.get("message_timeout") {
                    None => DEFAULT_MESSAGE_TIMEOUT,
                    Some(d) => duration(d).with_context(|| {
                        format!("the `message_timeout` of `{name}` is not a duration: {d}")
                    })?,
                };
                out.push(ExtProcFilter {
                    name,
                    failure_mode_allow: config
                        .get("failure_mode_allow")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                    message_timeout,
                });
            }
            for v in map.values() {
                collect(v, out)?;
            }
        }
        Value::Array(items) => {
            for v in items {
                collect(v, out)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// A protobuf duration as Envoy's YAML writes it: `"0.2s"`, or `{seconds, nanos}`.
fn duration(value: &Value) -> Option<Duration> {
    match value {
        Value::String(text) => {
            let seconds: f64 = text.trim().strip_suffix('s')?.parse().ok()?;
            (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds))
        }
        Value::Object(map) => {
            let seconds = map.get("seconds").map_or(Some(0), Value::as_u64)?;
            let nanos = map.get("nanos").map_or(Some(0), Value::as_u64)?;
            Some(Duration::from_secs(seconds) + Duration::from_nanos(nanos))
        }
        _ => None,
    }
}

/// The warnings of deploying `policy` (lowered to `program`) through the `gateway` of `file`,
/// with model calls bounded by `model_timeout` each.
pub fn diagnostics(
    policy: &CheckedPolicy,
    program: &Program,
    gateway: &Gateway,
    file: &str,
    model_timeout: Duration,
) -> Vec<Diagnostic> {
    let filters = &gateway.filters;
    let mut out = Vec::new();
    let enforcing = enforcing(policy, program);
    for filter in filters.iter().filter(|f| f.failure_mode_allow) {
        if let Some((what, span)) = enforcing.first() {
            out.push(
                Diagnostic::warning(
                    codes::FAIL_OPEN_ENFORCEMENT,
                    format!(
                        "{what} is skipped whenever the router is unreachable: `{}` in `{file}` \
                         fails open",
                        filter.name
                    ),
                    *span,
                )
                .with_label_message("enforced only while the router answers")
                .with_help(
                    "set `failure_mode_allow: false` on the filter (deploy/envoy/fail-closed.yaml)",
                ),
            );
        }
    }
    // Routes in scan order with their worst case; rounds only grow along the scan, so the
    // first route over a timeout is where it starts, and the last one is the worst.
    let routes: Vec<(&RouteDef, usize, Duration)> = model_waits(program, model_timeout)
        .into_iter()
        .filter_map(|(owner, rounds, wait)| match owner {
            CondOwner::Route(route) => policy.routes.get(route.index()).map(|r| (r, rounds, wait)),
            _ => None,
        })
        .collect();
    let needed = message_timeout(policy, program, model_timeout);
    for filter in filters {
        let over: Vec<_> = routes
            .iter()
            .filter(|(_, rounds, worst)| *rounds > 0 && *worst > filter.message_timeout)
            .collect();
        let (Some((route, rounds, worst)), Some((_, _, longest))) = (over.first(), over.last())
        else {
            continue;
        };
        let mut warning = Diagnostic::warning(
            codes::EXTPROC_TIMEOUT,
            format!(
                "route `{}` can wait {} ms for model signals, longer than the {} ms \
                 `message_timeout` of `{}` in `{file}`",
                route.name,
                worst.as_millis(),
                filter.message_timeout.as_millis(),
                filter.name
            ),
            route.span,
        )
        .with_label_message(format!(
            "{rounds} model round(s) of up to {} ms each",
            model_timeout.as_millis()
        ))
        .with_help(format!(
            "raise `message_timeout` to at least {}s (what `src manifest --format envoy` \
             writes), or lower `SRC_MODEL_TIMEOUT_MS`",
            needed.as_secs_f64()
        ));
        if over.len() > 1 {
            warning = warning.with_note(format!(
                "{} later route(s) too, up to {} ms",
                over.len() - 1,
                longest.as_millis()
            ));
        }
        out.push(warning);
    }
    out.extend(gateway.routing.diagnostics(policy, file));
    out
}

/// What in the policy a fail-open gateway would skip, each with where it is declared.
fn enforcing(policy: &CheckedPolicy, program: &Program) -> Vec<(String, Span)> {
    let mut found: Vec<(String, Span)> = policy
        .blocks
        .iter()
        .map(|b| (format!("block `{}`", b.name), b.span))
        .chain(
            policy
                .guards
                .iter()
                .map(|g| (format!("guard `{}`", g.name), g.span)),
        )
        .collect();
    for cond in program.conds() {
        if let CondOwner::Route(route) = cond.owner {
            if reads_caller(program, cond.root) {
                let name = policy.routes.get(route.index()).map_or("?", |r| &r.name);
                found.push((
                    format!("the rule of route `{name}` on the caller"),
                    cond.span,
                ));
            }
        }
    }
    found
}

/// Whether the expression at `root` reads a request header or the API key (who is calling).
fn reads_caller(program: &Program, root: NodeId) -> bool {
    let mut stack = vec![root];
    let mut seen = vec![false; program.nodes().len()];
    while let Some(node) = stack.pop() {
        let Some(def) = program.nodes().get(node.index()) else {
            continue;
        };
        if std::mem::replace(&mut seen[node.index()], true) {
            continue;
        }
        if let Inst::Load(slot) | Inst::Given { slot, .. } = &def.inst {
            let atom = match program.slots().get(slot.index()).map(|s| s.source) {
                Some(SlotSource::Atom(a) | SlotSource::Confidence(a)) => program.atom(a),
                _ => None,
            };
            if atom.is_some_and(|a| atom_reads_caller(&a.atom)) {
                return true;
            }
        }
        stack.extend(def.inst.operands());
    }
    false
}

fn atom_reads_caller(atom: &Atom) -> bool {
    match atom {
        Atom::TextCmp(_, a, b) => caller_text(a) || caller_text(b),
        other => other.text().is_some_and(caller_text),
    }
}

fn caller_text(t: &TextExpr) -> bool {
    match t {
        TextExpr::Header(_) | TextExpr::Body(_) | TextExpr::ApiKey => true,
        TextExpr::Coalesce(a, b) => caller_text(a) || caller_text(b),
        TextExpr::Signal(_, e) => caller_text(e),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_read_as_envoy_writes_them() {
        assert_eq!(duration(&json!("0.2s")), Some(Duration::from_millis(200)));
        assert_eq!(duration(&json!("3s")), Some(Duration::from_secs(3)));
        assert_eq!(
            duration(&json!({"seconds": 1, "nanos": 500_000_000})),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(duration(&json!("200ms")), None);
    }
}
