//! `src import vsr`: a vLLM Semantic Router recipe (`recipe.dsl`, with the `config.yaml` that
//! serves it and the `probes.yaml` that states its expectations, or a `config.yaml` alone) as a
//! policy.
//!
//! [`syntax`] reads the recipe language and [`config`] the YAML (models' endpoints, entrypoints,
//! and the YAML form of the routing) into one tree; [`signals`] translates its signals,
//! [`projections`] its projections' bands, [`routes`] its decisions (with [`cache`] for their
//! caches), [`probes`] its probes. This module binds models to backends and assembles the
//! policy. A decision whose rule reads something with no counterpart is left out whole and
//! reported: a route with part of its rule missing would route other requests than the recipe
//! did.

mod cache;
mod config;
mod probes;
mod projections;
mod routes;
mod signals;
mod syntax;

use super::emit::{comment, ident, quote, Names};
use super::{read, yaml, ImportError, Translation};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use syntax::{get, Val};

/// The recipe's files: its routing in the recipe language, or in `config.yaml` alone.
struct Inputs {
    dsl: Option<PathBuf>,
    config: Option<PathBuf>,
    probes: Option<PathBuf>,
}

fn inputs(path: &Path) -> Result<Inputs, ImportError> {
    let dir = if path.is_dir() {
        path.to_path_buf()
    } else {
        path.parent().map(Path::to_path_buf).unwrap_or_default()
    };
    let dsl = if path.extension().is_some_and(|e| e == "dsl") {
        path.to_path_buf()
    } else {
        dir.join("recipe.dsl")
    };
    let beside = |name: &str| Some(dir.join(name)).filter(|p| p.is_file());
    let config = if path.is_file() && path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
        Some(path.to_path_buf())
    } else {
        beside("config.yaml")
    };
    if !dsl.is_file() && config.is_none() {
        return Err(ImportError::Shape {
            path: path.display().to_string(),
            line: 0,
            message: format!(
                "no recipe: expected `{}` (the recipe's routing in vLLM Semantic Router's recipe \
                 language) or a `config.yaml` with its signals and decisions",
                dsl.display()
            ),
        });
    }
    Ok(Inputs {
        dsl: Some(dsl).filter(|d| d.is_file()),
        config,
        probes: beside("probes.yaml"),
    })
}

/// A model of the recipe, bound to a backend.
struct Model {
    ident: String,
    backend: usize,
    serves: String,
}

struct Backend {
    name: String,
    url: String,
    anthropic: bool,
    key_env: Option<String>,
    note: Option<String>,
}

