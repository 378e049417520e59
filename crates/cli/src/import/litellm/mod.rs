//! `src import litellm`: a LiteLLM proxy config (`model_list`, `litellm_settings`,
//! `router_settings`, `general_settings`) as a policy.
//!
//! Each `model_list` entry (a deployment) becomes a `model` on a `backend` made from its
//! `api_base` (or its provider's default URL) and its key, which stays an environment
//! reference. Each `model_name` (a model group) becomes a router name and a route that sends a
//! request naming it to the group's first deployment, then its other deployments and its
//! fallback groups in order; a test per group pins that down. LiteLLM spreads load over a
//! group's deployments; a policy names models, never workers, so the order is the listed one and
//! the strategy is reported as not translated. The settings are read in [`settings`].

mod providers;
mod settings;

use super::emit::{comment, duration_ms, ident, quote, short_float, Names};
use super::lines::{line_of, Step};
use super::{read, yaml, Case, ImportError, Translation};
use serde_norway::{Mapping, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One `model_list` entry that became a model.
struct Deployment {
    /// The logical name clients send (`model_name`).
    group: String,
    /// The `.sr` model's name.
    model: String,
    serves: String,
    backend: usize,
    /// The line of its `model_list` entry.
    line: usize,
    context: Option<u64>,
    cost: Option<f64>,
}

/// A backend, one per distinct (URL, key, API).
#[derive(PartialEq)]
struct Backend {
    name: String,
    url: String,
    key_env: Option<String>,
    anthropic: bool,
    timeout: Option<String>,
    /// Why a person must look at it, written above it.
    note: Option<String>,
}

pub fn translate(path: &Path) -> Result<Translation, ImportError> {
    let file = path.display().to_string();
    let text = read(path)?;
    let root = yaml(&file, &text)?;
    let Some(root) = root.as_mapping() else {
        return Err(shape(&file, 1, "the config is not a mapping of sections"));
    };
    let Some(list) = root.get("model_list").and_then(Value::as_sequence) else {
        return Err(shape(
            &file,
            1,
            "no `model_list`: a LiteLLM config lists its deployments there",
        ));
    };
    if list.is_empty() {
        return Err(shape(
            &file,
            line_of(&text, &[Step::Key("model_list")]),
            "`model_list` is empty",
        ));
    }
    let mut out = Translation::default();
    let ctx = Ctx {
        file: &file,
        text: &text,
    };
    let settings = settings::read(&ctx, root, &mut out);
    let mut deployments = Vec::new();
    let mut backends: Vec<Backend> = Vec::new();
    let mut model_names = Names::default();
    let mut backend_names = Names::default();
    for group in settings::groups_in(list) {
        model_names.reserve(&group);
    }
    for (i, entry) in list.iter().enumerate() {
        let at = [Step::Key("model_list"), Step::Index(i)];
        if let Some(d) = deployment(
            &ctx,
            &at,
            entry,
            &mut out,
            &mut backends,
            &mut backend_names,
            &mut model_names,
        )? {
            if deployments
                .iter()
                .any(|o: &Deployment| o.backend == d.backend && o.serves == d.serves)
            {
                out.skip(
                    &file,
                    line_of(&text, &at),
                    format!("model_list[{i}] (`{}`)", d.group),
                    format!(
                        "serves `{}` on the same backend with the same key as an earlier \
                         deployment: to a policy they are one model",
                        d.serves
                    ),
                );
                continue;
            }
            deployments.push(d);
        }
    }
    if deployments.is_empty() {
        return Err(shape(
            &file,
            line_of(&text, &[Step::Key("model_list")]),
            "no deployment of `model_list` could be translated (see above)",
        ));
    }
    write_policy(&ctx, &mut out, &deployments, &backends, &settings);
    Ok(out)
}

/// The input, for line lookups.
pub(crate) struct Ctx<'a> {
    pub file: &'a str,
    pub text: &'a str,
}

impl Ctx<'_> {
    pub fn line(&self, path: &[Step<'_>]) -> usize {
        line_of(self.text, path)
    }
}

fn shape(file: &str, line: usize, message: &str) -> ImportError {
    ImportError::Shape {
        path: file.to_string(),
        line,
        message: message.to_string(),
    }
}

