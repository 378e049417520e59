//! A recipe's expectations as `test` blocks: `probes.yaml` (each decision's variants: a query,
//! or messages and tools, the expected decision and model, and the signals it expects) and the
//! recipe's own `TEST` blocks. A model-backed signal the probe names as matching becomes a
//! `given` that makes it hold; one it does not name is never guessed, and the command takes out
//! and reports the cases that reach it.

use super::routes::RouteOut;
use super::signals::Signals;
use super::syntax::Recipe;
use crate::import::emit::{ident, quote, Names};
use crate::import::lines::{line_of, Step};
use crate::import::{read, yaml, Case, ImportError, Translation};
use serde_json::json;
use serde_norway::Value;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The recipe's `TEST` blocks: each query must take its route.
pub fn dsl_tests(
    file: &str,
    recipe: &Recipe,
    routes: &HashMap<String, RouteOut>,
    out: &mut Translation,
) {
    let mut names = Names::default();
    for (query, route, line) in &recipe.tests {
        let Some(r) = routes.get(route) else {
            out.skip(
                file,
                *line,
                format!("TEST `{query}`"),
                format!("decision `{route}` was not translated"),
            );
            continue;
        };
        let name = names.fresh(&format!("recipe_test_{line}"));
        out.tests.push(Case {
            text: format!(
                "test {name} {{\n  prompt = {}\n  expect {}\n}}\n",
                quote(query),
                r.route
            ),
            name,
            file: file.to_string(),
            line: *line,
            what: format!("TEST `{query}`"),
        });
    }
}

pub fn translate(
    path: &Path,
    recipe_name: Option<&str>,
    recipe_decisions: &[String],
    routes: &HashMap<String, RouteOut>,
    models: &HashMap<String, String>,
    sigs: &Signals,
    out: &mut Translation,
) -> Result<(), ImportError> {
    let file = path.display().to_string();
    let text = read(path)?;
    let doc = yaml(&file, &text)?;
    let images = doc.get("fixtures").and_then(|f| f.get("images"));
    let Some(decisions) = doc.get("decisions").and_then(Value::as_sequence) else {
        out.skip(&file, 1, "probes", "no `decisions` list of probes");
        return Ok(());
    };
    let mut names = Names::default();
    for (i, d) in decisions.iter().enumerate() {
        let expected = d
            .get("expected_decision")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let alias = d.get("expected_alias").and_then(Value::as_str);
        let variants = d
            .get("variants")
            .and_then(Value::as_sequence)
            .cloned()
            .unwrap_or_default();
        for (j, v) in variants.iter().enumerate() {
            let line = line_of(
                &text,
                &[
                    Step::Key("decisions"),
                    Step::Index(i),
                    Step::Key("variants"),
                    Step::Index(j),
                ],
            );
            let id = v.get("id").and_then(Value::as_str).unwrap_or("probe");
            let what = format!(
                "probe `{}/{id}`",
                d.get("id").and_then(Value::as_str).unwrap_or(expected)
            );
            if let (Some(r), Some(own)) = (
                d.get("expected_recipe").and_then(Value::as_str),
                recipe_name,
            ) {
                if r != own {
                    out.skip(
                        &file,
                        line,
                        what,
                        format!("it probes recipe `{r}`: import that one with `--recipe {r}`"),
                    );
                    continue;
                }
            }
            let Some(route) = routes.get(expected) else {
                let why = if recipe_decisions.iter().any(|d| d == expected) {
                    format!("its decision `{expected}` was not translated")
                } else {
                    format!("the recipe has no decision `{expected}`")
                };
                out.skip(&file, line, what, why);
                continue;
            };
            let model = match alias.map(|a| models.get(a)) {
                Some(Some(m)) => format!(" model {m}"),
                Some(None) => {
                    out.skip(
                        &file,
                        line,
                        what,
                        "its expected model is not one of the recipe's",
                    );
                    continue;
                }
                None => String::new(),
            };
            let name = names.fresh(&format!("{}_{id}", ident(expected)));
            let mut body = String::new();
            let query = v.get("query").and_then(Value::as_str);
            let messages = v.get("messages").and_then(Value::as_sequence);
            let tools = v.get("tools").and_then(Value::as_sequence);
            // `repeat: N` sends the query N times over (a long input), space-separated.
            let repeated = v
                .get("repeat")
                .and_then(Value::as_u64)
                .filter(|n| *n > 1)
                .zip(query)
                .map(|(n, q)| vec![q; n as usize].join(" "));
            // `padding: {text, repeat, placement}` surrounds the query with filler text (a long
            // input whose signal sits at one end), space-separated as well.
            let padded = v
                .get("padding")
                .zip(repeated.as_deref().or(query))
                .map(|(p, q)| {
                    let text = p.get("text").and_then(Value::as_str).unwrap_or_default();
                    let n = p.get("repeat").and_then(Value::as_u64).unwrap_or(1) as usize;
                    let fill = vec![text; n].join(" ");
                    match p.get("placement").and_then(Value::as_str) {
                        Some("after") => format!("{q} {fill}"),
                        _ => format!("{fill} {q}"),
                    }
                });
            let repeated = padded.or(repeated);
            let query = repeated.as_deref().or(query);
            match (query, messages) {
                (Some(q), None) if tools.is_none() && repeated.is_none() => {
                    let _ = writeln!(body, "  prompt = {}", quote(q));
                }
                (q, m) => {
                    let mut messages: Vec<serde_json::Value> = match m {
                        Some(list) => list.iter().map(|m| message(m, images)).collect(),
                        None => Vec::new(),
                    };
                    if let Some(q) = q {
                        messages.push(json!({"role": "user", "content": q}));
                    }
                    if messages.is_empty() {
                        out.skip(&file, line, what, "no query or messages");
                        continue;
                    }
                    let mut request = json!({ "messages": messages });
                    if let Some(t) = tools {
                        request["tools"] = serde_json::to_value(t).unwrap_or_default();
                    }
                    let path = format!("requests/{name}.json");
                    out.files.push((
                        PathBuf::from(&path),
                        serde_json::to_string_pretty(&request).unwrap_or_default() + "\n",
                    ));
                    let _ = writeln!(body, "  messages = {}", quote(&path));
                }
            }
            let givens = givens(v.get("expected_signals"), sigs);
            if !givens.is_empty() {
                let _ = writeln!(body, "  given {}", givens.join(", "));
            }
            out.tests.push(Case {
                text: format!(
                    "test {name} {{\n{body}  expect {}{model}\n}}\n",
                    route.route
                ),
                name,
                file: file.clone(),
                line,
                what,
            });
        }
    }
    Ok(())
}

