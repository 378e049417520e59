//! A recipe's route caches (`PLUGIN semantic_cache`, or `response_cache` in `config.yaml`) as
//! the policy's `cache`: a cache keyed by meaning, answering a request whose final user message
//! is close enough to a stored one. The recipe turns it on per decision with a similarity
//! threshold and a lifetime; a policy has one cache, which routes turn off (`cache = off`). So
//! the caches translate when every decision that caches does so with the same threshold and
//! lifetime; otherwise each is reported.

use super::syntax::{get, PluginRef, Route, Val};
use crate::import::Translation;

/// The policy's cache: the threshold and lifetime the recipe's caching decisions share, and
/// which decisions cache.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub threshold: f64,
    pub ttl_s: Option<u64>,
    pub routes: Vec<String>,
}

/// Whether a route plugin is a cache.
pub fn is_cache(plugin: &PluginRef) -> bool {
    matches!(plugin.0.as_str(), "semantic_cache" | "response_cache")
}

/// A cache plugin's threshold and lifetime, when it is on.
fn settings(fields: &[(String, Val)]) -> Option<(Option<f64>, Option<u64>)> {
    if get(fields, "enabled") == Some(&Val::Bool(false)) {
        return None;
    }
    let threshold = get(fields, "similarity_threshold")
        .or_else(|| get(fields, "semantic").and_then(|s| s.get("similarity_threshold")))
        .and_then(Val::as_num);
    let ttl = get(fields, "ttl_seconds")
        .and_then(Val::as_num)
        .map(|t| t as u64);
    Some((threshold, ttl))
}

/// The cache the `routes` (the decisions that translated) ask for, or `None` when none caches
/// or they disagree (each cache plugin then reported).
pub fn plan(file: &str, routes: &[&Route], out: &mut Translation) -> Option<Plan> {
    let mut uses: Vec<(&Route, &PluginRef, Option<f64>, Option<u64>)> = Vec::new();
    for r in routes {
        for plugin in r.plugins.iter().filter(|p| is_cache(p)) {
            if let Some((t, ttl)) = settings(&plugin.1) {
                uses.push((r, plugin, t, ttl));
            }
        }
    }
    let first = uses.first()?;
    let (threshold, ttl) = (first.2, first.3);
    let agree = uses.iter().all(|u| u.2 == threshold && u.3 == ttl);
    match threshold.filter(|_| agree) {
        Some(threshold) => Some(Plan {
            threshold,
            ttl_s: ttl,
            routes: uses.iter().map(|u| u.0.name.clone()).collect(),
        }),
        None => {
            let why = if agree {
                "a cache without `similarity_threshold`: the policy's cache needs one"
            } else {
                "decisions cache at different similarity thresholds or lifetimes, and a policy \
                 has one cache"
            };
            for (r, plugin, _, _) in &uses {
                out.skip(
                    file,
                    plugin.2,
                    format!("ROUTE {} PLUGIN {}", r.name, plugin.0),
                    why,
                );
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(name: &str, fields: &str) -> Route {
        let text = format!("ROUTE {name} {{ PRIORITY 1 PLUGIN semantic_cache {{ {fields} }} }}");
        super::super::syntax::parse("t", &text, None)
            .expect("parses")
            .routes
            .remove(0)
    }

    #[test]
    fn caches_that_agree_become_the_policy_cache() {
        let a = route(
            "a",
            "enabled: true similarity_threshold: 0.9 ttl_seconds: 600",
        );
        let b = route("b", "similarity_threshold: 0.9 ttl_seconds: 600");
        let off = route("c", "enabled: false similarity_threshold: 0.5");
        let mut out = Translation::default();
        let plan = plan("t", &[&a, &b, &off], &mut out).expect("a cache");
        assert_eq!(plan.threshold, 0.9);
        assert_eq!(plan.ttl_s, Some(600));
        assert_eq!(plan.routes, vec!["a".to_string(), "b".to_string()]);
        assert!(out.untranslated.is_empty());
        let other = route("d", "similarity_threshold: 0.8 ttl_seconds: 600");
        assert_eq!(plan_of(&[&a, &other]), None);
    }

    fn plan_of(routes: &[&Route]) -> Option<Plan> {
        let mut out = Translation::default();
        let p = plan("t", routes, &mut out);
        assert_eq!(
            out.untranslated.len(),
            2,
            "each disagreeing cache is reported"
        );
        p
    }
}