/// Translates the recipe at `path`; `select` names the `RECIPE` to read when the file has
/// several (the first otherwise).
pub fn translate(path: &Path, select: Option<&str>) -> Result<Translation, ImportError> {
    let files = inputs(path)?;
    let config = match &files.config {
        Some(p) => {
            let f = p.display().to_string();
            let text = read(p)?;
            let value = yaml(&f, &text)?;
            Some((f, text, value))
        }
        None => None,
    };
    let (dsl_file, mut recipe) = match (&files.dsl, &config) {
        (Some(dsl), _) => {
            let f = dsl.display().to_string();
            let recipe = syntax::parse(&f, &read(dsl)?, select)?;
            (f, recipe)
        }
        (None, Some((f, text, value))) => {
            if !config::has_routing(value) {
                return Err(ImportError::Shape {
                    path: f.clone(),
                    line: 0,
                    message: "no routing: neither `recipe.dsl` beside it nor `signals` or \
                              `decisions` in it (at the top or in `recipes[0].document`)"
                        .to_string(),
                });
            }
            let index =
                config::recipe_index(value, select).map_err(|names| ImportError::Shape {
                    path: f.clone(),
                    line: 0,
                    message: format!(
                        "no recipe `{}` in `recipes` (it has {})",
                        select.unwrap_or_default(),
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ),
                })?;
            (f.clone(), config::routing(text, value, index))
        }
        (None, None) => unreachable!("inputs() refuses a recipe with neither file"),
    };
    if recipe.entrypoints.is_empty() {
        if let Some((_, text, value)) = &config {
            recipe.entrypoints = config::entrypoints(text, value);
        }
    }
    let mut out = Translation::default();
    for (what, line) in &recipe.other {
        out.skip(&dsl_file, *line, what, reason(what));
    }
    for (what, line, why) in &recipe.notes {
        out.skip(&dsl_file, *line, what, why);
    }
    for (name, line) in &recipe.extra_recipes {
        out.skip(
            &dsl_file,
            *line,
            format!("RECIPE {name}"),
            format!("a policy is one recipe: import this one with `--recipe {name}`"),
        );
    }
    // Entrypoints serving another recipe than the one translated.
    let own = |e: &syntax::Decl| {
        get(&e.fields, "recipe")
            .and_then(Val::as_str)
            .is_none_or(|r| recipe.name.as_deref().is_none_or(|n| n == r))
    };
    for e in recipe.entrypoints.iter().filter(|e| !own(e)) {
        let r = get(&e.fields, "recipe")
            .and_then(Val::as_str)
            .unwrap_or("?");
        out.skip(
            &dsl_file,
            e.line,
            format!("ENTRYPOINT for recipe `{r}`"),
            "it serves a recipe that is not translated (a policy is one recipe)",
        );
    }
    recipe.entrypoints.retain(|e| own(e));
    // Names: models, classifiers, guards, encoders and signals share one namespace.
    let mut names = Names::default();
    let served = config
        .as_ref()
        .map(|(f, text, c)| config::served_models(f, text, c))
        .unwrap_or_default();
    let default_model = config
        .as_ref()
        .and_then(|(_, _, c)| config::default_model(c));
    // Every model the recipe names, in order of first mention.
    let assignments = assignments(&recipe);
    let mut mentioned: Vec<String> = recipe.models.iter().map(|(n, _)| n.clone()).collect();
    for r in &recipe.routes {
        mentioned.extend(r.models.iter().map(|m| m.name.clone()));
    }
    // Assignments in the order of their decisions, then any others by name: the output must
    // not depend on a map's order.
    let mut assigned: Vec<&String> = assignments.keys().collect();
    assigned.sort_by_key(|d| {
        let at = recipe.routes.iter().position(|r| &r.name == *d);
        (at.unwrap_or(usize::MAX), *d)
    });
    for d in assigned {
        mentioned.extend(assignments[d].iter().map(|(m, _)| m.clone()));
    }
    mentioned.extend(default_model.clone());
    let mut seen = Vec::new();
    mentioned.retain(|m| {
        let fresh = !seen.contains(m);
        seen.push(m.clone());
        fresh
    });
    if mentioned.is_empty() {
        return Err(ImportError::Shape {
            path: dsl_file,
            line: 0,
            message: "the recipe names no model".to_string(),
        });
    }
    let mut backends: Vec<Backend> = Vec::new();
    let mut backend_names = Names::default();
    let mut models: HashMap<String, Model> = HashMap::new();
    let mut model_order = Vec::new();
    for name in &mentioned {
        let (url, anthropic, key, serves) = match served.get(name) {
            Some(s) => (s.url.clone(), s.anthropic, s.key.clone(), s.serves.clone()),
            None => (None, false, config::Key::None, name.clone()),
        };
        let (url, note) = match url {
            Some(u) => (u, None),
            None => {
                out.skip(
                    &dsl_file,
                    recipe
                        .models
                        .iter()
                        .find(|(n, _)| n == name)
                        .map_or(0, |(_, d)| d.line),
                    format!("MODEL {name}"),
                    "no endpoint for it in config.yaml: its backend URL is a placeholder",
                );
                // One placeholder for them all: the backends are unknown, not different.
                (
                    "https://placeholder.invalid/v1".to_string(),
                    Some(
                        "DECIDE: where the models that config.yaml gives no endpoint are served;\n\
                         write the URL here (or give each its own backend)."
                            .to_string(),
                    ),
                )
            }
        };
        let key_env = match key {
            config::Key::None => None,
            config::Key::Env(e) => Some(e),
            config::Key::Literal(file, line) => {
                let env = format!("{}_API_KEY", ident(name).to_uppercase());
                out.skip(
                    &file,
                    line,
                    format!("api key of `{name}`"),
                    format!("a key written in the config is never copied into a policy: the backend reads `{env}` from the environment"),
                );
                Some(env)
            }
        };
        let index = match backends
            .iter()
            .position(|b| b.url == url && b.anthropic == anthropic && b.key_env == key_env)
        {
            Some(i) => i,
            None => {
                backends.push(Backend {
                    name: backend_names.fresh(&backend_name(&url)),
                    url,
                    anthropic,
                    key_env,
                    note,
                });
                backends.len() - 1
            }
        };
        let id = names.fresh(&name.to_lowercase());
        model_order.push(name.clone());
        models.insert(
            name.clone(),
            Model {
                ident: id,
                backend: index,
                serves,
            },
        );
    }
    let mut sigs = signals::translate(&dsl_file, &recipe.signals, &mut names, &mut out);
    projections::translate(
        &dsl_file,
        &recipe.projections,
        &recipe.signals,
        &mut sigs,
        &mut names,
        &mut out,
    );
    // The names clients send to ask for the recipe: an entrypoint's `name` or `model_names`.
    let mut entry_names: Vec<String> = Vec::new();
    if let Some(e) = recipe.entrypoints.first() {
        let named = get(&e.fields, "name")
            .and_then(Val::as_str)
            .map(str::to_string);
        let listed = get(&e.fields, "model_names")
            .map(Val::strings)
            .unwrap_or_default();
        for n in std::iter::once("auto".to_string())
            .chain(named)
            .chain(listed)
        {
            if !entry_names.contains(&n) {
                entry_names.push(n);
            }
        }
    }

    let mut p = String::new();
    p.push_str(&comment(
        "",
        &format!(
            "Imported from the vLLM Semantic Router recipe `{dsl_file}` by `src import vsr`.\n\
             MIGRATION.md lists what was not translated and the choices to confirm."
        ),
    ));
    p.push('\n');
    for b in &backends {
        if let Some(n) = &b.note {
            p.push_str(&comment("", n));
        }
        let _ = write!(p, "backend {} {{\n  url = {}\n", b.name, quote(&b.url));
        if b.anthropic {
            p.push_str("  api = anthropic\n");
        }
        if let Some(e) = &b.key_env {
            let _ = writeln!(p, "  api_key = env({})", quote(e));
        }
        p.push_str("}\n\n");
    }
    for name in &model_order {
        let m = &models[name];
        let _ = write!(
            p,
            "model {} {{\n  backend = {}\n  serves = {}\n",
            m.ident,
            backends[m.backend].name,
            quote(&m.serves)
        );
        if &m.ident != name {
            let _ = writeln!(p, "  aliases = [{}]", quote(name));
        }
        p.push_str("}\n\n");
    }
    if !entry_names.is_empty() {
        let quoted: Vec<String> = entry_names.iter().map(|n| quote(n)).collect();
        let _ = writeln!(p, "router {{ names = [{}] }}\n", quoted.join(", "));
    }
    p.push_str(&sigs.text);
    p.push('\n');
    let routes = routes::write_routes(
        &dsl_file,
        &recipe,
        &assignments,
        &models,
        &default_model,
        &model_order,
        &sigs,
        &mut out,
        &mut p,
    );
    out.policy = p;
    probes::dsl_tests(&dsl_file, &recipe, &routes, &mut out);
    if let Some(file) = &files.probes {
        let decisions: Vec<String> = recipe.routes.iter().map(|r| r.name.clone()).collect();
        probes::translate(
            file,
            recipe.name.as_deref(),
            &decisions,
            &routes,
            &models_by_name(&models),
            &sigs,
            &mut out,
        )?;
    }
    Ok(out)
}

