//! A recipe's `config.yaml`: where its models are served (`providers.models` with
//! `backend_refs`, or `models` with `connections`), its default model, its entrypoints, and the
//! YAML form of its routing (`signals`, `projections`, `decisions`, at the top or in
//! `recipes[0].document`), read into the same tree as `recipe.dsl` so that both translate alike.

use super::syntax::{Decl, Expr, PluginRef, Projection, Recipe, Route, Signal, Val};
use crate::import::lines::{line_of, Step};
use serde_norway::Value;
use std::collections::HashMap;

/// How a model's key is given.
#[derive(Clone)]
pub enum Key {
    None,
    Env(String),
    /// A literal key: never copied. (file, line)
    Literal(String, usize),
}

pub struct Served {
    pub url: Option<String>,
    pub anthropic: bool,
    pub key: Key,
    pub serves: String,
}

/// Each served model's endpoint, API, key and served id: `providers.models[]` (`backend_refs`,
/// `provider_model_id`, `api_format`) or `models[]` (`connections`: `endpoint`, `model`,
/// `provider`).
pub fn served_models(file: &str, text: &str, config: &Value) -> HashMap<String, Served> {
    let mut out = HashMap::new();
    let (list, top, refs) = match config
        .get("providers")
        .and_then(|p| p.get("models"))
        .and_then(Value::as_sequence)
    {
        Some(l) => (Some(l), vec!["providers", "models"], "backend_refs"),
        None => (
            config.get("models").and_then(Value::as_sequence),
            vec!["models"],
            "connections",
        ),
    };
    for (i, m) in list.into_iter().flatten().enumerate() {
        let Some(name) = m.get("name").and_then(Value::as_str) else {
            continue;
        };
        let backend = m.get(refs).and_then(|b| b.get(0));
        let url = backend
            .and_then(|b| b.get("endpoint").or_else(|| b.get("base_url")))
            .and_then(Value::as_str)
            .map(|u| {
                let u = u.trim_end_matches('/');
                if u.contains("://") {
                    u.to_string()
                } else {
                    format!("http://{u}")
                }
            });
        let mut key = Key::None;
        for (k, v) in backend.and_then(Value::as_mapping).into_iter().flatten() {
            let (Some(k), Some(v)) = (k.as_str(), v.as_str()) else {
                continue;
            };
            if !(k.contains("key") || k.contains("token")) {
                continue;
            }
            let reference = v
                .strip_prefix("${")
                .and_then(|r| r.strip_suffix('}'))
                .or_else(|| v.strip_prefix("os.environ/"))
                .or_else(|| v.strip_prefix('$'));
            key = match reference {
                Some(env) => Key::Env(env.to_string()),
                None if k.ends_with("_env") => Key::Env(v.to_string()),
                None => {
                    let mut path: Vec<Step> = top.iter().map(|k| Step::Key(k)).collect();
                    path.extend([
                        Step::Index(i),
                        Step::Key(refs),
                        Step::Index(0),
                        Step::Key(k),
                    ]);
                    Key::Literal(file.to_string(), line_of(text, &path))
                }
            };
        }
        let provider = backend
            .and_then(|b| b.get("provider"))
            .and_then(Value::as_str);
        let format = m
            .get("api_format")
            .and_then(Value::as_str)
            .or(provider.filter(|p| *p == "anthropic"))
            .unwrap_or("openai");
        let serves = m
            .get("provider_model_id")
            .or_else(|| backend.and_then(|b| b.get("model")))
            .and_then(Value::as_str)
            .unwrap_or(name)
            .to_string();
        out.insert(
            name.to_string(),
            Served {
                url,
                anthropic: format == "anthropic",
                key,
                serves,
            },
        );
    }
    out
}

/// `providers.defaults.default_model`.
pub fn default_model(config: &Value) -> Option<String> {
    config
        .get("providers")?
        .get("defaults")?
        .get("default_model")?
        .as_str()
        .map(str::to_string)
}

/// A YAML value as a recipe value.
fn val(v: &Value) -> Val {
    match v {
        Value::Bool(b) => Val::Bool(*b),
        Value::Number(n) => Val::Num(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => Val::Str(s.clone()),
        Value::Sequence(items) => Val::List(items.iter().map(val).collect()),
        Value::Mapping(m) => Val::Obj(
            m.iter()
                .filter_map(|(k, v)| Some((k.as_str()?.to_string(), val(v))))
                .collect(),
        ),
        Value::Tagged(t) => val(&t.value),
        Value::Null => Val::Str(String::new()),
    }
}

/// The fields of a YAML mapping, less `skip`.
fn fields(v: &Value, skip: &[&str]) -> Vec<(String, Val)> {
    v.as_mapping()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let k = k.as_str()?;
            (!skip.contains(&k)).then(|| (k.to_string(), val(v)))
        })
        .collect()
}

