//! LiteLLM's settings sections: what becomes part of the policy (fallback chains, model group
//! aliases, cooldowns) and what is reported as not translated, with the reason and what the
//! router does instead. Values are never echoed: settings hold keys and passwords.

use super::{number, string, Ctx};
use crate::import::emit::duration_ms;
use crate::import::lines::Step;
use crate::import::Translation;
use serde_norway::{Mapping, Value};
use std::collections::BTreeMap;

/// A fallback target as written, with its line.
type Targets = Vec<(String, usize)>;

#[derive(Default)]
pub struct Settings {
    /// `model_group_alias`: alias → group.
    pub aliases: Vec<(String, String)>,
    fallbacks: BTreeMap<String, Targets>,
    context_fallbacks: BTreeMap<String, Targets>,
    default_fallbacks: Targets,
    cooldown_after: Option<u64>,
    cooldown: Option<String>,
}

const SECTIONS: &[&str] = &[
    "model_list",
    "litellm_settings",
    "router_settings",
    "general_settings",
];

pub fn read(ctx: &Ctx<'_>, root: &Mapping, out: &mut Translation) -> Settings {
    let mut s = Settings::default();
    for (key, _) in root {
        let Some(key) = key.as_str() else { continue };
        if SECTIONS.contains(&key) {
            continue;
        }
        let why = if key == "environment_variables" {
            "values are never copied into a policy; set them in the router's environment"
        } else {
            "no counterpart in a policy"
        };
        out.skip(ctx.file, ctx.line(&[Step::Key(key)]), key, why);
    }
    for section in ["litellm_settings", "router_settings"] {
        let Some(map) = root.get(section).and_then(Value::as_mapping) else {
            continue;
        };
        for (key, value) in map {
            let Some(key) = key.as_str() else { continue };
            let at = [Step::Key(section), Step::Key(key)];
            let line = ctx.line(&at);
            match key {
                "fallbacks" => read_fallbacks(ctx, &at, value, &mut s.fallbacks, out),
                "context_window_fallbacks" => {
                    read_fallbacks(ctx, &at, value, &mut s.context_fallbacks, out)
                }
                "default_fallbacks" => {
                    for (i, t) in value.as_sequence().into_iter().flatten().enumerate() {
                        if let Some(t) = t.as_str() {
                            let line = ctx.line(&[&at[..], &[Step::Index(i)]].concat());
                            s.default_fallbacks.push((t.to_string(), line));
                        }
                    }
                }
                "model_group_alias" => {
                    for (alias, target) in value.as_mapping().into_iter().flatten() {
                        let target = match target {
                            Value::Mapping(m) => string(m, "model"),
                            other => other.as_str().map(str::to_string),
                        };
                        if let (Some(alias), Some(target)) = (alias.as_str(), target) {
                            s.aliases.push((alias.to_string(), target));
                        }
                    }
                }
                "allowed_fails" if section == "router_settings" => {
                    s.cooldown_after = number(map, key).map(|n| n.max(1.0) as u64);
                }
                "cooldown_time" if section == "router_settings" => {
                    s.cooldown = number(map, key)
                        .filter(|n| *n > 0.0)
                        .map(|n| duration_ms((n * 1000.0).round() as u64));
                }
                _ => out.skip(ctx.file, line, format!("{section}.{key}"), reason(key)),
            }
        }
    }
    if let Some(map) = root.get("general_settings").and_then(Value::as_mapping) {
        for (key, _) in map {
            let Some(key) = key.as_str() else { continue };
            let why = match key {
                "master_key" => {
                    "the router checks no master key: each backend forwards or drops the \
                     client's credentials (`client_auth`) and uses its own `api_key`"
                }
                "database_url" | "store_model_in_db" => {
                    "the router keeps no database of keys or spend"
                }
                _ => "no counterpart in a policy",
            };
            let line = ctx.line(&[Step::Key("general_settings"), Step::Key(key)]);
            out.skip(ctx.file, line, format!("general_settings.{key}"), why);
        }
    }
    s
}