/// A backend's name from its URL: the host's distinctive label (`api.openai.com` → `openai`),
/// or `local` for an address or `localhost`.
fn backend_name(url: &str) -> String {
    let host = url
        .split("://")
        .nth(1)
        .and_then(|r| r.split([':', '/']).next())
        .unwrap_or("");
    let labels: Vec<&str> = host.split('.').collect();
    let numeric = labels.iter().all(|l| l.chars().all(|c| c.is_ascii_digit()));
    if numeric || host == "localhost" || host.is_empty() {
        return "local".to_string();
    }
    labels
        .iter()
        .find(|l| !matches!(**l, "api" | "www" | "inference" | "gateway"))
        .unwrap_or(&labels[0])
        .to_string()
}

fn models_by_name(models: &HashMap<String, Model>) -> HashMap<String, String> {
    models
        .iter()
        .map(|(k, m)| (k.clone(), m.ident.clone()))
        .collect()
}

fn reason(what: &str) -> &'static str {
    if what.starts_with("PLUGIN") {
        "a plugin is translated where a route uses it (`tools`, `system_prompt`, `header_mutation`, caches); others have no counterpart"
    } else if what.starts_with("ROUTING") {
        "routes are tried by priority, the first whose rule holds taking the request"
    } else if what.starts_with("DECISION_TREE") {
        "decision trees are not read; write each branch as a route"
    } else {
        "no counterpart in a policy"
    }
}

/// `ENTRYPOINT` assignments: decision → [(model, reasoning effort)].
fn assignments(recipe: &syntax::Recipe) -> HashMap<String, Vec<(String, Option<String>)>> {
    let mut map = HashMap::new();
    let Some(e) = recipe.entrypoints.first() else {
        return map;
    };
    for a in get(&e.fields, "assignments")
        .map(Val::as_list)
        .unwrap_or_default()
    {
        let Some(decision) = a.get("decision").and_then(Val::as_str) else {
            continue;
        };
        let models = a
            .get("models")
            .map(Val::as_list)
            .unwrap_or_default()
            .iter()
            .filter_map(|m| {
                let name = m.get("model").and_then(Val::as_str)?.to_string();
                let effort = m.get("reasoning").and_then(|r| {
                    (r.get("enabled") != Some(&Val::Bool(false))).then(|| {
                        r.get("effort")
                            .and_then(Val::as_str)
                            .unwrap_or("medium")
                            .to_string()
                    })
                });
                Some((name, effort))
            })
            .collect();
        map.insert(decision.to_string(), models);
    }
    map
}