/// `entrypoints[]`, in the shape of the recipe language's `ENTRYPOINT` (assignments as a list
/// of `{ decision, models }`).
pub fn entrypoints(text: &str, config: &Value) -> Vec<Decl> {
    let mut out = Vec::new();
    let list = config.get("entrypoints").and_then(Value::as_sequence);
    for (i, e) in list.into_iter().flatten().enumerate() {
        let mut decl = fields(e, &["assignments"]);
        let assignments: Vec<Val> = match e.get("assignments") {
            Some(Value::Mapping(m)) => m
                .iter()
                .filter_map(|(k, v)| {
                    let mut a = vec![("decision".to_string(), Val::Str(k.as_str()?.to_string()))];
                    a.extend(fields(v, &[]));
                    Some(Val::Obj(a))
                })
                .collect(),
            Some(other) => val(other).as_list().to_vec(),
            None => Vec::new(),
        };
        decl.push(("assignments".into(), Val::List(assignments)));
        out.push(Decl {
            line: line_of(text, &[Step::Key("entrypoints"), Step::Index(i)]),
            fields: decl,
        });
    }
    out
}

/// Whether the config carries routing of its own (signals or decisions).
pub fn has_routing(config: &Value) -> bool {
    let doc = document(config, 0).0;
    doc.get("decisions").is_some() || doc.get("signals").is_some()
}

/// The index in `recipes[]` of the recipe named `select` (the first when `None`), or the names
/// there are.
pub fn recipe_index(config: &Value, select: Option<&str>) -> Result<usize, Vec<String>> {
    let Some(wanted) = select else { return Ok(0) };
    let names: Vec<String> = config
        .get("recipes")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    names.iter().position(|n| n == wanted).ok_or(names)
}

/// The mapping holding the routing, and the path to it: `recipes[index].document` or
/// `recipes[index].routing`, `routing` (v0.3), or the top of the file.
fn document(config: &Value, index: usize) -> (&Value, Vec<Step<'static>>) {
    let recipe = config.get("recipes").and_then(|r| r.get(index));
    for key in ["document", "routing"] {
        if let Some(d) = recipe.and_then(|r| r.get(key)).filter(|d| d.is_mapping()) {
            return (
                d,
                vec![Step::Key("recipes"), Step::Index(index), Step::Key(key)],
            );
        }
    }
    match config.get("routing") {
        Some(d) if d.is_mapping() => (d, vec![Step::Key("routing")]),
        _ => (config, Vec::new()),
    }
}