fn reason(key: &str) -> &'static str {
    match key {
        "routing_strategy" | "routing_strategy_args" => {
            "the router never balances load over one name's deployments: a policy names models, \
             and a group's deployments are tried in listed order (the first takes every request \
             while it answers); spread load behind the backend URL (a load balancer, NVIDIA \
             Dynamo, llm-d)"
        }
        "num_retries" | "retry_policy" | "retry_after" | "max_fallbacks" => {
            "the router sends a request to each candidate once and then to the next fallback; \
             it does not retry the same model"
        }
        "allowed_fails_policy" => "cooldowns count every failure alike (`failure.cooldown_after`)",
        "content_policy_fallbacks" => {
            "fallbacks are taken on backend failure only; a refusal for content is returned as \
             the model gave it"
        }
        "timeout" | "request_timeout" | "stream_timeout" => {
            "timeouts are set per backend (`timeout = ..`); set them where they matter"
        }
        "redis_host" | "redis_port" | "redis_password" | "redis_url" => {
            "cooldowns are shared over the session store (`session { store = redis(..) }`); \
             the store's address and credentials are not copied"
        }
        "enable_pre_call_checks" => {
            "the router always skips a model whose `context` is too small for the request"
        }
        "cache" | "cache_params" => {
            "the router's response cache is keyed by meaning and needs an encoder model \
             (`cache { encoder = .. }`); it is not enabled"
        }
        "callbacks" | "success_callback" | "failure_callback" | "service_callback" => {
            "observability: the router exports Prometheus metrics and OpenTelemetry traces"
        }
        "drop_params" | "modify_params" | "set_verbose" | "json_logs" => {
            "LiteLLM's own request handling: the router forwards the client's body as sent"
        }
        _ => "no counterpart in a policy",
    }
}

/// `[{group: [target, ..]}, ..]` (or `{group: target}`) into `into`.
fn read_fallbacks(
    ctx: &Ctx<'_>,
    at: &[Step<'_>],
    value: &Value,
    into: &mut BTreeMap<String, Targets>,
    out: &mut Translation,
) {
    let Some(list) = value.as_sequence() else {
        out.skip(
            ctx.file,
            ctx.line(at),
            "fallbacks",
            "expected a list of `{model_name: [fallbacks]}`",
        );
        return;
    };
    for (i, entry) in list.iter().enumerate() {
        let line = ctx.line(&[at, &[Step::Index(i)]].concat());
        for (group, targets) in entry.as_mapping().into_iter().flatten() {
            let Some(group) = group.as_str() else {
                continue;
            };
            let targets: Vec<String> = match targets {
                Value::Sequence(s) => s
                    .iter()
                    .filter_map(|t| t.as_str().map(str::to_string))
                    .collect(),
                Value::String(t) => vec![t.clone()],
                _ => Vec::new(),
            };
            let slot = into.entry(group.to_string()).or_default();
            slot.extend(targets.into_iter().map(|t| (t, line)));
        }
    }
}

/// The model groups of `model_list`, in order, each once.
pub fn groups_in(list: &[Value]) -> Vec<String> {
    let mut groups: Vec<String> = Vec::new();
    for entry in list {
        if let Some(g) = entry.as_mapping().and_then(|m| string(m, "model_name")) {
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
    }
    groups
}

impl Settings {
    /// The `failure` declaration for LiteLLM's cooldowns, when it set any.
    pub fn failure(&self) -> Option<String> {
        if self.cooldown_after.is_none() && self.cooldown.is_none() {
            return None;
        }
        let mut fields = Vec::new();
        if let Some(n) = self.cooldown_after {
            fields.push(format!("cooldown_after = {n}"));
        }
        if let Some(c) = &self.cooldown {
            fields.push(format!("cooldown = {c}"));
        }
        Some(format!(
            "# LiteLLM's allowed_fails and cooldown_time: a failing model is skipped for a while.\n\
             failure {{ {} }}",
            fields.join("  ")
        ))
    }

    pub fn has_context_fallbacks(&self, group: &str) -> bool {
        self.context_fallbacks.contains_key(group)
    }

    /// The models a request for `group` is tried on, in order: the group's deployments, its
    /// fallback groups', its context-window fallback groups' (the router skips a model whose
    /// `context` the request exceeds, so both lists are one chain), then the default
    /// fallbacks'. A target that names no group is reported.
    pub fn chain(
        &self,
        group: &str,
        groups: &BTreeMap<&str, Vec<&str>>,
        ctx: &Ctx<'_>,
        out: &mut Translation,
    ) -> Vec<String> {
        let mut chain: Vec<String> = Vec::new();
        let mut push = |models: &[&str]| {
            for m in models {
                if !chain.iter().any(|c| c == m) {
                    chain.push(m.to_string());
                }
            }
        };
        push(&groups[group]);
        let listed = self.fallbacks.get(group).into_iter().flatten();
        let context = self.context_fallbacks.get(group).into_iter().flatten();
        for (target, line) in listed.chain(context).chain(&self.default_fallbacks) {
            match groups.get(target.as_str()) {
                Some(models) => push(models),
                None => out.skip(
                    ctx.file,
                    *line,
                    format!("fallback `{group}` -> `{target}`"),
                    "the fallback names no translated `model_name`",
                ),
            }
        }
        chain
    }
}
