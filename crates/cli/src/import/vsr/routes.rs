//! A recipe's decisions as routes: each kept decision's rule as a `when` over the translated
//! signals, its models as `to .. else ..`, its plugins (`tools`, `system_prompt`,
//! `header_mutation`, caches) as route settings, priorities kept or numbered again, and the
//! decision without a rule as `route default`. A decision whose rule reads anything not
//! translated is left out whole and reported.

use super::syntax::{self, get, Expr, Route, Val};
use super::{cache, signals, Model};
use crate::import::emit::{comment, quote, quote_list, Names};
use crate::import::Translation;
use std::collections::HashMap;
use std::fmt::Write as _;

/// A translated decision: the route the recipe's decision became.
pub struct RouteOut {
    pub route: String,
}

#[allow(
    clippy::too_many_arguments,
    reason = "the recipe's parts a decision is resolved against, each its own"
)]
pub fn write_routes(
    file: &str,
    recipe: &syntax::Recipe,
    assignments: &HashMap<String, Vec<(String, Option<String>)>>,
    models: &HashMap<String, Model>,
    default_model: &Option<String>,
    model_order: &[String],
    sigs: &signals::Signals,
    out: &mut Translation,
    p: &mut String,
) -> HashMap<String, RouteOut> {
    let mut done = HashMap::new();
    let mut route_names = Names::default();
    route_names.reserve("default");
    let mut kept: Vec<(&Route, String)> = Vec::new();
    let mut default: Option<&Route> = None;
    for r in &recipe.routes {
        for (what, line) in &r.other {
            out.skip(
                file,
                *line,
                format!("ROUTE {} {what}", r.name),
                route_reason(what),
            );
        }
        let Some(when) = &r.when else {
            if default.is_some() {
                out.skip(
                    file,
                    r.line,
                    format!("ROUTE {}", r.name),
                    "a second decision without a rule: the first is the default",
                );
            } else {
                default = Some(r);
            }
            continue;
        };
        let mut missing = Vec::new();
        let expr = rule(when, sigs, &mut missing);
        if !missing.is_empty() {
            out.skip(
                file,
                r.line,
                format!("ROUTE {}", r.name),
                format!(
                    "its rule reads {}, which were not translated: the decision is left out",
                    missing.join(", ")
                ),
            );
            continue;
        }
        kept.push((r, expr));
    }
    // Highest priority first; the order of declaration breaks ties, as the recipe lists them.
    kept.sort_by_key(|(r, _)| std::cmp::Reverse(r.priority.unwrap_or(0)));
    let priorities: Vec<i64> = kept.iter().map(|(r, _)| r.priority.unwrap_or(0)).collect();
    let distinct = priorities.windows(2).all(|w| w[0] > w[1]) && priorities.iter().all(|p| *p >= 0);
    if !distinct && !kept.is_empty() {
        out.decisions.push(
            "decisions shared a priority (or had a negative one): they are numbered again in the \
             recipe's order, highest first"
                .to_string(),
        );
    }
    // One cache for the decisions that cache, when they agree on how; the others turn it off.
    let caching: Vec<&Route> = kept.iter().map(|(r, _)| *r).chain(default).collect();
    let cache = cache::plan(file, &caching, out);
    if let Some(c) = &cache {
        let encoder = match &sigs.encoder {
            Some(e) => e.clone(),
            None => {
                p.push_str(&comment(
                    "",
                    "DECIDE: the sentence encoder the recipe's cache compared questions with; put its\n\
                     files at this path (docs/models.md).",
                ));
                p.push_str("encoder cache_encoder { path = \"models/embedding\" }\n\n");
                "cache_encoder".to_string()
            }
        };
        let _ = write!(
            p,
            "cache {{\n  encoder = {encoder}\n  threshold = {}\n",
            crate::import::emit::float(c.threshold)
        );
        if let Some(t) = c.ttl_s {
            let _ = writeln!(p, "  ttl = {}", crate::import::emit::duration_ms(t * 1000));
        }
        p.push_str("}\n\n");
    }
    let off = |r: &Route| cache.as_ref().is_some_and(|c| !c.routes.contains(&r.name));
    let plugins_of = |r: &Route| -> Vec<syntax::PluginRef> {
        r.plugins
            .iter()
            // A cache plugin is the policy's cache, or was reported with why it is not.
            .filter(|pl| !cache::is_cache(pl))
            .cloned()
            .collect()
    };
    let n = kept.len();
    for (i, (r, expr)) in kept.iter().enumerate() {
        let priority = if distinct {
            priorities[i]
        } else {
            ((n - i) * 10) as i64
        };
        let name = route_names.fresh(&r.name);
        let Some((chain, effort)) = chain(
            r,
            assignments,
            models,
            default_model,
            model_order,
            file,
            out,
        ) else {
            continue;
        };
        if let Some(d) = &r.description {
            p.push_str(&comment("", d));
        }
        let _ = writeln!(p, "route {name} priority {priority} {{\n  when {expr}");
        write_target(
            p,
            &chain,
            effort.as_deref(),
            &plugins_of(r),
            file,
            &r.name,
            out,
        );
        if off(r) {
            p.push_str("  cache = off\n");
        }
        p.push_str("}\n\n");
        done.insert(r.name.clone(), RouteOut { route: name });
    }
    let target = default
        .and_then(|r| {
            chain(
                r,
                assignments,
                models,
                default_model,
                model_order,
                file,
                out,
            )
        })
        .or_else(|| {
            let m = default_model.as_ref().unwrap_or(&model_order[0]);
            Some((vec![models[m].ident.clone()], None))
        });
    if let Some((chain, effort)) = target {
        if default.is_none() {
            p.push_str(&comment(
                "",
                "The recipe's default model, for requests no decision takes.",
            ));
        }
        p.push_str("route default {\n");
        let plugins = default.map(plugins_of).unwrap_or_default();
        let name = default.map_or("default", |d| d.name.as_str());
        write_target(p, &chain, effort.as_deref(), &plugins, file, name, out);
        if cache.is_some() && default.is_none_or(off) {
            p.push_str("  cache = off\n");
        }
        p.push_str("}\n\n");
        if let Some(d) = default {
            done.insert(
                d.name.clone(),
                RouteOut {
                    route: "default".into(),
                },
            );
        }
    }
    done
}

