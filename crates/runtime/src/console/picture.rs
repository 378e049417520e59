//! `GET /v1/console/policy`: the served policy as a picture — blocks, then routes in priority
//! order with their conditions as written, the logical models they send to, and the served ids
//! on each backend; the signals each item reads, marked cheap or model-backed; and each `src
//! check` warning attached to the item whose declaration it points into.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use src_compiler::explain::snippet;
use src_compiler::hir::{CheckedPolicy, TExpr, TExprKind};
use src_dsl::{Diagnostic, Span};

use crate::policy_store::Snapshot;

/// The picture of `snapshot`.
pub fn picture(snapshot: &Snapshot) -> Value {
    let policy = snapshot.policy();
    let warnings = &snapshot.warning_list;
    let text = |span: Span| snippet(&policy.sources, span);
    let mut placed = vec![false; warnings.len()];
    let mut warnings_in = |span: Span| -> Vec<Value> {
        warnings
            .iter()
            .enumerate()
            .filter(|(_, d)| primary(d).is_some_and(|s| within(s, span)))
            .map(|(i, d)| {
                placed[i] = true;
                warning_json(policy, d)
            })
            .collect()
    };
    let blocks: Vec<Value> = policy
        .blocks
        .iter()
        .map(|b| {
            json!({
                "name": b.name,
                "when": text(b.when.span),
                "action": match &b.action {
                    src_compiler::hir::BlockActionDef::Refuse { status, .. } => format!("refuse {status}"),
                    src_compiler::hir::BlockActionDef::Redirect(m) => format!("redirect to {}", policy.models[m.index()].name),
                },
                "signals": reads(policy, Some(&b.when)),
                "warnings": warnings_in(b.span),
            })
        })
        .collect();
    let routes: Vec<Value> = policy
        .routes
        .iter()
        .map(|r| {
            json!({
                "name": r.name,
                "priority": r.priority,
                "when": r.when.as_ref().map(|w| text(w.span)),
                "to": policy.models[r.to.index()].name,
                "fallbacks": r.fallbacks.iter().map(|m| policy.models[m.index()].name.clone()).collect::<Vec<_>>(),
                "signals": reads(policy, r.when.as_ref()),
                "warnings": warnings_in(r.span),
            })
        })
        .collect();
    let models: Vec<Value> = policy
        .models
        .iter()
        .map(|m| {
            json!({
                "name": m.name,
                "serves": m.serves,
                "backend": policy.backends[m.backend.index()].name,
                "warnings": warnings_in(m.span),
            })
        })
        .collect();
    let backends: Vec<Value> = policy
        .backends
        .iter()
        .enumerate()
        .map(|(index, b)| {
            json!({
                "name": b.name,
                "url": if b.simulated { "(simulated)".to_owned() } else { b.url.clone() },
                "serves": policy.models.iter().filter(|m| m.backend.index() == index).map(|m| m.serves.clone()).collect::<BTreeSet<_>>(),
                "warnings": warnings_in(b.span),
            })
        })
        .collect();
    let signals: Vec<Value> = policy
        .signals
        .iter()
        .map(|s| {
            json!({
                "name": s.name,
                "cost": cost(policy, &s.expr),
                "definition": text(s.expr.span),
                "warnings": warnings_in(s.span),
            })
        })
        .collect();
    let elsewhere: Vec<Value> = warnings
        .iter()
        .zip(&placed)
        .filter(|(_, placed)| !**placed)
        .map(|(d, _)| warning_json(policy, d))
        .collect();
    json!({
        "generation": snapshot.generation,
        "blocks": blocks,
        "routes": routes,
        "models": models,
        "backends": backends,
        "signals": signals,
        "other_warnings": elsewhere,
    })
}

fn primary(d: &Diagnostic) -> Option<Span> {
    d.labels
        .iter()
        .find(|l| l.primary)
        .or(d.labels.first())
        .map(|l| l.span)
}

fn within(inner: Span, outer: Span) -> bool {
    inner.file == outer.file && inner.start >= outer.start && inner.end <= outer.end
}

fn warning_json(policy: &CheckedPolicy, d: &Diagnostic) -> Value {
    let at = primary(d).map(|s| {
        let (line, column) = policy.sources.line_col(s.file, s.start as usize);
        json!({"line": line, "column": column})
    });
    json!({"code": d.code.as_str(), "message": d.message, "help": d.help, "at": at})
}

/// The signals `expr` reads, directly or through other signals, each with its cost.
fn reads(policy: &CheckedPolicy, expr: Option<&TExpr>) -> Vec<Value> {
    let mut found = BTreeSet::new();
    if let Some(expr) = expr {
        collect(policy, expr, &mut found);
    }
    found
        .into_iter()
        .map(|id: usize| {
            let s = &policy.signals[id];
            json!({"name": s.name, "cost": cost(policy, &s.expr)})
        })
        .collect()
}

fn collect(policy: &CheckedPolicy, expr: &TExpr, found: &mut BTreeSet<usize>) {
    if let TExprKind::Signal(id) = &expr.kind {
        let id = id.index();
        if found.insert(id) {
            if let Some(s) = policy.signals.get(id) {
                collect(policy, &s.expr, found);
            }
        }
    }
    for child in expr.children() {
        collect(policy, child, found);
    }
}

/// `model-backed` when computing the expression runs a classifier, guard, detector or encoder
/// (through any signal it reads), `cheap` otherwise.
fn cost(policy: &CheckedPolicy, expr: &TExpr) -> &'static str {
    let mut found = BTreeSet::new();
    collect(policy, expr, &mut found);
    let direct = |e: &TExpr| {
        e.any(&|x| {
            matches!(
                x.kind,
                TExprKind::Classify(..)
                    | TExprKind::Guard(..)
                    | TExprKind::Detect { .. }
                    | TExprKind::Similarity { .. }
            )
        })
    };
    if direct(expr) || found.iter().any(|&i| direct(&policy.signals[i].expr)) {
        "model-backed"
    } else {
        "cheap"
    }
}