/// A string field, or a number written as one.
fn string(map: &Mapping, key: &str) -> Option<String> {
    match map.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn number(map: &Mapping, key: &str) -> Option<f64> {
    match map.get(key)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The variable named by LiteLLM's `os.environ/NAME` form.
fn env_ref(value: &str) -> Option<&str> {
    value
        .strip_prefix("os.environ/")
        .map(str::trim)
        .filter(|n| !n.is_empty())
}

/// Fields of `litellm_params` read by [`deployment`]; the others are reported.
const READ_PARAMS: &[&str] = &[
    "model",
    "api_base",
    "base_url",
    "api_key",
    "timeout",
    "max_input_tokens",
    "input_cost_per_token",
];

#[allow(
    clippy::too_many_arguments,
    reason = "the namespaces and tables one deployment adds to, each its own"
)]
fn deployment(
    ctx: &Ctx<'_>,
    at: &[Step<'_>],
    entry: &Value,
    out: &mut Translation,
    backends: &mut Vec<Backend>,
    backend_names: &mut Names,
    model_names: &mut Names,
) -> Result<Option<Deployment>, ImportError> {
    let line = ctx.line(at);
    let Some(entry) = entry.as_mapping() else {
        return Err(shape(
            ctx.file,
            line,
            "a `model_list` entry is not a mapping",
        ));
    };
    let Some(group) = string(entry, "model_name") else {
        return Err(shape(
            ctx.file,
            line,
            "a `model_list` entry has no `model_name`",
        ));
    };
    let Some(params) = entry.get("litellm_params").and_then(Value::as_mapping) else {
        return Err(shape(
            ctx.file,
            line,
            &format!("`{group}` has no `litellm_params`"),
        ));
    };
    let Some(model) = string(params, "model") else {
        return Err(shape(
            ctx.file,
            line,
            &format!("`{group}` has no `litellm_params.model`"),
        ));
    };
    let info = entry.get("model_info").and_then(Value::as_mapping);
    let at_params = [at, &[Step::Key("litellm_params")]].concat();
    if group.contains('*') || model.contains('*') {
        out.skip(
            ctx.file,
            line,
            format!("model_list `{group}` ({model})"),
            "a wildcard deployment passes any model name through: a policy names each model it \
             serves; declare the ones clients use",
        );
        return Ok(None);
    }
    if let Some(mode) = info.and_then(|i| string(i, "mode")) {
        if !matches!(mode.as_str(), "chat" | "completion" | "responses") {
            out.skip(
                ctx.file,
                ctx.line(&[at, &[Step::Key("model_info"), Step::Key("mode")]].concat()),
                format!("model_list `{group}` (mode {mode})"),
                "the router routes chat completions, Responses and Messages requests; other \
                 endpoints are not routed",
            );
            return Ok(None);
        }
    }
    let (provider, served) = providers::split(&model);
    let model_line = ctx.line(&[&at_params[..], &[Step::Key("model")]].concat());
    if !provider.compatible {
        out.skip(
            ctx.file,
            model_line,
            format!("model_list `{group}` ({model})"),
            format!(
                "provider `{}` speaks neither OpenAI's nor Anthropic's API; put an \
                 OpenAI-compatible gateway in front of it and point a backend at that",
                provider.prefix
            ),
        );
        return Ok(None);
    }
    for (key, _) in params {
        let Some(key) = key.as_str() else { continue };
        if READ_PARAMS.contains(&key) {
            continue;
        }
        let why = match key {
            "rpm" | "tpm" => {
                "per-deployment rate limits: the router limits per client with `budget`, not \
                 per backend"
            }
            "order" | "weight" => {
                "load-balancing weight: a policy tries a group's deployments in listed order"
            }
            "api_version" => "Azure's `api-version` query: the backend URL uses Azure's v1 API",
            "temperature" | "max_tokens" | "top_p" | "stop" | "seed" | "extra_body" => {
                "a default request parameter: the router forwards the client's parameters as sent"
            }
            _ => "no counterpart in a policy (credentials other than `api_key` are never copied)",
        };
        out.skip(
            ctx.file,
            ctx.line(&[&at_params[..], &[Step::Key(key)]].concat()),
            format!("model_list `{group}` litellm_params.{key}"),
            why,
        );
    }
    let backend = backend_of(ctx, &at_params, &group, params, provider, out)?;
    let index = match backends.iter().position(|b| {
        b.url == backend.url && b.key_env == backend.key_env && b.anthropic == backend.anthropic
    }) {
        Some(i) => i,
        None => {
            let mut backend = backend;
            backend.name = backend_names.fresh(provider.prefix);
            backends.push(backend);
            backends.len() - 1
        }
    };
    let context = info
        .and_then(|i| number(i, "max_input_tokens"))
        .or_else(|| number(params, "max_input_tokens"))
        .map(|n| n as u64);
    let cost = info
        .and_then(|i| number(i, "input_cost_per_token"))
        .or_else(|| number(params, "input_cost_per_token"))
        .map(|c| c * 1000.0);
    // Named after what it serves: the LiteLLM name is a router name, and the two share the
    // table of names a client may send.
    Ok(Some(Deployment {
        model: model_names.fresh(&served.to_lowercase()),
        group,
        serves: served.to_string(),
        backend: index,
        line,
        context,
        cost,
    }))
}

/// The backend a deployment is sent to; its key is always an environment reference.
fn backend_of(
    ctx: &Ctx<'_>,
    at_params: &[Step<'_>],
    group: &str,
    params: &Mapping,
    provider: &providers::Provider,
    out: &mut Translation,
) -> Result<Backend, ImportError> {
    let base = string(params, "api_base").or_else(|| string(params, "base_url"));
    let mut note = None;
    let url = match base {
        Some(base) if env_ref(&base).is_some() => {
            out.skip(
                ctx.file,
                ctx.line(&[at_params, &[Step::Key("api_base")]].concat()),
                format!("model_list `{group}` api_base"),
                "the URL is read from the environment: a backend's `url` is written in the \
                 policy; the placeholder URL must be replaced",
            );
            note = Some(format!(
                "DECIDE: `{group}` reads its URL from `{base}`; write that URL here"
            ));
            format!(
                "https://{}.invalid/v1",
                ident(group).to_lowercase().replace('_', "-")
            )
        }
        Some(base) => {
            let base = base.trim_end_matches('/').to_string();
            if provider.prefix == "azure" {
                note = Some(
                    "DECIDE: Azure OpenAI answers OpenAI's API under `/openai/v1`; check that \
                     the resource has the v1 API"
                        .to_string(),
                );
                format!("{base}/openai/v1")
            } else if matches!(provider.prefix, "ollama" | "ollama_chat") && !base.ends_with("/v1")
            {
                format!("{base}/v1")
            } else {
                base
            }
        }
        None => match provider.default_url {
            Some(url) => url.to_string(),
            None => {
                out.skip(
                    ctx.file,
                    ctx.line(&[at_params, &[Step::Key("model")]].concat()),
                    format!("model_list `{group}` (no api_base)"),
                    format!(
                        "provider `{}` needs an `api_base`; the placeholder URL must be replaced",
                        provider.prefix
                    ),
                );
                note = Some(format!(
                    "DECIDE: `{group}` has no `api_base`; write its URL here"
                ));
                format!(
                    "https://{}.invalid/v1",
                    ident(group).to_lowercase().replace('_', "-")
                )
            }
        },
    };
    let key_env = match string(params, "api_key") {
        Some(key) => match env_ref(&key) {
            Some(name) => Some(name.to_string()),
            None => {
                let name = format!("{}_API_KEY", ident(group).to_uppercase());
                out.skip(
                    ctx.file,
                    ctx.line(&[at_params, &[Step::Key("api_key")]].concat()),
                    format!("model_list `{group}` api_key"),
                    format!(
                        "a key written in the config is never copied into a policy: the backend \
                         reads `{name}` from the environment; set it there (and take the key out \
                         of the config)"
                    ),
                );
                Some(name)
            }
        },
        None => provider.key_env.map(str::to_string),
    };
    let timeout = number(params, "timeout").map(|s| duration_ms((s * 1000.0).round() as u64));
    Ok(Backend {
        name: String::new(),
        url,
        key_env,
        anthropic: provider.anthropic,
        timeout,
        note,
    })
}

fn write_policy(
    ctx: &Ctx<'_>,
    out: &mut Translation,
    deployments: &[Deployment],
    backends: &[Backend],
    settings: &settings::Settings,
) {
    let mut p = String::new();
    p.push_str(&comment(
        "",
        &format!(
            "Imported from the LiteLLM config `{}` by `src import litellm`.\n\
             MIGRATION.md lists what was not translated and the choices to confirm.",
            ctx.file
        ),
    ));
    p.push('\n');
    for b in backends {
        if let Some(note) = &b.note {
            p.push_str(&comment("", note));
        }
        let _ = write!(p, "backend {} {{\n  url = {}\n", b.name, quote(&b.url));
        if b.anthropic {
            p.push_str("  api = anthropic\n");
        }
        if let Some(env) = &b.key_env {
            let _ = writeln!(p, "  api_key = env({})", quote(env));
        }
        if let Some(t) = &b.timeout {
            let _ = writeln!(p, "  timeout = {t}");
        }
        p.push_str("}\n\n");
    }
    for d in deployments {
        let _ = write!(
            p,
            "model {} {{\n  backend = {}\n  serves = {}\n",
            d.model,
            backends[d.backend].name,
            quote(&d.serves)
        );
        if let Some(c) = d.context {
            let _ = writeln!(p, "  context = {c}");
        }
        if let Some(c) = d.cost {
            p.push_str(
                "  # LiteLLM's input price per token, times 1000 (the price per 1k tokens)\n",
            );
            let _ = writeln!(p, "  cost = {}", short_float(c));
        }
        p.push_str("}\n\n");
    }
    let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for d in deployments {
        if !groups.contains_key(d.group.as_str()) {
            order.push(&d.group);
        }
        groups.entry(&d.group).or_default().push(&d.model);
    }
    let mut names: Vec<String> = order.iter().map(|g| g.to_string()).collect();
    for (alias, target) in &settings.aliases {
        if groups.contains_key(target.as_str()) && !names.contains(alias) {
            names.push(alias.clone());
        }
    }
    p.push_str(&comment(
        "",
        "Each LiteLLM model name asks for routing; its route picks the deployment.",
    ));
    let quoted: Vec<String> = names.iter().map(|n| quote(n)).collect();
    let _ = writeln!(p, "router {{ names = [{}] }}\n", quoted.join(", "));
    if let Some(failure) = settings.failure() {
        let _ = writeln!(p, "{failure}\n");
    }
    let mut group_lines: BTreeMap<&str, usize> = BTreeMap::new();
    for d in deployments.iter().rev() {
        group_lines.insert(&d.group, d.line);
    }
    let alias_line = ctx.line(&[Step::Key("router_settings"), Step::Key("model_group_alias")]);
    let mut route_names = Names::default();
    let mut test_names = Names::default();
    let count = order.len();
    for (i, group) in order.iter().enumerate() {
        let chain = settings.chain(group, &groups, ctx, out);
        let route = route_names.fresh(group);
        let mut when = vec![format!("body(\"model\") == {}", quote(group))];
        let aliases: Vec<&String> = settings
            .aliases
            .iter()
            .filter(|(_, t)| t == group)
            .map(|(a, _)| a)
            .collect();
        for alias in &aliases {
            when.push(format!("body(\"model\") == {}", quote(alias)));
        }
        if groups[group].len() > 1 {
            p.push_str(&comment(
                "",
                "LiteLLM balanced load over these deployments; here the first takes every \
                 request while it answers and the others are its fallbacks.",
            ));
        }
        for d in deployments.iter().filter(|d| &d.group == group) {
            if d.context.is_none() && settings.has_context_fallbacks(group) {
                p.push_str(&comment(
                    "",
                    &format!(
                        "DECIDE: give model `{}` its `context` so that requests too long for it \
                         go to its context-window fallbacks without being sent to it first.",
                        d.model
                    ),
                ));
            }
        }
        let first = chain[0].clone();
        let rest = if chain.len() > 1 {
            format!(" else {}", chain[1..].join(", "))
        } else {
            String::new()
        };
        let _ = writeln!(
            p,
            "route {route} priority {} {{ when {} to {first}{rest} }}\n",
            (count - i) * 10,
            when.join(" or ")
        );
        for name in std::iter::once(*group).chain(aliases.iter().map(|a| a.as_str())) {
            let test = test_names.fresh(&format!("{}_goes_to_{first}", ident(name)));
            let file = format!("requests/{test}.json");
            let body = serde_json::json!({
                "model": name,
                "messages": [{"role": "user", "content": "Hello"}],
            });
            out.files.push((
                PathBuf::from(&file),
                serde_json::to_string_pretty(&body).unwrap_or_default() + "\n",
            ));
            out.tests.push(Case {
                text: format!(
                    "test {test} {{\n  messages = {}\n  expect {route} model {first}\n}}\n",
                    quote(&file)
                ),
                name: test,
                file: ctx.file.to_string(),
                line: group_lines.get(name).copied().unwrap_or(alias_line),
                what: format!("a request for `{name}`"),
            });
        }
    }
    p.push_str(&comment(
        "",
        "Only reached by a router name no route above takes.",
    ));
    let _ = writeln!(p, "route default {{ to {} }}\n", deployments[0].model);
    out.policy = p;
}