fn route_reason(what: &str) -> &'static str {
    if what.starts_with("ALGORITHM") {
        "model selection among a decision's candidates: the first is taken, the others are its fallbacks"
    } else if what == "TIER" {
        "routes are ordered by priority alone"
    } else {
        "no counterpart in a policy"
    }
}

/// The decision's models (route `MODEL` list, else the entrypoint's assignment, else the default)
/// as `.sr` model names, with the first model's reasoning effort.
fn chain(
    r: &Route,
    assignments: &HashMap<String, Vec<(String, Option<String>)>>,
    models: &HashMap<String, Model>,
    default_model: &Option<String>,
    model_order: &[String],
    file: &str,
    out: &mut Translation,
) -> Option<(Vec<String>, Option<String>)> {
    let mut list: Vec<(String, Option<String>)> = r
        .models
        .iter()
        .map(|m| {
            let effort = get(&m.options, "effort")
                .and_then(Val::as_str)
                .map(str::to_string)
                .or_else(|| {
                    (get(&m.options, "reasoning") == Some(&Val::Bool(true)))
                        .then(|| "medium".to_string())
                });
            (m.name.clone(), effort)
        })
        .collect();
    if list.is_empty() {
        list = assignments.get(&r.name).cloned().unwrap_or_default();
    }
    if list.is_empty() {
        let m = default_model
            .clone()
            .unwrap_or_else(|| model_order[0].clone());
        out.decisions.push(format!(
            "decision `{}` names no model: it goes to the default model `{m}`",
            r.name
        ));
        list.push((m, None));
    }
    if list.len() > 1 {
        out.skip(
            file,
            r.line,
            format!("ROUTE {} (several models)", r.name),
            "the recipe chose among several models; here the first takes every request and the others are its fallbacks",
        );
    }
    let effort = list[0].1.clone();
    let mut chain: Vec<String> = Vec::new();
    for (m, _) in list {
        if let Some(model) = models.get(&m) {
            if !chain.contains(&model.ident) {
                chain.push(model.ident.clone());
            }
        }
    }
    (!chain.is_empty()).then_some((chain, effort))
}