/// Reads the YAML routing of `recipes[index]` (or of the whole file) into `recipe`: signals, projections, decisions, entrypoints and the
/// models the decisions name. Constructs that do not fit are listed in `recipe.other`.
pub fn routing(text: &str, config: &Value, index: usize) -> Recipe {
    let mut recipe = Recipe::default();
    let (doc, prefix) = document(config, index);
    let at = |rest: &[Step]| {
        let mut path = prefix.clone();
        path.extend_from_slice(rest);
        line_of(text, &path)
    };
    for (r, extra) in config
        .get("recipes")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(r, _)| *r != index)
    {
        let name = extra.get("name").and_then(Value::as_str).unwrap_or("?");
        recipe.extra_recipes.push((
            name.to_string(),
            line_of(text, &[Step::Key("recipes"), Step::Index(r)]),
        ));
    }
    // Signals: a list per kind, its key the kind's plural (`keywords`, `user_feedbacks`).
    for (kind, list) in doc
        .get("signals")
        .and_then(Value::as_mapping)
        .into_iter()
        .flatten()
    {
        let Some(plural) = kind.as_str() else {
            continue;
        };
        let singular = match plural {
            "pii" | "kb" | "authz" | "fact_check" | "complexity" | "modality" | "context"
            | "structure" | "jailbreak" | "language" => plural,
            p => p.strip_suffix('s').unwrap_or(p),
        };
        for (i, s) in list.as_sequence().into_iter().flatten().enumerate() {
            let Some(name) = s.get("name").and_then(Value::as_str) else {
                continue;
            };
            recipe.signals.push(Signal {
                kind: singular.to_string(),
                name: name.to_string(),
                decl: Decl {
                    line: at(&[Step::Key("signals"), Step::Key(plural), Step::Index(i)]),
                    fields: fields(s, &["name"]),
                },
            });
        }
    }
    for (key, kind) in [("scores", "score"), ("mappings", "mapping")] {
        let list = doc
            .get("projections")
            .and_then(|p| p.get(key))
            .and_then(Value::as_sequence);
        for (i, p) in list.into_iter().flatten().enumerate() {
            let Some(name) = p.get("name").and_then(Value::as_str) else {
                continue;
            };
            recipe.projections.push(Projection {
                kind: kind.to_string(),
                name: name.to_string(),
                decl: Decl {
                    line: at(&[Step::Key("projections"), Step::Key(key), Step::Index(i)]),
                    fields: fields(p, &["name"]),
                },
            });
        }
    }
    let decisions = doc.get("decisions").and_then(Value::as_sequence);
    for (i, d) in decisions.into_iter().flatten().enumerate() {
        let Some(name) = d.get("name").and_then(Value::as_str) else {
            continue;
        };
        let line = at(&[Step::Key("decisions"), Step::Index(i)]);
        let mut route = Route {
            name: name.to_string(),
            line,
            description: d
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_string),
            priority: d.get("priority").and_then(Value::as_i64),
            ..Route::default()
        };
        match d.get("rules").map(|r| rule(r, line)) {
            Some(Ok(e)) => route.when = e,
            Some(Err(why)) => {
                recipe.notes.push((
                    format!("decision {name}"),
                    line,
                    format!(
                        "its rules hold {why}, which has no reading here: the decision is left out"
                    ),
                ));
                continue;
            }
            None => {}
        }
        for m in d
            .get("modelRefs")
            .or_else(|| d.get("model_refs"))
            .and_then(Value::as_sequence)
            .into_iter()
            .flatten()
        {
            let Some(model) = m.get("model").and_then(Value::as_str) else {
                continue;
            };
            let mut options = Vec::new();
            if let Some(effort) = m.get("reasoning_effort").and_then(Value::as_str) {
                options.push(("effort".to_string(), Val::Str(effort.to_string())));
            }
            if m.get("use_reasoning").and_then(Value::as_bool) == Some(true) {
                options.push(("reasoning".to_string(), Val::Bool(true)));
            }
            route.models.push(super::syntax::ModelRef {
                name: model.to_string(),
                options,
            });
        }
        if let Some(a) = d
            .get("algorithm")
            .and_then(|a| a.get("type"))
            .and_then(Value::as_str)
        {
            if a != "static" {
                route.other.push((format!("ALGORITHM {a}"), line));
            }
        }
        let plugins = d.get("plugins").and_then(Value::as_sequence);
        for (j, p) in plugins.into_iter().flatten().enumerate() {
            let Some(kind) = p.get("type").and_then(Value::as_str) else {
                continue;
            };
            let config = p
                .get("configuration")
                .map(|c| fields(c, &[]))
                .unwrap_or_default();
            let plugin: PluginRef = (
                kind.to_string(),
                config,
                at(&[
                    Step::Key("decisions"),
                    Step::Index(i),
                    Step::Key("plugins"),
                    Step::Index(j),
                ]),
            );
            route.plugins.push(plugin);
        }
        recipe.routes.push(route);
    }
    recipe.entrypoints = entrypoints(text, config);
    // The models the config serves are the recipe's, as `MODEL` declarations are in the
    // recipe language.
    for (path, list) in [
        (
            vec![Step::Key("providers"), Step::Key("models")],
            config.get("providers").and_then(|p| p.get("models")),
        ),
        (vec![Step::Key("models")], config.get("models")),
    ] {
        for (i, m) in list
            .and_then(Value::as_sequence)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let Some(name) = m.get("name").and_then(Value::as_str) else {
                continue;
            };
            let mut at = path.clone();
            at.push(Step::Index(i));
            recipe.models.push((
                name.to_string(),
                Decl {
                    line: line_of(text, &at),
                    fields: Vec::new(),
                },
            ));
        }
    }
    recipe.name = config
        .get("recipes")
        .and_then(|r| r.get(index))
        .and_then(|r| r.get("name"))
        .and_then(Value::as_str)
        .map(str::to_string);
    recipe
}

/// A decision's `rules` as a boolean tree: `None` for an `AND` over nothing (every request).
fn rule(v: &Value, line: usize) -> Result<Option<Expr>, String> {
    if let (Some(kind), Some(name)) = (
        v.get("type").and_then(Value::as_str),
        v.get("name").and_then(Value::as_str),
    ) {
        return Ok(Some(Expr::Ref {
            kind: kind.to_string(),
            name: name.to_string(),
            line,
        }));
    }
    let op = v
        .get("operator")
        .and_then(Value::as_str)
        .unwrap_or("AND")
        .to_uppercase();
    let mut items = Vec::new();
    for c in v
        .get("conditions")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
    {
        match rule(c, line)? {
            Some(e) => items.push(e),
            None => return Err("an empty condition inside a rule".into()),
        }
    }
    match (op.as_str(), items.len()) {
        ("AND", 0) => Ok(None),
        ("AND" | "OR", 1) => Ok(items.pop()),
        ("AND", _) => Ok(Some(Expr::And(items))),
        ("OR", 0) => Err("an OR over no condition".into()),
        ("OR", _) => Ok(Some(Expr::Or(items))),
        ("NOT", 1) => Ok(items.pop().map(|e| Expr::Not(Box::new(e)))),
        ("NOT", n) => Err(format!("a NOT over {n} conditions")),
        (other, _) => Err(format!("operator `{other}`")),
    }
}