/// `given`s for the model-backed signals a probe names as matching.
fn givens(expected: Option<&Value>, sigs: &Signals) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (kind, names) in expected.and_then(Value::as_mapping).into_iter().flatten() {
        let Some(kind) = kind.as_str() else { continue };
        let kind = kind.trim_end_matches('s');
        for name in names
            .as_sequence()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            let Some(sig) = sigs.map.get(&(kind.to_string(), name.to_string())) else {
                continue;
            };
            if let Some((signal, value)) = &sig.given {
                if !out.iter().any(|g| g.starts_with(&format!("{signal} ="))) {
                    out.push(format!("{signal} = {value}"));
                }
            }
        }
    }
    out
}

/// A probe's message, with its image fixtures as data URLs.
fn message(m: &Value, images: Option<&Value>) -> serde_json::Value {
    let mut v = serde_json::to_value(m).unwrap_or_default();
    if let Some(parts) = v.get_mut("content").and_then(|c| c.as_array_mut()) {
        for part in parts {
            if part.get("type").and_then(|t| t.as_str()) != Some("image_fixture") {
                continue;
            }
            let fixture = part
                .get("fixture")
                .and_then(|f| f.as_str())
                .unwrap_or_default();
            let image = images.and_then(|i| i.get(fixture));
            let media = image
                .and_then(|i| i.get("media_type"))
                .and_then(Value::as_str)
                .unwrap_or("image/png");
            let data = image
                .and_then(|i| i.get("data_base64"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            *part = json!({"type": "image_url", "image_url": {"url": format!("data:{media};base64,{data}")}});
        }
    }
    v
}