fn write_target(
    p: &mut String,
    chain: &[String],
    effort: Option<&str>,
    plugins: &[syntax::PluginRef],
    file: &str,
    route: &str,
    out: &mut Translation,
) {
    let _ = write!(p, "  to {}", chain[0]);
    if chain.len() > 1 {
        let _ = write!(p, " else {}", chain[1..].join(", "));
    }
    p.push('\n');
    if let Some(e) = effort.filter(|e| matches!(*e, "low" | "medium" | "high" | "off")) {
        let _ = writeln!(p, "  reasoning = {e}");
    }
    for (name, fields, line) in plugins {
        if get(fields, "enabled") == Some(&Val::Bool(false)) {
            continue;
        }
        match name.as_str() {
            "tools" => match get(fields, "mode")
                .and_then(Val::as_str)
                .unwrap_or("passthrough")
            {
                "none" => p.push_str("  tools = none\n"),
                "filtered" => {
                    let allowed = get(fields, "allow_tools")
                        .map(Val::strings)
                        .unwrap_or_default();
                    let _ = writeln!(p, "  tools = only {}", quote_list(&allowed));
                }
                _ => {}
            },
            "system_prompt" => match get(fields, "system_prompt").and_then(Val::as_str) {
                Some(text) => {
                    let replace = get(fields, "mode").and_then(Val::as_str) == Some("replace");
                    let _ = writeln!(
                        p,
                        "  system_prompt = {}{}",
                        if replace { "replace " } else { "" },
                        quote(text)
                    );
                }
                None => out.skip(
                    file,
                    *line,
                    format!("ROUTE {route} PLUGIN system_prompt"),
                    "no `system_prompt` text",
                ),
            },
            "header_mutation" => {
                // `add` and `update` both leave the header set to the value on the upstream
                // request, as `headers` does; a removal has no counterpart.
                let mut set: Vec<String> = Vec::new();
                for key in ["add", "update"] {
                    for h in get(fields, key).map(Val::as_list).unwrap_or_default() {
                        if let (Some(n), Some(v)) = (
                            h.get("name").and_then(Val::as_str),
                            h.get("value").and_then(Val::as_str),
                        ) {
                            set.push(format!("{} = {}", quote(n), quote(v)));
                        }
                    }
                }
                if !set.is_empty() {
                    let _ = writeln!(p, "  headers {{ {} }}", set.join("  "));
                }
                if get(fields, "delete").is_some_and(|d| !d.as_list().is_empty()) {
                    out.skip(
                        file,
                        *line,
                        format!("ROUTE {route} PLUGIN header_mutation delete"),
                        "headers are set on the upstream request, never removed",
                    );
                }
            }
            other => out.skip(
                file,
                *line,
                format!("ROUTE {route} PLUGIN {other}"),
                "route plugins other than `tools`, `system_prompt`, `header_mutation` and the caches have no counterpart",
            ),
        }
    }
}

/// A rule as an `.sr` expression; references with no translation are collected in `missing`.
fn rule(e: &Expr, sigs: &signals::Signals, missing: &mut Vec<String>) -> String {
    match e {
        Expr::Ref { kind, name, .. } => {
            let key = (kind.clone(), name.clone());
            let singular = (kind.trim_end_matches('s').to_string(), name.clone());
            match sigs.map.get(&key).or_else(|| sigs.map.get(&singular)) {
                Some(s) => s.ident.clone(),
                None => {
                    missing.push(format!("`{kind}(\"{name}\")`"));
                    "false".to_string()
                }
            }
        }
        Expr::Not(inner) => {
            let inner_text = rule(inner, sigs, missing);
            if matches!(**inner, Expr::Ref { .. }) {
                format!("not {inner_text}")
            } else {
                format!("not ({inner_text})")
            }
        }
        Expr::And(items) => items
            .iter()
            .map(|i| {
                let t = rule(i, sigs, missing);
                if matches!(i, Expr::Or(_)) {
                    format!("({t})")
                } else {
                    t
                }
            })
            .collect::<Vec<_>>()
            .join(" and "),
        Expr::Or(items) => items
            .iter()
            .map(|i| rule(i, sigs, missing))
            .collect::<Vec<_>>()
            .join(" or "),
    }
}
